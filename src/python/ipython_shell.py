"""The IPython runtime: cells run through an IPython ``InteractiveShell``
whose display publisher, displayhook, pager and tracebacks publish to the
kernel, as ipykernel's shell does. Loaded as ``_mahtab_ipython``; importing it
fails with ImportError when IPython is not installed.
"""

import contextlib
import html
import json
import logging
import os
import re
import sys
import threading
import types

from IPython.core import page
from IPython.core.autocall import ZMQExitAutocall
from IPython.core.completer import provisionalcompleter
from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.inputtransformer2 import TransformerManager
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.payload import PayloadManager
from IPython.utils.tokenutil import token_at_cursor
from traitlets import Any, Instance, Type, default

from _mahtab_runtime import (
    BaseRuntime,
    dumps,
    imported_module_attributes,
    jupyter_data_dir,
    loaded_source_files,
    patch_on_import,
    reset_thread_parent,
    set_thread_parent,
    thread_parent,
)


class KernelDisplayPublisher(DisplayPublisher):
    """``display()`` and ``clear_output()`` become IOPub messages."""

    runtime = None

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        content = {"data": data, "metadata": metadata or {}, "transient": transient or {}}
        noted = getattr(self.runtime, "_agent_displays", None)
        if noted is not None:
            noted.append(data.get("text/plain", ", ".join(sorted(data))))
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
    import asyncio

    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:  # no loop set on this thread yet
        loop = None
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    return loop.run_until_complete(coro)


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


class KernelView:
    """``get_ipython().kernel``: the parts of ipykernel's kernel object that
    libraries read (ipywidgets, tqdm, output capture, "which kernel is this"
    checks). The kernel itself is Rust; this answers for it."""

    implementation = "mahtab"

    def __init__(self, shell, runtime):
        self.shell = shell
        self._runtime = runtime
        self.log = logging.getLogger("mahtab")

    @property
    def comm_manager(self):
        return self._runtime.comm_manager

    @property
    def user_ns(self):
        return self.shell.user_ns

    @property
    def execution_count(self):
        return self.shell.execution_count

    @property
    def connection_file(self):
        return self._runtime.bridge.connection_file

    def get_parent(self, channel="shell"):
        if channel == "control":
            return {"header": json.loads(self._runtime.bridge.parent_header("control"))}
        return self.shell.get_parent()

    @property
    def _parent_ident(self):
        # Private in ipykernel, but read by some extensions: the ROUTER
        # identities of the requests last served on each channel.
        bridge = self._runtime.bridge
        return {"shell": bridge.parent_identities("shell"), "control": bridge.parent_identities("control")}

    def raw_input(self, prompt=""):
        return self._runtime.input(prompt)

    def getpass(self, prompt="Password: ", stream=None):
        return self._runtime.getpass(prompt)


def _take_the_notebook_shells_name():
    """Makes the idioms that tell a notebook kernel from a terminal see one:
    the shell's class is ``ipykernel.zmqshell.ZMQInteractiveShell`` by name
    (rich and plotly compare both), and that module is imported (tqdm.auto
    looks in ``sys.modules``). It holds this kernel's shell, so
    ``from ipykernel.zmqshell import ZMQInteractiveShell`` and an
    ``isinstance`` check agree too; the rest of ipykernel, if installed,
    imports as usual. Not done when ipykernel's own shell is already
    loaded."""
    if "ipykernel.zmqshell" in sys.modules:
        return
    module = types.ModuleType("ipykernel.zmqshell", "The shell of this kernel (mahtab), under ipykernel's name.")
    module.ZMQInteractiveShell = ZMQInteractiveShell
    module.ZMQDisplayPublisher = KernelDisplayPublisher
    ZMQInteractiveShell.__module__ = module.__name__
    sys.modules[module.__name__] = module


HISTORY_BATCH = 50


def _history_file():
    """Where cell history persists across restarts: a small SQLite file in
    the Jupyter data directory (IPython's own location if that is unusable)."""
    folder = os.path.join(jupyter_data_dir(), "mahtab")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return os.path.join(folder, "history.sqlite")


def _shell_config(connection_file):
    from traitlets.config import Config

    config = Config()
    # What a kernel started by ipykernel's IPKernelApp has, and what
    # libraries look for (`"IPKernelApp" in get_ipython().config`).
    config.IPKernelApp.connection_file = connection_file or ""
    history = _history_file()
    if history:
        config.HistoryManager.hist_file = history
    # Written in batches rather than after every cell: each write wakes
    # IPython's history thread, whose GIL traffic costs every cell about a
    # millisecond. Pending entries are written when history is read and when
    # the kernel shuts down.
    config.HistoryManager.db_cache_size = HISTORY_BATCH
    return config


def _speed_up_introspection():
    """Two IPython costs a kernel pays on every request, removed.

    - ``import x`` completion rescans every directory on sys.path each time;
      the scan is cached until sys.path or one of its directories changes
      (installing a package changes its site-packages directory).
    - Inspection renders HTML with pygments even when, as here (and in
      ipykernel), the HTML pager is off and the HTML is thrown away.
    """
    from IPython.core import completerlib, oinspect

    scan = completerlib.get_root_modules
    cache = {}

    def root_modules():
        key = []
        for path in sys.path:
            try:
                key.append((path, os.stat(path or ".").st_mtime_ns))
            except OSError:
                key.append((path, None))
        key = tuple(key)
        if cache.get("key") != key:
            cache["modules"] = scan()
            cache["key"] = key
        return cache["modules"]

    completerlib.get_root_modules = root_modules
    oinspect.pylight = html.escape


_ASK_HELP = """see the README's %%ask section.

    %%ask [--model MODEL] [--provider anthropic|openai|claude] [--max-turns N]
          [--graph default|analyst|planner|triage] [--informer] [--no-exec] [--once] [--confirm] [--new]
          [--allow shell,files,network,install] [--trace]
    <your request>

    %ask_config [--model M] [--provider P] [--max-turns N] [--graph G] [--informer] [--allow KINDS] | --reset

    %ask_graph [default|analyst|planner|triage|rlm]
"""


def _use_ipython_debugger(debugger):
    """As ipykernel: pdb.set_trace() and breakpoint() give IPython's debugger
    (ipdb> prompt, colours, magics), in the form an interrupt ends rather than
    the stock one that prompts again."""
    import pdb

    debugger.Pdb = debugger.InterruptiblePdb
    pdb.Pdb = debugger.InterruptiblePdb
    pdb.set_trace = debugger.set_trace


class IPythonRuntime(BaseRuntime):
    """Cells, completion, inspection and history through IPython."""

    def __init__(self, bridge):
        super().__init__(bridge)
        # As ipykernel does: figures drawn in a cell show up when it ends.
        os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        _take_the_notebook_shells_name()
        self.shell = ZMQInteractiveShell.instance(config=_shell_config(bridge.connection_file))
        self.shell.kernel = KernelView(self.shell, self)
        self.shell.input_transformer_manager = FastTransformerManager()
        self.shell.loop_runner = run_on_this_threads_loop
        self.shell.runtime = self
        self.shell.display_pub.runtime = self
        self.shell.displayhook.runtime = self
        # Jedi is slow, so it is only the last resort (see do_complete).
        self.shell.Completer.use_jedi = False
        _speed_up_introspection()
        patch_on_import("IPython.core.debugger", _use_ipython_debugger)
        self.user_ns = self.shell.user_ns
        # Cells compile under the file names Jupyter's debugger frontends
        # compute from their text (see cell_files.rs): a breakpoint set in the
        # notebook then names the code that runs. Tracebacks still say
        # "Cell In[n]" (IPython maps the name to the cell's number).
        self.shell.compile.get_code_name = lambda raw_code, transformed_code, number: bridge.cell_file_name(raw_code)
        self._register_agent_magics()
        self.shell.register_magic_function(self._connect_info, "line", "connect_info")
        self.kernel_files = loaded_source_files()

    def _register_agent_magics(self):
        """``%%ask`` and ``%ask_config`` are magics here, as IPython users
        expect (``%%ask?`` shows their help); the agent parses them."""

        def ask(line, cell):
            self.ask_cell("%%ask " + line + "\n" + cell)

        def ask_config(line):
            self.ask_cell("%ask_config " + line)

        def ask_graph(line):
            self.ask_cell("%ask_graph " + line)

        ask.__doc__ = "Sends the cell to the agent: " + _ASK_HELP
        ask_config.__doc__ = "Sets or shows the defaults of %%ask: " + _ASK_HELP
        ask_graph.__doc__ = "Draws an agent graph (Mermaid), or lists them: " + _ASK_HELP
        self.shell.register_magic_function(ask, "cell", "ask")
        self.shell.register_magic_function(ask_config, "line", "ask_config")
        self.shell.register_magic_function(ask_graph, "line", "ask_graph")

    def _connect_info(self, line=""):
        """Shows how another client (a console, say) can join this kernel."""
        path = self.bridge.connection_file
        if not path:
            print("The kernel's connection file is not known.")
            return
        # Only the file's name: its contents include the key that signs
        # messages, which is not output for a notebook to keep.
        print(
            "Connection file: %s\n\nAnother client can join this kernel with:\n"
            "    jupyter console --existing %s\n\n"
            "The file holds the key that signs the kernel's messages: keep it private." % (path, path)
        )

    def shutdown(self):
        # Writes the history entries still batched in memory.
        self.shell.history_manager.end_session()

    def _debugger(self, pdb):
        debugger = sys.modules.get("IPython.core.debugger")
        if debugger is None:
            import IPython.core.debugger  # noqa: F401 (its import hook does the rest)
        elif hasattr(debugger, "InterruptiblePdb"):
            _use_ipython_debugger(debugger)
        # Else IPython's debugger is being imported and imported pdb: the hook
        # on its own import does the rest.

    def _agent_python(self, code):
        # The static transformations only (`!cmd`, `%magic`, `%%magic`), not
        # the dynamic ones of one-line cells: automagic would take the
        # toolbox's `edit(...)` for IPython's %edit.
        return self.shell.input_transformer_manager.transform_cell(code)

    def _run_coroutine(self, coroutine):
        # The loop cells with top-level await use on this thread.
        return run_on_this_threads_loop(coroutine)

    def _agent_code_finished(self):
        # What IPython does after each cell: the inline backend shows the
        # figures drawn without plt.show() (in this cell, not the user's next).
        self.shell.events.trigger("post_execute")

    def _execute(self, code, execution_count, silent, store_history, user_expressions_json):
        shell = self.shell
        shell.last_error = shell.displayhook_error = None
        # IPython numbers a stored cell with execution_count and then moves it
        # on; the kernel owns the count, so set it before every cell.
        shell.execution_count = execution_count if store_history else execution_count + 1
        result = shell.run_cell(code, store_history=store_history, silent=silent)
        if result.success and shell.displayhook_error is None:
            reply = {"status": "ok", "user_expressions": shell.user_expressions(json.loads(user_expressions_json))}
        elif result.success:
            reply = dict(shell.displayhook_error, status="error", user_expressions={})
        else:
            error = result.error_before_exec or result.error_in_exec
            reply = {
                "status": "error",
                "ename": type(error).__name__,
                "evalue": str(error),
                "traceback": (shell.last_error or {}).get("traceback", []),
                "user_expressions": {},
            }
            if shell.last_error is None:
                # Errors IPython does not show itself (rare) still reach the client once.
                self.publish("error", {k: reply[k] for k in ("ename", "evalue", "traceback")})
        self.note_cell(code, store_history, reply)
        reply["payload"] = shell.payload_manager.read_payload()
        shell.payload_manager.clear_payload()
        return dumps(reply)

    def do_is_complete(self, content):
        status, indent = self.shell.input_transformer_manager.check_complete(content.get("code", ""))
        reply = {"status": status}
        if status == "incomplete":
            reply["indent"] = " " * (indent or 0)
        return reply

    def do_complete(self, content):
        """Completion in three steps, fastest first: IPython's own completer
        (names, attributes of live objects, imports, paths, dict keys), then
        attributes of modules the code imports that are already loaded, and
        only when both find nothing, jedi's static analysis (slow, but it
        knows what a name assigned in the same cell will be)."""
        code, cursor = self._cursor(content)
        completions = self._completions(code, cursor)
        if not completions:
            found = imported_module_attributes(code, cursor, self.user_ns)
            if found:
                start, matches = found
                return {"matches": matches, "cursor_start": start, "cursor_end": cursor, "metadata": {}}
            completions = self._completions(code, cursor, jedi=True)
        if not completions:
            return {"matches": [], "cursor_start": cursor, "cursor_end": cursor, "metadata": {}}
        # Completions may start at different offsets; widen all to one range.
        start = min(c.start for c in completions)
        end = max(c.end for c in completions)
        matches, types = [], []
        for c in completions:
            text = code[start:c.start] + c.text + code[c.end:end]
            if text not in matches:
                matches.append(text)
                types.append({"start": start, "end": end, "text": text, "type": c.type, "signature": c.signature})
        return {
            "matches": matches,
            "cursor_start": start,
            "cursor_end": end,
            "metadata": {"_jupyter_types_experimental": types},
        }

    def _completions(self, code, cursor, jedi=False):
        completer = self.shell.Completer
        completer.use_jedi = jedi
        try:
            with provisionalcompleter():
                return list(completer.completions(code, cursor))
        except Exception:
            return []  # jedi can fail on odd code; no completion is the answer
        finally:
            completer.use_jedi = False

    def do_inspect(self, content):
        code, cursor = self._cursor(content)
        name = token_at_cursor(code, cursor)
        try:
            bundle = self.shell.object_inspect_mime(name, detail_level=int(content.get("detail_level") or 0))
        except KeyError:
            return {"found": False, "data": {}, "metadata": {}}
        if not self.shell.enable_html_pager:
            bundle.pop("text/html", None)
        return {"found": True, "data": bundle, "metadata": {}}

    def do_history(self, content):
        history = self.shell.history_manager
        raw, output = bool(content.get("raw", True)), bool(content.get("output", False))
        kind = content.get("hist_access_type")
        if kind == "tail":
            entries = history.get_tail(int(content.get("n") or 10), raw=raw, output=output, include_latest=True)
        elif kind == "range":
            entries = history.get_range(
                int(content.get("session") or 0),
                int(content.get("start") or 0),
                content.get("stop"),
                raw=raw,
                output=output,
            )
        elif kind == "search":
            entries = history.search(
                content.get("pattern") or "*",
                raw=raw,
                output=output,
                n=content.get("n"),
                unique=bool(content.get("unique", False)),
            )
        else:
            entries = []
        # IPython numbers the current session 0 in ranges; clients expect its
        # real number, the one tail and search report.
        current = history.session_number
        return {"history": [[session or current, *rest] for session, *rest in entries]}
