"""The IPython shell of the kernel: an ``InteractiveShell`` whose display
publisher, displayhook, payloads, pager and tracebacks publish to the
kernel, as ipykernel's shell does, and each of whose threads (the main
shell's and the subshells') keeps its own cell state. Importing it fails
with ImportError when IPython is not installed.
"""

import contextlib
import json
import os
import re
import sys
import threading

from IPython.core import page
from IPython.core.autocall import ZMQExitAutocall
from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.inputtransformer2 import TransformerManager
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.payload import PayloadManager
from traitlets import Any, Instance, Type, default

from mahtab.runtime.event_loop import run_on_own_loop
from mahtab.runtime.streams import reset_thread_parent, set_thread_parent, thread_parent


class KernelDisplayPublisher(DisplayPublisher):
    """``display()`` and ``clear_output()`` become IOPub messages."""

    runtime = None

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        content = {"data": data, "metadata": metadata or {}, "transient": transient or {}}
        noted = getattr(self.runtime, "_agent_displays", None)
        if noted is not None:
            noted.append(data)
        self.runtime.publish("update_display_data" if update else "display_data", content)

    def clear_output(self, wait=False):
        self.runtime.publish("clear_output", {"wait": bool(wait)})


# Exact types that have no rich representation of their own: for them only a
# formatter registered for the type (sympy's init_printing registers LaTeX for
# int and float) could add one.
_TEXT_ONLY_TYPES = frozenset({int, float, complex, bool, str, bytes, range})


class _PerThread:
    """An attribute whose value is each thread's own: one shell runs the main
    shell's cell and subshells' cells at once, and each cell's error, value
    and payloads are its own. Starts as ``default`` on every thread."""

    def __init__(self, default=None):
        self.default = default

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        return getattr(_thread_state(obj), self.name, self.default)

    def __set__(self, obj, value):
        setattr(_thread_state(obj), self.name, value)


def _thread_state(obj):
    state = obj.__dict__.get("_per_thread")
    if state is None:
        state = obj.__dict__.setdefault("_per_thread", threading.local())
    return state


class PerThreadPayloads(PayloadManager):
    """Payloads (pager text, set_next_input, exit) kept per thread, so each
    cell's reply carries its own."""

    def write_payload(self, data, single=True):
        if not isinstance(data, dict):
            raise TypeError("Each payload write must be a dict, got: %r" % data)
        payloads = self.read_payload()
        if single and "source" in data:
            for i, old in enumerate(payloads):
                if old.get("source") == data["source"]:
                    payloads[i] = data
                    return
        payloads.append(data)

    def read_payload(self):
        state = _thread_state(self)
        if not hasattr(state, "payloads"):
            state.payloads = []
        return state.payloads

    def clear_payload(self):
        _thread_state(self).payloads = []


def run_on_this_threads_loop(coro):
    """IPython's runner for a cell's top-level ``await``: on the main thread,
    IPython's one loop (which also runs the main shell's tasks between
    cells); on a subshell's thread, a loop of that thread's own, as each
    subshell has in ipykernel 7, so its cells never touch the main shell's
    loop."""
    if threading.current_thread() is threading.main_thread():
        from IPython.core.async_helpers import _asyncio_runner

        return _asyncio_runner(coro)
    return run_on_own_loop(coro)


class KernelDisplayHook(DisplayHook):
    """A cell's last value becomes ``execute_result`` (``Out[n]`` and ``_`` as usual)."""

    runtime = None
    msg = None

    def compute_format_data(self, result):
        # Asking all twelve formatters about a number takes most of a trivial
        # cell's time in Python; when none but text/plain can apply, the
        # result is the same without asking them.
        kind = type(result)
        if kind in _TEXT_ONLY_TYPES and self._only_text_applies(kind):
            data = self.shell.display_formatter.formatters["text/plain"](result)
            md = None
            if isinstance(data, tuple) and len(data) == 2:
                data, md = data
            return ({} if data is None else {"text/plain": data}), ({} if md is None else {"text/plain": md})
        return super().compute_format_data(result)

    def quiet(self):
        # A trailing semicolon silences the result; without one anywhere in
        # the cell there is nothing to tokenize.
        cell = self.shell.history_manager.input_hist_parsed[-1:]
        if cell and ";" not in cell[0]:
            return False
        return super().quiet()

    def _only_text_applies(self, kind):
        display = self.shell.display_formatter
        plain = display.formatters.get("text/plain")
        if plain is None:
            return False
        classes = kind.__mro__
        names = [(cls.__module__, cls.__name__) for cls in classes]
        others = [display.ipython_display_formatter, display.mimebundle_formatter]
        others.extend(f for f in display.formatters.values() if f is not plain)
        for formatter in others:
            # Read past traitlets' descriptors (a third of this check's time
            # otherwise); a trait not set yet means asking the slow way.
            values = formatter._trait_values
            try:
                enabled, printers, deferred = values["enabled"], values["type_printers"], values["deferred_printers"]
            except KeyError:
                enabled, printers, deferred = formatter.enabled, formatter.type_printers, formatter.deferred_printers
            if not enabled:
                continue
            if any(cls in printers for cls in classes) or any(name in deferred for name in names):
                return False
        return True

    # The value being shown, and whether one is, for each thread's cell.
    msg = _PerThread()
    _is_active = _PerThread(False)

    def start_displayhook(self):
        super().start_displayhook()
        self.msg = {"execution_count": self.prompt_count, "data": {}, "metadata": {}}

    def write_output_prompt(self):
        self.msg["execution_count"] = self.prompt_count

    def write_format_data(self, format_dict, md_dict=None):
        self.msg["data"] = format_dict
        self.msg["metadata"] = md_dict or {}

    def finish_displayhook(self):
        msg, self.msg = self.msg, None
        self._is_active = False
        if msg and msg["data"]:
            self.runtime.publish("execute_result", msg)


# Everything IPython's input transformations act on: magics, shell escapes
# and help (% ! ?), pasted prompts (>>> ... In [1]: ...:), the autocall
# escapes , ; / at the start of a line, and leading blank lines or indentation.
_MAY_TRANSFORM = re.compile(r"[%!?]|^[\s,;/]|^\s*(?:>>>|\.\.\.|In \[)|\n\s*[,;/]", re.MULTILINE)


class FastTransformerManager(TransformerManager):
    """IPython's static input transformations, skipped for cells that contain
    nothing they act on (most cells), whose tokenizing passes would return the
    cell unchanged."""

    def __init__(self):
        super().__init__()
        self._stock = self._transforms()

    def _transforms(self):
        return (tuple(self.cleanup_transforms), tuple(self.line_transforms), tuple(self.token_transformers))

    def transform_cell(self, cell):
        # Extensions may add transforms of their own; then every cell goes through.
        if _MAY_TRANSFORM.search(cell) is None and self._transforms() == self._stock:
            return cell if cell.endswith("\n") else cell + "\n"
        return super().transform_cell(cell)


class ZMQInteractiveShell(InteractiveShell):
    """An InteractiveShell wired to the kernel instead of a terminal. Named
    as ipykernel's (see ``_take_the_notebook_shells_name``): libraries decide
    whether they run in a notebook by that name."""

    displayhook_class = Type(KernelDisplayHook)
    display_pub_class = Type(KernelDisplayPublisher)
    exiter = Instance(ZMQExitAutocall)
    kernel = Any(None, allow_none=True, help="What libraries read of the kernel (KernelView).")
    keepkernel_on_exit = None
    runtime = None
    # What the cell running on each thread failed with (shown, or in showing
    # its value).
    last_error = _PerThread()
    displayhook_error = _PerThread()

    def init_payload(self):
        self.payload_manager = PerThreadPayloads(parent=self)
        self.configurables.append(self.payload_manager)

    @default("exiter")
    def _default_exiter(self):
        return ZMQExitAutocall(self)

    def init_environment(self):
        # No terminal to page in: subprocesses should print, not wait.
        os.environ.update({"TERM": "xterm-color", "CLICOLOR": "1", "PAGER": "cat", "GIT_PAGER": "cat"})

    def init_hooks(self):
        super().init_hooks()
        self.set_hook("show_in_pager", page.as_hook(self._page), 99)

    def init_virtualenv(self):
        # The kernel embeds the environment it was installed for; nothing to adjust.
        pass

    def _page(self, strng, start=0, screen_lines=0, pager_cmd=None):
        data = strng if isinstance(strng, dict) else {"text/plain": strng}
        self.payload_manager.write_payload({"source": "page", "data": data, "start": max(0, start)})

    def ask_exit(self):
        self.exit_now = not self.keepkernel_on_exit
        self.payload_manager.write_payload({"source": "ask_exit", "keepkernel": self.keepkernel_on_exit})

    def set_next_input(self, text, replace=False):
        # The client puts the text in the next cell (%load replaces the
        # cell's own); the last call of a cell wins, as in ipykernel.
        self.payload_manager.write_payload({"source": "set_next_input", "text": text, "replace": bool(replace)})

    def enable_gui(self, gui=None):
        if gui not in (None, "inline"):
            from IPython.core.error import UsageError

            raise UsageError("GUI event loop %r is not supported in this kernel" % gui)

    def should_run_async(self, raw_cell, *, transformed_cell=None, preprocessing_exc_tuple=None):
        # Only a cell with top-level await (or async for/with) runs as a
        # coroutine; IPython finds out by compiling every cell an extra time.
        code = raw_cell if transformed_cell is None else transformed_cell
        if "await" not in code and "async" not in code:
            return False
        return super().should_run_async(
            raw_cell, transformed_cell=transformed_cell, preprocessing_exc_tuple=preprocessing_exc_tuple
        )

    async def run_ast_nodes(self, *args, **kwargs):
        # The last step before the user's code: a kept interrupt lands here,
        # inside run_cell's error handling, not in an event hook.
        self.runtime.bridge.user_code_starting()
        return await super().run_ast_nodes(*args, **kwargs)

    # ipywidgets' Output widget asks the shell (and its kernel) for the
    # request being served, to capture output sent with it as parent.
    def get_parent(self):
        """The request the calling thread's output goes to: the one it chose
        with set_thread_parent, else the one being served."""
        chosen = thread_parent()
        return {"header": json.loads(chosen if chosen is not None else self.runtime.bridge.parent_header())}

    def set_parent(self, parent):
        # On the interpreter thread the kernel tracks the request being
        # served itself; another thread chooses its own (ipykernel's
        # set_parent sets the calling thread's parent too).
        if threading.current_thread() is not threading.main_thread():
            set_thread_parent(parent)

    def set_thread_parent(self, parent):
        """Output of the calling thread goes to ``parent``'s request (say,
        the cell that started the thread: ``get_parent()`` there) instead of
        the one being served. Returns a token for reset_thread_parent."""
        return set_thread_parent(parent)

    def reset_thread_parent(self, token):
        reset_thread_parent(token)

    @contextlib.contextmanager
    def _tee(self, channel):
        # IPython 9 wraps sys.stdout.write in a Python function for every cell
        # to keep a second copy of stream output in memory; it triples the
        # cost of printing. The kernel keeps no such copy.
        yield

    def showtraceback(self, exc_tuple=None, *args, **kwargs):
        # An interrupt's traceback only needs to say where the code stopped;
        # the plain form says that without the syntax highlighting that makes
        # the full form cost ~10 ms, which the user would wait for after
        # pressing stop.
        etype = (exc_tuple or sys.exc_info())[0]
        if etype is None or not issubclass(etype, KeyboardInterrupt):
            return super().showtraceback(exc_tuple, *args, **kwargs)
        mode = self.InteractiveTB.mode
        self.InteractiveTB.set_mode("Plain")
        try:
            return super().showtraceback(exc_tuple, *args, **kwargs)
        finally:
            self.InteractiveTB.set_mode(mode)

    def _format_exception_for_storage(self, exception, filename=None, running_compiled_code=False):
        # IPython formats a failed cell's traceback a second time for its
        # history; the one just shown is the same, so store that.
        if self.last_error is not None and self.last_error["evalue"] == str(exception):
            return dict(self.last_error)
        return super()._format_exception_for_storage(exception, filename, running_compiled_code)

    def _showtraceback(self, etype, evalue, stb):
        error = {"ename": etype.__name__, "evalue": str(evalue), "traceback": stb}
        self.last_error = error
        if self.displayhook.msg is not None:
            # The cell's value failed to show (its __repr__ or a _repr_*_
            # raised): the cell failed, as in ipykernel, though its code ran.
            self.displayhook_error = error
        self.runtime.publish("error", error)
