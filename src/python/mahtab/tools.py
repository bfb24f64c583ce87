"""mahtab.tools: the agent's toolbox, plain Python functions.

The model works by writing Python, so its tools are functions its code calls
(they are at hand in agent code without an import); users may import them
too (``from mahtab.tools import grep``). Text tools take a string, a list of
lines, or anything with a sensible ``str()``. File tools work relative to the
kernel's working directory. Errors are ordinary Python exceptions with
messages that say what to do, so the model can correct itself.
"""

import difflib
import fnmatch
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from mahtab.declared import TOOLBOX_FUNCTIONS
# describe() is a toolbox function; its limits are read as the toolbox's.
from mahtab.descriptions import (  # noqa: F401
    DESCRIBE_CHARS,
    DESCRIBE_COLUMNS,
    DESCRIBE_ROWS,
    describe,
    first_characters,
    size_text,
)

# The toolbox's functions are declared in declared.json, which the kernel's
# build reads too; a test holds this module's functions to that list.
__all__ = list(TOOLBOX_FUNCTIONS)

# Most matches grep lists before it says how many more there were.
GREP_LIMIT = 200

# Most paths files() lists before it says how many more there were.
FILES_LIMIT = 200

# Directories files() and grep_files() do not enter: version control's,
# caches and installed packages, never what a question is about.
SKIPPED_DIRECTORIES = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".ipynb_checkpoints", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".tox", ".venv", "venv", "node_modules",
})  # fmt: skip

# Files grep_files() does not read: past this size, or binary.
GREP_FILES_MAX_BYTES = 2 * 1024 * 1024

# What git() runs: subcommands that only read the repository.
GIT_READ_ONLY = frozenset({"status", "diff", "log", "show", "blame", "ls-files", "grep", "shortlog"})

# Options that would make a reading subcommand write a file or run a program
# the repository's configuration names.
GIT_REFUSED_OPTIONS = ("--output", "--ext-diff", "--textconv", "--open-files-in-pager", "-O")

# How long git() waits for git.
GIT_TIMEOUT = 30

# Asked before each file write when the run asked to confirm (set by the
# kernel for the duration of agent code; None: write without asking).
confirm_write = None

# Told each file's path before a file tool changes it, so the run can be
# undone (set by the kernel for the duration of agent code; None: not told).
file_journal = None


def _text(value):
    """A text tool's input as one string: lists and tuples are lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, Lines):
        return value.text
    if isinstance(value, (list, tuple)):
        return "\n".join(str(item) for item in value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def peek(text, n=2000):
    """The first ``n`` characters of ``text``, and how much more there is."""
    return first_characters(_text(text), int(n))


def peek_raw(text, n=2000):
    """The first ``n`` characters of ``text`` and nothing else, for code that
    goes on working with them."""
    return _text(text)[: int(n)]


def _not_a_file_name(text, pattern, tool):
    """A search that finds nothing because its pattern names a file (a small
    model writes ``grep('ERROR', 'app.log')``): an error that says what to
    call instead."""
    if (
        isinstance(text, str) and isinstance(pattern, str) and "\n" not in pattern
        and os.path.isfile(pattern) and pattern not in text
    ):
        raise ValueError(
            "%s(text, pattern) searches a text, and %r is a file: search the file with "
            "grep_files(%r, %r), or its text with %s(open(%r).read(), %r)"
            % (tool, pattern, text, pattern, tool, pattern, text)
        )


def grep_raw(text, pattern):
    """The lines of ``text`` that match the regular expression ``pattern``, as
    a list of ``(number, line)`` pairs (numbers from 1), all of them: for code
    that computes with the matches."""
    text, pattern = _search_order(text, pattern, "grep_raw")
    _not_a_file_name(text, pattern, "grep_raw")
    regex = re.compile(pattern)
    return [(number, line) for number, line in enumerate(_text(text).splitlines(), 1) if regex.search(line)]


class Lines(list):
    """Lines of text as a list of the lines themselves, shown numbered: what
    read() and grep() give. ``len()`` counts them, ``[0]`` is the first, an
    empty one is false, and ``numbers`` holds each line's number (from 1).
    Code written for a text works on it too: ``text`` is the lines as the
    file has them, ``in`` looks for a piece of it, and a text's methods
    (``.splitlines()``, ``.split()``, ``.replace()``) apply to it."""

    def __init__(self, lines, numbers, shown, text=None):
        super().__init__(lines)
        self.numbers = numbers
        self._shown = shown
        self.text = "\n".join(lines) if text is None else text

    def __repr__(self):
        return self._shown

    __str__ = __repr__

    def __contains__(self, item):
        if isinstance(item, str):
            return item in self.text
        return super().__contains__(item)

    def __getitem__(self, index):
        # A small model reads a CSV file with read() and picks a column.
        if isinstance(index, str):
            raise TypeError(
                "lines are picked by number ([0] is the first), not by %r: these are lines of text; "
                "a table's columns come from loading it, e.g. pd.read_csv(path)[%r]" % (index, index)
            )
        return super().__getitem__(index)

    def __getattr__(self, name):
        # Reached only for names a list lacks: a text's methods, on the text.
        if not name.startswith("_") and hasattr(str, name) and "text" in self.__dict__:
            return getattr(self.text, name)
        raise AttributeError("%r object has no attribute %r" % (type(self).__name__, name))


class Matches(Lines):
    """What grep() found: the matching lines themselves
    (``grep(log, "ERROR")[0]`` is the first such line), shown numbered as
    grep prints them (``143: ERROR disk full``), with the context lines
    asked for."""


def _search_order(text, pattern, tool):
    """``(text, pattern)``, also when the call gave them the other way round,
    as grep on the command line takes them (``grep("ERROR", log)``): a
    pattern is one line of text, so a multi-line or non-string "pattern"
    beside a one-line string is the text."""
    swapped = isinstance(text, str) and "\n" not in text and (
        not isinstance(pattern, (str, bytes)) or "\n" in pattern
    )
    if swapped:
        return pattern, text
    if not isinstance(pattern, str):
        raise TypeError(
            "%s(text, pattern) takes the pattern as a string (a regular expression), not %s: "
            "%s(text, 'ERROR')" % (tool, type(pattern).__name__, tool)
        )
    return text, pattern


def grep(text, pattern, context=0):
    """The lines of ``text`` that match the regular expression ``pattern``: a
    list of the lines (``grep(log, "ERROR")[0]`` is the first), printed with
    each line's number (``12: ...``) and ``context`` lines around each match
    (``11- ...``); at most 200 matches are printed."""
    text, pattern = _search_order(text, pattern, "grep")
    _not_a_file_name(text, pattern, "grep")
    regex = re.compile(pattern)
    lines = _text(text).splitlines()
    hits = [number for number, line in enumerate(lines) if regex.search(line)]
    matched = [lines[number] for number in hits]
    numbers = [number + 1 for number in hits]
    if not hits:
        return Matches([], [], "(no line matches %r)" % pattern)
    shown, out, last = hits[:GREP_LIMIT], [], -1
    matching = set(shown)
    for number in shown:
        start, end = max(0, number - int(context)), min(len(lines), number + int(context) + 1)
        if out and context and start > last + 1:
            out.append("--")
        for index in range(max(start, last + 1), end):
            mark = ":" if index in matching else "-"
            out.append("%d%s %s" % (index + 1, mark, lines[index]))
        last = max(last, end - 1)
    if len(hits) > len(shown):
        out.append("... [%d more matches; narrow the pattern]" % (len(hits) - len(shown)))
    return Matches(matched, numbers, "\n".join(out))


def partition(text, n):
    """``text`` split into ``n`` parts of about equal size, at line breaks
    (a list of strings; a list is split into lists)."""
    n = int(n)
    if n < 1:
        raise ValueError("partition needs n >= 1, not %d" % n)
    if isinstance(text, (list, tuple)):
        items = list(text)
        size = -(-len(items) // n) if items else 0
        return [items[i : i + size] for i in range(0, len(items), size)] if size else []
    lines = _text(text).splitlines(keepends=True)
    total = sum(len(line) for line in lines)
    target = -(-total // n) if total else 0
    parts, current, size = [], [], 0
    for line in lines:
        current.append(line)
        size += len(line)
        if size >= target and len(parts) < n - 1:
            parts.append("".join(current))
            current, size = [], 0
    if current:
        parts.append("".join(current))
    return parts


def _matching_files(glob):
    """Paths under the working directory, relative to it and sorted, that
    match ``glob``: a glob without a slash matches file names at any depth
    (``*.py``), one with a slash matches the path (``src/*.py``; ``*``
    crosses directories there too)."""
    by_name = "/" not in glob
    glob = glob[2:] if glob.startswith("./") else glob
    for root, directories, names in os.walk("."):
        directories[:] = sorted(d for d in directories if d not in SKIPPED_DIRECTORIES)
        for name in sorted(names):
            path = os.path.normpath(os.path.join(root, name))
            if fnmatch.fnmatchcase(name if by_name else path, glob):
                yield path


def files(glob="*"):
    """Files under the working directory whose name (or, with a slash in
    ``glob``, path) matches ``glob``, one per line with its size; at most 200
    listed. Version control's directories, caches and virtual environments
    are left out."""
    listed, more = [], 0
    for path in _matching_files(glob):
        if len(listed) >= FILES_LIMIT:
            more += 1
            continue
        try:
            listed.append("%s  (%s)" % (path, size_text(os.path.getsize(path))))
        except OSError:  # a dangling link, or gone since the walk
            listed.append("%s  (unreadable)" % path)
    if not listed:
        return "(no file matches %r under %s)" % (glob, os.getcwd())
    if more:
        listed.append("... [%d more files; narrow the glob]" % more)
    return "\n".join(listed)


def grep_files(pattern, glob="*"):
    """Lines matching the regular expression ``pattern`` in the text files
    that ``files(glob)`` would list, as ``path:number: line``; at most 200
    matches. Binary files and files over 2 MB are skipped."""
    regex = re.compile(pattern)
    hits, more = [], 0
    for path in _matching_files(glob):
        try:
            if os.path.getsize(path) > GREP_FILES_MAX_BYTES:
                continue
            with open(path, "rb") as file:
                data = file.read()
        except OSError:  # unreadable, a dangling link, or gone since the walk
            continue
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                if len(hits) < GREP_LIMIT:
                    hits.append("%s:%d: %s" % (path, number, line))
                else:
                    more += 1
    if not hits:
        return "(no line matches %r in files matching %r)" % (pattern, glob)
    if more:
        hits.append("... [%d more matches; narrow the pattern or the glob]" % more)
    return "\n".join(hits)


def git(*args):
    """The output of ``git ARGS`` in the working directory, for the
    subcommands that only read (status, diff, log, show, blame, ls-files,
    grep, shortlog), e.g. ``git("log", "-5", "--oneline")``."""
    if not args:
        raise ValueError("git() needs a subcommand, e.g. git('status')")
    args = [str(arg) for arg in args]
    command, options = args[0], args[1:]
    if command not in GIT_READ_ONLY:
        raise PermissionError(
            "git(%r): only %s are run; make changes in code the user sees" % (command, ", ".join(sorted(GIT_READ_ONLY)))
        )
    refused = [o for o in options if o.startswith(GIT_REFUSED_OPTIONS)]
    if refused:
        raise PermissionError("git(): %s is not run by the toolbox" % refused[0])
    argv = ["git", "--no-pager", command]
    if command in ("diff", "log", "show"):
        argv += ["--no-ext-diff", "--no-textconv"]
    completed = subprocess.run(
        argv + options, capture_output=True, text=True, errors="replace", timeout=GIT_TIMEOUT,
        env=dict(os.environ, GIT_PAGER="cat", GIT_TERMINAL_PROMPT="0"), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if completed.returncode != 0:
        raise RuntimeError("git %s failed: %s" % (" ".join(args), completed.stderr.strip()))
    return completed.stdout.rstrip("\n")


def _path(path):
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def read(path, start=1, end=None):
    """Lines ``start`` to ``end`` (1-based, inclusive) of a text file: a list
    of the lines (``len(read(path))`` counts them, ``[0]`` is line
    ``start``), shown each with its number (``12| text``); ``.text`` is
    them as the file has them."""
    # newline="": the text as the file has it, line ends and all.
    with open(_path(path), encoding="utf-8", errors="replace", newline="") as file:
        kept = file.read().splitlines(keepends=True)
    start = max(1, int(start))
    end = len(kept) if end is None else min(len(kept), int(end))
    numbers = list(range(start, end + 1))
    lines = [(kept[number - 1].splitlines() or [""])[0] for number in numbers]
    width = len(str(end))
    shown = "\n".join("%*d| %s" % (width, number, line) for number, line in zip(numbers, lines))
    return Lines(lines, numbers, shown, text="".join(kept[start - 1 : end]))


def _ask_before_writing(action, *paths):
    """Asks the user, when the run asked to confirm writes; then tells the
    run's journal which files are about to change."""
    if confirm_write is not None and not confirm_write(action):
        raise PermissionError("the user declined: " + action)
    if file_journal is not None:
        for path in paths:
            file_journal(path)


def _write(path, content):
    """Writes the whole file or nothing: a temporary file replaces it."""
    directory = os.path.dirname(path) or "."
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".mahtab-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(content)
        if os.path.exists(path):
            os.chmod(temporary, os.stat(path).st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _reload_modules_of(path):
    """Reloads the imported modules whose source is ``path``."""
    reloaded = []
    for name, module in list(sys.modules.items()):
        source = getattr(module, "__file__", None)
        if source and os.path.abspath(source) == path:
            importlib.reload(module)
            reloaded.append(name)
    return reloaded


def edit(path, old, new):
    """Replaces the one occurrence of ``old`` in a file with ``new``. ``old``
    must occur exactly once; otherwise nothing is written. An imported module
    of that file is reloaded."""
    target = _path(path)
    with open(target, encoding="utf-8") as file:
        content = file.read()
    count = content.count(old)
    if count != 1:
        if count == 0:
            close = difflib.get_close_matches(old.strip(), content.splitlines(), n=1, cutoff=0.6)
            hint = " (closest line: %r)" % close[0] if close else ""
            raise ValueError("the text to replace does not occur in %s%s; read() the file first" % (path, hint))
        raise ValueError(
            "the text to replace occurs %d times in %s; include more of its surroundings "
            "so it occurs exactly once" % (count, path)
        )
    _ask_before_writing("edit %s" % path, target)
    _write(target, content.replace(old, new, 1))
    reloaded = _reload_modules_of(target)
    return "edited %s%s" % (path, " (reloaded %s)" % ", ".join(reloaded) if reloaded else "")


def create(name, content=""):
    """Creates the file ``name`` with ``content``: a bare module name is
    ``name.py`` in the working directory, a name with an extension (or a
    path) is taken as it is; never overwrites an existing file."""
    path = os.fspath(name)
    if "." not in path and os.sep not in path and "/" not in path:
        path += ".py"
    target = _path(path)
    if os.path.exists(target):
        raise FileExistsError("%s exists already; edit() it instead" % path)
    _ask_before_writing("create %s" % path, target)
    _write(target, content)
    return "created %s" % path


def write(path, text):
    """Writes ``text`` as the whole of the file ``path`` (made or replaced);
    the guard asks first."""
    target = _path(path)
    _ask_before_writing("write %s" % path, target)
    # Lines read() gave are written as the file had them, not numbered.
    _write(target, text.text if isinstance(text, Lines) else str(text))
    reloaded = _reload_modules_of(target)
    return "wrote %s%s" % (path, " (reloaded %s)" % ", ".join(reloaded) if reloaded else "")


def read_json(path):
    """The value in the JSON file ``path``."""
    with open(_path(path), encoding="utf-8") as file:
        return json.load(file)


def write_json(path, value, indent=2):
    """Writes ``value`` to ``path`` as JSON (made or replaced; the guard asks
    first); a value JSON cannot hold is an error and nothing is written."""
    text = json.dumps(value, indent=indent, ensure_ascii=False) + "\n"
    _ask_before_writing("write %s" % path, _path(path))
    _write(_path(path), text)
    return "wrote %s" % path


def move(source, destination):
    """Moves (renames) the file ``source`` to ``destination``, a path or a
    directory; never replaces an existing file. The guard asks first."""
    target = _path(destination)
    if os.path.isdir(target):
        target = os.path.join(target, os.path.basename(_path(source)))
    if os.path.exists(target):
        raise FileExistsError("%s exists already; delete() it first or choose another name" % target)
    if not os.path.isfile(_path(source)):
        raise FileNotFoundError("no file %s" % source)
    _ask_before_writing("move %s to %s" % (source, destination), _path(source), target)
    shutil.move(_path(source), target)
    return "moved %s to %s" % (source, os.path.relpath(target))


def delete(path):
    """Deletes the file ``path`` (not a directory). The guard asks first."""
    target = _path(path)
    if not os.path.isfile(target):
        raise FileNotFoundError("no file %s%s" % (path, " (it is a directory)" if os.path.isdir(target) else ""))
    _ask_before_writing("delete %s" % path, target)
    os.remove(target)
    return "deleted %s" % path


def _skill_dirs():
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return [os.path.join(config, "mahtab", "skills"), os.path.join(os.getcwd(), ".mahtab", "skills")]


def skills(name=None, args=None):
    """The available skills: name -> description (the file's first line).
    A project's ``.mahtab/skills/`` overrides the user's
    ``~/.config/mahtab/skills/`` for the same name. Given a ``name``, the
    instructions of that skill, as ``skill(name, args)`` gives them: models
    reach for the list's name to load one."""
    if name is not None:
        return skill(name, args)
    found = {}
    for directory in _skill_dirs():
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for filename in names:
            if filename.endswith(".md"):
                try:
                    with open(os.path.join(directory, filename), encoding="utf-8", errors="replace") as file:
                        first = file.readline().strip().lstrip("#").strip()
                except OSError:
                    continue
                found[filename[:-3]] = first
    return found


def skill(name, args=None):
    """The instructions of skill ``name``, to follow. With ``args``, they
    take the place of ``$ARGUMENTS`` in the skill's text, or, where it has
    none, follow it as its arguments."""
    for directory in reversed(_skill_dirs()):
        path = os.path.join(directory, "%s.md" % name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as file:
                text = file.read()
            if args is None:
                return text
            if "$ARGUMENTS" in text:
                return text.replace("$ARGUMENTS", str(args))
            return "%s\n\nArguments: %s\n" % (text.rstrip("\n"), args)
    available = ", ".join(sorted(skills())) or "none"
    raise LookupError("no skill named %r (available: %s)" % (name, available))


def claude_sessions(limit=20):
    """The newest ``limit`` sessions of the ``claude`` CLI
    (``~/.claude/projects/*/*.jsonl``) as one text, one JSON record a line,
    each session headed by its file name: something to ``grep``."""
    root = os.path.join(os.path.expanduser("~"), ".claude", "projects")
    files = []
    for directory, _, names in os.walk(root):
        files.extend(os.path.join(directory, name) for name in names if name.endswith(".jsonl"))
    files.sort(key=lambda path: os.path.getmtime(path), reverse=True)
    parts = []
    for path in files[: int(limit)]:
        with open(path, encoding="utf-8", errors="replace") as file:
            parts.append("# %s\n%s" % (os.path.relpath(path, root), file.read()))
    return "\n".join(parts)
