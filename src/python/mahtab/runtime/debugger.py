"""What the kernel's debugger asks of Python: starting debugpy, the user's
variables as bounded reprs, a variable's rich view, the loaded modules, the
kernel's own files (which the debugger steps over), and pdb made to end on
an interrupt.
"""

import json
import os
import sys
import time
import uuid

from mahtab.runtime.display import mime_bundle
from mahtab.runtime.messages import dumps
from mahtab.runtime.reprs import short_repr


def loaded_source_files():
    """Source files of the modules loaded now, and the kernel's own: taken
    when the runtime has started, they are the kernel's Python, which the
    debugger steps over and leaves out of call stacks."""
    files = [getattr(module, "__file__", None) for module in list(sys.modules.values())]
    return [path for path in files if isinstance(path, str)] + own_source_files()


def own_source_files():
    """The files of this package, loaded or not (the agent's modules load on
    first use). The kernel loads them from memory, so they have names, not
    paths: the debugger matches those as patterns."""
    names = getattr(__loader__, "file_names", None)
    if names is not None:
        return ["**/" + name for name in names()]
    folder = os.path.dirname(os.path.abspath(__file__))
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".py"))


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
                shown = short_repr(value, 500)
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


class DebuggerRequests:
    """The runtime's side of the kernel's debugger: starting debugpy's listener
    and the calls the kernel makes by name. Needs the runtime's ``user_ns``
    and ``kernel_files`` (and ``shell``, if it has one)."""

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
