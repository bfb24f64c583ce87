"""Bounded text of values (``mahtab.runtime.reprs``) and the debugger's variables
made of it (``mahtab.runtime.debugger``)."""

import time

from mahtab.runtime.debugger import debugger_variables
from mahtab.runtime.reprs import bounded_repr, clip_middle, short_repr


def test_a_huge_list_costs_its_first_items():
    value = list(range(10_000_000))
    started = time.perf_counter()
    text = bounded_repr(value, 50)
    assert time.perf_counter() - started < 0.5
    assert text.startswith("[0, 1, 2, 3") and text.endswith("…") and len(text) == 50


def test_small_values_read_as_their_repr():
    for value in ([1, "a"], (1,), {"k": [1, 2]}, set(), frozenset(), b"x", "text", None, 3.5):
        assert bounded_repr(value) == repr(value)


def test_nesting_past_the_depth_shows_dots():
    assert bounded_repr([[[[1]]]], depth=2) == "[[[...]]]"


def test_a_failing_repr_does_not_fail_the_text():
    class Broken:
        def __repr__(self):
            raise RuntimeError("no")

    assert bounded_repr([Broken()]) == "[<unrepresentable>]"


def test_short_repr_is_one_line():
    assert short_repr({"k": "line one\nline two"}, 12) == "{'k': 'line…"
    assert short_repr(["a  b", "c"]) == "['a b', 'c']"  # runs of whitespace become one space


def test_clip_middle_keeps_head_and_tail():
    assert clip_middle("short", 10) == "short"
    clipped = clip_middle("a" * 50 + "b" * 50, 20)
    assert clipped.startswith("a" * 10) and clipped.endswith("b" * 10) and "[80 characters cut]" in clipped


def test_debugger_variables_leave_out_private_and_kernel_names():
    namespace = {"x": [1, 2], "_hidden": 1, "In": [], "get_ipython": None, "text": "t" * 1000}
    variables = {v["name"]: v for v in debugger_variables(namespace)}
    assert set(variables) == {"x", "text"}
    assert variables["x"]["value"] == "[1, 2]" and variables["x"]["type"] == "list"
    assert len(variables["text"]["value"]) == 500


def test_debugger_variables_past_the_time_are_listed_without_a_value():
    variables = debugger_variables({"a": 1, "b": 2}, seconds=0)
    assert [v["value"] for v in variables] == ["<not shown: out of time>"] * 2
