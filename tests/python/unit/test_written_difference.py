"""What the model sent back is told differs between its value and the
result the request writes out: columns, rows, items, or the first row or
item whose numbers differ, and nothing where the printouts show nothing
certain."""

import numpy as np
import pandas as pd

from mahtab.agent.written_difference import difference

WANTED = """    A   B    D
2   1   0    1
3   0   1    0
4   1   1    1
Notice that the rows and columns with sum of 0 have been removed."""


def test_a_column_the_value_has_and_the_written_table_lacks_is_named():
    value = pd.DataFrame({"A": [1, 0, 1], "B": [0, 1, 1], "C": [0, 0, 0], "D": [1, 0, 1]}, index=[2, 3, 4])
    assert difference(WANTED, value, "result") == "`result` has the column(s) `C`, which the written result does not."


def test_a_written_column_the_value_lacks_or_holds_as_its_index():
    value = pd.DataFrame({"A": [1, 0, 1], "B": [0, 1, 1]}, index=[2, 3, 4])
    assert difference(WANTED, value, "out") == "The written result has the column(s) `D`, which `out` lacks."
    indexed = pd.DataFrame({"A": [1, 0, 1], "B": [0, 1, 1]}, index=pd.Index([1, 0, 1], name="D"))
    assert difference(WANTED, indexed, "out") == "The written result has `D` as a column; `out` has it as its index."


def test_a_table_with_the_written_columns_and_another_count_of_rows():
    value = pd.DataFrame({"A": [1, 0], "B": [0, 1], "D": [1, 0]}, index=[2, 3])
    assert difference(WANTED, value, "result") == "The written result has 3 rows; `result` has 2."


def test_a_table_with_its_rows_and_columns_swapped_is_told_so():
    # The written table of a DS-1000 request, and the local model's first
    # groupby: bins as rows where the request has them as columns.
    written = (
        "views     (1, 10]  (10, 25]  (25, 50]  (50, 100]\n"
        "username\n"
        "jane            1         1         1          1\n"
        "john            1         1         1          1"
    )
    df = pd.DataFrame({"username": ["jane", "john"] * 4, "views": [3, 8, 23, 13, 44, 40, 82, 56]})
    value = df.groupby(pd.cut(df.views, [1, 10, 25, 50, 100]), observed=False)["username"].value_counts().unstack()
    assert difference(written, value, "result") == (
        "`result` is the written result with its rows and columns swapped: end the code with `result = result.T`."
    )
    # Swapped, but with other numbers: not said.
    assert "swapped" not in difference(written, value * 2, "result")


def test_a_series_where_a_table_is_written():
    written = "desired:\n       l    v\n0   left -3.0\n1  right  NaN"
    value = pd.Series([-3.0, 2.0], index=pd.Index(["left", "right"], name="l"))
    assert difference(written, value, "result") == (
        "The written result is a table with the columns `l`, `v`; `result` is a Series."
    )


def test_the_first_row_whose_numbers_differ_is_quoted_from_both():
    written = "  id  val  top\n0  A    3    3\n1  B    5    5\n2  A    2    3"
    value = pd.DataFrame({"id": ["A", "B", "A"], "val": [3, 5, 2], "top": [3, 8, 10]})
    assert difference(written, value, "out") == (
        "The first row that differs: the written result has `1 B 5 5` where `out` has `1 B 5 8`."
    )


def test_a_list_of_another_length_or_with_an_item_that_differs():
    assert difference("result should be [1, 2, 3]", [1, 2], "r") == "The written result holds 3 items; `r` holds 2."
    assert difference("[0.5, 1.25, 2.0]", np.array([0.5, 1.5, 2.0]), "r") == (
        "Item 2 is the first that differs: the written result has 1.25 where `r` has 1.5."
    )
    assert difference("[1, 2, 3]", [1, 2, float("nan")], "r").endswith("where `r` has nan.")


def test_an_array_with_other_rows_than_the_written_one():
    written = "a = np.array([[0, 1, 2],\n              [4, 5, 6]])\nHow can I do it?"
    assert difference(written, np.arange(9).reshape(3, 3), "result") == "The written result has 2 rows of 3; `result` has 3 rows of 3."
    assert difference("[[1, 2], [3, 4]]", np.array([[1, 2, 3], [3, 4, 5]]), "r") == "The written result has 2 rows of 2; `r` has 2 rows of 3."
    # Rows of other lengths are no grid: nothing certain to say of its shape.
    assert "rows of" not in difference("[[1, 2], [3]]", np.arange(6).reshape(2, 3), "r")


def test_nothing_is_said_where_the_printouts_show_nothing_certain():
    # The same numbers, written in words the value does not print.
    assert difference("[1, 2, 3]", [1, 2, 3], "r") == ""
    # A table printed without a header: its numbers are no column names.
    assert difference("0 1 2\n1 3 4", pd.DataFrame({"x": [1, 3], "y": [2, 4]}), "r") == ""
    # As many rows, and a count of numbers no printout of the value has.
    assert difference(WANTED, pd.DataFrame({"A": [1, 0, 1], "B": [0, 1, 1], "D": [[1], [0, 2], [1]]},
                                           index=[2, 3, 4]), "r") == ""
    assert difference("the total is about right", 12, "total") == ""


def test_a_value_whose_own_methods_fail_gets_nothing_said():
    class Odd(list):
        def __len__(self):
            raise RuntimeError("no length")

    assert difference("[1, 2, 3]", Odd([1, 2]), "r") == ""


def test_a_written_series_is_read_row_by_row_not_as_a_table():
    # ``blue NaN`` over ``red 5.0`` looks like a header of names over a row.
    written = "team\nblue    NaN\nred     5.0\nName: pts, dtype: float64"
    value = pd.Series([2.0, 5.0], index=pd.Index(["blue", "red"], name="team"), name="pts")
    assert difference(written, value, "result") == (
        "The first row that differs: the written result has `blue NaN` where `result` has `blue 2.0`."
    )
