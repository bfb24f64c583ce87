"""A block that fails in a library call it got wrong tells the model what
the function takes: its signature and the documentation of the arguments
the call gave, the one the error names first. Only the model's copy has
it, before the traceback, and nothing else gets it."""

import numpy as np
import pandas as pd

from mahtab.agent import call_help, execution

from agent_runtime import Runtime


def run(code):
    table = pd.DataFrame({"B": ["a", "b", "a"], "D": [1.0, 2.0, 3.0], "E": [4.0, 5.0, 6.0]})
    return execution.run_agent_code(Runtime(), code, {"pd": pd, "np": np, "df": table})


def test_a_callback_of_the_wrong_shape_gets_the_parameters_documentation_first():
    code = (
        "def custom_agg(D, E):\n"
        "    return D.sum(), E.mean()\n"
        "result = pd.pivot_table(df, values=['D', 'E'], index=['B'], aggfunc=custom_agg)\n"
    )
    result = run(code)
    assert result["failed"]
    told = result["output"]
    lines = told.strip().splitlines()
    assert lines[0] == "What pivot_table takes (from its documentation):", told
    assert lines[1].startswith("pivot_table(data, values=None, index=None, columns=None, aggfunc='mean'"), told
    assert lines[2].startswith("  aggfunc: function, list of functions, dict"), told
    assert "If a dict is passed, the key is column to aggregate" in lines[2], told
    assert lines[3].startswith("  values: "), told
    assert lines[4] == "Traceback (most recent call last):", told
    assert lines[-1] == "TypeError: custom_agg() missing 1 required positional argument: 'E'", told
    # The user's panel shows the error as Python printed it.
    assert "What pivot_table takes" not in result["shown"]
    assert result["shown"].strip().splitlines()[-1] == lines[-1]


def test_a_call_python_refused_gets_the_signature_from_the_line():
    told = run("parts = pd.concat(df, df)")["output"]
    assert "What concat takes (from its documentation):\nconcat(objs, *, axis=0, join='outer'" in told, told
    assert told.strip().splitlines()[-1] == "TypeError: concat() takes 1 positional argument but 2 were given"


def test_a_parameter_the_error_names_comes_before_the_others_given():
    told = run("ordered = df.sort_values(by='D', ascending='no')")["output"]
    help_lines = told.split("Traceback")[0].splitlines()
    assert help_lines[1].startswith("sort_values(self, by, *, axis=0, ascending=True"), told
    assert [line.split(":")[0].strip() for line in help_lines[2:]] == ["ascending", "by"], told


def test_no_help_where_the_call_is_not_the_cause():
    # A missing key is the data's doing; the agent's own function and a
    # builtin need no documentation; an operator's error names no call.
    for code in (
        "df.merge(df, on='Z')",
        "def f(a):\n    return a\nf(1, 2)",
        "sorted([1, 'a'])",
        "df.apply(lambda row: row['B'] + 1, axis=1)",
        "np.concatenate(df['D'], df['E'])",
    ):
        result = run(code)
        assert result["failed"], code
        assert "takes (from its documentation)" not in result["output"], (code, result["output"])
        assert result["output"] == result["shown"], code


def test_parameter_notes_are_read_from_numpydoc_and_google_docstrings():
    numpydoc = """Join tables.

    Parameters
    ----------
    how : {'left', 'right'}, default 'inner'
        Type of merge to be performed.
        * left: use only keys from left frame.
    on : label or list
        Column names to join on.

    Returns
    -------
    DataFrame
    """
    google = """Fit a model.

    Args:
        data (list): The rows to fit,
            one per sample.
        steps (int): How many steps.
    """
    assert call_help.parameter_note(numpydoc, "how") == (
        "{'left', 'right'}, default 'inner'. Type of merge to be performed. * left: use only keys from left frame."
    )
    assert call_help.parameter_note(numpydoc, "on") == "label or list. Column names to join on."
    assert call_help.parameter_note(google, "data") == "(list): The rows to fit, one per sample."
    assert call_help.parameter_note(google, "missing") is None
    assert call_help.parameter_note(None, "on") is None
    long_doc = "Parameters\n----------\nx : int\n    " + "word " * 200
    assert call_help.parameter_note(long_doc, "x").endswith("...")
    assert len(call_help.parameter_note(long_doc, "x")) <= call_help.NOTE_CHARACTERS


def test_a_keyword_the_function_passes_on_unread_is_named_as_not_its_own():
    told = run("table = pd.pivot_table(df, values=['D'], rows=['B'])")["output"]
    assert "\n  rows: not a parameter of pivot_table (taken by **kwargs and passed on)\n" in told, told
    assert told.strip().splitlines()[-1] == "ValueError: No group keys passed!", told
