"""The example a request gives for other data than the notebook's: read back
(a printed table, the request's own code), the run's code tried on it, and
only a match with the result the request writes out for it said."""

import numpy as np
import pandas as pd

from mahtab.agent import request_example
from mahtab.agent.scope import AgentScope
from mahtab.agent.undo import UndoHistory

from agent_runtime import Runtime
from test_shown_result import TABLES, written

# The notebook's table: not the one the request shows.
SALES = pd.DataFrame({"id": ["A", "B", "A", "C"], "val": [4, 1, 7, 2]})

# The request of the comparison on the notebook's own data, which shows
# three rows: here the notebook holds other ones.
PRINTED = TABLES

RIGHT = "out = sales.assign(top=sales.groupby('id')['val'].cummax())"
WRONG = "out = sales.assign(top=sales.groupby('id')['val'].cumsum())"


def scope_over(**values):
    namespace = {"pd": pd, "np": np, "__builtins__": __builtins__, **values}
    return AgentScope(Runtime(), namespace, journal=UndoHistory().journal()), namespace


def test_code_that_makes_the_written_result_from_the_example_matches_and_the_notebook_is_untouched():
    scope, namespace = scope_over(sales=SALES.copy())
    assert written(scope, RIGHT) == [{"verdict": "matches", "name": "out", "on_example": True}]
    # The value kept is the notebook's, not the example's.
    assert namespace["out"]["top"].tolist() == [4, 1, 7, 2]
    pd.testing.assert_frame_equal(namespace["sales"], SALES)


def test_code_that_makes_another_result_from_the_example_is_sent_back_with_what_it_made_there():
    # Measured on DS-1000's reference code, an example's written result
    # holds for right code (all but 1 of 27): another result made from the
    # example is a wrong answer's sign, shown beside the written one.
    scope, namespace = scope_over(sales=SALES.copy())
    [found] = written(scope, WRONG)
    assert found["verdict"] == "differs" and found["name"] == "out" and found["on_example"]
    assert found["written"].splitlines()[-1] == "2  A    2    3"
    # The value shown is the one made from the example, not the notebook's.
    assert found["value"].splitlines()[-1] == "2  A    2    5"
    assert namespace["out"]["top"].tolist() == [4, 1, 11, 2]


def test_code_that_types_the_example_in_over_the_data_is_not_confirmed_by_it():
    # A copy of the request's table over the notebook's makes the written
    # result from any data: run on the example, it tests nothing.
    copied = "data = {'id': ['A', 'B', 'A'], 'val': [3, 5, 2]}\nsales = pd.DataFrame(data)\n"
    scope, namespace = scope_over(sales=SALES.copy())
    assert written(scope, copied + RIGHT) == []
    assert namespace["out"]["top"].tolist() == [3, 5, 3]  # the example's, not the notebook's
    # The notebook's own table rebuilt from itself is still its data.
    scope, _ = scope_over(sales=SALES.copy())
    assert written(scope, "sales = sales.reset_index(drop=True)\n" + RIGHT) == [
        {"verdict": "matches", "name": "out", "on_example": True}
    ]


def test_code_that_picks_the_example_s_rows_by_label_is_not_confirmed_by_it():
    # Rows kept by labels written into the code are the example's rows on
    # the example and a guess on the notebook's table.
    request = (
        "My table looks like this:\n\n  id  val\n0  A    3\n1  B    5\n2  A    2\n3  C    1\n\n"
        "I want the rows whose val is above 2:\n\n  id  val\n0  A    3\n1  B    5\n\nStore them in `out`."
    )
    scope, _ = scope_over(sales=SALES.copy())
    assert written(scope, "out = sales[sales['val'] > 2]", request=request) == [
        {"verdict": "matches", "name": "out", "on_example": True}
    ]
    for picked in ("out = sales.loc[[0, 1]]", "out = sales.iloc[[0, 1], :]", "out = sales.drop([2, 3])",
                   "out = sales.drop(index=[2, 3])"):
        scope, _ = scope_over(sales=SALES.copy())
        assert written(scope, picked, request=request) == [], picked
    # Columns picked by name are the request's words, not a guess.
    for columns in ("out = sales[['id', 'val']]", "out = sales.drop(['id'], axis=1)",
                    "out = sales.drop(columns=['id'])", "out = sales.reindex(['val', 'id'], axis='columns')"):
        assert not request_example._picks_written_rows(columns), columns


def test_code_that_types_in_the_example_s_values_over_an_unread_input_is_not_confirmed_by_it():
    # The request shows its values ("ids like [2, 3]") for an example; the
    # notebook holds its own in `ids`. Code that writes the example's in
    # makes the written result on the example and a guess on the notebook.
    request = (
        "My table looks like this:\n\n  id  val\n0  1    3\n1  2    5\n2  3    2\n\n"
        "I have the ids to scale in a list like this: [2, 3]. Scaling their val by 10 gives:\n\n"
        "  id  val\n0  1    3\n1  2   50\n2  3   20\n\nStore the table in `out`."
    )
    table = pd.DataFrame({"id": [1, 2, 3, 4], "val": [4, 1, 7, 2]})

    def on(code, **inputs):
        scope, _ = scope_over(table=table.copy(), **inputs)
        return written(scope, code, request=request)

    confirmed = [{"verdict": "matches", "name": "out", "on_example": True}]
    typed = "out = table.assign(val=table['val'].where(~table['id'].isin([2, 3]), table['val'] * 10))"
    read = "out = table.assign(val=table['val'].where(~table['id'].isin(ids), table['val'] * 10))"
    assert on(typed, ids=[1, 4]) == []
    assert on(typed, ids=np.array([1, 4])) == []
    # Code that reads the input is tried on the example as ever (the
    # example stands in for the table; `ids` is the notebook's).
    assert on(read, ids=[2, 3]) == confirmed
    # Nothing of that kind unread: the written values are the request's.
    assert on(typed) == confirmed
    assert on(typed, names=["a", "b"]) == confirmed


def test_the_example_s_values_typed_over_an_unread_input_are_not_confirmed_on_data_like_the_example():
    # The notebook's table is the request's example, so the example's
    # values typed in make the written result on it; the notebook's own
    # `order` goes unread, so the match says nothing of the code.
    request = (
        "My table looks like this:\n\n   a\n0  1\n1  2\n2  3\n\n"
        "I have a list of row positions, like [2, 0, 1], and want the rows in that order:\n\n"
        "   a\n2  3\n0  1\n1  2\n\nStore the table in `out`."
    )
    table = pd.DataFrame({"a": [1, 2, 3]})

    def on(code, order):
        scope, _ = scope_over(table=table.copy(), order=order)
        return written(scope, code, request=request)

    assert on("out = table.iloc[[2, 0, 1]]", [1, 2, 0]) == []
    assert on("positions = [2, 0, 1]\nout = table.iloc[positions]", np.array([1, 2, 0])) == []
    assert on("out = table.iloc[order]", [2, 0, 1]) == [{"verdict": "matches", "name": "out", "on_example": False}]


def test_an_example_built_by_the_request_s_own_code():
    request = (
        "For example:\n\n```python\nimport numpy as np\na = np.array([[1, 2], [3, 4]])\n```\n\n"
        "I want each row's sum, which here is:\n\n[3, 7]\n\nStore it in `sums`."
    )
    scope, _ = scope_over(a=np.arange(6).reshape(3, 2))
    assert written(scope, "sums = a.sum(axis=1)", "sums", request) == [
        {"verdict": "matches", "name": "sums", "on_example": True}
    ]
    scope, _ = scope_over(a=np.arange(6).reshape(3, 2))
    [found] = written(scope, "sums = a.sum(axis=0)", "sums", request)
    assert (found["verdict"], found["on_example"], found["written"]) == ("differs", True, "[3, 7]")
    assert found["value"] == "array([4, 6])"


def test_a_first_column_the_notebook_lacks_is_read_as_the_rows_labels():
    request = (
        "My data:\n\nid    url     keep\n1     A.com   Yes\n2     A.com   Yes\n3     B.com   No\n\n"
        "I want the first row of each url:\n\nid    url     keep\n1     A.com   Yes\n3     B.com   No\n\n"
        "Store it in `result`."
    )
    notebook = pd.DataFrame({"url": ["X.com", "X.com", "Y.com", "Y.com"], "keep": ["No", "Yes", "No", "No"]})
    scope, _ = scope_over(df=notebook)
    assert written(scope, "result = df.drop_duplicates('url')", "result", request) == [
        {"verdict": "matches", "name": "result", "on_example": True}
    ]


def test_no_example_without_one_for_every_input():
    # Two tables of the same columns for two inputs: which is which is not
    # known. A list the request states in words: not read back.
    two = (
        "C\n  A  B\n0  a  1\n1  b  2\nD\n  A  B\n0  b  4\n\nThe merge:\n\n  A  B\n0  a  1\n1  b  4\n\n"
        "result = ..."
    )
    c, d = pd.DataFrame({"A": ["x"], "B": [1]}), pd.DataFrame({"A": ["x"], "B": [2]})
    assert request_example.example_inputs(Runtime(), two, {"C": c, "D": d}) is None
    assert request_example.example_inputs(Runtime(), PRINTED, {"sales": SALES, "keys": [1, 2]}) is None
    # The request shows the notebook's own data: no other example to try.
    shown = PRINTED.replace("0  A    3\n1  B    5\n2  A    2", "0  A    4\n1  B    1\n2  A    7\n3  C    2", 1)
    assert request_example.example_inputs(Runtime(), shown, {"sales": SALES}) is None


def test_tables_are_read_back_with_the_notebook_s_columns_and_kinds():
    lines = ["   day  amount", "0  2024-01-02  3", "1  2024-01-05  4", "..  ...  ..."]
    like = pd.DataFrame({"day": pd.to_datetime(["2023-05-01"]), "amount": [1.5]})
    [table] = request_example._tables("\n".join(lines + ["", "Desired:"]))
    read = request_example.read_table(table, like)
    assert list(read.columns) == ["day", "amount"] and read["amount"].dtype == float
    assert str(read["day"].dtype).startswith("datetime64")
    assert request_example.read_table(table, pd.DataFrame({"other": [1], "amount": [2]})) is None


def test_code_that_fails_on_the_example_or_reaches_past_its_copy_says_nothing():
    scope, _ = scope_over(sales=SALES.copy())
    assert written(scope, "out = sales.assign(top=sales['val'].cummax() + sales.loc[3, 'val'])") == []
    example = {"sales": SALES.iloc[:2]}
    runtime = Runtime()
    assert request_example.run_on(runtime, ["out = sales.copy()\nout.to_csv('x.csv')"], {}, example, "out") is None
    assert request_example.run_on(runtime, ["out = sales.val.sum()"], {}, example, "out") == 5


def test_a_column_of_mixed_objects_reads_numbers_back_as_numbers():
    # The notebook's column holds numbers and words; its printout shows 7
    # and "7" alike, so a field that reads as a number is one, as there.
    request = (
        "I have:\n\n   code  name\n0     7   ann\n1     x   bob\n2     9   cy\n\n"
        "I want the rows whose code is text:\n\n   code  name\n1     x   bob\n\nStore it in `result`."
    )
    notebook = pd.DataFrame({"code": [3, "q", "r", 4], "name": ["d", "e", "f", "g"]})
    scope, _ = scope_over(df=notebook)
    code = "result = df[df['code'].map(lambda v: isinstance(v, str))]"
    assert written(scope, code, "result", request) == [{"verdict": "matches", "name": "result", "on_example": True}]
    texts = pd.DataFrame({"code": ["3", "q"], "name": ["d", "e"]})
    [table] = request_example._tables(request.split("\n\n")[1])
    assert request_example.read_table(table, texts)["code"].tolist() == ["7", "x", "9"]
    digits = ["   code  name", "0     7   ann", "1     9   bob"]
    assert request_example.read_table(digits, texts.astype(object))["code"].tolist() == ["7", "9"]


def test_a_table_printed_with_its_columns_in_another_order_is_read_in_the_notebook_s():
    lines = ["   val id", "0    3  A", "1    5  B"]
    read = request_example.read_table(lines, SALES)
    assert list(read.columns) == ["id", "val"] and read["val"].tolist() == [3, 5]
    # A name printed twice (a typo) is no such table.
    assert request_example.read_table(["   val val", "0    3  A"], SALES) is None


def test_only_request_code_that_makes_values_is_run():
    assert request_example._makes_values("a = np.array([1, 2])\nprint(a)\na\ndef f(x):\n    return x")
    assert not request_example._makes_values("for i in range(10**9):\n    pass")
    assert not request_example._makes_values("model.fit(x, y)")
    assert not request_example._makes_values("a = (")
    assert not request_example._makes_values("a = eval('1')")
    assert not request_example._makes_values("a = open('f').read()")
    made = request_example._made_by_code(Runtime(), "```python\nb = [1]\nwhile True:\n    b.append(1)\n```\n\n```python\nc = 2\n```")
    assert made == {"c": (2, "c = 2")}


def test_code_after_a_sentence_in_the_same_piece_makes_the_example():
    request = (
        "Say I have df, created with:\nvals = [[1, 5], [2, 6]]\ndf = pd.DataFrame(vals, columns=['a', 'b'])\n"
        "and I call df.sum() on it\n\nI want each row's total:\n\n0    6\n1    8\ndtype: int64\n\n"
        "Store it in `result`."
    )
    [(_, code)] = request_example._code_in(request)
    assert code.splitlines() == ["vals = [[1, 5], [2, 6]]", "df = pd.DataFrame(vals, columns=['a', 'b'])"]
    scope, _ = scope_over(df=pd.DataFrame({"a": [3, 4, 5], "b": [0, 0, 1]}))
    assert written(scope, "result = df.sum(axis=1)", "result", request) == [
        {"verdict": "matches", "name": "result", "on_example": True}
    ]


# A request that shows the data, what the user tried and what it printed,
# then the result they want.
TRIED = """I have this table:

  id  val
0  A    3
1  B    5
2  A    2

I tried

out = sales['val'].cumsum()

which gives

0     3
1     8
2    10

but I want the running maximum of val within each id:

0    3
1    5
2    3

Store it in `out`."""


def test_an_attempt_is_what_the_request_code_makes_from_the_data_not_the_data_itself():
    shown = pd.DataFrame({"id": ["A", "B", "A"], "val": [3, 5, 2]})
    request = TRIED.replace("out = sales['val'].cumsum()", "sales\nout = sales['val'].cumsum()\nout")
    made = request_example.attempted(Runtime(), request, {"sales": shown})
    assert [(a.name, list(a.value)) for a in made] == [("out", [3, 8, 10]), ("_attempt_value", [3, 8, 10])]
    assert made[0].code.endswith("_attempt_value = out")
    assert shown["val"].tolist() == [3, 5, 2]


def test_the_printout_of_what_the_user_tried_does_not_confirm_that_attempt():
    shown = pd.DataFrame({"id": ["A", "B", "A"], "val": [3, 5, 2]})
    scope, _ = scope_over(sales=shown.copy())
    assert written(scope, "out = sales['val'].cumsum()", "out", TRIED) == []
    scope, _ = scope_over(sales=shown.copy())
    assert written(scope, "out = sales.groupby('id')['val'].cummax()", "out", TRIED) == [
        {"verdict": "matches", "name": "out", "on_example": False}
    ]
    # The result written before the attempt is what the user wants, even
    # where their attempt makes it.
    before = TRIED.replace("which gives\n\n0     3\n1     8\n2    10", "which gives an error")
    before = before.replace("I have this table:", "I want\n\n0     3\n1     8\n2    10\n\nfrom this table:")
    scope, _ = scope_over(sales=shown.copy())
    assert written(scope, "out = sales['val'].cumsum()", "out", before) == [
        {"verdict": "matches", "name": "out", "on_example": False}
    ]
