"""The runtime without IPython: exec the cell, show the value of its last
expression, with the kernel's own ``display()`` and introspection. A cell
that uses IPython's syntax says IPython is missing.
"""

import ast
import builtins
import json
import linecache
import sys
import types

from mahtab.runtime.debugger import loaded_source_files
from mahtab.runtime.display import PlainDisplay, mime_bundle
from mahtab.runtime.introspection import PlainIntrospection
from mahtab.runtime.messages import dumps, error_content
from mahtab.runtime.base import BaseRuntime


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


class Runtime(PlainDisplay, PlainIntrospection, BaseRuntime):
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

    def _execute(self, code, execution_count, silent, store_history, user_expressions_json):
        """Runs one cell; returns the execute_reply fields as JSON text."""
        self.payloads = []
        self.execution_count = execution_count
        self._last_output = None
        try:
            self._run_cell(code, execution_count, silent)
        except BaseException:
            error = error_content(sys.exc_info(), skip_files=_kernel_files())
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

    def set_next_input(self, text):
        """Asks the frontend to put ``text`` in a new cell below this one."""
        self.payloads.append({"source": "set_next_input", "text": text, "replace": False})

    def _run_cell(self, code, execution_count, silent):
        if self._serve_special_cell(code):
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
                error = error_content(sys.exc_info(), skip_files=_kernel_files())
                results[name] = {"status": "error", **error}
            else:
                data, metadata = mime_bundle(value)
                results[name] = {"status": "ok", "data": data, "metadata": metadata}
        return results


def _kernel_files():
    """The files of the kernel's own Python loaded now: a cell's traceback
    starts after their frames."""
    package = __name__.partition(".")[0] + "."
    modules = list(sys.modules.items())
    return {getattr(module, "__file__", None) for name, module in modules if name.startswith(package)}


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
