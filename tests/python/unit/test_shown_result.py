"""The result a request writes out, compared with the value a run made: a
match, a difference, and the cases where nothing may be said (the example is
about other data, several pieces could be the result, an input unchanged)."""

import json
import math
import warnings

import numpy as np
import pandas as pd

from mahtab.agent import shown_result, typed_values
from mahtab.agent.scope import AgentScope
from mahtab.agent.undo import UndoHistory

from agent_runtime import Runtime

SALES = pd.DataFrame({"id": ["A", "B", "A"], "val": [3, 5, 2]})

TABLES = """I have this table:

  id  val
0  A    3
1  B    5
2  A    2

I want the running maximum of val within each id, like this:

  id  val  top
0  A    3    3
1  B    5    5
2  A    2    3

Store it in `out`."""


def test_the_written_table_matches_the_right_value_and_not_a_wrong_one():
    right = SALES.assign(top=[3, 5, 3])
    assert shown_result.judge(TABLES, right, [SALES]) == "matches"
    verdict, written = shown_result.judge(TABLES, SALES.assign(top=[3, 5, 5]), [SALES])
    assert verdict == "differs"
    assert written.splitlines()[0].split() == ["id", "val", "top"]
    # A column left out is a difference too; the columns' order is not
    # compared by tokens, so a value in another order is said nothing of.
    assert shown_result.judge(TABLES, SALES, [SALES])[0] == "differs"


FOUR_ROWS = """I have this table:

  id  val
0  A    3
1  B    5
2  A    2
3  B    7

I want the running maximum of val within each id, like this:

  id  val  top
0  A    3    3
1  B    5    5
2  A    2    3
3  B    7    7

Store it in `out`."""


def test_a_table_a_row_short_of_the_written_one_is_not_it():
    sales = pd.DataFrame({"id": ["A", "B", "A", "B"], "val": [3, 5, 2, 7]})
    right = sales.assign(top=[3, 5, 3, 7])
    assert shown_result.judge(FOUR_ROWS, right, [sales]) == "matches"
    # Three of the four rows cover three quarters of the piece's numbers,
    # but the row beside them is one they leave out.
    assert shown_result.judge(FOUR_ROWS, right.iloc[:-1], [sales]) != "matches"
    assert shown_result.judge(FOUR_ROWS, right.iloc[1:], [sales]) != "matches"
    series = FOUR_ROWS.replace("  id  val  top\n", "").replace("  A    3    3", "    3").replace(
        "  B    5    5", "    5").replace("  A    2    3", "    3").replace("  B    7    7", "    7")
    assert shown_result.judge(series, right["top"], [sales]) == "matches"
    assert shown_result.judge(series, right["top"].iloc[:-1], [sales]) != "matches"


def test_a_row_left_out_whose_words_make_it_longer_is_found_by_its_number():
    """A row of two-word names and a joined string is longer than the rows
    kept: it is still a row left out, as the index numbers on from them."""
    people = pd.DataFrame({"name": ["Ana Maria Lopez", "Bo", "Cy"], "a": ["x", None, "z"], "b": ["y", "w", None]})
    right = people.assign(both=["y+x", "w", "z"])
    request = ("I have:\n\n" + people.to_string() + "\n\nand want the non-empty ones joined from the right:\n\n"
               + right.to_string() + "\n\nresult = ... # put solution in this variable")
    assert shown_result.judge(request, right, [people]) == "matches"
    assert shown_result.judge(request, right.iloc[1:], [people]) != "matches"
    assert shown_result.judge(request, right.iloc[:-1], [people]) != "matches"


def test_a_list_an_item_short_is_not_the_written_one():
    marks = pd.DataFrame({"mark": [2.25, 7, "absent", 3]})
    request = "I have:\n\n" + marks.to_string() + '\n\nThe ones not whole numbers:\n\n[2.25,"absent"]\n'
    assert shown_result.judge(request, [2.25, "absent"], [marks]) == "matches"
    assert shown_result.judge(request, [2.25], [marks]) != "matches"
    assert shown_result.judge(request, ["absent"], [marks]) != "matches"


def test_numbers_in_the_prose_beside_a_table_are_not_rows_it_left_out():
    sales = pd.DataFrame({"id": ["A", "B", "A", "B"], "val": [3, 5, 2, 7]})
    request = FOUR_ROWS.replace("like this:\n", "like this (4 of them, 2 ids):\nOut[16]:\n")
    assert shown_result.judge(request, sales.assign(top=[3, 5, 3, 7]), [sales]) == "matches"


LABELLED = """I have this table:

   team  won
0   red    1
1  blue    0
2   red    1
3  blue    1

I want the share of games each team won:

team
blue    0.5
red     1.0
Name: won, dtype: float64

Store it in `out`."""


def test_a_series_that_lost_its_word_labels_is_not_the_written_one():
    games = pd.DataFrame({"team": ["red", "blue", "red", "blue"], "won": [1, 0, 1, 1]})
    right = games.groupby("team")["won"].mean()
    assert shown_result.judge(LABELLED, right, [games]) == "matches"
    assert shown_result.judge(LABELLED, right.reset_index(drop=True), [games]) != "matches"


def test_a_table_under_a_header_of_intervals_that_lost_its_labels_is_not_it():
    """The header's column name (``size``) is followed by the intervals'
    numbers, as a labelled row would be; it holds more numbers than the
    rows, and is no row label."""
    boxes = pd.DataFrame({"owner": ["kim", "kim", "lee", "lee"], "size": [2, 30, 8, 45]})
    right = pd.crosstab(boxes.owner, pd.cut(boxes["size"], [0, 10, 50]))
    request = ("I have:\n\n" + boxes.to_string() + "\n\nand want counts by owner and size band:\n\n"
               + right.to_string() + "\n\nresult = ... # put solution in this variable")
    assert shown_result.judge(request, right, [boxes]) == "matches"
    assert shown_result.judge(request, right.reset_index(drop=True), [boxes]) != "matches"


def test_a_sentence_that_writes_out_the_data_and_the_result():
    """``for [..] I want [..]``: the result's numbers are a few of the
    sentence's, so its lists are pieces of their own. They confirm a right
    value; a wrong one is left to the review (the list may be what the
    user got)."""
    steps = np.array([4, 4, 0, 5, 5, 5, 0, 4])
    request = ("Dropping the zeros and the repeats next to each other, for an array like this one: "
               "[4,4,0,5,5,5,0,4], I'd want to get: [4,5,4]. How?\n\nresult = ... # put solution in this variable")
    assert shown_result.judge(request, np.array([4, 5, 4]), [steps]) == "matches"
    assert shown_result.judge(request, np.array([4, 5]), [steps]) is None
    assert shown_result.judge(request.replace("[4,4,0,5,5,5,0,4]", "[1,1,0,2]"), np.array([4, 5, 4]), [steps]) is None


def test_nothing_is_said_when_the_example_is_about_other_data():
    other = pd.DataFrame({"id": ["A", "B", "A"], "val": [4, 5, 2]})
    assert shown_result.judge(TABLES, other.assign(top=[4, 5, 4]), [other]) is None
    # Nor when the code read data the request does not show (a list of
    # its own, beside the table it shows).
    assert shown_result.judge(TABLES, SALES.assign(top=[3, 5, 5]), [SALES, [2, 0, 1]]) is None
    # Nor when no input is known.
    assert shown_result.judge(TABLES, SALES.assign(top=[3, 5, 5]), []) is None


def test_two_pieces_that_could_be_the_result_say_nothing_of_a_wrong_value():
    tried = TABLES.replace("Store it", "What I tried gives:\n\n  id  val  top\n0  A    3    3\n1  B    5    8\n2  A    2    5\n\nStore it")
    assert shown_result.judge(tried, SALES.assign(top=[3, 5, 3]), [SALES]) == "matches"
    assert shown_result.judge(tried, SALES.assign(top=[1, 1, 1]), [SALES]) is None


def test_an_input_the_code_made_in_code_and_an_array_literal():
    request = (
        "a = np.array([[1, 2], [3, 4]])\n\nI want each row reversed:\n\n"
        "result = array([[2, 1],\n       [4, 3]])\n\nwithout a loop."
    )
    a = np.array([[1, 2], [3, 4]])
    assert shown_result.judge(request, a[:, ::-1], [a], "result") == "matches"
    assert shown_result.judge(request, a[::-1], [a], "result")[0] == "differs"
    # A few rows of the written result are not it.
    assert shown_result.judge(request, a[:1, ::-1], [a], "result") != "matches"
    # Code that assigns to another name is not a written result.
    assert shown_result.judge(request, a[::-1], [a], "flipped") is None


def test_a_result_written_as_code_under_the_name_of_its_data():
    request = (
        "I have an array:\na = np.array([[1, 2, 3],\n              [4, 5, 6],\n              [7, 8, 9]])\n"
        "Taking rows 0 up to 2, I should get\na = np.array([[1, 2, 3],\n              [4, 5, 6]])\nHow?"
    )
    a = np.arange(1, 10).reshape(3, 3)
    assert shown_result.judge(request, a[0:2], [a], "result") == "matches"
    assert shown_result.judge(request, a.copy(), [a], "result")[0] == "differs"
    assert shown_result.judge(request, a[1:3], [a], "result")[0] == "differs"
    # What the user tried, code that reads the data, is no written result.
    tried = request.replace("I should get\na = np.array([[1, 2, 3],\n              [4, 5, 6]])", "I tried\na = a[[0, 1]]")
    assert shown_result.judge(tried, a[1:3], [a], "result") is None


def test_numbers_compare_to_the_decimals_the_request_writes():
    request = "x = [1, 2, 4]\n\nThe mean should come out as:\n\nmean = 2.33\n"
    assert shown_result.judge(request, 7 / 3, [[1, 2, 4]]) == "matches"
    assert shown_result.judge(request, 2.5, [[1, 2, 4]]) is None  # one number: no written form to compare
    assert shown_result.judge(request, "2.33", [[1, 2, 4]]) is None  # the number as text


def test_a_whole_number_written_is_that_number_not_one_that_rounds_to_it():
    data = pd.DataFrame({"id": ["A", "A", "A", "B"], "val": [1, 2, 4, 5]})
    request = ("I have\n\n  id  val\n0  A    1\n1  A    2\n2  A    4\n3  B    5\n\n"
               "I want the median of val for each id:\n\nid\nA    2\nB    5\n")
    median = data.groupby("id")["val"].median()
    assert shown_result.judge(request, median, [data]) == "matches"
    assert shown_result.judge(request, median.astype(int), [data]) == "matches"
    # The mean (2.33 for A) prints as a number that rounds to the written 2.
    assert shown_result.judge(request, data.groupby("id")["val"].mean(), [data]) != "matches"
    # The same in a table: ranks with ties averaged where the minimum was written.
    ranks = pd.DataFrame({"v": [5, 5, 1, 9]})
    request = "I have\n\n   v\n0  5\n1  5\n2  1\n3  9\n\nI want ties to get the lowest rank:\n\n   v  r\n0  5  2\n1  5  2\n2  1  1\n3  9  4\n"
    assert shown_result.judge(request, ranks.assign(r=ranks.v.rank(method="min")), [ranks]) == "matches"
    assert shown_result.judge(request, ranks.assign(r=ranks.v.rank()), [ranks]) != "matches"


def test_an_input_left_as_it_was_is_not_confirmed_by_its_own_printout():
    request = TABLES.replace("like this:", "keeping the rest; for example the table above stays:")
    assert shown_result.judge(request, SALES.copy(), [SALES]) != "matches"


def test_tokens_and_names_read():
    found = shown_result.tokens("0  A  -1.50 'x y' True")
    assert found == [("n", 0.0, 0), ("w", "A"), ("n", -1.5, 2), ("w", "x y"), ("w", "true")]
    assert shown_result.tokens("-inf inf TRUE") == [("n", -math.inf, 15), ("n", math.inf, 15), ("w", "true")]
    assert [token[0] for token in shown_result.tokens("<NA> NA")] == ["n", "w"]
    # Words that begin like a special value are words; a typeset minus is a minus.
    assert shown_result.tokens("info nano Nones") == [("w", "info"), ("w", "nano"), ("w", "Nones")]
    assert shown_result.tokens("\u22123.5 \u2212inf") == [("n", -3.5, 1), ("n", -math.inf, 15)]
    counts = pd.DataFrame({"k": ["a", "b"], "n": pd.array([1, None], dtype="Int64")})
    request = "I have\n\n   k\n0  a\n1  b\n\nI want n:\n\n   k    n\n0  a  1.0\n1  b  NaN\n"
    assert shown_result.judge(request, counts, [counts[["k"]]]) == "matches"
    assert shown_result.tokens("NaN")[0][0] == "n" and math.isnan(shown_result.tokens("NaN")[0][1])
    assert set(shown_result.names_read("out = sales.assign(top=t)\nprint(out)")) == {"sales", "t", "print", "out"}
    assert shown_result.names_read("def (") == []


def written(scope, code, name="out", request=TABLES):
    assert not json.loads(scope.run_code(json.dumps({"code": code})))["failed"]
    reply = scope.written_results(json.dumps({"request": request, "names": [name], "codes": [code]}))
    return json.loads(reply)["results"]


def test_the_run_compares_the_value_with_the_data_as_it_was_before_it():
    # The run changes the user's table in place: the request printed it as
    # it was, so the comparison reads the journal's copy, not the table now.
    namespace = {"pd": pd, "sales": SALES.copy(), "__builtins__": __builtins__}
    scope = AgentScope(Runtime(), namespace, journal=UndoHistory().journal())
    assert written(scope, "sales['top'] = sales.groupby('id')['val'].cummax()", "sales") == [
        {"verdict": "matches", "name": "sales", "on_example": False},
    ]
    scope = AgentScope(Runtime(), {"pd": pd, "sales": SALES.copy(), "__builtins__": __builtins__},
                       journal=UndoHistory().journal())
    [found] = written(scope, "out = sales.assign(top=sales['val'].cumsum())")
    assert found["verdict"] == "differs" and found["name"] == "out"
    assert "2  A    2   10" in found["value"] and found["written"].splitlines()[-1] == "2  A    2    3"
    assert found["differs_in"] == "The first row that differs: the written result has `1 B 5 5` where `out` has `1 B 5 8`."
    # Without a journal nothing is known of the data before the run.
    scope = AgentScope(Runtime(), {"pd": pd, "sales": SALES.copy(), "__builtins__": __builtins__})
    assert written(scope, "out = sales.assign(top=sales['val'].cumsum())") == []


def test_the_written_result_typed_in_is_not_taken_for_a_computed_one():
    namespace = {"pd": pd, "sales": SALES.copy(), "__builtins__": __builtins__}
    scope = AgentScope(Runtime(), namespace, journal=UndoHistory().journal())
    typed = "print(sales)\nout = pd.DataFrame({'id': ['A', 'B', 'A'], 'val': [3, 5, 2], 'top': [3, 5, 3]})"
    assert written(scope, typed) == []
    assert typed_values.typed_in([typed], "out", namespace)
    assert not typed_values.typed_in(["out = sales.assign(top=sales.val.cummax())"], "out", namespace)
    assert not typed_values.typed_in(["x = 1"], "out", namespace)
    # Typed in through a name the code typed in before; a function's own
    # names are its own.
    namespace.update(rows={"id": ["A"]}, made=lambda: None)
    assert typed_values.typed_in(["rows = {'id': ['A']}\nout = pd.DataFrame(rows)"], "out", namespace)
    assert not typed_values.typed_in(["rows = sales.head()\nout = pd.DataFrame(rows)"], "out", namespace)
    assert not typed_values.typed_in(["def made():\n    out = []\n    return out\nout = made() + sales"], "out", namespace)
    # A sum begun at 0 and added to from the data is computed.
    namespace.update(out=10, v=2)  # as the run left them
    assert not typed_values.typed_in(["out = 0\nfor v in sales['val']:\n    out += v"], "out", namespace)
    assert typed_values.typed_in(["out = 0\nout += 1"], "out", namespace)


def test_a_table_printed_with_its_columns_in_another_order():
    # The request prints the table and the result with `val` before `id`;
    # the notebook's table has them the other way round.
    request = TABLES.replace("  id  val\n0  A    3\n1  B    5\n2  A    2", "  val id\n0    3  A\n1    5  B\n2    2  A")
    request = request.replace("  id  val  top\n0  A    3    3\n1  B    5    5\n2  A    2    3",
                              "  val  top id\n0    3    3  A\n1    5    5  B\n2    2    3  A")
    assert shown_result.judge(request, SALES.assign(top=[3, 5, 3]), [SALES]) == "matches"
    assert shown_result.judge(request, SALES.assign(top=[3, 5, 5]), [SALES])[0] == "differs"


def test_a_table_in_another_column_order_than_written_is_left_to_the_review():
    # The request prints the data in the notebook's order and the result
    # in another: the order may be what it asks for.
    request = TABLES.replace("  id  val  top\n0  A    3    3\n1  B    5    5\n2  A    2    3",
                             "  top  val id\n0    3    3  A\n1    5    5  B\n2    3    2  A")
    assert shown_result.judge(request, SALES.assign(top=[3, 5, 3]), [SALES]) is None
    assert shown_result.judge(request, SALES.assign(top=[3, 5, 3])[["top", "val", "id"]], [SALES]) == "matches"


def test_a_table_the_request_builds_in_code():
    request = TABLES.replace("  id  val\n0  A    3\n1  B    5\n2  A    2",
                             "sales = pd.DataFrame({'id': ['A', 'B', 'A'], 'val': [3, 5, 2]})")
    assert shown_result.judge(request, SALES.assign(top=[3, 5, 3]), [SALES]) == "matches"
    assert shown_result.judge(request, SALES.assign(top=[3, 5, 5]), [SALES])[0] == "differs"


def test_the_first_rows_of_an_input_are_not_taken_for_the_written_result():
    # Three of four rows are most of the table's numbers, yet not the
    # result: a piece that prints an input must be the value whole.
    sales = pd.DataFrame({"id": ["A", "B", "A", "C"], "val": [3, 5, 2, 7]})
    request = "I have:\n\n" + sales.to_string() + "\n\nDrop the rows whose val is below 3; store it in `out`."
    assert shown_result.judge(request, sales.iloc[:3], [sales]) is None


def test_a_table_too_large_to_be_written_out_is_printed_only_as_pandas_shortens_it():
    large = pd.DataFrame({"a": range(100_000), "b": range(100_000)})
    texts = shown_result.printouts(large)
    assert texts == [repr(large)]
    assert len(shown_result.printouts(large.head(3))) > 2


def test_a_single_value_is_not_sent_back_for_a_table_the_request_passes_through():
    # The request writes out the table in the order it wants, then asks
    # for a count: a count is no table, and whether one is wanted is the
    # form check's call, not this comparison's.
    request = """My table:

  id  val
0  A    3
1  B    5
2  A    2

Sorted by val it should look like:

  id  val
2  A    2
0  A    3
1  B    5

How many rows moved? Store it in `moved`."""
    assert shown_result.judge(request, 3, [SALES], "moved") is None
    assert shown_result.judge(request, "three", [SALES], "moved") is None
    # A table that is not the one written is still sent back.
    assert shown_result.judge(request, SALES.sort_values("id"), [SALES], "moved")[0] == "differs"


def test_the_written_numbers_under_other_labels_are_not_confirmed_nor_sent_back():
    """A printout without its header or name holds the written numbers when
    only the labels are wrong: renamed columns, an `index` column that
    `reset_index()` added, a one-column table for a series and the other
    way round, a series under another name. None is the written result; a
    label read wrong would send a right value back, so the review weighs
    them."""
    right = SALES.assign(top=[3, 5, 3])
    assert shown_result.judge(TABLES, right.rename(columns={"top": "running_max"}), [SALES]) is None
    assert shown_result.judge(TABLES, right.reset_index(), [SALES]) is None
    # Written without a header, a table is compared by its rows alone.
    headless = TABLES.replace("  id  val  top\n0  A    3    3", "0  A    3    3")
    assert shown_result.judge(headless, right.rename(columns={"top": "running_max"}), [SALES]) == "matches"

    sums = pd.Series([5.0, 5.0], index=pd.Index(["A", "B"], name="id"), name="val")
    as_series = "I have this table:\n\n  id  val\n0  A    3\n1  B    5\n2  A    2\n\nI want the sums:\n\n" \
                "id\nA    5.0\nB    5.0\nName: val, dtype: float64\n"
    assert shown_result.judge(as_series, sums, [SALES]) == "matches"
    assert shown_result.judge(as_series, sums.to_frame(), [SALES]) is None
    assert shown_result.judge(as_series, sums.rename("total"), [SALES]) is None
    as_table = as_series.replace("id\nA    5.0\nB    5.0\nName: val, dtype: float64\n", "    val\nid\nA   5.0\nB   5.0\n")
    assert shown_result.judge(as_table, sums.to_frame(), [SALES]) == "matches"
    assert shown_result.judge(as_table, sums, [SALES]) is None


def test_a_header_that_names_the_index_as_a_column_is_another_table():
    """pandas prints an index's name below the header: a header line with
    the value's columns and its index's name prints that key as a column.
    Where the data's own index is written in its header, as people write
    tables by hand, a value keeping that index is the table written."""
    data = pd.DataFrame({"key": ["a", "b"], "x": [1, 2], "y": [3, 4]})
    request = "I have:\n\nkey | x | y\na | 1 | 3\nb | 2 | 4\n\nI want each x doubled:\n\nkey | x | y\na | 2 | 3\nb | 4 | 4\n"
    right = data.assign(x=[2, 4])
    assert shown_result.judge(request, right, [data]) == "matches"
    assert shown_result.judge(request, right.set_index("key"), [data]) is None
    keyed = data.set_index("key")
    assert shown_result.judge(request, keyed.assign(x=[2, 4]), [keyed]) == "matches"


def test_the_data_reshaped_to_print_as_it_did_is_not_the_written_result():
    """A value made from the data that prints as the data did (an index
    made a column of names, the other columns' numbers unchanged) matches
    the request's printout of its input: that printout is not a result."""
    series = pd.Series([[1, 2], [3, 4]], index=["f1", "f2"])
    request = "I have a series:\n\nf1    [1, 2]\nf2    [3, 4]\n\nI want a table of name, 0 and 1.\n"
    table = pd.DataFrame([[1, 2], [3, 4]], index=pd.Index(["f1", "f2"], name="name"))
    assert shown_result.judge(request, table, [series]) is None


def test_text_that_prints_as_the_written_numbers_or_dates_is_not_them():
    """pandas prints the text '3' as it prints the number 3: numbers taken
    out of text and never converted match the written table's tokens.
    Text the data already held (a column of codes) is compared as before,
    and so is text the request writes quoted."""
    as_text = SALES.assign(top=["3", "5", "3"])
    assert shown_result.judge(TABLES, as_text, [SALES]) is None
    codes = pd.Series(["a3", "b5"])
    quoted = "I have:\n\n0    a3\n1    b5\n\nI want the digits, as text:\n\n['3', '5']\n"
    assert shown_result.judge(quoted, pd.Series(["3", "5"]), [codes]) == "matches"
    assert shown_result.judge(quoted.replace("['3', '5']", "0    3\n1    5"), pd.Series(["3", "5"]), [codes]) is None
    coded = SALES.assign(val=["3", "5", "2"])
    assert shown_result.judge(TABLES, coded.assign(top=[3, 5, 3]), [coded]) == "matches"
    request = "I have:\n\n  id  n\n0  A  1\n\nI want the day it was due:\n\n  id  n         due\n0  A  1  2024-01-05\n"
    data = pd.DataFrame({"id": ["A"], "n": [1]})
    assert shown_result.judge(request, data.assign(due=pd.to_datetime(["2024-01-05"])), [data]) == "matches"
    assert shown_result.judge(request, data.assign(due=["2024-01-05"]), [data]) is None


def test_a_table_without_an_index_is_compared_by_its_labels_alone():
    """A table kind with columns and no index (as polars' tables are) is
    held against the header as a pandas one is, without failing."""
    from mahtab.agent import written_labels

    class Table:
        columns = ["id", "top"]

    assert not written_labels.differ("  id  top\n0  A  3\n", Table())
    assert written_labels.differ("  id  best\n0  A  3\n", Table())


def test_printing_a_table_with_repeated_column_names_warns_nobody():
    table = pd.DataFrame([[1, 2]], columns=["a", "a"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        texts = shown_result.printouts(table)
    assert caught == [] and any("a  a" in text for text in texts)


def test_an_array_an_item_short_of_a_written_list_is_not_it():
    data = pd.DataFrame({"v": [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]})
    request = ("I have df:\n\n   v\n" + "\n".join(f"{i}  {v}" for i, v in enumerate(data.v))
               + "\n\nI want the values of v from 2 up, sorted, as an array: [2, 3, 4, 5, 6, 7, 8, 9]\n")
    assert shown_result.judge(request, np.sort(data.v[data.v >= 2].to_numpy()), [data]) == "matches"
    for short in (np.sort(data.v[data.v > 2].to_numpy()), np.arange(3, 9), pd.Series(range(3, 10))):
        assert shown_result.judge(request, short, [data]) != "matches"


def test_text_in_another_case_is_other_text():
    people = pd.DataFrame({"name": ["john smith", "mary ann lee"]})
    request = ("I have\n\n           name\n0    john smith\n1  mary ann lee\n\nI want each word capitalised:\n\n"
               "           name        title\n0    john smith   John Smith\n1  mary ann lee  Mary Ann Lee\n")
    assert shown_result.judge(request, people.assign(title=people.name.str.title()), [people]) == "matches"
    for wrong in (people.name.str.capitalize(), people.name.str.upper(), people.name):
        assert shown_result.judge(request, people.assign(title=wrong), [people]) != "matches"
    # A truth value may be written in either case.
    flags = pd.DataFrame({"v": [1, 5]})
    request = "I have\n\n   v\n0  1\n1  5\n\nI want big = v > 2:\n\n   v    big\n0  1  false\n1  5   true\n"
    assert shown_result.judge(request, flags.assign(big=flags.v > 2), [flags]) == "matches"


def test_a_result_written_into_the_code_is_not_confirmed_by_the_request_it_was_copied_from():
    def scope():
        namespace = {"pd": pd, "np": np, "sales": SALES.copy(), "__builtins__": __builtins__}
        return AgentScope(Runtime(), namespace, journal=UndoHistory().journal())

    assert written(scope(), "out = sales.assign(top=sales.groupby('id')['val'].cummax())") == [
        {"verdict": "matches", "name": "out", "on_example": False},
    ]
    for typed in ("out = sales.assign(top=[3, 5, 3])", "out = sales.copy()\nout['top'] = (3, 5, 3)",
                  "sales['top'] = [3, 5, 3]\nout = sales"):
        assert written(scope(), typed) == [], typed
    # A list of the data's own items is no result typed in.
    assert typed_values.typed_items(["out = sales.assign(top=[3, 5, 2])"], SALES.assign(top=SALES.val), [SALES]) is False
    assert typed_values.typed_items(["x = np.array([[0, 1], [2, 3]])"], np.arange(4).reshape(2, 2), []) is True
    assert typed_values.typed_items(["x = (", "y = [1]"], [1], []) is False


def test_a_list_written_beside_another_that_may_be_what_the_user_got_confirms_nothing():
    data = [3, 1, 2, 5]
    request = "I have a = [3, 1, 2, 5]. I tried a cumulative sum but I get [3, 4, 6, 11] while I expected [0, 3, 4, 6]."
    assert shown_result.judge(request, np.cumsum(data), [data]) is None
    assert shown_result.judge(request, [0, 3, 4, 6], [data]) is None
    alone = "I have a = [3, 1, 2, 5]. I want the cumulative sum shifted by one: [0, 3, 4, 6]."
    assert shown_result.judge(alone, [0, 3, 4, 6], [data]) == "matches"
    assert shown_result.judge("for [0, 1, 1] I want [1, 1], the ones", [1, 1], [[0, 1, 1]]) == "matches"


def test_a_sentence_s_own_number_is_not_a_written_series_of_one_item():
    # "every 3 rows" is a number of the request's words: a series, array or
    # list of the one item 3 is not the table it writes out.
    request = (
        "I want to bin my table for every 3 rows from back to front.\n\n   a\n0  2\n1  1\n2  3\n3  1\n\n"
        "and turn it into this:\n\n     a\n0  1.5\n1  2.0\n\nStore it in `out`."
    )
    table = pd.DataFrame({"a": [2, 1, 3, 1]})
    for one_item in (table.iloc[[2]].mean(), np.array([3.0]), [3]):
        assert shown_result.judge(request, one_item, [table]) is None, one_item
    # Written alone, the one item is the result written out.
    alone = "I want the largest value of a, in a list:\n\n   a\n0  2\n1  1\n2  3\n\nwhich gives\n\n[3]"
    assert shown_result.judge(alone, [3], [table.iloc[:3]]) == "matches"
    # A single value is still shown by a sentence: "the largest is 3".
    said = "I want the largest value of a.\n\n   a\n0  2\n1  1\n2  3\n\nHere the largest is 3."
    assert shown_result.judge(said, 3, [table.iloc[:3]]) == "matches"


def test_a_result_written_in_the_value_s_own_form_with_other_numbers_differs():
    # The request writes, for its own data, the series it wants: the same
    # row labels and name as the value, another number in one row.
    table = pd.DataFrame({"team": ["red", "blue", "red", "blue"], "pts": [4.0, np.nan, 1.0, 2.0]})
    request = (
        "My table:\n\n   team  pts\n0   red  4.0\n1  blue  NaN\n2   red  1.0\n3  blue  2.0\n\n"
        "I want the total per team, missing if any is missing:\n\nteam\nblue    NaN\nred     5.0\n"
        "Name: pts, dtype: float64\n\nresult = ..."
    )
    right = table.groupby("team")["pts"].apply(lambda pts: pts.sum(skipna=False))
    assert shown_result.judge(request, right, [table], name="result") == "matches"
    skipped = table.groupby("team")["pts"].sum()
    verdict, piece = shown_result.judge(request, skipped, [table], name="result")
    assert verdict == "differs" and "Name: pts" in piece
    # Labels over numbers alone do not make a form: below a header, the
    # numbers of a table with a column more line up with any run of as
    # many, so a value without that column is not sent back for them.
    data = pd.DataFrame({"key": [7, 7, 8], "a": [5, 1, 3]})
    wider = (
        "My data:\n\n   key  a\n0    7  5\n1    7  1\n2    8  3\n\nsorted within each key:\n\n"
        "        key  a\nkey            \n7   1    7  1\n    0    7  5\n8   2    8  3\n\nresult = ..."
    )
    kept_out = data.groupby("key")[["a"]].apply(lambda group: group.sort_values("a"))
    assert shown_result.judge(wider, kept_out, [data], name="result") is None


def test_columns_in_another_order_match_only_in_the_notebook_s_order_or_the_written_one():
    # The notebook holds key, n, tag; the request prints tag first.
    data = pd.DataFrame({"key": ["p", "q", "p"], "n": [2, 7, 5], "tag": ["x1", "y2", "z3"]})
    request = (
        "My data:\n\n  tag key  n\n0  x1   p  2\n1  y2   q  7\n2  z3   p  5\n\n"
        "I want a running total of n per key:\n\n  tag key  n  run\n0  x1   p  2    2\n1  y2   q  7    7\n"
        "2  z3   p  5    7\n\nresult = ..."
    )
    right = data.assign(run=data.groupby("key")["n"].cumsum())
    assert shown_result.judge(request, right, [data], name="result") == "matches"
    assert shown_result.judge(request, right[["tag", "key", "n", "run"]], [data], name="result") == "matches"
    assert shown_result.judge(request, right[["run", "tag", "n", "key"]], [data], name="result") is None
    # Printed in its own order once, the data is not reordered by a later
    # piece in another order (what the user got): only the written order
    # of the result matches.
    shown_once = (
        "My data:\n\n  key  n tag\n0   p  2  x1\n1   q  7  y2\n2   p  5  z3\n\n"
        "I tried something and got:\n\n  tag key  n\n0  x1   p  2\n1  y2   q  7\n2  z3   p  5\n\n"
        "I want:\n\n  key  n tag  run\n0   p  2  x1    2\n1   q  7  y2    7\n2   p  5  z3    7\n\nresult = ..."
    )
    assert shown_result.judge(shown_once, right[["key", "n", "tag", "run"]], [data], name="result") == "matches"
    assert shown_result.judge(shown_once, right[["tag", "key", "run", "n"]], [data], name="result") is None
