"""What agent runs changed, and putting it back.

Each ``%%ask`` or ``ask()`` run keeps a journal: before a block of agent code
runs, the values of the names it binds, deletes or changes in place (read
from its syntax tree; names it touched some other way are found by comparing
the namespace after), copied where they can be changed in place, within a
memory budget; and before the toolbox writes, moves or deletes a file, the
file's contents. The run's "changed" panel comes from the journal, and
``%ask_undo [N]`` puts the last N runs' changes back, newest first, leaving
alone any name or file the user's own code changed since.
"""

import ast
import copy
import hashlib
import os
import sys
import types

from mahtab.agent.namespace import describe_briefly, fingerprint, stored_names

# Copies kept for undo, all remembered runs together. Past it the oldest runs
# are forgotten; a value that does not fit even then is not kept.
UNDO_BUDGET_BYTES = 256 * 1024 * 1024

# How many runs can be undone.
UNDO_RUNS = 10

# Files larger than this are not kept.
FILE_LIMIT_BYTES = 32 * 1024 * 1024

# At most this many lines of each kind in the "changed" panel.
PANEL_LINES = 12


class _Absent:
    """A name or file that did not exist."""

    def __repr__(self):
        return "ABSENT"


ABSENT = _Absent()


class _Forgotten:
    """An old object let go for the budget's sake."""


_FORGOTTEN = _Forgotten()


class _NotKept:
    """A value the run changed without keeping what it was."""

    def __repr__(self):
        return "NOT_KEPT"


NOT_KEPT = _NotKept()

# Values a block cannot change in place: the object itself is their record.
_NEVER_CHANGED = (int, float, complex, str, bytes, bool, type(None), range, frozenset, tuple,
                  types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)

# Containers whose copies are theirs alone (subclasses included: deque aside,
# the collections module's types are dicts and lists).
COPIED_BUILTINS = (list, dict, set, bytearray)


def is_data(value):
    """A pandas or NumPy value, which copies itself."""
    module = type(value).__module__ or ""
    return module.split(".")[0] in ("pandas", "numpy") and callable(getattr(value, "copy", None))


def size_of(value, limit):
    """Roughly how many bytes a copy of ``value`` takes, counting no further
    than ``limit``."""
    if is_data(value):
        usage = getattr(value, "memory_usage", None)
        if callable(usage):
            try:
                total = usage(deep=True)
                return int(total.sum()) if hasattr(total, "sum") else int(total)
            except Exception:
                pass
        return int(getattr(value, "nbytes", sys.getsizeof(value)))
    total = sys.getsizeof(value)
    stack = [value]
    seen = set()
    while stack and total <= limit:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            children = [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple, set, frozenset)):
            children = list(item)
        else:
            if is_data(item):
                total += size_of(item, limit - total)
            continue
        for child in children:
            total += sys.getsizeof(child)
            stack.append(child)
    return total


def copy_value(value):
    if is_data(value):
        try:
            return value.copy(deep=True)
        except TypeError:  # NumPy's copy() takes no `deep`: it is deep
            return value.copy()
    return copy.deepcopy(value)


class _Before:
    """A name as it was before the run: the object, its fingerprint, and a
    copy if the object could change in place (or why there is none)."""

    __slots__ = ("value", "print", "copy", "cost", "note")

    def __init__(self, value, copied=None, cost=0, note=None):
        self.value = value
        self.print = None if value is ABSENT else fingerprint(value)
        self.copy = copied
        self.cost = cost
        self.note = note

    def unchanged_object(self):
        """The object itself, when its contents are still as they were."""
        if self.value is not ABSENT and fingerprint(self.value) == self.print:
            return self.value
        return ABSENT


def refill(value, before):
    """Puts back into ``value`` itself, changed in place since ``before``
    (its record, with a copy) was taken, what it held then, so that every
    name and container holding it sees the data as it was (a request may
    ask for the object itself to change: a copy under its name would leave
    it changed); whether it holds that again. False leaves the name to be
    given a copy."""
    contents = copy_value(before.copy)
    try:
        update = getattr(value, "_update_inplace", None) if is_data(value) else None
        if callable(update):  # pandas' own way to change a frame or series in place
            update(contents)
        elif is_data(value):  # a NumPy array, refilled only where it keeps its shape
            if getattr(value, "shape", None) != contents.shape or value.dtype != contents.dtype:
                return False
            value[...] = contents
        elif isinstance(value, (list, bytearray)):
            value[:] = contents
        elif isinstance(value, (dict, set)):
            value.clear()
            value.update(contents)
        else:
            return False
        return fingerprint(value) == before.print
    except Exception:  # a read-only array, a pandas without the method: a copy does
        return False


class _File:
    """A file as it was before the run (its bytes, or ABSENT), or why it was
    not kept; and its hash after the run."""

    __slots__ = ("content", "note", "after")

    def __init__(self, content, note=None):
        self.content = content
        self.note = note
        self.after = None


def _file_hash(path):
    if not os.path.isfile(path):
        return ABSENT
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class RunJournal:
    """What one run's code may have changed, as it was before the run."""

    def __init__(self, history):
        self.history = history
        self.names = {}
        self.files = {}
        # name -> the statements (dumped) that stored it since the run began
        # (or since a block sent again put it back as it was then).
        self.stores = {}
        # name -> (object after the run, its fingerprint); set by finish().
        self.after = None
        self.summary = None

    # -- while the run goes ---------------------------------------------------

    def before_block(self, tree, namespace):
        """Keeps the names a block may change (from its syntax tree) as they
        are, unless the run kept them already."""
        if tree is None:
            return
        for name in stored_names(tree):
            if _tracked(name) and name not in self.names:
                self.names[name] = self._keep(namespace.get(name, ABSENT))
        self._remember_stores(tree)

    def rewind_resent(self, tree, namespace):
        """Puts back, as they were before the run, the names whose every
        change since then this block makes again, statement for statement,
        and returns them. A model sends its whole block again after a
        failure, written against the data as its prompt showed it: run on
        the first try's leftovers, ``df.set_index('Date', inplace=True)``
        fails on a column that is now the index, and ``df['a'] = df['a'] *
        100`` scales twice. A block that repeats only the last of several
        changes builds on them: put back, the earlier ones would be lost."""
        if tree is None:
            return []
        statements = {ast.dump(statement) for statement in tree.body}
        rewound = []
        for name in sorted(stored_names(tree)):
            before, earlier = self.names.get(name), self.stores.get(name)
            if before is None or before.value is ABSENT or not earlier or not earlier <= statements:
                continue
            try:
                now = namespace.get(name, ABSENT)
                if now is before.value and before.print == fingerprint(now):
                    continue
                # The object itself when it is as it was (a block that
                # rebound the name left it alone) or can be made so again,
                # else a copy of the copy.
                if before.unchanged_object() is not ABSENT:
                    namespace[name] = before.value
                elif before.copy is not None:
                    if not (now is before.value and refill(now, before)):
                        namespace[name] = copy_value(before.copy)
                else:
                    continue
            except Exception:  # a value that cannot be compared or copied stays as it is
                continue
            rewound.append(name)
            # As before the run again: this block's stores are all it has had.
            del self.stores[name]
        return rewound

    def _remember_stores(self, tree):
        stores = {}
        for statement in tree.body:
            # `df = df` (a small model's way to "store the result in df")
            # changes nothing: a block sent again need not make it.
            if _rebinds_itself(statement):
                continue
            for name in stored_names(statement):
                stores.setdefault(name, set()).add(ast.dump(statement))
        for name, statements in stores.items():
            self.stores.setdefault(name, set()).update(statements)

    def after_block(self, before, namespace):
        """Keeps the names the block bound or deleted some other way (found
        by comparing the namespace with ``before``, its copy from before)."""
        for name in set(before) | set(namespace):
            if not _tracked(name) or name in self.names:
                continue
            old, new = before.get(name, ABSENT), namespace.get(name, ABSENT)
            if old is not new:
                self.names[name] = _Before(old)

    def file_written(self, path):
        """Keeps ``path`` as it is, before the toolbox writes, moves or
        deletes it."""
        if path in self.files:
            return
        if not os.path.exists(path):
            self.files[path] = _File(ABSENT)
            return
        size = os.path.getsize(path)
        if size > FILE_LIMIT_BYTES:
            self.files[path] = _File(None, "too large to keep (%s)" % _megabytes(size))
            return
        if not self.history.reserve(size):
            self.files[path] = _File(None, "over the undo budget")
            return
        with open(path, "rb") as file:
            self.files[path] = _File(file.read())

    def _keep(self, value):
        if value is ABSENT or isinstance(value, _NEVER_CHANGED):
            return _Before(value)
        if not (is_data(value) or isinstance(value, COPIED_BUILTINS)):
            return _Before(value, note="a %s cannot be copied" % type(value).__name__)
        cost = size_of(value, self.history.budget)
        if not self.history.reserve(cost):
            return _Before(value, note="too large to keep (%s)" % _megabytes(cost))
        try:
            copied = copy_value(value)
        except Exception as error:
            self.history.release(cost)
            return _Before(value, note="could not be copied (%s)" % type(error).__name__)
        return _Before(value, copied, cost)

    def value_before(self, name, namespace):
        """What `name` held before the run: the value (the object itself
        where the run left it alone), ABSENT where the run made the name,
        NOT_KEPT where the run changed it and its old value is gone."""
        before = self.names.get(name)
        if before is None:
            return namespace.get(name, ABSENT)
        if before.value is ABSENT:
            return ABSENT
        old = _old_value(before)
        return NOT_KEPT if old is ABSENT else old

    def namespace_before(self, namespace):
        """A namespace as ``namespace`` was before the run, as far as the
        journal kept it: the names the run made are not in it, nor those it
        changed without keeping what they held (code that reads them fails
        rather than reading the run's work)."""
        before = dict(namespace)
        for name in self.names:
            value = self.value_before(name, namespace)
            if value is ABSENT or value is NOT_KEPT:
                before.pop(name, None)
            else:
                before[name] = value
        return before

    # -- when it ends ---------------------------------------------------------

    def finish(self, namespace):
        """The run's changes ({"added", "changed", "removed", "files",
        "not_restorable"}: lines of text); the first call also remembers the
        run for ``%ask_undo`` when it changed anything."""
        if self.summary is not None:
            return self.summary
        self.after = {}
        added, changed, removed, not_restorable = [], [], [], []
        for name, before in sorted(self.names.items()):
            now = namespace.get(name, ABSENT)
            now_print = None if now is ABSENT else fingerprint(now)
            if now is before.value and now_print == before.print:
                self.history.release(before.cost)
                before.copy, before.cost = None, 0
                continue
            self.after[name] = (now, now_print)
            if before.value is ABSENT:
                added.append("%s: %s" % (name, _brief(now)))
                continue
            old = _old_value(before)
            if now is ABSENT:
                removed.append("%s (was %s)" % (name, _brief(old)))
            else:
                old_text = "changed in place" if old is ABSENT else _brief(old)
                changed.append("%s: %s -> %s" % (name, old_text, _brief(now)))
            if now is not before.value:
                self._settle_rebound(before)
            if before.copy is None and before.unchanged_object() is ABSENT:
                not_restorable.append("%s (%s)" % (name, before.note or "changed in place"))
        files = []
        for path, kept in sorted(self.files.items()):
            kept.after = _file_hash(path)
            what = ("deleted" if kept.after is ABSENT else
                    "created" if kept.content is ABSENT else "written")
            files.append("%s (%s)" % (os.path.relpath(path), what))
            if kept.note is not None:
                not_restorable.append("%s (%s)" % (os.path.relpath(path), kept.note))
        self.names = {name: before for name, before in self.names.items() if name in self.after}
        self.summary = {
            "added": _capped(added),
            "changed": _capped(changed),
            "removed": _capped(removed),
            "files": _capped(files),
            "not_restorable": _capped(not_restorable),
        }
        if self.after or self.files:
            self.history.push(self)
        return self.summary

    def _settle_rebound(self, before):
        """A name the run rebound or deleted: only the journal keeps its old
        object alive now, so that object counts against the budget too (a
        copy, when there is one, stands for it), or is let go."""
        if before.copy is not None:
            # One of the two is enough: the object itself when it is as it
            # was (its cost is the copy's), else the copy.
            if before.unchanged_object() is ABSENT:
                before.value, before.print = before.copy, fingerprint(before.copy)
            before.copy = None
            return
        if isinstance(before.value, _NEVER_CHANGED):
            return
        size = size_of(before.value, self.history.budget)
        if self.history.reserve(size):
            before.cost += size
        else:
            before.value, before.print = _FORGOTTEN, None
            before.note = "too large to keep (%s)" % _megabytes(size)

    def undo(self, namespace):
        """Puts this run's changes back; what was restored, what was left
        because it changed since, and what could not be restored."""
        restored, left, failed = [], [], []
        for name, before in sorted(self.names.items()):
            after, after_print = self.after[name]
            now = namespace.get(name, ABSENT)
            if now is not after or (now is not ABSENT and fingerprint(now) != after_print):
                left.append(name)
                continue
            if before.value is ABSENT:
                del namespace[name]
                restored.append(name)
                continue
            old = before.unchanged_object()
            if old is ABSENT and before.copy is not None:
                if now is before.value and refill(now, before):
                    restored.append(name)
                    continue
                old = before.copy
            if old is ABSENT:
                failed.append("%s (%s)" % (name, before.note or "changed in place"))
            else:
                namespace[name] = old
                restored.append(name)
        for path, kept in sorted(self.files.items()):
            shown = os.path.relpath(path)
            if kept.note is not None:
                failed.append("%s (%s)" % (shown, kept.note))
            elif _file_hash(path) != kept.after:
                left.append(shown)
            elif kept.content is ABSENT:
                os.remove(path)
                restored.append(shown)
            else:
                with open(path, "wb") as file:
                    file.write(kept.content)
                restored.append(shown)
        self.history.release(self.cost())
        return restored, left, failed

    def cost(self):
        """The bytes this run's copies hold."""
        kept = sum(before.cost for before in self.names.values())
        return kept + sum(len(f.content) for f in self.files.values() if isinstance(f.content, bytes))


class UndoHistory:
    """The runs that can be undone, newest last, and the bytes their copies
    hold (within ``budget``)."""

    def __init__(self, budget=UNDO_BUDGET_BYTES, runs=UNDO_RUNS):
        self.budget = budget
        self.max_runs = runs
        self.runs = []
        self.used = 0

    def journal(self):
        """A journal for a new run."""
        return RunJournal(self)

    def reserve(self, size):
        """Whether ``size`` more bytes can be kept, forgetting the oldest
        runs to make room."""
        while self.used + size > self.budget and self.runs:
            self._forget_oldest()
        if self.used + size > self.budget:
            return False
        self.used += size
        return True

    def release(self, size):
        self.used = max(0, self.used - size)

    def push(self, journal):
        self.runs.append(journal)
        while len(self.runs) > self.max_runs:
            self._forget_oldest()

    def _forget_oldest(self):
        self.release(self.runs.pop(0).cost())

    def undo(self, namespace, count=1):
        """Undoes the last ``count`` runs, newest first; the report to show."""
        if not self.runs:
            return ("Nothing to undo: no agent run since the kernel started changed a variable or a file "
                    "(or it was forgotten: the last %d runs are kept, within %s)."
                    % (self.max_runs, _megabytes(self.budget)))
        count = max(1, min(count, len(self.runs)))
        lines = []
        for number in range(count):
            restored, left, failed = self.runs.pop().undo(namespace)
            title = "the last run" if number == 0 else "the run before"
            lines.append("Undid %s: %s." % (title, ", ".join(restored) if restored else "nothing to put back"))
            if left:
                lines.append("  left as they are (changed since by your code): %s" % ", ".join(left))
            if failed:
                lines.append("  could not restore: %s" % ", ".join(failed))
        return "\n".join(lines)


def _rebinds_itself(statement):
    """Whether the statement is ``name = name``."""
    return (
        isinstance(statement, ast.Assign) and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.Name)
        and statement.targets[0].id == statement.value.id
    )


def _tracked(name):
    return not name.startswith("_") and name not in ("In", "Out", "exit", "quit", "get_ipython")


def _old_value(before):
    """What a name held before the run, if it can still be shown."""
    if before.copy is not None:
        return before.copy
    return before.unchanged_object()


def _brief(value):
    try:
        return describe_briefly(value)
    except Exception:
        return type(value).__name__


def _capped(lines):
    if len(lines) <= PANEL_LINES:
        return lines
    return lines[:PANEL_LINES] + ["(and %d more)" % (len(lines) - PANEL_LINES)]


def _megabytes(size):
    return "%.0f MB" % (size / 1e6) if size >= 1e6 else "%.1f MB" % (size / 1e6)


def parse_count(line):
    """The N of ``%ask_undo [N]``."""
    text = line.strip()
    if not text:
        return 1
    if not text.isdigit() or int(text) < 1:
        raise ValueError("usage: %ask_undo [N]  (undo the last N agent runs; default 1)")
    return int(text)
