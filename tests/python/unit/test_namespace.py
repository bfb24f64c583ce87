"""What the agent is told of the namespace (``mahtab.agent.namespace``), and the
words that tell its check a table, series or array holds nothing but
missing values."""

import ast
import os

import numpy as np
import pandas as pd
import pytest

from mahtab.agent.namespace import (
    EVERY_VALUE_MISSING,
    describe_briefly,
    fingerprints,
    is_user_variable,
    namespace_changes,
    namespace_summary,
    stored_names,
)


def test_summary_lists_variables_and_counts_the_rest():
    namespace = {"n": 3, "_private": 1, "os": os, "f": lambda: 0, "words": ["a", "b"], "In": []}
    summary = namespace_summary(namespace).splitlines()
    assert summary == [
        "n: int = 3",
        "words: list len=2 = ['a', 'b']",
        "(and 2 functions, classes or modules)",
    ]


def test_summary_says_when_a_value_is_large_and_stays_bounded():
    summary = namespace_summary({"log": "x" * 5000})
    assert "len=5000" in summary and "(large: explore it with peek, grep, partition or rlm)" in summary
    many = {"v%d" % i: i for i in range(2000)}
    assert len(namespace_summary(many, limit=1000)) < 1100


def test_summary_of_a_table_lists_its_columns():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1, 2, 3, 4], "b": ["x", "y", "z", "w"]})
    line = namespace_summary({"df": frame})
    assert line.startswith("df: DataFrame (4, 2); columns a (int64) [1, 2, 3]; b (")
    assert line.endswith(") ['x', 'y', 'z']")


def test_describe_briefly():
    assert describe_briefly(os) == "module os"
    assert describe_briefly(len) == "function"
    assert describe_briefly(int) == "class"
    assert describe_briefly([1, 2]) == "list len 2 = [1, 2]"
    assert describe_briefly(7) == "int = 7"


def test_user_variables_are_not_private_nor_code():
    namespace = {"x": 1, "_y": 2, "os": os, "In": [], "K": int}
    assert [name for name in ("x", "_y", "os", "In", "K", "missing") if is_user_variable(namespace, name)] == ["x"]


def test_stored_names_are_what_a_block_binds_or_may_change():
    code = (
        "a = 1\nb.c = 2\nd[0] = 3\ne += 1\ndel f\nimport g.h\nfrom i import j as k\n"
        "def l(): m = 1\nfor n, o in []: pass\nwith p() as q: pass\nr.append(1)\ns.drop('x', inplace=True)\nt.copy()"
    )
    # `m` is bound inside the function, which the walk enters too; `t.copy()` changes nothing.
    assert stored_names(ast.parse(code)) == set("abdefgklmnoqrs")


def test_namespace_changes_new_rebound_in_place_and_deleted():
    namespace = {"kept": 1, "rebound": "old", "items": [1], "gone": 0, "_private": 1}
    code = "new = 2\nrebound = 'new'\nitems.append(2)\ndel gone"
    tree = ast.parse(code)
    before = dict(namespace)
    prints = fingerprints(tree, namespace)
    exec(compile(tree, "<test>", "exec"), namespace)
    namespace.pop("__builtins__")
    assert namespace_changes(before, namespace, tree, prints) == [
        "rebound: str len 3 = 'new' (changed)",
        "items: list len 2 = [1, 2] (changed in place)",
        "new: int = 2 (new)",
        "gone (deleted)",
    ]


def test_a_stored_name_whose_contents_stay_is_not_changed():
    namespace = {"items": [1]}
    tree = ast.parse("items.sort()")
    prints = fingerprints(tree, namespace)
    assert namespace_changes(dict(namespace), namespace, tree, prints) == []


def test_changes_are_bounded():
    before = {}
    after = {"v%02d" % i: i for i in range(25)}
    lines = namespace_changes(before, after, None)
    assert len(lines) == 21 and lines[-1] == "(and 5 more)"


def test_a_table_of_placeholders_or_missing_values_says_so() -> None:
    # As a pivot whose aggregation returned (None, None) on a failing path.
    placeholders = pd.DataFrame({"D": [(None, None)] * 3, "E": [(None, None)] * 3})
    for value in [
        placeholders,
        pd.DataFrame({"a": [np.nan, np.nan]}),
        pd.Series([None, None]),
        pd.Series([pd.NA, pd.NA], dtype="Int64"),
        pd.Series(pd.NaT, index=[0, 1]),
        np.full(3, np.nan),
    ]:
        assert describe_briefly(value).endswith(", " + EVERY_VALUE_MISSING), value


def test_values_with_anything_in_them_and_empty_tables_do_not() -> None:
    for value in [
        pd.DataFrame({"a": [1.0, np.nan]}),
        pd.DataFrame({"a": ["x", None]}),
        pd.DataFrame(),
        pd.Series([], dtype=float),
        np.zeros(3),
        [None, None],
        None,
    ]:
        assert EVERY_VALUE_MISSING not in describe_briefly(value), value
