"""mahtab's Python side: runs cells in the user's namespace and renders output.

The Rust kernel loads this file as the module ``_mahtab_runtime`` on the
interpreter thread, then ``ipython_shell.py`` as ``_mahtab_ipython``. When
IPython is importable the session is an ``IPythonRuntime`` (magics, ``obj?``,
IPython tracebacks, ``In``/``Out``); otherwise it is the plain :class:`Runtime`
below, which execs the cell and shows the value of its last expression. Both
take a bridge object whose methods reach Rust:

- ``bridge.write(name, text)`` buffers stream text (``"stdout"``/``"stderr"``);
- ``bridge.flush()`` sends buffered stream text now;
- ``bridge.publish(msg_type, content_json)`` flushes streams, then publishes an
  IOPub message (display_data, execute_result, error, clear_output, ...).

Every method called from Rust takes and returns JSON text, so the Rust side
never walks Python objects.
"""

import ast
import base64
import builtins
import codeop
import collections
import contextvars
import difflib
import fnmatch
import functools
import getpass
import importlib.abc
import importlib.util
import inspect
import io
import json
import linecache
import logging
import os
import pydoc
import re
import rlcompleter
import signal
import sys
import threading
import time
import traceback
import types
import uuid

_MIME_REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
    ("application/javascript", "_repr_javascript_"),
    ("application/pdf", "_repr_pdf_"),
)


# The request a thread's output belongs to, when Python code chose one with
# set_thread_parent (a header, JSON text); otherwise output goes to the
# request being served. A context variable, so each thread (and asyncio task)
# has its own. Until someone chooses one, the streams write without looking
# (KernelStream) and the flag spares each publish the lookup.
_THREAD_PARENT = contextvars.ContextVar("mahtab_thread_parent", default=None)
_thread_parents_used = False
_STREAMS = []  # the KernelStreams, told when thread parents come into use


def _header_of(parent):
    """The header in ``parent``: a message (with ``header``) or a header."""
    if not parent:
        return {}
    header = parent.get("header", parent)
    return dict(header) if isinstance(header, dict) else {}


def set_thread_parent(parent):
    """Output of the calling thread (or task) goes to ``parent``'s request
    from now on (``parent``: a message or its header, as ``get_parent()``
    returns it). Returns a token for :func:`reset_thread_parent`."""
    global _thread_parents_used
    _thread_parents_used = True
    for stream in _STREAMS:
        stream._write_each_time_anew()
    return _THREAD_PARENT.set(dumps(_header_of(parent)))


def reset_thread_parent(token):
    """Undoes the :func:`set_thread_parent` call that returned ``token``."""
    _THREAD_PARENT.reset(token)


def thread_parent():
    """The header the calling thread chose (JSON text), or None."""
    return _THREAD_PARENT.get() if _thread_parents_used else None


def _event_loop_of_this_thread():
    """The asyncio event loop cells on this thread use, or None if none was
    made yet (never makes one, nor imports asyncio). ``await`` in a cell runs
    on IPython's loop and ``asyncio.get_event_loop()`` returns asyncio's loop
    of the thread: the first of the two to exist becomes the other too, so
    tasks of both kinds of cell go on together between cells."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    usable = lambda loop: loop is not None and not loop.is_closed()
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    loop = getattr(local, "_loop", None)
    helpers = sys.modules.get("IPython.core.async_helpers")
    ipython_loop = getattr(helpers, "_asyncio_event_loop", None)
    if not usable(loop) and usable(ipython_loop) and threading.current_thread() is threading.main_thread():
        asyncio.set_event_loop(ipython_loop)
        loop = ipython_loop
    elif usable(loop) and helpers is not None and not usable(ipython_loop):
        helpers._asyncio_event_loop = loop
    if not usable(loop) or loop.is_running():
        return None
    return loop


def _has_work(loop):
    """Whether ``loop`` has callbacks or timers waiting (tasks that will go
    on when it runs)."""
    ready, scheduled = getattr(loop, "_ready", None), getattr(loop, "_scheduled", None)
    if ready is not None and scheduled is not None:
        return bool(ready) or any(not timer.cancelled() for timer in scheduled)
    return any(not task.done() for task in sys.modules["asyncio"].all_tasks(loop))


class KernelStream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr``: text goes to the kernel's stream buffer.

    In a process forked from the kernel (``os.fork``, multiprocessing's fork
    start method) only the forking thread exists: the kernel's threads that
    carry output to the client are gone, and locks they held stay held. There
    the streams write to file descriptors 1 and 2 instead, which are the
    kernel's capture pipes, so the kernel reads what the child prints and
    shows it in the running cell. Lines go out whole (line buffering, and a
    pipe write of up to 4 KiB is never interleaved with another).
    """

    _in_child = None  # the descriptor's writer, in a forked child

    def __init__(self, bridge, name):
        super().__init__()
        self._bridge = bridge
        self._name = name
        # In the common case (no forked child, no thread with a parent of
        # its own) writing is the bridge's own method, bound to the stream's
        # name: print() finds it on the instance and calls Rust without a
        # Python frame, which a print loop would pay thousands of times.
        self.write = functools.partial(bridge.write, name)
        _STREAMS.append(self)
        os.register_at_fork(after_in_child=self._write_to_the_descriptor)

    def _write_to_the_descriptor(self):
        raw = io.FileIO(self.fileno(), "w", closefd=False)
        self._in_child = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", line_buffering=True)
        self._write_each_time_anew()

    def _write_each_time_anew(self):
        """From now on every write decides where it goes (``write`` below)."""
        self.__dict__.pop("write", None)

    def _write_without_looking(self):
        """Back to the bridge's own write (no thread with a parent of its own)."""
        if self._in_child is None:
            self.write = functools.partial(self._bridge.write, self._name)

    @property
    def name(self):
        return "<" + self._name + ">"

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "strict"

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        # The kernel captures the process's fd 1 and 2 into the same streams,
        # so code that writes to the descriptor (faulthandler, C code) is shown.
        return 1 if self._name == "stdout" else 2

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        if self._in_child is not None:
            return self._in_child.write(text)
        parent = _THREAD_PARENT.get()
        if parent is None:
            self._bridge.write(self._name, text)
        else:
            self._bridge.write_for(self._name, text, parent)
        return len(text)

    # ipykernel's streams offer these too.
    def _is_master_process(self):
        return self._in_child is None

    def set_thread_parent(self, parent):
        return set_thread_parent(parent)

    def reset_thread_parent(self, token):
        reset_thread_parent(token)

    def flush(self):
        if self._in_child is not None:
            self._in_child.flush()
            return
        self._bridge.flush()


def json_default(value):
    """JSON for values the display machinery produces: bytes become base64."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return repr(value)


def dumps(value):
    return json.dumps(value, default=json_default)


def error_content(exc_info, skip_file=None):
    """ename/evalue/traceback for an exception, without frames of ``skip_file``;
    an exception that renders its own traceback (as IPython lets it) does."""
    etype, value, tb = exc_info
    while tb is not None and tb.tb_frame.f_code.co_filename == skip_file:
        tb = tb.tb_next
    render = getattr(value, "_render_traceback_", None)
    lines = render() if render is not None else traceback.format_exception(etype, value, tb)
    return {
        "ename": etype.__name__,
        "evalue": str(value),
        "traceback": [line.rstrip("\n") for line in lines],
    }


_IMPORT_LINE = re.compile(r"^\s*import\s+([\w., ]+)", re.MULTILINE)
_DOTTED_BEFORE_CURSOR = re.compile(r"([A-Za-z_][\w.]*)\.(\w*)$")


def imported_module_attributes(code, cursor, namespace):
    """Completes ``module.attr`` for a module the code imports but the
    namespace does not hold yet (``import os; os.pa``), from modules already
    loaded: nothing is imported or run to complete.

    Returns ``(start, matches)`` or None.
    """
    found = _DOTTED_BEFORE_CURSOR.search(code[:cursor])
    if not found:
        return None
    head, partial = found.groups()
    root = head.split(".")[0]
    if root in namespace:
        return None
    modules = {}
    for line in _IMPORT_LINE.findall(code):
        for item in line.split(","):
            words = item.split()
            if len(words) == 3 and words[1] == "as":
                modules[words[2]] = words[0]
            elif len(words) == 1:
                modules[words[0].split(".")[0]] = words[0].split(".")[0]
    if root not in modules:
        return None
    obj = sys.modules.get(modules[root])
    for part in head.split(".")[1:]:
        obj = getattr(obj, part, None)
    if obj is None:
        return None
    names = sorted(
        name
        for name in dir(obj)
        if name.startswith(partial) and (partial.startswith("_") or not name.startswith("_"))
    )
    return cursor - len(partial), names


def cursor_token(code, cursor):
    """The dotted name around ``cursor`` (e.g. ``os.path.join``)."""
    start = cursor
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] in "_."):
        start -= 1
    end = cursor
    while end < len(code) and (code[end].isalnum() or code[end] == "_"):
        end += 1
    return code[start:end].strip(".")


class ExitAutocall:
    """``exit`` / ``quit``: ask the frontend to end the session.

    Typing ``exit`` alone works too (as in IPython): the runtime calls it when
    it is the value of a cell's last expression.
    """

    def __init__(self, runtime):
        self._runtime = runtime

    def __call__(self, keep_kernel=False):
        self._runtime.payloads.append({"source": "ask_exit", "keepkernel": bool(keep_kernel)})

    def __repr__(self):
        return "Use exit() or quit() to end the session."


def mime_bundle(obj):
    """Returns ``(data, metadata)`` for ``obj`` the way IPython's formatter does."""
    data, metadata = {}, {}
    method = getattr(type(obj), "_repr_mimebundle_", None)
    if method is not None:
        try:
            result = obj._repr_mimebundle_(include=None, exclude=None)
        except Exception:
            result = None
        if isinstance(result, tuple) and len(result) == 2:
            result, extra = result
            metadata.update(extra or {})
        if isinstance(result, dict):
            data.update(result)
    for mime, name in _MIME_REPR_METHODS:
        if mime in data or getattr(type(obj), name, None) is None:
            continue
        try:
            result = getattr(obj, name)()
        except Exception:
            continue
        if result is None:
            continue
        if isinstance(result, tuple) and len(result) == 2:
            result, extra = result
            if extra:
                metadata[mime] = extra
        data[mime] = result  # bytes become base64 when published (json_default)
    if "text/plain" not in data:
        try:
            data["text/plain"] = repr(obj)
        except Exception as exc:
            data["text/plain"] = "<repr failed: %s: %s>" % (type(exc).__name__, exc)
    return data, metadata


class DisplayHandle:
    """What ``display(..., display_id=...)`` returns: updates that output."""

    def __init__(self, runtime, display_id):
        self._runtime = runtime
        self.display_id = display_id

    def update(self, obj, **kwargs):
        self._runtime.update_display(obj, display_id=self.display_id, **kwargs)

    def display(self, obj, **kwargs):
        self._runtime.display(obj, display_id=self.display_id, **kwargs)

    def __repr__(self):
        return "<DisplayHandle display_id=%s>" % self.display_id


AGENT_OUTPUT_LIMIT = 10_000
# Innermost frames of a failed agent block kept for the model and the user.
AGENT_TRACEBACK_FRAMES = 5


class _Capture(io.TextIOBase):
    """A text stream that appends what is written to a list, and passes it
    to ``echo`` (if given) as it is written."""

    def __init__(self, parts, echo=None):
        super().__init__()
        self._parts = parts
        self._echo = echo

    def writable(self):
        return True

    def write(self, text):
        self._parts.append(text)
        if self._echo is not None and text:
            self._echo(text)
        return len(text)


def clip_middle(text, limit):
    """``text`` itself, or its head and tail with a marker, if it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return "%s\n... [%d characters cut] ...\n%s" % (text[:half], len(text) - 2 * half, text[-half:])


_CONTAINERS = {list: "[]", tuple: "()", set: "{}", frozenset: "{}", dict: "{}"}


def bounded_repr(value, limit=500, depth=3):
    """``repr(value)`` cut to ``limit`` characters, made without building the
    whole text of a big or deep built-in container or string (as debugpy's
    SafeRepr does): a ten-million-element list costs its first items, and
    nesting past ``depth`` shows as ``...``. Other objects' own ``repr`` is
    called (and cut); one that fails shows as ``<unrepresentable>``."""
    out = []
    _repr_into(value, out, [limit + 1], depth)
    text = "".join(out)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _repr_into(value, out, budget, depth):
    """Appends value's repr to ``out`` while ``budget[0]`` (characters left)
    lasts."""
    if budget[0] <= 0:
        return
    kind = type(value)
    if kind in (str, bytes, bytearray):
        piece = repr(value[: budget[0]])
    elif kind in _CONTAINERS:
        brackets = _CONTAINERS[kind]
        if depth <= 0:
            piece = brackets[0] + "..." + brackets[1]
        elif not value and kind in (set, frozenset):
            piece = kind.__name__ + "()"
        else:
            _put(out, budget, brackets[0])
            items = value.items() if kind is dict else value
            for i, item in enumerate(items):
                if budget[0] <= 0:
                    break
                if i:
                    _put(out, budget, ", ")
                if kind is dict:
                    _repr_into(item[0], out, budget, depth - 1)
                    _put(out, budget, ": ")
                    item = item[1]
                _repr_into(item, out, budget, depth - 1)
            if kind is tuple and len(value) == 1:
                _put(out, budget, ",")
            _put(out, budget, brackets[1])
            return
    else:
        try:
            piece = repr(value)
        except TimeoutError:
            raise  # the kernel's time limit, not the object's failure
        except Exception:
            piece = "<unrepresentable>"
    _put(out, budget, piece)


def _put(out, budget, text):
    out.append(text[: max(budget[0], 0)])
    budget[0] -= len(text)


def _short_repr(value, limit=80):
    text = " ".join(bounded_repr(value, limit * 2).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _columns(frame, columns, dtypes, shown=20, samples=3):
    """A DataFrame's columns with their dtypes and first few values."""
    parts = []
    for column, dtype in list(zip(columns, dtypes))[:shown]:
        try:
            values = _short_repr(frame[column].head(samples).tolist(), 60)
        except Exception:  # duplicate column names, odd frame types
            values = "?"
        parts.append("%s (%s) %s" % (column, dtype, values))
    if len(columns) > shown:
        parts.append("and %d more" % (len(columns) - shown))
    return "; ".join(parts)


# Past these sizes the summary tells the model to explore a value with the
# toolbox rather than print it.
LARGE_TEXT = 2000
LARGE_COLLECTION = 500


def namespace_summary(namespace, limit=4000):
    """One line per user variable: name, type, shape or length, a short value.

    DataFrames list their columns with dtypes and first values. Modules,
    functions, classes and private names are left out (a count says how
    many), and the whole summary is bounded.
    """
    lines, skipped = [], 0
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in ("In", "Out", "exit", "quit", "get_ipython", "display"):
            continue
        if isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType)):
            skipped += 1
            continue
        kind = type(value).__name__
        columns = getattr(value, "columns", None)
        dtypes = getattr(value, "dtypes", None)
        shape = getattr(value, "shape", None)
        if columns is not None and dtypes is not None and shape is not None:
            lines.append("%s: DataFrame %s; columns %s" % (name, tuple(shape), _columns(value, columns, dtypes)))
        elif shape is not None and not callable(shape):
            lines.append("%s: %s shape=%s dtype=%s" % (name, kind, tuple(shape), getattr(value, "dtype", "?")))
        elif isinstance(value, (list, tuple, dict, set, str, bytes)):
            large = len(value) > (LARGE_TEXT if isinstance(value, (str, bytes)) else LARGE_COLLECTION)
            hint = " (large: explore it with peek, grep, partition or rlm)" if large else ""
            lines.append("%s: %s len=%d = %s%s" % (name, kind, len(value), _short_repr(value), hint))
        else:
            lines.append("%s: %s = %s" % (name, kind, _short_repr(value)))
    if skipped:
        lines.append("(and %d functions, classes or modules)" % skipped)
    return clip_middle("\n".join(lines), limit)


def describe_briefly(value):
    """A value in a few words: its type with shape, length or columns, and a
    short value where one fits (``DataFrame 4x3, columns a, b, c``)."""
    kind = type(value).__name__
    if isinstance(value, types.ModuleType):
        return "module %s" % value.__name__
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return "function"
    if isinstance(value, type):
        return "class"
    columns, shape = getattr(value, "columns", None), getattr(value, "shape", None)
    if columns is not None and shape is not None and not callable(shape):
        names = [str(c) for c in list(columns)[:12]]
        more = ", ..." if len(columns) > 12 else ""
        return "%s %s, columns %s%s" % (kind, "x".join(str(n) for n in tuple(shape)), ", ".join(names), more)
    if shape is not None and not callable(shape):
        text = "%s shape %s dtype %s" % (kind, tuple(shape), getattr(value, "dtype", "?"))
        size = getattr(value, "size", None)
        return text + (" = " + _short_repr(value, 60) if isinstance(size, int) and size <= 10 else "")
    if isinstance(value, (list, tuple, dict, set, str, bytes)):
        return "%s len %d = %s" % (kind, len(value), _short_repr(value, 60))
    return "%s = %s" % (kind, _short_repr(value, 60))


def stored_names(tree):
    """The names a block binds, deletes or may change in place: assignment
    targets (the variable under an item or attribute assignment), augmented
    assignments, deletions, imports, definitions, loop and with targets."""
    names = set()

    def root(target):
        while isinstance(target, (ast.Attribute, ast.Subscript, ast.Starred)):
            target = target.value
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                root(element)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                root(target)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            root(node.target)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                root(target)
        elif isinstance(node, (ast.withitem,)) and node.optional_vars is not None:
            root(node.optional_vars)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            # df.drop(..., inplace=True), items.append(x): a method that may
            # change its object.
            if node.func.attr in _MUTATING_METHODS or any(k.arg == "inplace" for k in node.keywords):
                root(node.func.value)
    return names


_MUTATING_METHODS = {
    "append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse", "update", "add",
    "discard", "setdefault", "popitem", "rename_axis", "set_index", "reset_index", "fillna",
    "drop", "dropna", "rename", "replace", "sort_values", "drop_duplicates", "astype", "resize",
}

# At most this many names are reported for one block.
CHANGES_SHOWN = 20


def fingerprint(value):
    """A cheap summary of a value's contents, to tell whether code changed it
    in place: its type, shape or length, and a bounded repr (for a table, of
    its columns, missing values and first and last rows)."""
    try:
        columns, shape = getattr(value, "columns", None), getattr(value, "shape", None)
        if columns is not None and shape is not None and hasattr(value, "head"):
            sample = (value.head(20), value.tail(20))
            return (type(value), tuple(shape), tuple(columns), int(value.isna().sum().sum()),
                    bounded_repr(sample, 4000), str(getattr(value, "dtypes", "")))
        if shape is not None and not callable(shape):
            return (type(value), tuple(shape), bounded_repr(value, 4000))
        return (type(value), bounded_repr(value, 4000))
    except Exception:  # a value that cannot say: treat it as changed
        return object()


def fingerprints(tree, namespace):
    """Fingerprints of the variables a block may change in place, taken
    before it runs."""
    if tree is None:
        return {}
    return {name: fingerprint(namespace[name]) for name in stored_names(tree)
            if name in namespace and not name.startswith("_")}


def namespace_changes(before, namespace, tree, prints=None):
    """What a block did to ``namespace`` (``before`` is a copy of it from
    just before, ``prints`` the fingerprints of the names it may change in
    place): one line per name added, rebound, changed in place (a name the
    block stores into or calls a changing method on, whose contents now
    differ) or deleted."""
    stored = stored_names(tree) if tree is not None else set()
    prints = prints or {}
    lines = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in ("In", "Out"):
            continue
        if name not in before:
            kind = "new"
        elif before[name] is not value:
            kind = "changed"
        elif (name in stored and not isinstance(value, (types.ModuleType, types.FunctionType, type))
              and (name not in prints or fingerprint(value) != prints[name])):
            kind = "changed in place"
        else:
            continue
        lines.append("%s: %s (%s)" % (name, describe_briefly(value), kind))
    lines.extend("%s (deleted)" % name for name in before if not name.startswith("_") and name not in namespace)
    if len(lines) > CHANGES_SHOWN:
        lines = lines[:CHANGES_SHOWN] + ["(and %d more)" % (len(lines) - CHANGES_SHOWN)]
    return lines


# -- the agent ---------------------------------------------------------------


class AskError(Exception):
    """An ``%%ask`` cell or ``ask()`` call failed (the model provider, the
    settings or the request); the message says why."""

    def _render_traceback_(self):
        # What went wrong is the message; the frames are the kernel's own.
        return ["%s: %s" % (type(self).__name__, self)]


class AskConfigError(AskError):
    """No usable provider, or a settings file that cannot be read."""


class AskProviderError(AskError):
    """The provider could not be set up."""


class UsageError(AskError):
    """Options the magic or ``ask()`` does not take."""


_AGENT_ERRORS = {cls.__name__: cls for cls in (AskError, AskConfigError, AskProviderError, UsageError)}

# How deep rlm() calls may nest unless told otherwise.
RLM_MAX_DEPTH = 3


def tools_on(context, tools):
    """peek, grep and partition for an ``rlm()`` search: called without the
    text (``grep("ERROR")``, ``partition(4)``, ``peek()``, ``peek(500)``) they
    look at the searched value, as a model that was told its data is in
    ``context`` often writes; with the text given they work as ever."""

    def bound(tool, argument):
        # `argument` is the one the call must still give besides the text.
        @functools.wraps(tool)
        def call(*args, **kwargs):
            if "text" not in kwargs and len(args) + (argument in kwargs) == 1:
                args = (context,) + args
            return tool(*args, **kwargs)

        return call

    @functools.wraps(tools.peek)
    def peek(*args, **kwargs):
        if "text" not in kwargs and not args:
            args = (context,)
        elif len(args) == 1 and type(args[0]) is int and "n" not in kwargs:
            args = (context, args[0])
        return tools.peek(*args, **kwargs)

    return {"peek": peek, "grep": bound(tools.grep, "pattern"), "partition": bound(tools.partition, "n")}


class _FinalAnswer(BaseException):
    """Raised by ``FINAL()`` to end an rlm() sub-agent's code at once (a
    BaseException, so the code's own ``except Exception`` lets it pass)."""


def describe_value(value, shown=500):
    """What an rlm() sub-agent is told of the value it explores: its type,
    its size and how it begins."""
    try:
        size = len(value)
    except TypeError:
        size = None
    unit = "characters" if isinstance(value, (str, bytes)) else "items"
    size_text = ", %s %s" % (format(size, ","), unit) if size is not None else ""
    return "%s%s; it begins:\n%s" % (type(value).__name__, size_text, sys.modules["mahtab.tools"].peek(value, shown))

RECENT_CELLS = 10
RECENT_CELL_CHARS = 2000


def is_agent_cell(code):
    """Whether the agent serves ``code``: an ``%%ask`` cell or an
    ``%ask_config`` or ``%ask_graph`` line (the rule of the kernel's own
    parser)."""
    first = code.lstrip("\r\n").split("\n", 1)[0].rstrip()
    for magic in ("%%ask", "%ask_config", "%ask_graph"):
        rest = first[len(magic) :]
        if first.startswith(magic) and (not rest or rest[0].isspace()):
            return True
    return False


class AskAnswer(str):
    """What ``ask()`` returns: the model's final answer, as a str, with the
    run's trace (``.trace``: its steps, turns, tokens and seconds)."""

    def __new__(cls, answer, trace=None):
        text = super().__new__(cls, answer)
        text.trace = trace
        return text


# How many variables the informer describes at most, and how many of the
# newest tables and arrays when the request names none.
INFORMER_MAX_VARIABLES = 6
INFORMER_DEFAULT_VARIABLES = 3


def _is_user_variable(namespace, name):
    """Whether ``name`` is a variable of the user's worth describing (not a
    private name, module, function or class)."""
    if name.startswith("_") or name not in namespace or name in ("In", "Out", "exit", "quit", "get_ipython"):
        return False
    value = namespace[name]
    return not isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType))


# -- what the kernel's debugger asks of Python ------------------------------------


def loaded_source_files():
    """Source files of the modules loaded now, and the runtime's own: taken
    when the runtime has started, they are the kernel's Python, which the
    debugger steps over and leaves out of call stacks."""
    files = [getattr(module, "__file__", None) for module in list(sys.modules.values())]
    # The runtime's own code has names, not paths (the kernel loads it from
    # memory); the debugger matches them as patterns.
    return [path for path in files if isinstance(path, str)] + [
        "**/mahtab_runtime.py",
        "**/mahtab_ipython.py",
        "**/mahtab/tools.py",
        "**/mahtab/guard.py",
    ]


_DEBUGGER_HIDDEN = {"In", "Out", "exit", "quit", "get_ipython", "debugpy"}
_debugger_kept = {}


def debugger_variables(namespace, seconds=2.0):
    """The user's variables as the Debug Adapter Protocol lists them (the
    variable explorer of a debugger frontend, outside a breakpoint). Each
    value is a bounded repr, made until ``seconds`` have gone by: the kernel
    then raises TimeoutError in a repr still running (one that never
    returns, say), and the variables after it are listed without a value."""
    deadline = time.monotonic() + seconds
    variables = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in _DEBUGGER_HIDDEN:
            continue
        if time.monotonic() < deadline:
            try:
                shown = _short_repr(value, 500)
            except TimeoutError:
                shown = "<repr took too long>"
        else:
            shown = "<not shown: out of time>"
        variables.append(
            {
                "name": name,
                "value": shown,
                "type": type(value).__name__,
                "evaluateName": name,
                "variablesReference": 0,
            }
        )
    return variables


def keep_for_debugger(value):
    """Keeps ``value`` for the kernel to take (``take_from_debugger``): an
    expression evaluated at a breakpoint hands its result over this way, in
    full, rather than as the debugger's shortened text of it."""
    key = uuid.uuid4().hex
    _debugger_kept[key] = value
    return key


def take_from_debugger(key):
    return _debugger_kept.pop(key, None)


class AskCallbacks:
    """What an ``ask()`` caller wants to hear as the run goes, called on the
    caller's thread: ``on_token(text)`` with each piece of the answers as they
    stream, ``on_code_block(code, index)`` before each block of the model's
    code runs, ``on_execution(output, error, index)`` after it (``error`` is
    the traceback's text when the block failed, else None). An exception in
    a callback is shown in the cell and the run goes on."""

    def __init__(self, on_token=None, on_code_block=None, on_execution=None):
        self.on_token = on_token
        self.on_code_block = on_code_block
        self.on_execution = on_execution
        self.blocks = 0

    @property
    def wants_tokens(self):
        return self.on_token is not None

    def token(self, text):
        self._call(self.on_token, text)

    def code_block(self, code):
        index, self.blocks = self.blocks, self.blocks + 1
        self._call(self.on_code_block, code, index)
        return index

    def executed(self, result, index):
        output, error = result["shown"], result.get("error")
        if error and output.endswith(error):
            output = output[: -len(error)]
        self._call(self.on_execution, output, error, index)

    @staticmethod
    def _call(callback, *args):
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:
            traceback.print_exc()


class AgentScope:
    """What an agent run may do in Python. The kernel's agent calls these
    methods on the thread that asked for the run (JSON text in and out)."""

    def __init__(self, runtime, namespace, callbacks=None):
        self.runtime = runtime
        self.namespace = namespace
        self.callbacks = callbacks or AskCallbacks()

    def run_code(self, args, output=None):
        request = json.loads(args)
        index = self.callbacks.code_block(request["code"])
        result = self.runtime.run_agent_code(
            request["code"], self.namespace, bool(request.get("confirm")), request.get("allow") or (), output
        )
        self.callbacks.executed(result, index)
        return dumps(result)

    def token(self, args):
        self.callbacks.token(json.loads(args)["text"])
        return "{}"

    def skills(self, args):
        return dumps({"skills": sys.modules["mahtab.tools"].skills()})

    def namespace_summary(self, args):
        return dumps({"summary": namespace_summary(self.namespace)})

    def describe(self, args):
        """The informer's findings: each variable asked about (or, with no
        names, each the request mentions; failing that, the newest tables
        and arrays), described in detail."""
        request = json.loads(args)
        names = [name for name in request.get("names") or () if _is_user_variable(self.namespace, name)]
        if not request.get("names"):
            mentioned = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", request.get("request", ""))
            names = [name for name in dict.fromkeys(mentioned) if _is_user_variable(self.namespace, name)]
            if not names:
                data = [name for name in self.namespace if _is_user_variable(self.namespace, name) and hasattr(self.namespace[name], "shape")]
                names = data[-INFORMER_DEFAULT_VARIABLES:]
        describe = sys.modules["mahtab.tools"].describe
        described = [[name, describe(self.namespace[name], name)] for name in names[:INFORMER_MAX_VARIABLES]]
        return dumps({"described": described})

    def missing(self, args):
        """Which of the variables and files a request names do not exist."""
        import os

        request = json.loads(args)
        return dumps({
            "names": [name for name in request.get("names", ()) if name not in self.namespace],
            "files": [path for path in request.get("files", ()) if not os.path.exists(path)],
        })

    def triage_context(self, args):
        names = [name for name in self.namespace if _is_user_variable(self.namespace, name)]
        return dumps({"variables": names, "last_error": self.runtime.last_failure})

    def repair(self, args):
        request = json.loads(args)
        return dumps({"repair": repair(request.get("code", ""), request.get("error", ""), self.namespace)})

    def recent_cells(self, args):
        return dumps({"cells": self.runtime.take_recent_cells()})

    def interpolate(self, args):
        return dumps({"prompt": interpolate(json.loads(args).get("prompt", ""), self.namespace)})

    def local_model(self, args):
        return dumps(local_model(json.loads(args)))

    def memory(self, args):
        import os

        folder = os.path.join(jupyter_data_dir(), "mahtab", "conversations")
        return dumps({"dir": folder, "key": str(conversation_key(self.namespace))})

    def input(self, args):
        request = json.loads(args)
        return dumps({"value": self.runtime.bridge.input(str(request.get("prompt", "")), bool(request.get("password")))})


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# The names modules are usually imported under.
MODULE_ALIASES = {
    "np": "numpy",
    "pd": "pandas",
    "plt": "matplotlib.pyplot",
    "mpl": "matplotlib",
    "sns": "seaborn",
    "sp": "scipy",
    "nx": "networkx",
    "px": "plotly.express",
    "go": "plotly.graph_objects",
}


def repair(code, error, namespace):
    """A fix for agent code that failed in a way known to need no model: a
    module the session already uses, not imported under the name the code
    uses; a column name misspelt with a single close match among the
    DataFrames' columns. ``{"code", "change"}``, or None."""
    missing = re.search(r"NameError: name '(\w+)' is not defined", error)
    if missing:
        name = missing.group(1)
        module = MODULE_ALIASES.get(name, name)
        # Only what is loaded already: importing it again costs nothing.
        if module in sys.modules and name not in namespace:
            statement = "import %s" % module if module == name else "import %s as %s" % (module, name)
            return {"code": "%s\n%s" % (statement, code), "change": "added `%s`" % statement}
        return None
    wrong = re.search(r"KeyError: ['\"]([^'\"]+)['\"]", error) or re.search(
        r"AttributeError: '\w+' object has no attribute '(\w+)'", error
    )
    if not wrong:
        return None
    name = wrong.group(1)
    columns = {str(column) for value in list(namespace.values()) if _is_frame(value) for column in value.columns}
    close = difflib.get_close_matches(name, sorted(columns), n=2, cutoff=0.75)
    if len(close) != 1:
        return None
    right = close[0]
    fixed = re.sub(r"(['\"])%s\1" % re.escape(name), lambda m: m.group(1) + right + m.group(1), code)
    if wrong.re.pattern.startswith("AttributeError") and right.isidentifier():
        fixed = re.sub(r"\.%s\b" % re.escape(name), "." + right, fixed)
    if fixed == code:
        return None
    return {"code": fixed, "change": "column %r is %r" % (name, right)}


def _is_frame(value):
    return hasattr(value, "columns") and hasattr(value, "dtypes") and not isinstance(value, type)


def interpolate(prompt, namespace):
    """``{name}`` in a prompt becomes that variable's value; ``{{``/``}}``
    are literal braces; unknown names stay as written."""

    def replace(match):
        if match.group(0) in ("{{", "}}"):
            return match.group(0)[0]
        name = match.group(1)
        if name not in namespace:
            return match.group(0)
        return clip_middle(str(namespace[name]), 4000)

    return re.sub(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}", replace, prompt)


def jupyter_data_dir():
    """The Jupyter data directory, as jupyter_core finds it on Linux."""
    import os

    data_dir = os.environ.get("JUPYTER_DATA_DIR")
    if not data_dir:
        xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        data_dir = os.path.join(xdg, "jupyter")
    return data_dir


def conversation_key(namespace):
    """What the saved conversation belongs to: the notebook, when the client
    says which (jupyter_server sets JPY_SESSION_NAME for the kernel; VS Code
    defines __vsc_ipynb_file__), else the working directory."""
    import os

    return os.environ.get("JPY_SESSION_NAME") or namespace.get("__vsc_ipynb_file__") or os.getcwd()


def local_model(args):
    """Where the local model the kernel serves is, if this environment can
    serve it: whether the xllamacpp server package is here, and the GGUF file
    ``args["file"]``, in the package ``args["package"]`` when one ships it,
    else in a models directory (``$MAHTAB_MODELS_DIR``, then ``mahtab/models``
    in the user's Jupyter data directory and in this environment's, where
    ``mahtab local-model`` puts it). Nothing is imported."""
    import os

    searched = []
    model = None
    package = args.get("package")
    if package:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            searched.append(os.path.dirname(spec.origin))
    else:
        if os.environ.get("MAHTAB_MODELS_DIR"):
            searched.append(os.environ["MAHTAB_MODELS_DIR"])
        searched.append(os.path.join(jupyter_data_dir(), "mahtab", "models"))
        searched.append(os.path.join(sys.prefix, "share", "jupyter", "mahtab", "models"))
        searched.extend(os.path.join(root, "share", "jupyter", "mahtab", "models") for root in ("/usr/local", "/usr"))
    for folder in searched:
        candidate = os.path.join(folder, args["file"])
        if os.path.isfile(candidate):
            model = candidate
            break
    server = importlib.util.find_spec("xllamacpp") is not None
    return {"python": sys.executable, "server": server, "model": model, "searched": searched}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Calls ``patch(module)`` right after ``module_name`` is first imported,
    so a module the kernel adjusts costs nothing until someone uses it."""

    def __init__(self, module_name, patch):
        self.module_name = module_name
        self.patch = patch

    def find_spec(self, name, path=None, target=None):
        if name != self.module_name:
            return None
        # The other finders find the module; `importlib.util.find_spec` would
        # come back here. A spec may be asked for without an import (by a
        # completer, say), so this finder stays until the module is loaded.
        for finder in sys.meta_path:
            find = None if finder is self else getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader, self)
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    """A module's own loader, and then the patch."""

    def __init__(self, loader, finder):
        self._loader = loader
        self._finder = finder

    def __getattr__(self, name):
        # get_source, get_filename, ...: inspect and linecache ask the loader.
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        self._finder.patch(module)


def patch_on_import(module_name, patch):
    """``patch(module)`` now if the module is loaded, else when it is."""
    module = sys.modules.get(module_name)
    if module is not None:
        patch(module)
    else:
        sys.meta_path.insert(0, _PatchOnImport(module_name, patch))


def make_pdb_interruptible(pdb):
    """An interrupt while pdb waits for a command ends the debugger and the
    cell. Stock pdb catches KeyboardInterrupt and prompts again, and a frontend
    that has stopped answering prompts then waits for a reply forever."""

    class InterruptiblePdb(pdb.Pdb):
        def _cmdloop(self):
            self.allow_kbdint = True
            try:
                self.cmdloop()
            except KeyboardInterrupt:
                # Stop tracing, so the interrupt ends the cell rather than
                # stopping again at the next line.
                self.stop_here = lambda frame: False
                self.do_quit("")
                sys.settrace(None)
                self.quitting = False
                self.message("--KeyboardInterrupt--")
                raise
            finally:
                self.allow_kbdint = False

    pdb.Pdb = InterruptiblePdb


class BaseRuntime:
    """What every runtime shares: stream redirection, publishing, requests, comms."""

    def __init__(self, bridge):
        self.bridge = bridge
        self._agent_displays = None  # a list while agent code runs
        self.comm_manager = _install_comms(self)
        sys.stdout = KernelStream(bridge, "stdout")
        sys.stderr = KernelStream(bridge, "stderr")
        builtins.input = self.input
        getpass.getpass = self.getpass
        patch_on_import("pdb", self._debugger)
        # The kernel raises KeyboardInterrupt through Python's own handler;
        # make sure it is the one CPython calls (the kernel then takes the
        # signal over at the OS level).
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self._recent_cells = collections.deque(maxlen=RECENT_CELLS)
        # The user's last failed cell, for "explain the last error".
        self.last_failure = None
        self._agent_runs = 0  # agent runs under way on this thread, nested
        # ask() and rlm() are at hand in every cell, like display(), and importable.
        builtins.ask = self.ask
        builtins.rlm = self.rlm
        package = types.ModuleType("mahtab", "mahtab's Python side: ask() and the agent's tools.")
        package.__path__ = []  # a package: mahtab.tools is its module
        package.ask = self.ask
        package.rlm = self.rlm
        package.AskError = AskError
        package.tools = tools = sys.modules["mahtab.tools"]
        sys.modules["mahtab"] = package
        self._tools = {name: getattr(tools, name) for name in tools.__all__}
        # Like `python -m ipykernel_launcher`: modules next to the notebook import.
        if "" not in sys.path:
            sys.path.insert(0, "")

    # -- cells and the event loop between them ---------------------------------

    def execute(self, code, execution_count, silent, store_history, user_expressions_json):
        """Runs one cell (``_execute``, the runtime's own) with its request
        as the context's parent, so asyncio tasks it creates, which copy the
        context, print to it when they run later, between or during other
        cells. (Within the cell the streams need not look: the kernel's
        current request is the cell.)"""
        if _THREAD_PARENT.get() is not None:  # a subshell's cell, which has its own
            return self._execute(code, execution_count, silent, store_history, user_expressions_json)
        token = _THREAD_PARENT.set(self.bridge.parent_header())
        try:
            return self._execute(code, execution_count, silent, store_history, user_expressions_json)
        finally:
            _THREAD_PARENT.reset(token)

    def run_event_loop(self, wake_fd):
        """Between cells: runs this thread's asyncio event loop, if it has
        work (tasks a cell created), until the kernel has something to do (a
        byte on ``wake_fd``). Returns whether it ran. Output of the tasks goes
        to the cells that created them."""
        loop = _event_loop_of_this_thread()
        if loop is None or not _has_work(loop):
            return False
        global _thread_parents_used
        looked_before = _thread_parents_used
        _thread_parents_used = True
        for stream in _STREAMS:
            stream._write_each_time_anew()

        def woken():
            try:
                while os.read(wake_fd, 4096):
                    pass
            except BlockingIOError:
                pass
            loop.stop()

        loop.add_reader(wake_fd, woken)
        try:
            loop.run_forever()
        finally:
            loop.remove_reader(wake_fd)
            if not looked_before:
                _thread_parents_used = False
                for stream in _STREAMS:
                    stream._write_without_looking()
        return True

    # -- the debugger ----------------------------------------------------------

    def do_debugpy_listen(self, content):
        """Starts debugpy in this process for the kernel's debugger (once;
        on the thread that runs cells, so it traces them): its adapter, a
        process of its own, listens on a loopback port, which the kernel
        connects to."""
        # Python 3.11's frozen standard modules make pydevd warn on every
        # start; the kernel does not debug them.
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        import debugpy

        # The adapter runs under the environment's interpreter (the kernel
        # process itself is not a Python executable).
        debugpy.configure(python=sys.executable)
        _, port = debugpy.listen(("127.0.0.1", 0))
        # Line numbers must stay those of the cell the frontend dumped.
        shell = getattr(self, "shell", None)
        transforms = getattr(getattr(shell, "input_transformer_manager", None), "cleanup_transforms", None)
        if transforms is not None:
            transforms[:] = [t for t in transforms if getattr(t, "__name__", "") != "leading_empty_lines"]
        return {"port": port, "internal": self.kernel_files}

    def debug_variables(self, args):
        seconds = json.loads(args).get("seconds", 2.0)
        return dumps({"variables": debugger_variables(self.user_ns, seconds)})

    def debug_rich_inspect(self, args):
        """A variable's rich view ({data, metadata}), outside a breakpoint,
        or (``key``) as an expression at a breakpoint kept it."""
        request = json.loads(args)
        if "key" in request:
            bundle = take_from_debugger(request["key"])
        else:
            name = request.get("name", "")
            bundle = mime_bundle(self.user_ns[name]) if name in self.user_ns else None
        data, metadata = bundle if bundle else ({}, {})
        return dumps({"data": data, "metadata": {k: v for k, v in metadata.items() if k in data}})

    def debug_modules(self, args):
        """The loaded modules with a Python source file, as DAP lists them."""
        request = json.loads(args)
        modules = []
        for name, module in list(sys.modules.items()):
            origin = getattr(getattr(module, "__spec__", None), "origin", None)
            if isinstance(origin, str) and origin.endswith(".py"):
                modules.append({"id": name, "name": name, "path": origin})
        start = int(request.get("startModule") or 0)
        count = int(request.get("moduleCount") or 0)
        shown = modules[start : start + count] if count else modules[start:]
        return dumps({"modules": shown, "totalModules": len(modules)})

    # -- subshells -------------------------------------------------------------

    def start_subshell(self, inbox, name):
        """Starts a kernel subshell's thread: it serves the commands the
        kernel puts in ``inbox`` until the kernel deletes the subshell."""
        thread = threading.Thread(target=self.bridge.serve_subshell, args=(inbox, self), name=name, daemon=True)
        thread.start()

    def execute_for(self, parent_json, *args):
        """``execute`` on a subshell's thread: its output goes to ``parent``."""
        token = set_thread_parent(json.loads(parent_json))
        try:
            return self.execute(*args)
        finally:
            reset_thread_parent(token)

    def request_for(self, parent_json, *args):
        """``request`` on a subshell's thread, as a child of ``parent``."""
        token = set_thread_parent(json.loads(parent_json))
        try:
            return self.request(*args)
        finally:
            reset_thread_parent(token)

    def publish(self, msg_type, content, metadata=None, buffers=None):
        metadata_json = None if metadata is None else dumps(metadata)
        buffers = None if not buffers else [bytes(b) for b in buffers]
        self.bridge.publish(msg_type, dumps(content), metadata_json, buffers, thread_parent())

    def input(self, prompt=""):
        """``input()``: asks the frontend over the stdin channel."""
        __tracebackhide__ = True  # IPython leaves this frame out of tracebacks
        return self.bridge.input(str(prompt), False)

    def getpass(self, prompt="Password: ", stream=None):
        """``getpass.getpass()``: like input(), without echo in the frontend."""
        __tracebackhide__ = True
        return self.bridge.input(str(prompt), True)

    def shutdown(self):
        """Called once before the kernel exits."""

    def _debugger(self, pdb):
        """Adjusts the ``pdb`` module when it is first imported."""
        make_pdb_interruptible(pdb)

    # -- the agent ------------------------------------------------------------

    def ask(
        self,
        prompt,
        *,
        model=None,
        provider=None,
        max_turns=None,
        graph=None,
        no_exec=False,
        once=False,
        confirm=False,
        new=False,
        allow=None,
        trace=False,
        informer=False,
        on_token=None,
        on_code_block=None,
        on_execution=None,
    ):
        """Asks the agent, as an ``%%ask`` cell does, from Python code: the run
        streams into the running cell, its code runs in this namespace, and
        the model's final answer (without its code) is returned, a str whose
        ``.trace`` tells the nodes the run went through, with their time,
        turns and tokens (``trace=True`` also shows it in the cell).
        ``on_token``, ``on_code_block`` and ``on_execution`` are called as the
        run goes (see AskCallbacks)."""
        __tracebackhide__ = True
        callbacks = AskCallbacks(on_token, on_code_block, on_execution)
        options = {
            "model": model,
            "provider": provider,
            "max_turns": max_turns,
            "graph": graph,
            "no_exec": no_exec,
            "once": once,
            "confirm": confirm,
            "new": new,
            "allow": allow,
            "trace": trace,
            "informer": informer,
            "on_token": callbacks.wants_tokens,
        }
        request = {"kind": "ask", "prompt": str(prompt), "options": options}
        result = self._agent_request(request, AgentScope(self, self.user_ns, callbacks))
        return AskAnswer(result["answer"], result.get("trace"))

    def rlm(self, query, context, *, max_turns=None, max_depth=RLM_MAX_DEPTH, model=None, provider=None, _depth=0):
        """Asks a sub-agent ``query`` about ``context``: it sees only a
        description of the value, explores it with code (peek, grep,
        partition, and rlm() on parts, at most ``max_depth`` levels deep) in
        a namespace of its own, and ends by calling ``FINAL(answer)``; that
        answer is returned (None if it found none within its turns)."""
        __tracebackhide__ = True
        if _depth >= max_depth:
            raise AskError(
                "rlm(): the depth limit (%d) is reached; explore this part with peek, grep and partition" % max_depth
            )
        found = {}

        def FINAL(answer):
            found["answer"] = answer
            raise _FinalAnswer()

        def nested(query, context, **kwargs):
            kwargs.setdefault("max_depth", max_depth)
            return self.rlm(query, context, _depth=_depth + 1, **kwargs)

        namespace = {"__name__": "__rlm__", "__builtins__": builtins, "context": context, "FINAL": FINAL, "rlm": nested}
        namespace.update(tools_on(context, sys.modules["mahtab.tools"]))
        request = {
            "kind": "rlm",
            "query": str(query),
            "description": describe_value(context),
            "depth_left": max_depth - _depth - 1,
            "options": {"max_turns": max_turns, "model": model, "provider": provider},
        }
        self._agent_request(request, AgentScope(self, namespace))
        return found.get("answer")

    def ask_cell(self, code):
        """Runs an ``%%ask`` cell or an ``%ask_config`` line. An interrupted
        run ends the cell with KeyboardInterrupt shown as one line, its
        summary, not a traceback into the kernel's own code."""
        __tracebackhide__ = True
        try:
            self._agent_request({"kind": "cell", "code": code})
        except KeyboardInterrupt:
            what = "%%ask" if code.startswith("%%ask") else code.split(None, 1)[0]
            stopped = KeyboardInterrupt("the %s run was interrupted" % what)
            stopped._render_traceback_ = lambda: ["\x1b[31mKeyboardInterrupt: %s\x1b[39m" % stopped]
            raise stopped from None

    def _agent_request(self, request, scope=None):
        __tracebackhide__ = True
        scope = scope or AgentScope(self, self.user_ns)
        # A run started from inside another run's code shows indented.
        request["indent"] = self._agent_runs
        self._agent_runs += 1
        try:
            result = json.loads(self.bridge.ask(dumps(request), scope))
        finally:
            self._agent_runs -= 1
        error = result.get("error")
        if error is not None:
            if error["ename"] == "KeyboardInterrupt":
                raise KeyboardInterrupt(error["evalue"])
            raise _AGENT_ERRORS.get(error["ename"], AskError)(error["evalue"]) from None
        return result

    def note_cell(self, code, store_history, reply=None):
        """Remembers a cell the user ran, and whether it failed, for the
        agent's next request."""
        if store_history and not is_agent_cell(code):
            self._recent_cells.append(code[:RECENT_CELL_CHARS])
            if reply is not None and reply.get("status") == "error":
                traceback_text = _ANSI.sub("", "\n".join(reply.get("traceback") or ()))
                self.last_failure = "%s\n\n%s" % (code[:RECENT_CELL_CHARS], clip_middle(traceback_text, 4000))

    def take_recent_cells(self):
        """The cells run since the last request (and forgets them)."""
        cells = list(self._recent_cells)
        self._recent_cells.clear()
        return cells

    def _agent_builtins(self, namespace):
        """The builtins agent code sees: Python's, and the toolbox, so the
        model's code calls ``grep(...)`` without an import while the user's
        own cells see no new names."""
        base = namespace.get("__builtins__", builtins)
        merged = dict(base if isinstance(base, dict) else vars(base))
        merged.update(self._tools)
        return merged

    def _confirm_write(self, action):
        answer = self.bridge.input("Allow the agent to %s? [y/N] " % action, False)
        return answer.strip().lower() in ("y", "yes")

    def _guard(self, code, allow):
        """Why agent code must not run, if it would do what the user should
        agree to first (see mahtab.guard) and the user does not, or cannot
        be asked; None when it may run."""
        guard = sys.modules["mahtab.guard"]
        findings = [finding for finding in guard.inspect(code) if finding.kind not in allow]
        if not findings:
            return None
        what = guard.describe(findings)
        kinds = ",".join(sorted({finding.kind for finding in findings}))
        try:
            answer = self.bridge.input("The agent's code would %s. Run it? [y/N] " % what, False)
        except KeyboardInterrupt:
            raise
        except Exception:
            return (
                "Not run: this code would %s, and no one can allow that here (the frontend takes no input). "
                "Do it another way, or tell the user that %%ask_config --allow %s allows it." % (what, kinds)
            )
        if answer.strip().lower() in ("y", "yes"):
            return None
        return "Not run: the user did not allow this code to %s. Do it another way, or ask the user." % what

    def run_agent_code(self, code, namespace, confirm=False, allow=(), output=None):
        """Runs code the agent wrote in ``namespace`` (the user's, for %%ask);
        with ``confirm`` (the user agreed to the block already), each file
        write of the toolbox asks the user first; without, code that would
        run shell commands, delete or overwrite files, reach the network or
        install packages asks first, unless ``allow`` names that kind.

        Its stdout and stderr are captured for the model rather than streamed
        (the kernel shows them in an output panel); rich output it displays
        (plots, tables, a rich last value) reaches the user as it comes, and
        the model gets its text form; ``output``, if given, is called with
        the text as it is written (the kernel shows it while the code runs).
        Returns {"output": for the model, "shown": for the panel (without
        the rich output, already on screen), "rich_outputs": how many,
        "failed", "error": the traceback's (or the guard's) text, or None,
        "finished": whether it called FINAL(), "changes": what it did to the
        namespace, a line per name}.
        """
        # IPython's syntax (`!pip ...`, `%matplotlib inline`) works as in a
        # cell; the code as written names its file and is what a debugger and
        # a traceback show (the static transformations keep its lines).
        written, code = code, self._agent_python(code)
        refusal = None if confirm else self._guard(code, allow)
        if refusal is not None:
            return {"output": refusal, "shown": refusal, "rich_outputs": 0, "failed": True, "error": refusal,
                    "finished": False, "changes": []}
        captured = []
        displayed = []
        tools = sys.modules["mahtab.tools"]
        saved = sys.stdout, sys.stderr, self._agent_displays, tools.confirm_write
        saved_builtins = namespace.get("__builtins__", builtins)
        sys.stdout = sys.stderr = _Capture(captured, output)
        self._agent_displays = displayed
        tools.confirm_write = self._confirm_write if confirm else None
        finished = False
        before = dict(namespace)
        tree, prints = None, {}
        namespace["__builtins__"] = self._agent_builtins(namespace)
        failed, error = False, None
        try:
            filename = self._agent_code_file(written)
            linecache.cache[filename] = (len(written), None, written.splitlines(True), filename)
            # Top-level `await` is allowed, as in a cell.
            flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            tree = compile(code, filename, "exec", flags=flags)
            prints = fingerprints(tree, namespace)
            body = list(tree.body)
            last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
            self.bridge.user_code_starting()
            if body:
                module = ast.Module(body=body, type_ignores=[])
                self._run_agent_code(compile(module, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
            if last is not None:
                expression = compile(ast.Expression(last.value), filename, "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                value = self._run_agent_code(expression, namespace)
                if value is not None:
                    namespace["_"] = value
                    data, _ = mime_bundle(value)
                    if set(data) - {"text/plain"}:
                        self.publish("display_data", {"data": data, "metadata": {}, "transient": {}})
                        displayed.append(data.get("text/plain", ", ".join(sorted(data))))
                    else:
                        captured.append(data.get("text/plain", "") + "\n")
        except KeyboardInterrupt:
            raise
        except _FinalAnswer:
            finished = True
        except BaseException:
            failed = True
            etype, value, tb = sys.exc_info()
            # From the agent's own code on: the runtime's frames (and the
            # parser's, for a SyntaxError) would only distract the model.
            frames = traceback.extract_tb(tb)
            start = next((i for i, frame in enumerate(frames) if frame.filename == filename), len(frames))
            frames = frames[start:][-AGENT_TRACEBACK_FRAMES:]
            header = "Traceback (most recent call last):\n" if frames else ""
            told = header + "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(etype, value))
            # The model reads "<agent>", whatever file a debugger needed.
            error = told.replace('"%s"' % filename, '"<agent>"')
            captured.append(error)
        finally:
            namespace["__builtins__"] = saved_builtins
            self._agent_code_finished()
            sys.stdout, sys.stderr, self._agent_displays, tools.confirm_write = saved
        try:
            changes = namespace_changes(before, namespace, tree, prints)
        except Exception:  # a value whose description fails says nothing of the run
            changes = []
        shown = "".join(captured)
        told = shown + "".join("[displayed: %s]\n" % d for d in displayed)
        return {
            "output": clip_middle(told, AGENT_OUTPUT_LIMIT),
            "shown": clip_middle(shown, AGENT_OUTPUT_LIMIT),
            "rich_outputs": len(displayed),
            "failed": failed,
            "error": error,
            "finished": finished,
            "changes": changes,
        }

    def _agent_python(self, code):
        """Agent code as Python: the IPython runtime turns its syntax
        (magics, shell escapes) into calls, as for a cell."""
        return code

    def _run_agent_code(self, compiled, namespace):
        """Runs a compiled piece of agent code; code with top-level ``await``
        gives a coroutine, run to its end on this thread's event loop."""
        result = eval(compiled, namespace)
        if compiled.co_flags & inspect.CO_COROUTINE:
            result = self._run_coroutine(result)
        return result

    def _run_coroutine(self, coroutine):
        """Runs ``coroutine`` on this thread's event loop (one of its own)."""
        import asyncio

        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            loop = None
        if loop is None or loop.is_closed():
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
        return loop.run_until_complete(coroutine)

    def _agent_code_file(self, code):
        """The name agent code compiles under: "<agent>", or, once the
        debugger has started (debugpy is loaded), the file a cell with this
        code would have, written out, so a breakpoint set in it (a frontend
        finds it with dumpCell) stops the agent's code and the debugger shows
        its source, as for a cell."""
        if "debugpy" not in sys.modules:
            return "<agent>"
        return self.bridge.write_cell_file(code) or "<agent>"

    def _agent_code_finished(self):
        """Runs after agent code, failed or not, while its output is still
        captured: the place for what a shell does after each execution."""

    def request(self, msg_type, content_json, buffers=()):
        """Serves a shell message; returns the reply content as JSON text."""
        content = json.loads(content_json)
        handler = getattr(self, "do_" + msg_type.removesuffix("_request"), None)
        if handler is None:
            raise ValueError("unsupported request " + msg_type)
        if msg_type.startswith("comm_") and msg_type != "comm_info_request":
            handler({"content": content, "buffers": list(buffers), "metadata": {}})
            return "{}"
        reply = handler(content)
        reply.setdefault("status", "ok")
        return dumps(reply)

    @staticmethod
    def _cursor(content):
        code = content.get("code", "")
        cursor = content.get("cursor_pos")
        return code, len(code) if cursor is None else max(0, min(int(cursor), len(code)))

    # -- comms ---------------------------------------------------------------

    def do_comm_info(self, content):
        target = content.get("target_name")
        comms = self.comm_manager.comms if self.comm_manager else {}
        return {
            "comms": {
                comm_id: {"target_name": comm.target_name}
                for comm_id, comm in comms.items()
                if target is None or comm.target_name == target
            }
        }

    def do_comm_open(self, msg):
        if self.comm_manager is None:
            # No comm support in this environment: refuse, as the spec asks.
            self.publish("comm_close", {"comm_id": msg["content"].get("comm_id"), "data": {}})
            return
        self.comm_manager.comm_open(None, None, msg)

    def do_comm_msg(self, msg):
        if self.comm_manager is not None:
            self.comm_manager.comm_msg(None, None, msg)

    def do_comm_close(self, msg):
        if self.comm_manager is not None:
            self.comm_manager.comm_close(None, None, msg)


class Runtime(BaseRuntime):
    """Plain Python: exec the cell, show the value of its last expression."""

    def __init__(self, bridge):
        super().__init__(bridge)
        self.payloads = []
        self.execution_count = 0
        self.history = []  # (line, input, output) of stored cells
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        self.user_ns = main.__dict__
        self.user_ns["exit"] = self.user_ns["quit"] = ExitAutocall(self)
        self.user_ns["display"] = self.display
        self.user_ns["update_display"] = self.update_display
        self.user_ns["clear_output"] = self.clear_output
        sys.displayhook = self.displayhook
        self.kernel_files = loaded_source_files()

    # -- output ------------------------------------------------------------

    def display(self, *objs, display_id=None, update=False, metadata=None, raw=False):
        """Shows each object as ``display_data`` (or updates a shown one).

        With ``display_id=True`` a new id is made; with any id, a handle whose
        ``update(obj)`` replaces the shown output is returned, as in IPython.
        """
        if display_id is True:
            display_id = uuid.uuid4().hex
        transient = {} if display_id is None else {"display_id": str(display_id)}
        for obj in objs:
            if raw:
                data, md = dict(obj), {}
            else:
                data, md = mime_bundle(obj)
            md.update(metadata or {})
            if self._agent_displays is not None:
                self._agent_displays.append(data.get("text/plain", ", ".join(sorted(data))))
            msg_type = "update_display_data" if update else "display_data"
            self.publish(msg_type, {"data": data, "metadata": md, "transient": transient})
        if display_id is not None and not update:
            return DisplayHandle(self, display_id)
        return None

    def update_display(self, obj, *, display_id, **kwargs):
        """Replaces the output shown with ``display_id``."""
        self.display(obj, display_id=display_id, update=True, **kwargs)

    def clear_output(self, wait=False):
        """Clears the cell's output (after the next output, with ``wait``)."""
        self.publish("clear_output", {"wait": bool(wait)})

    def displayhook(self, value):
        """``sys.displayhook``: the value of a cell's last expression."""
        if value is None:
            return
        builtins._ = value
        data, metadata = mime_bundle(value)
        self._last_output = data.get("text/plain")
        self.publish(
            "execute_result",
            {"execution_count": self.execution_count, "data": data, "metadata": metadata},
        )

    # -- execution ---------------------------------------------------------

    def _execute(self, code, execution_count, silent, store_history, user_expressions_json):
        """Runs one cell; returns the execute_reply fields as JSON text."""
        self.payloads = []
        self.execution_count = execution_count
        self._last_output = None
        try:
            self._run_cell(code, execution_count, silent)
        except BaseException:
            error = error_content(sys.exc_info(), skip_file=__file__)
            if error["ename"] == "SyntaxError" and _looks_like_ipython(code):
                error["traceback"].append(_NEEDS_IPYTHON)
            self.publish("error", error)
            reply = {"status": "error", **error, "user_expressions": {}}
        else:
            reply = {"status": "ok"}
            reply["user_expressions"] = self._user_expressions(json.loads(user_expressions_json))
        if store_history:
            self.history.append((execution_count, code, self._last_output))
        self.note_cell(code, store_history, reply)
        reply["payload"] = self.payloads
        return dumps(reply)

    def _run_cell(self, code, execution_count, silent):
        if is_agent_cell(code):
            self.bridge.user_code_starting()
            self.ask_cell(code)
            return
        filename = "<cell %d>" % execution_count if execution_count else "<cell>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename=filename, mode="exec")
        self.bridge.user_code_starting()
        last_expr = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not silent:
            if not code.rstrip().endswith(";"):
                last_expr = tree.body.pop()
        if tree.body:
            exec(compile(tree, filename, "exec"), self.user_ns)
        if last_expr is not None:
            expression = ast.Expression(last_expr.value)
            value = eval(compile(expression, filename, "eval"), self.user_ns)
            if isinstance(value, ExitAutocall):
                value()
            else:
                self.displayhook(value)

    def _user_expressions(self, expressions):
        results = {}
        for name, source in expressions.items():
            try:
                value = eval(source, self.user_ns)
            except BaseException:
                error = error_content(sys.exc_info(), skip_file=__file__)
                results[name] = {"status": "error", **error}
            else:
                data, metadata = mime_bundle(value)
                results[name] = {"status": "ok", "data": data, "metadata": metadata}
        return results

    # -- requests ------------------------------------------------------------

    def do_is_complete(self, content):
        """By IPython's rules: code that compiles is still incomplete while its
        last line is inside an indented block, until a blank line ends it."""
        code = content.get("code", "")
        try:
            compiled = codeop.compile_command(code, "<input>", "exec")
        except (SyntaxError, OverflowError, ValueError):
            return {"status": "invalid"}
        lines = code.split("\n")
        last = lines[-1] if lines[-1].strip() or len(lines) == 1 else None
        if compiled is not None and (last is None or not last[:1].isspace()):
            return {"status": "complete"}
        if last is None:
            last = next((line for line in reversed(lines) if line.strip()), "")
        indent = last[: len(last) - len(last.lstrip())]
        if last.rstrip().endswith(":"):
            indent += "    "
        return {"status": "incomplete", "indent": indent}

    def do_complete(self, content):
        code, cursor = self._cursor(content)
        start = cursor
        while start > 0 and (code[start - 1].isalnum() or code[start - 1] in "_."):
            start -= 1
        text = code[start:cursor]
        completer = rlcompleter.Completer(self.user_ns)
        matches, state = [], 0
        while len(matches) < 1000:
            match = completer.complete(text, state)
            if match is None:
                break
            matches.append(match.rstrip("("))
            state += 1
        if not matches:
            found = imported_module_attributes(code, cursor, self.user_ns)
            if found:
                return {"matches": found[1], "cursor_start": found[0], "cursor_end": cursor, "metadata": {}}
        return {
            "matches": list(dict.fromkeys(matches)),
            "cursor_start": start,
            "cursor_end": cursor,
            "metadata": {},
        }

    def do_inspect(self, content):
        code, cursor = self._cursor(content)
        name = cursor_token(code, cursor)
        try:
            obj = eval(name, self.user_ns) if name else None
        except Exception:
            obj = None
        if not name or (obj is None and name != "None"):
            return {"found": False, "data": {}, "metadata": {}}
        try:
            signature = name + str(inspect.signature(obj))
        except (TypeError, ValueError):
            signature = name
        text = signature + "\n\n" + (pydoc.getdoc(obj) or type(obj).__name__)
        return {"found": True, "data": {"text/plain": text}, "metadata": {}}

    def do_history(self, content):
        output = bool(content.get("output"))
        entries = [(0, line, (code, out) if output else code) for line, code, out in self.history]
        kind = content.get("hist_access_type")
        if kind == "tail":
            entries = entries[-int(content.get("n") or 10):]
        elif kind == "range":
            start, stop = int(content.get("start") or 0), content.get("stop")
            entries = [e for e in entries if e[1] >= start and (stop is None or e[1] < int(stop))]
        elif kind == "search":
            pattern = content.get("pattern") or "*"
            entries = [e for e in entries if fnmatch.fnmatch(self._source(e), pattern)]
            if content.get("unique"):
                seen, unique = set(), []
                for entry in reversed(entries):
                    if self._source(entry) not in seen:
                        seen.add(self._source(entry))
                        unique.append(entry)
                entries = unique[::-1]
            if content.get("n"):
                entries = entries[-int(content["n"]):]
        else:
            entries = []
        return {"history": entries}

    @staticmethod
    def _source(entry):
        return entry[2][0] if isinstance(entry[2], tuple) else entry[2]


class KernelLogHandler(logging.Handler):
    """Sends log records to the kernel's own log (its stderr), not to a cell."""

    def __init__(self, bridge):
        super().__init__()
        self._bridge = bridge

    def emit(self, record):
        try:
            self._bridge.log(record.levelno, "%s: %s" % (record.name, self.format(record)))
        except Exception:
            self.handleError(record)


def _install_comms(runtime):
    """Makes the ``comm`` package (used by ipywidgets) talk through the kernel.

    Returns the comm manager, or None when ``comm`` is not installed.
    """
    try:
        import comm
        from comm.base_comm import BaseComm, CommManager
    except ImportError:
        return None

    class KernelComm(BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            content = {"data": {} if data is None else data, "comm_id": self.comm_id, **keys}
            runtime.publish(msg_type, content, metadata or {}, buffers)

    # The comm package reports protocol trouble (an unknown target, a failing
    # callback) through its logger; that belongs in the kernel's log, as with
    # ipykernel, not in the output of whichever cell is current.
    log = logging.getLogger("Comm")
    log.addHandler(KernelLogHandler(runtime.bridge))
    log.propagate = False

    manager = CommManager()
    comm.create_comm = KernelComm
    comm.get_comm_manager = lambda: manager
    return manager


_NEEDS_IPYTHON = (
    "Magics (%time, %%writefile, !ls, obj?) need IPython, which is not installed "
    "in this kernel's environment: pip install ipython, then restart the kernel."
)


def _looks_like_ipython(code):
    """Whether a cell uses IPython-only syntax (a magic, a shell escape, help)."""
    for line in code.splitlines():
        line = line.strip()
        if line.startswith(("%", "!")) or (line.endswith("?") and not line.startswith("#")):
            return True
    return False
