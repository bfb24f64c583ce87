"""The runtime with IPython: cells, completion, inspection and history
through the kernel's IPython shell (magics, ``obj?``, IPython tracebacks,
``In``/``Out``), and what libraries read of
``get_ipython().kernel``. Importing it fails with ImportError when IPython
is not installed.
"""

import html
import json
import logging
import os
import sys
import types

from IPython.core.completer import provisionalcompleter
from IPython.utils.tokenutil import token_at_cursor

from mahtab.runtime.completion import code_and_cursor, imported_module_attributes
from mahtab.runtime.debugger import loaded_source_files
from mahtab.runtime.import_hooks import patch_on_import
from mahtab.runtime.ipython_shell import (
    FastTransformerManager,
    KernelDisplayPublisher,
    ZMQInteractiveShell,
    run_on_this_threads_loop,
)
from mahtab.runtime.messages import dumps
from mahtab.runtime.paths import history_file
from mahtab.runtime.base import BaseRuntime


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


def _shell_config(connection_file):
    from traitlets.config import Config

    config = Config()
    # What a kernel started by ipykernel's IPKernelApp has, and what
    # libraries look for (`"IPKernelApp" in get_ipython().config`).
    config.IPKernelApp.connection_file = connection_file or ""
    history = history_file()
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
        self._add_magics(self.shell)
        self.shell.register_magic_function(self._connect_info, "line", "connect_info")
        self.kernel_files = loaded_source_files()

    def set_next_input(self, text):
        """Asks the frontend to put ``text`` in a new cell below this one."""
        self.shell.set_next_input(text, replace=False)

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
            "A coding agent can work in it over MCP with the server command:\n"
            "    mahtab mcp --existing %s\n\n"
            "The file holds the key that signs the kernel's messages: keep it private." % (path, path, path)
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

    def _as_python(self, code):
        # The static transformations only (`!cmd`, `%magic`, `%%magic`), not
        # the dynamic ones of one-line cells: automagic would take the
        # toolbox's `edit(...)` for IPython's %edit.
        return self.shell.input_transformer_manager.transform_cell(code)

    def _run_coroutine(self, coroutine):
        # The loop cells with top-level await use on this thread.
        return run_on_this_threads_loop(coroutine)

    def _after_code(self):
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
        code, cursor = code_and_cursor(content)
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
        code, cursor = code_and_cursor(content)
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
