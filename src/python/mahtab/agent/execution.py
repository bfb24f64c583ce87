"""Running the code the agent writes: the guard on what it would do, its
output captured for the model, its rich output shown to the user, top-level
``await``, and what it did to the namespace.

Loaded with the agent, on its first run.
"""

import ast
import base64
import builtins
import contextlib
import ctypes
import functools
import inspect
import io
import linecache
import os
import sys
import sysconfig
import threading
import traceback

from mahtab.agent import call_help, close_names, guard

from mahtab import tools
from mahtab.runtime.display import mime_bundle
from mahtab.runtime.figures import FigureWatch, downscaled_png
from mahtab.agent.namespace import data_replaced_by_code, describe_briefly, fingerprints, namespace_changes
from mahtab.runtime.reprs import clip_middle

AGENT_OUTPUT_LIMIT = 10_000
# Figures of one block whose images go to a model that sees images.
IMAGES_PER_BLOCK = 2
# Innermost frames of a failed agent block kept for the model and the user.
AGENT_TRACEBACK_FRAMES = 5

# The toolbox agent code sees without an import (as it was when the agent
# first ran).
TOOLBOX = {name: getattr(tools, name) for name in tools.__all__}


class FinalAnswer(BaseException):
    """Raised by ``FINAL()`` to end an rlm() sub-agent's code at once (a
    BaseException, so the code's own ``except Exception`` lets it pass)."""


class BlockTimedOut(BaseException):
    """Raised in agent code that runs past its time limit (a BaseException,
    so the code's own ``except Exception`` does not swallow it and go on)."""


@contextlib.contextmanager
def _time_limit(seconds):
    """Stops the code run inside it once it has run `seconds` (None: no
    limit), by raising BlockTimedOut in this thread at its next bytecode: a
    loop that never ends does not hold the cell (a call into C that blocks,
    a long ``time.sleep``, ends first)."""
    if not seconds:
        yield
        return
    ident = threading.get_ident()
    lock = threading.Lock()
    state = {"running": True, "raised": False}

    def stop():
        with lock:
            if state["running"]:
                state["raised"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(BlockTimedOut))

    timer = threading.Timer(seconds, stop)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            state["running"] = False
            if state["raised"]:
                # Raised after the code ended but not yet delivered: taken
                # back, so it cannot land in what runs next.
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)


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


def agent_builtins(namespace):
    """The builtins agent code sees: Python's, and the toolbox, so the
    model's code calls ``grep(...)`` without an import while the user's
    own cells see no new names; a namespace with limited builtins of its own
    (an ``rlm()`` search's) keeps them."""
    base = namespace.get("__builtins__", builtins)
    if isinstance(base, dict) and base is not vars(builtins):
        # Builtins of its own (an rlm() search's, limited): kept as they are.
        return base
    merged = dict(vars(base) if not isinstance(base, dict) else base)
    merged.update(TOOLBOX)
    return merged


def _confirm_write(runtime, action):
    answer = runtime.bridge.input("Allow the agent to %s? [y/N] " % action, False)
    return answer.strip().lower() in ("y", "yes")


def _guard(runtime, code, allow):
    """Why agent code must not run, if it would do what the user should
    agree to first (see mahtab.agent.guard) and the user does not, or cannot
    be asked; None when it may run."""
    findings = [finding for finding in guard.inspect(code) if finding.kind not in allow]
    if not findings:
        return None
    what = guard.describe(findings)
    kinds = ",".join(sorted({finding.kind for finding in findings}))
    try:
        answer = runtime.bridge.input("The agent's code would %s. Run it? [y/N] " % what, False)
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


def run_agent_code(runtime, code, namespace, confirm=False, allow=(), output=None, originals=None, journal=None,
                   seconds=None):
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
    namespace, a line per name, "refused": the guard stopped it before it
    ran}. ``originals``, if given, keeps the object
    each name the code rebound had before the run's first rebinding of it
    (see ``AgentScope.restore``). ``journal``, if given (an
    ``undo.RunJournal``), keeps what the code changes as it was before.
    ``seconds``, if given, is how long the code may run before it is
    stopped (a failure the model is told of, the namespace as the code
    left it).
    """
    # IPython's syntax (`!pip ...`, `%matplotlib inline`) works as in a
    # cell; the code as written names its file and is what a debugger and
    # a traceback show (the static transformations keep its lines).
    written, code = code, runtime._as_python(code)
    refusal = None if confirm else _guard(runtime, code, allow)
    if refusal is not None:
        return _not_run(refusal, refused=True)
    clash = _name_in_use(code, namespace)
    if clash is not None:
        return _not_run(clash, refused=False)
    captured = []
    displayed = []
    saved = sys.stdout, sys.stderr, runtime._agent_displays, tools.confirm_write, tools.file_journal
    saved_builtins = namespace.get("__builtins__", builtins)
    sys.stdout = sys.stderr = _Capture(captured, output)
    runtime._agent_displays = displayed
    tools.confirm_write = functools.partial(_confirm_write, runtime) if confirm else None
    tools.file_journal = journal.file_written if journal is not None else None
    finished = False
    watch = FigureWatch().__enter__()
    if journal is not None:
        # A block sent again after a failure runs on the data as it was
        # (and what it changes is told from there).
        journal.rewind_resent(_syntax_tree(code), namespace)
    before = dict(namespace)
    tree, prints = None, {}
    namespace["__builtins__"] = agent_builtins(namespace)
    failed, error, help_for_model = False, None, None
    try:
        filename = _agent_code_file(runtime, written)
        linecache.cache[filename] = (len(written), None, written.splitlines(True), filename)
        # Top-level `await` is allowed, as in a cell.
        flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(code, filename, "exec", flags=flags)
        prints = fingerprints(tree, namespace)
        if journal is not None:
            journal.before_block(tree, namespace)
        body = list(tree.body)
        last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
        runtime.bridge.user_code_starting()
        value = None
        with _time_limit(seconds):
            if body:
                module = ast.Module(body=body, type_ignores=[])
                _run_compiled(runtime, compile(module, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
            if last is not None:
                expression = compile(ast.Expression(last.value), filename, "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                value = _run_compiled(runtime, expression, namespace)
        if last is not None:
            if value is not None:
                namespace["_"] = value
                data, _ = mime_bundle(value)
                if set(data) - {"text/plain"}:
                    runtime.publish("display_data", {"data": data, "metadata": {}, "transient": {}})
                    displayed.append(data)
                else:
                    captured.append(data.get("text/plain", "") + "\n")
    except KeyboardInterrupt:
        raise
    except FinalAnswer:
        finished = True
    except BaseException:
        failed = True
        etype, value, tb = sys.exc_info()
        # From the agent's own code on: the runtime's frames (and the
        # parser's, for a SyntaxError) would only distract the model.
        frames = traceback.extract_tb(tb)
        start = next((i for i, frame in enumerate(frames) if frame.filename == filename), len(frames))
        shown_frames = _frames_text(frames[start:])[-AGENT_TRACEBACK_FRAMES:]
        header = "Traceback (most recent call last):\n" if shown_frames else ""
        exception_lines = traceback.format_exception_only(etype, value)
        if etype is BlockTimedOut:
            exception_lines = [
                "BlockTimedOut: the block ran longer than %g s and was stopped (a loop that does not end, or "
                "too much work at once)\n" % seconds
            ]
        scopes = _agent_scopes(tb, filename, namespace)
        if exception_lines:
            agent_frames = [frame for frame in frames if frame.filename == filename]
            exception_lines[-1] = close_names.error_line_with_suggestion(
                exception_lines[-1],
                value,
                scopes,
                agent_frames[-1].line if agent_frames else None,
                code,
            )
        told = header + "".join(shown_frames) + "".join(exception_lines)
        # The model reads "<agent>", whatever file a debugger needed.
        error = told.replace('"%s"' % filename, '"<agent>"')
        help_for_model = call_help.help_for_failure(tb, filename, scopes, code, value)
        captured.append(error)
    finally:
        namespace["__builtins__"] = saved_builtins
        runtime._after_code()
        sys.stdout, sys.stderr, runtime._agent_displays, tools.confirm_write, tools.file_journal = saved
        watch.__exit__(None, None, None)
    try:
        changes = namespace_changes(before, namespace, tree, prints)
    except Exception:  # a value whose description fails says nothing of the run
        changes = []
    if journal is not None:
        journal.after_block(before, namespace)
    if originals is not None:
        for name, value in before.items():
            if name in namespace and namespace[name] is not value and not name.startswith("_"):
                originals.setdefault(name, value)
    shown = "".join(captured)
    said, images = _displayed_for_the_model(displayed, watch)
    told = shown
    if help_for_model:
        # Before the traceback: the error stays the last line the model reads.
        told = "".join(captured[:-1]) + help_for_model + captured[-1]
    told += "".join("[displayed: %s]\n" % d for d in said)
    return {
        "output": clip_middle(told, AGENT_OUTPUT_LIMIT),
        "shown": clip_middle(shown, AGENT_OUTPUT_LIMIT),
        "rich_outputs": len(displayed),
        "images": images,
        "failed": failed,
        "error": error,
        "finished": finished,
        "changes": changes,
    }


def _displayed_for_the_model(displayed, watch):
    """What the model is told of each output the code displayed (a figure
    described in words), and the figures' images (downscaled PNGs, base64;
    at most ``IMAGES_PER_BLOCK``)."""
    said, images, figures = [], [], 0
    for data in displayed:
        text = data.get("text/plain", ", ".join(sorted(data)))
        png = data.get("image/png")
        if png is None:
            said.append(text)
            continue
        description = watch.describe(figures)
        figures += 1
        said.append("figure: %s" % description if description else text)
        if len(images) < IMAGES_PER_BLOCK:
            images.append(downscaled_png(png if isinstance(png, str) else base64.b64encode(png).decode("ascii")))
    return said, images


# Where installed packages and the standard library live: their frames in a
# traceback of agent code are summed up in a line (the model fixes its own
# code, and pandas' internals only send a small model after the wrong cause).
# Longest first: a package directory may lie inside the standard library's.
_LIBRARY_DIRS = tuple(sorted({
    os.path.join(path, "") for path in (sysconfig.get_paths().get(key) for key in ("stdlib", "purelib", "platlib"))
    if path
}, key=len, reverse=True))  # fmt: skip


def _library_of(filename):
    """The package (or ``the standard library``) a frame's file belongs to,
    or None for the agent's and the user's own code."""
    for root in _LIBRARY_DIRS:
        if filename.startswith(root):
            rest = filename[len(root):].split(os.sep)
            if "site-packages" in root or "dist-packages" in root:
                return rest[0].split(".")[0] or "a package"
            return "the standard library"
    return None


def _frames_text(frames):
    """The traceback's frames as text, each run of library frames as one
    line saying where they are."""
    lines, run = [], []

    def close_run():
        if run:
            places = ", ".join(dict.fromkeys(run))
            lines.append("  ... %d frame%s in %s\n" % (len(run), "" if len(run) == 1 else "s", places))
            run.clear()

    for frame in frames:
        library = _library_of(frame.filename)
        if library is not None:
            run.append(library)
            continue
        close_run()
        lines.extend(traceback.format_list([frame]))
    close_run()
    return lines


def _agent_scopes(tb, filename, namespace):
    """The variables the failed agent code could see: its own frames'
    (innermost first), then the namespace."""
    scopes = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename and tb.tb_frame.f_locals is not namespace:
            scopes.insert(0, tb.tb_frame.f_locals)
        tb = tb.tb_next
    return scopes + [namespace]


def _not_run(why, refused):
    """The result of a block that did not run, for ``why``: ``refused``
    when the guard or the user stopped it, else a mistake in the code."""
    return {"output": why, "shown": why, "rich_outputs": 0, "failed": True, "error": why, "finished": False,
            "changes": [], "refused": refused}


def _name_in_use(code, namespace):
    """Why `code` must not run where it would bind a name that holds data
    to a function, class or module: the data would be gone (a model's
    ``def shift(...)`` over the user's list ``shift``), and the code mostly
    meant another name. None when it binds none."""
    tree = _syntax_tree(code)
    replaced = None if tree is None else data_replaced_by_code(tree, namespace)
    if replaced is None:
        return None
    statement, name = replaced
    return (
        "NameInUse: `%s` would replace `%s`, which holds data (%s), so nothing ran: give what it defines "
        "another name\n" % (statement, name, describe_briefly(namespace[name]))
    )


def _syntax_tree(code):
    """The syntax tree of `code`, or None where it has none (the error is
    reported when it is compiled to run)."""
    try:
        return compile(code, "<agent>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, ValueError):
        return None


def _run_compiled(runtime, compiled, namespace):
    """Runs a compiled piece of agent code; code with top-level ``await``
    gives a coroutine, run to its end on this thread's event loop."""
    result = eval(compiled, namespace)
    if compiled.co_flags & inspect.CO_COROUTINE:
        result = runtime._run_coroutine(result)
    return result


def _agent_code_file(runtime, code):
    """The name agent code compiles under: "<agent>", or, once the
    debugger has started (debugpy is loaded), the file a cell with this
    code would have, written out, so a breakpoint set in it (a frontend
    finds it with dumpCell) stops the agent's code and the debugger shows
    its source, as for a cell."""
    if "debugpy" not in sys.modules:
        return "<agent>"
    return runtime.bridge.write_cell_file(code) or "<agent>"
