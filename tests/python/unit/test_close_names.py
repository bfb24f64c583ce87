"""A KeyError in agent code names the closest key the code could see, as
Python does for a NameError, and names nothing when no key is close."""

import pandas as pd

from mahtab.agent import close_names, execution

from agent_runtime import Runtime


def run(code, namespace):
    return execution.run_agent_code(Runtime(), code, namespace)


def test_a_column_spelled_another_way_is_suggested_with_its_table():
    weather = pd.DataFrame({"time": [1], "wind speed": [3.0], "humidity": [0.5]})
    result = run("weather['wind_speed'].mean()", {"weather": weather})
    assert result["failed"]
    last = result["output"].strip().splitlines()[-1]
    assert last == "KeyError: 'wind_speed'. Did you mean: 'wind speed' (a column of weather)?", last


def test_a_dict_key_in_a_function_is_found_in_the_functions_variables():
    code = "def f():\n    prices = {'apple': 1.2, 'banana': 0.5}\n    return prices['appel']\nf()"
    result = run(code, {})
    assert result["output"].strip().endswith("Did you mean: 'apple' (a key of prices)?"), result["output"]


def test_no_close_key_no_suggestion_but_the_columns():
    result = run("table['zzz']", {"table": pd.DataFrame({"price": [1], "qty": [2]})})
    last = result["output"].strip().splitlines()[-1]
    assert last == "KeyError: 'zzz'. Columns of table: 'price', 'qty'", last
    assert run("{'a': 1}['zzz']", {})["output"].strip().splitlines()[-1] == "KeyError: 'zzz'"


def test_the_closest_of_several_wins_and_exact_spellings_count_first():
    scopes = [{"a": {"Total Sales": 1, "total_sale": 2}}]
    assert close_names.suggestion("total_sales", scopes) == ("Total Sales", "a key of a")
    assert close_names.suggestion("price", [{"t": pd.DataFrame({"price": [1]})}]) is None
    assert close_names.suggestion(3, scopes) is None
    # A key written without its punctuation is the same name; punctuation
    # alone is none.
    numbered = [{"df": pd.DataFrame({"#1": [1], "#2": [2]})}]
    assert close_names.suggestion("1", numbered) == ("#1", "a column of df")
    assert close_names.suggestion("$", [{"df": pd.DataFrame({"#": [1]})}]) is None
    assert close_names.suggestion(1, numbered) == ("#1", "a column of df")
    assert close_names.suggestion(12, numbered) is None


def test_an_attribute_close_to_a_column_names_the_column():
    weather = pd.DataFrame({"time": [1], "wind speed": [3.0]})
    result = run("weather.wind_speed.mean()", {"weather": weather})
    last = result["output"].strip().splitlines()[-1]
    assert last == "AttributeError: 'DataFrame' object has no attribute 'wind_speed'. Did you mean the column ['wind speed']?", last
    # Python's own suggestion is left alone.
    result = run("weather.hed()", {"weather": weather})
    assert "Did you mean the column" not in result["output"]


def test_a_series_method_reached_through_an_accessor_names_the_series_own():
    df = pd.DataFrame({"A": ["s", "b", "x"], "when": pd.to_datetime(["2020-01-01"] * 3)})
    last = run("df[df['A'].str.isin(['s', 'b'])]", {"df": df})["output"].strip().splitlines()[-1]
    assert last == ("AttributeError: 'StringMethods' object has no attribute 'isin'. "
                    "Did you mean the Series's own .isin, without .str?"), last
    last = run("df['when'].dt.between('2019', '2021')", {"df": df})["output"].strip().splitlines()[-1]
    assert last.endswith("Did you mean the Series's own .between, without .dt?"), last
    # An attribute the Series lacks too gets no suggestion.
    last = run("df['A'].str.frobnicate()", {"df": df})["output"].strip().splitlines()[-1]
    assert last == "AttributeError: 'StringMethods' object has no attribute 'frobnicate'", last


def test_a_key_no_column_is_close_to_lists_the_columns_of_the_tables_on_the_failing_line():
    df = pd.DataFrame({"Date": ["1/1/18"], "Val": ["A"]})
    other = pd.DataFrame({"unrelated": [1]})
    code = "x = 1\ndf1 = df.groupby('Val').agg({'Count_d': 'sum'})"
    result = run(code, {"df": df, "other": other})
    last = result["output"].strip().splitlines()[-1]
    assert last == "KeyError: \"Label(s) ['Count_d'] do not exist\". Columns of df: 'Date', 'Val'", last
    # A table that has the key is not what the lookup missed.
    line = close_names.columns_on_line(["Val"], "df['Val'] + other['Val']", [{"df": df, "other": other}])
    assert line == "Columns of other: 'unrelated'"
    wide = pd.DataFrame({"c%d" % i: [i] for i in range(30)})
    listed = close_names.columns_on_line(["zz"], "wide['zz']", [{"wide": wide}])
    assert listed.startswith("Columns of wide: 'c0', 'c1'") and listed.endswith("'c19' (30 in all)")
    assert close_names.columns_on_line(["zz"], "d['zz']", [{"d": {"a": 1}}]) is None


def test_keys_pandas_raises_in_a_list_or_a_message_get_their_suggestion():
    weather = pd.DataFrame({"time": [1], "wind speed": [3.0], "humidity": [0.5]})
    # Each way pandas 2 and 3 raise a missing column with a list of keys.
    for lookup in (
        "weather.dropna(subset=['wind_speed'])",
        "weather[['time', 'wind_speed']]",
        "weather[['wind_speed']]",
        "weather.drop(columns=['wind_speed'])",
        "weather.drop_duplicates(subset=['wind_speed'])",
        "weather.agg({'wind_speed': 'sum'})",
    ):
        result = run(lookup, {"weather": weather})
        last = result["output"].strip().splitlines()[-1]
        assert last.startswith("KeyError: "), last
        assert last.endswith(". Did you mean: 'wind speed' for 'wind_speed' (a column of weather)?"), last
    # Keys no column is close to: the columns, as for one key.
    result = run("weather[['time', 'zzz']]", {"weather": weather})
    last = result["output"].strip().splitlines()[-1]
    assert last.endswith(". Columns of weather: 'time', 'wind speed', 'humidity'"), last
    # A list of keys every one of which the table has names no table.
    assert close_names.columns_on_line(["time"], "weather[['time']]", [{"weather": weather}]) is None
    assert close_names.missing_keys("['a', 'b'] not in index") == ["a", "b"]
    assert close_names.missing_keys("plain key") == ["plain key"]
    assert close_names.missing_keys(3) == [3]


def test_the_blocks_other_keys_spelled_otherwise_follow_the_suggestion():
    df = pd.DataFrame({"Category": ["Assault"], "Age": [30], "Age group": ["a"], "age_group": ["b"]})
    code = (
        "a = df[df['category'] == 'Assault']\n"
        "q = a['age'].quantile(0.25)\n"
        "print(a['AGE'], a['agegroup'], 'Category', a[\"age\"])"
    )
    result = run(code, {"df": df})
    last = result["output"].strip().splitlines()[-1]
    # 'age' once, whichever quotes; 'agegroup' is two columns' spelling.
    assert last == ("KeyError: 'category'. Did you mean: 'Category' (a column of df)? "
                    "Also: 'Age' for 'age', 'Age' for 'AGE'."), last
    assert close_names.other_respellings("x = (", ["Age"], "a") == []
    many = "\n".join("t['c%d']" % i for i in range(9))
    assert len(close_names.other_respellings(many, ["C%d" % i for i in range(9)], "")) == 5


def test_a_key_that_is_a_value_of_a_series_on_the_failing_line_is_told_so():
    import numpy as np

    df = pd.DataFrame({"c0": [np.nan, 3.0], "c1": [6.0, 6.0]})
    # Iterating a row gives its values: the first, NaN, is looked up.
    code = "row = df.iloc[0]\nresult = [col for col in row if row[col] != 6.0]"
    last = run(code, {"df": df})["output"].strip().splitlines()[-1]
    assert last == ("KeyError: nan. nan is a value of row, not one of its labels: `for x in row` gives its "
                    "values; row.index gives the labels, row.items() both"), last
    scopes = [{"s": pd.Series([10, 20], index=["a", "b"])}]
    assert close_names.value_not_label([20], "s[v]", scopes).startswith("20 is a value of s")
    # A label, or a key that is no value: nothing said.
    assert close_names.value_not_label(["a"], "s[v]", scopes) is None
    assert close_names.value_not_label([30], "s[v]", scopes) is None
