"""bench/written_results.py: the name a DS-1000 request leaves to fill in,
the spoiled value it compares beside the right one, and a task measured end
to end from a converted item's parts."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import written_results  # noqa: E402


def test_the_name_left_to_fill_in_and_the_spoiled_value():
    assert written_results.target("Do it.\nresult = ... # put solution in this variable") == "result"
    assert written_results.target("Do it.\ndf = ...") == "df"
    assert written_results.target("Do it in place.") is None
    assert written_results.spoiled([1, 2, 3]) == [3, 2, 1]
    assert written_results.spoiled(np.array([5])).tolist() == [10]
    assert written_results.spoiled(pd.DataFrame({"a": [1, 2]}))["a"].tolist() == [2, 1]
    assert written_results.spoiled(4.5) is None


def test_a_task_whose_request_writes_out_its_result():
    task = SimpleNamespace(
        hidden_setup="import pandas as pd\n_eval_input = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\n"
                     "_eval_expected = _eval_input.assign(c=[4, 6])",
        setup="df = _eval_input",
        solution="result = df.assign(c=df.a + df.b)",
        prompt="I have:\n\n   a  b\n0  1  3\n1  2  4\n\nI want:\n\n   a  b  c\n0  1  3  4\n1  2  4  6\n\n"
               "result = ... # put solution in this variable",
    )
    assert written_results.measure(task) == ("matches", "differs", None)
    # An example about other data: the reference code is tried on it.
    task.prompt = task.prompt.replace("0  1  3\n", "0  9  3\n", 1)
    assert written_results.measure(task) == ("nothing", None, "differs")
    task.prompt = task.prompt.replace("0  1  3  4\n", "0  9  3  12\n", 1)
    assert written_results.measure(task) == ("nothing", None, "matches")


def test_what_the_request_own_code_makes_is_judged_as_an_answer():
    """The user's attempt, run on the notebook's data, is a wrong answer a
    small model often sends back: the request prints what it gives, and the
    kernel does not take that printout for the result wanted. A value typed
    in is left out (the kernel never confirms one)."""
    task = SimpleNamespace(
        hidden_setup="import pandas as pd\n_eval_input = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\n"
                     "_eval_expected = _eval_input.assign(c=[4, 6])",
        setup="df = _eval_input",
        solution="result = df.assign(c=df.a + df.b)",
        prompt="I have:\n\n   a  b\n0  1  3\n1  2  4\n\nI tried:\n\nout = df.a + df.b\nbut that is a series\n\n"
               "which gives\n\n0    4\n1    6\n\nand\n\nwanted = pd.DataFrame({'c': [4, 6]})\n\nI want:\n\n"
               "   a  b  c\n0  1  3  4\n1  2  4  6\n\nresult = ... # put solution in this variable",
    )
    assert written_results.measure_tried(task) == [("out", "attempted")]


def test_near_misses_the_task_check_fails_are_judged():
    table = pd.DataFrame({"a": [1, 2, 3, 4], "b": [5, 6, 7, 8]}, index=list("wxyz"))
    kinds = [kind for kind, _ in written_results.near_misses(table)]
    assert kinds == ["last row left out", "first row left out", "one number off by one", "index dropped",
                     "integers as floats", "a column left out", "columns in another order",
                     "a whole number off by a fraction",
                     "a column moved into the index",
                     "the index moved into a column", "columns renamed", "numbers as text"]
    assert [kind for kind, _ in written_results.near_misses(3)] == ["one number off by one"]
    fraction = dict(written_results.near_misses(table))["a whole number off by a fraction"]
    assert fraction["a"].tolist() == [1.3, 2, 3, 4] and fraction["b"].tolist() == [5, 6, 7, 8]
    assert dict(written_results.near_misses(np.arange(3)))["a whole number off by a fraction"].tolist() == [0.3, 1, 2]
    assert written_results.a_fraction_off(pd.Series([0.5, 1.0])) is None
    words = pd.DataFrame({"n": [1, 2], "w": ["7", "Apple"]})
    assert written_results.a_word_recased(words)["w"].tolist() == ["7", "aPPLE"]
    assert written_results.a_word_recased(table) is None
    # The same numbers in another shape: the labels are what is wrong.
    series = dict(written_results.reshaped(table["a"]))
    assert list(series) == ["a series as a table", "the index moved into a column", "series renamed",
                            "numbers as text"]
    assert series["numbers as text"].tolist() == ["1", "2", "3", "4"]
    dated = pd.DataFrame({"day": pd.to_datetime(["2024-01-02"]), "n": [1]})
    assert dict(written_results.reshaped(dated))["dates as text"]["day"].tolist() == ["2024-01-02"]
    assert series["series renamed"].name == "a_1" and series["a series as a table"].columns.tolist() == ["a"]
    assert dict(written_results.reshaped(table[["a"]]))["a table as a series"].tolist() == [1, 2, 3, 4]
    assert dict(written_results.reshaped(np.arange(3)))["an array as a list"] == [0, 1, 2]
    task = SimpleNamespace(
        hidden_setup="import pandas as pd\n_eval_input = pd.DataFrame({'a': [1, 2, 3, 4], 'b': [3, 4, 5, 6]})\n"
                     "_eval_expected = _eval_input.assign(c=[4, 6, 8, 10])\n"
                     "_eval_context = {'exec_test': lambda got, want: got.equals(want)}",
        setup="df = _eval_input",
        solution="result = df.assign(c=df.a + df.b)",
        prompt="I have:\n\n   a  b\n0  1  3\n1  2  4\n2  3  5\n3  4  6\n\nI want:\n\n"
               "   a  b  c\n0  1  3  4\n1  2  4  6\n2  3  5  8\n3  4  6  10\n\n"
               "result = ... # put solution in this variable",
    )
    found = dict(written_results.measure_near(task))
    # Integers as floats fail `equals` here; the comparison reads numbers by
    # their value (4 is 4.0), as DS-1000's own checks mostly do.
    assert found == {"last row left out": "differs", "first row left out": "differs",
                     "one number off by one": "differs", "integers as floats": "matches",
                     "a column left out": "differs", "columns in another order": "nothing",
                     "a whole number off by a fraction": "differs",
                     "a column moved into the index": "differs",
                     "columns renamed": "nothing", "numbers as text": "nothing"}


def test_each_turn_of_a_recorded_run_is_judged_as_the_kernel_takes_it():
    """A run's answer after each turn (the blocks that ran, up to it) is
    checked by the task and judged on the notebook's data: a right value
    the request writes out is done by code, a wrong one sent back, and a
    block that failed is no part of any answer."""
    body = ("[code, turn 1]\nresult = df.a + df.b\n[output]\n(no output)\n"
            "[code, turn 2]\nresult = df.nope\n[error]\nAttributeError\n"
            "[code, turn 2]\nresult = df.assign(c=df.a + df.b)\n[output]\n(no output)\n")
    turns = list(written_results.answered_turns(body))
    assert turns == [["result = df.a + df.b"], ["result = df.a + df.b", "result = df.assign(c=df.a + df.b)"]]
    task = SimpleNamespace(
        hidden_setup="import pandas as pd\n_eval_input = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\n"
                     "_eval_expected = _eval_input.assign(c=[4, 6])",
        setup="df = _eval_input",
        check="result.equals(_eval_expected)",
        prompt="I have:\n\n   a  b\n0  1  3\n1  2  4\n\nI want:\n\n   a  b  c\n0  1  3  4\n1  2  4  6\n\n"
               "result = ... # put solution in this variable",
    )
    assert written_results.kernel_call(task, turns[0]) == (False, "sent back")
    assert written_results.kernel_call(task, turns[1]) == (True, "done by code")
    assert written_results.kernel_call(task, ["other = 1"]) == (False, "no value")
    # A value that changes the notebook's data in place is judged against
    # that data as it was before the run.
    assert written_results.kernel_call(task, ["df['c'] = df.a + df.b", "result = df"]) == (True, "done by code")
    # The written result typed in is left to the review, as the kernel
    # leaves it (one decision, `request_example.written_verdict`).
    typed = "import pandas as pd\nresult = pd.DataFrame({'a': [1, 2], 'b': [3, 4], 'c': [4, 6]})"
    assert written_results.kernel_call(task, [typed]) == (True, "to the review")


def test_wrong_code_that_makes_the_example_s_written_result_is_judged():
    """A task decided on the request's example: the right code is done by
    code, and code that types the example in (its data over the notebook's,
    or its result) makes the written result without computing it from the
    data, so the kernel leaves it to the review."""
    assert written_results.typed_code("df", pd.DataFrame({"a": [1, 2]}, index=[5, 6])) == (
        "df = pd.DataFrame({'a': [1, 2]}, index=[5, 6])")
    assert written_results.typed_code("a", np.arange(3)) == "a = np.array([0, 1, 2])"
    assert written_results.typed_code("f", lambda: 1) is None
    task = SimpleNamespace(
        hidden_setup="import pandas as pd\n_eval_input = pd.DataFrame({'a': [7, 8], 'b': [1, 1]})\n"
                     "_eval_expected = _eval_input.assign(c=[8, 9])",
        setup="df = _eval_input",
        solution="result = df.assign(c=df.a + df.b)",
        check="result.equals(_eval_expected)",
        prompt="I have:\n\n   a  b\n0  1  3\n1  2  4\n\nI want:\n\n   a  b  c\n0  1  3  4\n1  2  4  6\n\n"
               "result = ... # put solution in this variable",
    )
    right, misses = written_results.measure_example(task)
    assert right == (True, "done by code")
    assert misses == [("the example typed in over the data", "to the review"),
                      ("the example's result typed in", "to the review")]


def test_code_that_types_a_result_s_new_columns_in():
    data = pd.DataFrame({"a": [1, 2], "b": [3, 4]})
    result = data.assign(c=data.a + data.b)
    code = written_results.columns_typed("out", result, {"df": data})
    assert code == "out = df.assign(**{'c': [4, 6]})[['a', 'b', 'c']]"
    assert written_results.columns_typed("out", result[["a", "c"]], {"df": data}) is None
    assert written_results.columns_typed("out", result.a, {"df": data}) is None
