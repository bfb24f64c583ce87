"""The undo journal on its own, with real pandas and NumPy values: what a
run's blocks change is kept as it was (copies within the budget), the
"changed" summary says what happened, and undo puts it back except what the
user changed since."""

import ast

import numpy as np
import pandas as pd
import pytest

from mahtab import tools
from mahtab.agent.undo import UndoHistory, parse_count


def run_block(journal, code, namespace):
    """What run_agent_code does around a block, without a kernel."""
    tree = ast.parse(code)
    journal.before_block(tree, namespace)
    before = dict(namespace)
    saved = tools.file_journal
    tools.file_journal = journal.file_written
    try:
        exec(compile(tree, "<agent>", "exec"), namespace)
    finally:
        tools.file_journal = saved
    journal.after_block(before, namespace)


def fresh_namespace():
    namespace = {"__builtins__": __builtins__}
    exec("import pandas as pd", namespace)
    return namespace


def test_a_run_is_summed_up_and_undone():
    history = UndoHistory()
    namespace = fresh_namespace()
    namespace["sales"] = pd.DataFrame({"qty": [1, 2, None]})
    namespace["items"] = [1, 2]
    namespace["old"] = "keep me"
    original, items = namespace["sales"], namespace["items"]
    journal = history.journal()
    run_block(journal, "sales.fillna(0, inplace=True)\nitems.append(3)\ntotal = 7", namespace)
    run_block(journal, "del old\nsales['double'] = sales['qty'] * 2", namespace)
    summary = journal.finish(namespace)
    assert summary["added"] == ["total: int = 7"]
    assert [line.split(":")[0] for line in summary["changed"]] == ["items", "sales"]
    assert "DataFrame 3x1" in summary["changed"][1] and "-> DataFrame 3x2" in summary["changed"][1]
    assert summary["removed"] == ["old (was str len 7 = 'keep me')"]
    assert summary["not_restorable"] == []
    assert history.runs == [journal]

    report = history.undo(namespace)
    assert "Undid the last run: items, old, sales, total." == report
    assert "total" not in namespace and namespace["old"] == "keep me"
    assert namespace["items"] == [1, 2]
    assert list(namespace["sales"].columns) == ["qty"] and namespace["sales"]["qty"].isna().sum() == 1
    # The objects themselves are put back: every other name or container
    # holding them sees the data as it was.
    assert namespace["sales"] is original and namespace["items"] is items
    assert history.runs == [] and history.used == 0


def test_a_rebound_name_gets_its_own_object_back():
    history = UndoHistory()
    namespace = fresh_namespace()
    frame = pd.DataFrame({"a": [1, None]})
    namespace["df"] = frame
    journal = history.journal()
    run_block(journal, "df = df.dropna()", namespace)
    journal.finish(namespace)
    history.undo(namespace)
    assert namespace["df"] is frame


def test_an_array_or_dict_changed_in_place_is_refilled_or_replaced_by_its_copy():
    history = UndoHistory()
    namespace = fresh_namespace()
    grid, counts, grown = np.arange(6).reshape(2, 3), {"a": 1}, np.arange(3)
    namespace.update(grid=grid, counts=counts, grown=grown)
    journal = history.journal()
    run_block(journal, "grid *= 10\ncounts['b'] = 2\ngrown.resize(5, refcheck=False)", namespace)
    journal.finish(namespace)
    history.undo(namespace)
    assert namespace["grid"] is grid and grid.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert namespace["counts"] is counts and counts == {"a": 1}
    # Another shape cannot be refilled: the name gets the copy.
    assert namespace["grown"] is not grown and namespace["grown"].tolist() == [0, 1, 2]


def test_what_the_user_changed_since_is_left_alone():
    history = UndoHistory()
    namespace = fresh_namespace()
    namespace["a"] = np.zeros(3)
    journal = history.journal()
    run_block(journal, "a[0] = 5\nb = 1\nc = 2", namespace)
    journal.finish(namespace)
    namespace["a"][1] = 9  # the user's own cell, after the run
    namespace["b"] = 10
    report = history.undo(namespace)
    assert report.splitlines() == [
        "Undid the last run: c.",
        "  left as they are (changed since by your code): a, b",
    ]
    assert namespace["a"].tolist() == [5, 9, 0] and namespace["b"] == 10 and "c" not in namespace


def test_nothing_changed_is_not_a_run_to_undo():
    history = UndoHistory()
    namespace = fresh_namespace()
    namespace["x"] = [1]
    journal = history.journal()
    run_block(journal, "print(len(x))\nx.sort()", namespace)
    assert journal.finish(namespace) == {"added": [], "changed": [], "removed": [], "files": [],
                                         "not_restorable": []}
    assert history.runs == []
    assert history.undo(namespace).startswith("Nothing to undo")


def test_values_over_the_budget_or_uncopyable_are_listed():
    history = UndoHistory(budget=10_000)
    namespace = fresh_namespace()
    namespace["big"] = np.zeros(100_000)

    class Box:
        def __init__(self):
            self.items = []

    namespace["box"] = Box()
    journal = history.journal()
    run_block(journal, "big[0] = 1\nbox.items.append(1)\nbox.x = 1", namespace)
    summary = journal.finish(namespace)
    assert any(line.startswith("big (too large to keep (0.8 MB))") for line in summary["not_restorable"]), summary
    assert any(line.startswith("box (a Box cannot be copied)") for line in summary["not_restorable"]), summary
    report = history.undo(namespace)
    assert "could not restore: big (too large to keep (0.8 MB)), box (a Box cannot be copied)" in report


def test_undo_n_goes_back_newest_first_and_old_runs_are_forgotten_within_the_budget():
    history = UndoHistory(runs=3)
    namespace = fresh_namespace()
    namespace["n"] = 0
    for step in range(1, 5):
        journal = history.journal()
        run_block(journal, "n = %d" % step, namespace)
        journal.finish(namespace)
    assert len(history.runs) == 3
    report = history.undo(namespace, 5)
    assert report.count("Undid") == 3
    assert namespace["n"] == 1  # the first run was forgotten


def test_files_the_tools_write_move_and_delete_are_put_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("old\n")
    (tmp_path / "gone.txt").write_text("bye\n")
    history = UndoHistory()
    namespace = fresh_namespace()
    namespace.update(write=tools.write, delete=tools.delete, move=tools.move)
    journal = history.journal()
    run_block(journal, "write('notes.txt', 'new')\nwrite('made.txt', 'x')\ndelete('gone.txt')", namespace)
    summary = journal.finish(namespace)
    assert summary["files"] == ["gone.txt (deleted)", "made.txt (created)", "notes.txt (written)"]
    (tmp_path / "made.txt").write_text("the user's own edit")
    report = history.undo(namespace)
    assert (tmp_path / "notes.txt").read_text() == "old\n"
    assert (tmp_path / "gone.txt").read_text() == "bye\n"
    assert (tmp_path / "made.txt").read_text() == "the user's own edit"
    assert "left as they are (changed since by your code): made.txt" in report


def test_undo_counts_are_read_strictly():
    assert parse_count("") == 1 and parse_count(" 3 ") == 3
    for bad in ("0", "-1", "two", "1 2"):
        with pytest.raises(ValueError, match="usage: %ask_undo"):
            parse_count(bad)


def test_a_large_rebound_object_is_let_go_rather_than_kept_past_the_budget():
    history = UndoHistory(budget=10_000)
    namespace = fresh_namespace()
    namespace["big"] = np.zeros(100_000)
    namespace["small"] = [1, 2, 3]
    original = namespace["small"]
    journal = history.journal()
    run_block(journal, "big = big + 1\nsmall = small + [4]", namespace)
    summary = journal.finish(namespace)
    assert summary["not_restorable"] == ["big (too large to keep (0.8 MB))"], summary
    assert "Undid the last run: small." in history.undo(namespace)
    assert namespace["small"] is original and namespace["big"][0] == 1


def test_the_value_a_name_held_before_the_run():
    from mahtab.agent.undo import ABSENT, NOT_KEPT

    namespace = {"kept": [1, 2], "big": [3, 4], "same": 5}
    journal = UndoHistory().journal()
    journal.before_block(ast.parse("kept.append(3)\nmade = 1"), namespace)
    namespace["kept"].append(3)
    namespace["made"] = 1
    assert journal.value_before("kept", namespace) == [1, 2]
    assert journal.value_before("made", namespace) is ABSENT
    assert journal.value_before("same", namespace) == 5
    # Over the undo budget, a value changed in place is gone.
    journal = UndoHistory(budget=0).journal()
    journal.before_block(ast.parse("big.append(5)"), namespace)
    namespace["big"].append(5)
    assert journal.value_before("big", namespace) is NOT_KEPT


def test_the_namespace_as_it_was_before_the_run():
    namespace = {"df": pd.DataFrame({"a": [1, 2]}), "big": [3, 4], "same": 5}
    journal = UndoHistory().journal()
    run_block(journal, "df['b'] = df['a'] * 2\nresult = df['b'].sum()", namespace)
    before = journal.namespace_before(namespace)
    assert list(before["df"].columns) == ["a"] and "result" not in before
    assert before["same"] == 5 and list(namespace["df"].columns) == ["a", "b"]
    # A value changed in place and not kept is left out, not shown changed.
    journal = UndoHistory(budget=0).journal()
    run_block(journal, "big.append(5)", namespace)
    assert "big" not in journal.namespace_before(namespace)
