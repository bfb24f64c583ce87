"""Unit tests of the agent's toolbox (src/python/mahtab/tools.py, the kernel's
``mahtab.tools``), loaded straight from its file. What the kernel does with
the tools (at hand in agent code, confirmation, reloading) is tested through
the kernel in tests/it."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

SOURCE_ROOT = Path(__file__).resolve().parents[2] / "src" / "python"
SOURCE = SOURCE_ROOT / "mahtab" / "tools.py"


@pytest.fixture
def tools(tmp_path, monkeypatch):
    # The toolbox reads its names from mahtab.declared: the package's source.
    monkeypatch.syspath_prepend(str(SOURCE_ROOT))
    spec = importlib.util.spec_from_file_location("mahtab_tools_under_test", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return module


LOG = "\n".join(
    ["start"] + [f"line {i}" if i % 7 else f"ERROR at step {i}" for i in range(1, 30)] + ["end"]
)


def test_describe_gives_a_tables_columns_missing_values_and_rows(tools):
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame({"fruit": ["apple", "pear", None], "price": [1.5, np.nan, 0.5]})
    text = tools.describe(frame, "sales")
    assert text.startswith("sales: DataFrame, 3 rows x 2 columns, "), text
    assert re.search(r"^  fruit  \S+  1 missing$", text, re.M), text
    assert "  price  float64  1 missing" in text
    assert text.split("first rows:\n")[1].splitlines()[1].split()[:2] == ["0", "apple"], text
    wide = pd.DataFrame({f"c{i}": [i] for i in range(tools.DESCRIBE_COLUMNS + 5)})
    assert "... and 5 more columns" in tools.describe(wide)

    array = tools.describe(np.array([1.0, np.nan, 4.0]))
    assert array.startswith("ndarray, shape (3,), dtype float64, 1 missing, min 1.0, max 4.0"), array
    series = tools.describe(pd.Series([3, 1, 2]))
    assert series.startswith("Series, shape (3,), dtype int64, min 1, max 3"), series


def test_describe_gives_collections_and_text_their_size_and_first_items(tools):
    assert tools.describe([1, "x", 2]) == "list, 3 items of int, str\n[1, 'x', 2]"
    assert tools.describe({"a": 1}, "d") == "d: dict, 1 keys: 'a'\n{'a': 1}"
    assert tools.describe("one\ntwo").startswith("str, 7 characters, 2 lines; it begins:\none\ntwo")
    assert len(tools.describe("x" * 100_000)) < tools.DESCRIBE_CHARS + 20

    class Broken:
        def __repr__(self):
            raise RuntimeError("no repr")

    assert tools.describe(Broken()) == "Broken: <unrepresentable>"


def test_describe_gives_a_numpy_scalar_as_its_value(tools):
    numpy = pytest.importorskip("numpy")
    assert tools.describe(numpy.float64(30.5), "revenue") == "revenue: float64: np.float64(30.5)"
    assert tools.describe(numpy.int64(3)) == "int64: np.int64(3)"


def test_peek_shows_the_start_and_says_how_much_more(tools):
    assert tools.peek("short") == "short"
    shown = tools.peek("x" * 5000, 100)
    assert shown.startswith("x" * 100) and shown.endswith("[4900 more characters of 5000]")
    assert tools.peek(["a", "b"]) == "a\nb"


def test_grep_numbers_matching_lines_and_shows_context(tools):
    assert str(tools.grep(LOG, r"ERROR")).splitlines() == [
        "8: ERROR at step 7",
        "15: ERROR at step 14",
        "22: ERROR at step 21",
        "29: ERROR at step 28",
    ]
    with_context = repr(tools.grep(LOG, r"step 14", context=1)).splitlines()
    assert with_context == ["14- line 13", "15: ERROR at step 14", "16- line 15"]
    assert repr(tools.grep(LOG, "nothing like this")) == "(no line matches 'nothing like this')"
    with pytest.raises(re.error):
        tools.grep(LOG, "(unclosed")


def test_grep_returns_the_matching_lines_as_a_list(tools):
    # As models use it: the first match is a line, not its first character;
    # no match is an empty, false result.
    found = tools.grep(LOG, r"ERROR")
    assert found[0] == "ERROR at step 7" and found[-1] == "ERROR at step 28"
    assert len(found) == 4 and found.numbers == [8, 15, 22, 29]
    assert [line.split()[-1] for line in found] == ["7", "14", "21", "28"]
    assert not tools.grep(LOG, "nothing like this")
    assert tools.grep(LOG, "step 14", context=1) == ["ERROR at step 14"]


def test_grep_takes_its_arguments_in_either_order(tools):
    # grep on the command line takes the pattern first; so do small models.
    assert tools.grep("ERROR", LOG) == tools.grep(LOG, "ERROR")
    assert tools.grep("ERROR", LOG.splitlines()) == tools.grep(LOG, "ERROR")
    assert tools.grep_raw("ERROR", LOG) == tools.grep_raw(LOG, "ERROR")
    # A pattern that is no string, beside a text of many lines, is an error
    # that shows the call.
    with pytest.raises(TypeError, match=r"grep\(text, 'ERROR'\)"):
        tools.grep(LOG, 3)


def test_the_raw_variants_return_data_to_compute_with(tools):
    assert tools.peek_raw("x" * 5000, 100) == "x" * 100
    assert tools.peek_raw(["a", "b"], 10) == "a\nb"
    assert tools.grep_raw(LOG, r"ERROR")[:2] == [(8, "ERROR at step 7"), (15, "ERROR at step 14")]
    assert len(tools.grep_raw("\n".join("hit" for _ in range(500)), "hit")) == 500
    assert tools.grep_raw(LOG, "nothing like this") == []


def test_a_text_search_given_a_file_name_says_what_to_call(tools, tmp_path):
    (tmp_path / "app.log").write_text(LOG)
    for search in (tools.grep, tools.grep_raw):
        with pytest.raises(ValueError, match=r"grep_files\('ERROR', 'app.log'\)"):
            search("ERROR", "app.log")
    # A pattern that only looks like a file name is searched for as ever.
    assert repr(tools.grep("see app.log", "app.log")) == "1: see app.log"


def test_grep_bounds_what_it_lists(tools):
    many = "\n".join("hit %d" % i for i in range(500))
    found = tools.grep(many, "hit")
    assert len(found) == 500, "every match is in the list"
    lines = str(found).splitlines()
    assert len(lines) == tools.GREP_LIMIT + 1
    assert lines[-1] == "... [300 more matches; narrow the pattern]"


def test_partition_splits_text_at_lines_and_lists_evenly(tools):
    parts = tools.partition(LOG, 4)
    assert len(parts) == 4 and "".join(parts) == LOG
    assert all(part.endswith("\n") for part in parts[:-1])
    assert tools.partition(list(range(10)), 3) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert tools.partition("", 3) == []
    with pytest.raises(ValueError):
        tools.partition(LOG, 0)


def make_tree(root):
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "core.py").write_text("def load():\n    return 'TODO: cache'\n")
    (root / "src" / "main.py").write_text("# TODO: flags\nimport pkg\n")
    (root / "data.csv").write_text("a,b\n1,2\n")
    (root / "blob.bin").write_bytes(b"TODO\0\x01")
    (root / ".git").mkdir()
    (root / ".git" / "notes.py").write_text("TODO: not this one\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.py").write_text("TODO\n")


def test_files_lists_by_name_or_by_path_and_skips_tool_directories(tools, tmp_path):
    make_tree(tmp_path)
    assert tools.files("*.py") == "src/main.py  (25 bytes)\nsrc/pkg/core.py  (37 bytes)"
    assert tools.files("src/*.py").splitlines() == ["src/main.py  (25 bytes)", "src/pkg/core.py  (37 bytes)"]
    assert tools.files("src/pkg/*") == "src/pkg/core.py  (37 bytes)"
    assert tools.files("./data.csv") == "data.csv  (8 bytes)"
    assert "(no file matches '*.json'" in tools.files("*.json")
    listed = [line.split("  ")[0] for line in tools.files().splitlines()]
    assert listed == ["blob.bin", "data.csv", "src/main.py", "src/pkg/core.py"]


def test_files_bounds_what_it_lists(tools, tmp_path):
    for i in range(tools.FILES_LIMIT + 5):
        (tmp_path / f"f{i:03}.txt").write_text("x")
    lines = tools.files("*.txt").splitlines()
    assert len(lines) == tools.FILES_LIMIT + 1
    assert lines[-1] == "... [5 more files; narrow the glob]"


def test_grep_files_finds_lines_in_text_files_only(tools, tmp_path):
    make_tree(tmp_path)
    assert tools.grep_files("TODO") == "src/main.py:1: # TODO: flags\nsrc/pkg/core.py:2:     return 'TODO: cache'"
    assert tools.grep_files("TODO", "src/pkg/*") == "src/pkg/core.py:2:     return 'TODO: cache'"
    assert "(no line matches 'nothing here'" in tools.grep_files("nothing here")
    with pytest.raises(re.error):
        tools.grep_files("(")


def test_git_reads_the_repository_and_refuses_what_writes(tools, tmp_path, monkeypatch):
    import subprocess

    for name, value in (("NAME", "Test"), ("EMAIL", "test@example.org")):
        monkeypatch.setenv(f"GIT_AUTHOR_{name}", value)
        monkeypatch.setenv(f"GIT_COMMITTER_{name}", value)
    with pytest.raises(RuntimeError, match="not a git repository"):
        tools.git("status")
    subprocess.run(["git", "init", "-q"], check=True)
    (tmp_path / "m.py").write_text("a = 1\n")
    subprocess.run(["git", "add", "m.py"], check=True)
    subprocess.run(["git", "commit", "-q", "-m", "first version"], check=True)
    (tmp_path / "m.py").write_text("a = 2\n")
    assert tools.git("status", "--short") == " M m.py"
    assert tools.git("log", "--format=%s") == "first version"
    assert "-a = 1\n+a = 2" in tools.git("diff")
    for refused in (("commit", "-am", "x"), ("push",), ("diff", "--output=out.txt"), ("log", "--ext-diff")):
        with pytest.raises(PermissionError):
            tools.git(*refused)
    assert not (tmp_path / "out.txt").exists()
    assert tools.git("status", "--short") == " M m.py"


def test_read_gives_the_lines_shown_numbered(tools, tmp_path):
    (tmp_path / "m.py").write_text("a = 1\nb = 2\r\nc = 3\n")
    lines = tools.read("m.py")
    # A list of the lines: what len() and [0] are taken to be.
    assert lines == ["a = 1", "b = 2", "c = 3"] and len(lines) == 3 and lines[0] == "a = 1"
    assert lines.numbers == [1, 2, 3]
    assert str(lines) == repr(lines) == "1| a = 1\n2| b = 2\n3| c = 3"
    part = tools.read("m.py", 2, 2)
    assert part == ["b = 2"] and str(part) == "2| b = 2" and part.numbers == [2]
    # Code written for a text works on it: its text, pieces of it, its methods.
    assert lines.text == "a = 1\nb = 2\r\nc = 3\n"
    assert "b = 2\r\nc" in lines and "= 2" in lines and "d = 4" not in lines
    assert lines.splitlines() == ["a = 1", "b = 2", "c = 3"]
    assert lines.replace("1", "9").startswith("a = 9")
    with pytest.raises(AttributeError, match="no attribute 'rows'"):
        lines.rows
    # Read for a table: the error says how a table is loaded.
    with pytest.raises(TypeError, match=r"pd\.read_csv\(path\)\['price'\]"):
        lines["price"]
    assert lines[1:] == ["b = 2", "c = 3"] and lines[-1] == "c = 3"
    assert not tools.read("m.py", 5)
    with pytest.raises(FileNotFoundError):
        tools.read("missing.py")


def test_a_file_read_is_written_back_as_it_was(tools, tmp_path):
    (tmp_path / "notes.txt").write_text("one\ntwo\n")
    assert tools.write("copy.txt", tools.read("notes.txt")) == "wrote copy.txt"
    assert (tmp_path / "copy.txt").read_text() == "one\ntwo\n"
    assert tools.peek_raw(tools.read("notes.txt")) == "one\ntwo\n"


def test_edit_needs_exactly_one_occurrence_and_writes_nothing_otherwise(tools, tmp_path):
    path = tmp_path / "m.py"
    path.write_text("x = 1\ny = 1\n")
    with pytest.raises(ValueError, match="occurs 2 times"):
        tools.edit("m.py", "= 1", "= 2")
    with pytest.raises(ValueError, match="does not occur"):
        tools.edit("m.py", "z = 1", "z = 2")
    assert path.read_text() == "x = 1\ny = 1\n"
    assert tools.edit("m.py", "y = 1", "y = 2") == "edited m.py"
    assert path.read_text() == "x = 1\ny = 2\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".mahtab-")]


def test_edit_reloads_an_imported_module(tools, tmp_path, monkeypatch):
    (tmp_path / "edited_module_for_test.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("edited_module_for_test")
    try:
        assert module.VALUE == 1
        result = tools.edit("edited_module_for_test.py", "VALUE = 1", "VALUE = 2")
        assert result == "edited edited_module_for_test.py (reloaded edited_module_for_test)"
        assert module.VALUE == 2
    finally:
        sys.modules.pop("edited_module_for_test", None)


def test_create_makes_a_module_and_never_overwrites(tools, tmp_path):
    assert tools.create("helpers", "def f():\n    return 1\n") == "created helpers.py"
    assert (tmp_path / "helpers.py").read_text() == "def f():\n    return 1\n"
    with pytest.raises(FileExistsError):
        tools.create("helpers", "")
    # A name with its own extension is the file's whole name.
    assert tools.create("notes.txt", "a\n") == "created notes.txt"
    assert (tmp_path / "notes.txt").read_text() == "a\n"
    assert not (tmp_path / "notes.txt.py").exists()


def test_writes_ask_first_when_asked_to(tools, tmp_path):
    asked = []
    tools.confirm_write = lambda action: asked.append(action) or False
    with pytest.raises(PermissionError, match="declined"):
        tools.create("denied", "x = 1\n")
    assert not (tmp_path / "denied.py").exists()
    tools.confirm_write = lambda action: asked.append(action) or True
    tools.create("allowed", "x = 1\n")
    assert asked == ["create denied.py", "create allowed.py"]


def test_write_move_and_delete_change_files_and_refuse_what_would_lose_one(tools, tmp_path):
    assert tools.write("notes.txt", "one\n") == "wrote notes.txt"
    assert (tmp_path / "notes.txt").read_text() == "one\n"
    tools.write("notes.txt", "two\n")
    assert (tmp_path / "notes.txt").read_text() == "two\n"
    (tmp_path / "archive").mkdir()
    assert tools.move("notes.txt", "archive") == "moved notes.txt to archive/notes.txt"
    assert (tmp_path / "archive" / "notes.txt").read_text() == "two\n"
    (tmp_path / "other.txt").write_text("keep")
    with pytest.raises(FileExistsError):
        tools.move("other.txt", "archive/notes.txt")
    assert (tmp_path / "other.txt").read_text() == "keep"
    assert tools.delete("other.txt") == "deleted other.txt"
    assert not (tmp_path / "other.txt").exists()
    with pytest.raises(FileNotFoundError, match="directory"):
        tools.delete("archive")
    assert not [p for p in tmp_path.rglob(".mahtab-*")]


def test_json_files_are_read_and_written_whole(tools, tmp_path):
    assert tools.write_json("settings.json", {"n": 1, "name": "ü"}) == "wrote settings.json"
    assert tools.read_json("settings.json") == {"n": 1, "name": "ü"}
    with pytest.raises(TypeError):
        tools.write_json("settings.json", {"f": object()})
    assert tools.read_json("settings.json") == {"n": 1, "name": "ü"}


def test_skills_come_from_the_user_and_the_project(tools, tmp_path):
    user = tmp_path / "config" / "mahtab" / "skills"
    project = tmp_path / ".mahtab" / "skills"
    user.mkdir(parents=True)
    project.mkdir(parents=True)
    (user / "debug.md").write_text("# Debug a failing cell\nRead the traceback first.\n")
    (user / "plot.md").write_text("Make a plot\nUse matplotlib.\n")
    (project / "plot.md").write_text("Plot the project's way\nUse seaborn.\n")
    assert tools.skills() == {"debug": "Debug a failing cell", "plot": "Plot the project's way"}
    assert "seaborn" in tools.skill("plot")
    with pytest.raises(LookupError, match="available: debug, plot"):
        tools.skill("nope")


def test_a_skill_takes_its_arguments(tools, tmp_path):
    skills = tmp_path / ".mahtab" / "skills"
    skills.mkdir(parents=True)
    (skills / "explain.md").write_text("Explain a column\nDescribe the column $ARGUMENTS of the table.\n")
    (skills / "debug.md").write_text("Debug a failing cell\nRead the traceback first.\n")
    assert tools.skill("explain", "price") == "Explain a column\nDescribe the column price of the table.\n"
    assert tools.skill("explain") == "Explain a column\nDescribe the column $ARGUMENTS of the table.\n"
    assert tools.skill("debug", "cell 3") == "Debug a failing cell\nRead the traceback first.\n\nArguments: cell 3\n"


def test_claude_sessions_are_text_to_grep(tools, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    project = tmp_path / ".claude" / "projects" / "proj"
    project.mkdir(parents=True)
    (project / "s1.jsonl").write_text('{"type": "user", "text": "fix the parser"}\n')
    text = tools.claude_sessions()
    assert text.startswith("# proj/s1.jsonl\n")
    assert repr(tools.grep(text, "parser")) == '2: {"type": "user", "text": "fix the parser"}'
