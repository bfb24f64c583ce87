"""mahtab's Python side: runs cells in the user's namespace and renders output.

The Rust kernel loads this file as the module ``_mahtab_runtime`` on the
interpreter thread and creates one :class:`Runtime` with a bridge object whose
methods send output back to Rust:

- ``bridge.write(name, text)`` buffers stream text (``"stdout"``/``"stderr"``);
- ``bridge.flush()`` sends buffered stream text now;
- ``bridge.publish(msg_type, content_json)`` flushes streams, then publishes an
  IOPub message (display_data, execute_result, clear_output, ...).

Every entry point called from Rust returns JSON text, so the Rust side never
walks Python objects.
"""

import ast
import base64
import builtins
import codeop
import io
import json
import linecache
import sys
import traceback
import types

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


class KernelStream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr``: text goes to the kernel's stream buffer."""

    def __init__(self, bridge, name):
        super().__init__()
        self._bridge = bridge
        self._name = name

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

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        self._bridge.write(self._name, text)
        return len(text)

    def flush(self):
        self._bridge.flush()


class ExitAutocall:
    """``exit`` / ``quit`` in the kernel: ask the frontend to end the session.

    Typing ``exit`` alone works too (as in IPython): the runtime calls it when
    it is the value of a cell's last expression.
    """

    def __init__(self, runtime):
        self._runtime = runtime

    def __call__(self, keep_kernel=False):
        self._runtime.payloads.append({"source": "ask_exit", "keepkernel": bool(keep_kernel)})

    def __repr__(self):
        return "Use exit() or quit() to end the session."


def _json_safe(value):
    """Makes a ``_repr_*_`` result JSON-serialisable (bytes become base64)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


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
            data.update({k: _json_safe(v) for k, v in result.items()})
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
        data[mime] = _json_safe(result)
    if "text/plain" not in data:
        try:
            data["text/plain"] = repr(obj)
        except Exception as exc:
            data["text/plain"] = "<repr failed: %s: %s>" % (type(exc).__name__, exc)
    return data, metadata


def _dumps(value):
    return json.dumps(value, default=repr)


class Runtime:
    """The state of one kernel session: the user namespace and cell runner."""

    def __init__(self, bridge):
        self.bridge = bridge
        self.payloads = []
        self.execution_count = 0
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        self.user_ns = main.__dict__
        self.user_ns["exit"] = self.user_ns["quit"] = ExitAutocall(self)
        self.user_ns["display"] = self.display
        sys.stdout = KernelStream(bridge, "stdout")
        sys.stderr = KernelStream(bridge, "stderr")
        sys.displayhook = self.displayhook
        builtins.input = _input_unavailable
        # Like `python -m ipykernel_launcher`: modules next to the notebook import.
        if "" not in sys.path:
            sys.path.insert(0, "")
        # Python's own REPL sets these; code that prints prompts expects them.
        sys.ps1, sys.ps2 = "In : ", "...: "

    # -- output ------------------------------------------------------------

    def publish(self, msg_type, content):
        self.bridge.publish(msg_type, _dumps(content))

    def display(self, *objs, display_id=None, update=False, metadata=None, raw=False):
        """Shows each object as ``display_data`` (or updates a shown one)."""
        transient = {} if display_id is None else {"display_id": str(display_id)}
        for obj in objs:
            if raw:
                data, md = dict(obj), {}
            else:
                data, md = mime_bundle(obj)
            md.update(metadata or {})
            msg_type = "update_display_data" if update else "display_data"
            self.publish(msg_type, {"data": data, "metadata": md, "transient": transient})

    def displayhook(self, value):
        """``sys.displayhook``: the value of a cell's last expression."""
        if value is None:
            return
        builtins._ = value
        data, metadata = mime_bundle(value)
        self.publish(
            "execute_result",
            {"execution_count": self.execution_count, "data": data, "metadata": metadata},
        )

    # -- execution ---------------------------------------------------------

    def execute(self, code, execution_count, silent, user_expressions_json):
        """Runs one cell; returns the execute_reply fields as JSON text."""
        self.payloads = []
        self.execution_count = execution_count
        try:
            self._run_cell(code, execution_count, silent)
        except BaseException:
            reply = {"status": "error", **self._error_fields(sys.exc_info())}
            reply["user_expressions"] = {}
        else:
            reply = {"status": "ok"}
            reply["user_expressions"] = self._user_expressions(json.loads(user_expressions_json))
        reply["payload"] = self.payloads
        return _dumps(reply)

    def _run_cell(self, code, execution_count, silent):
        filename = "<cell %d>" % execution_count if execution_count else "<cell>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename=filename, mode="exec")
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

    def _error_fields(self, exc_info):
        """ename/evalue/traceback for an exception, without the runtime's frames."""
        etype, value, tb = exc_info
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        lines = traceback.format_exception(etype, value, tb)
        return {
            "ename": etype.__name__,
            "evalue": str(value),
            "traceback": [line.rstrip("\n") for line in lines],
        }

    def _user_expressions(self, expressions):
        results = {}
        for name, source in expressions.items():
            try:
                value = eval(source, self.user_ns)
            except BaseException:
                results[name] = {"status": "error", **self._error_fields(sys.exc_info())}
            else:
                data, metadata = mime_bundle(value)
                results[name] = {"status": "ok", "data": data, "metadata": metadata}
        return results

    # -- code analysis -------------------------------------------------------

    def is_complete(self, code):
        """is_complete_reply content as JSON text, by IPython's rules: code
        that compiles is still incomplete while its last line is inside an
        indented block, until a blank line ends it."""
        try:
            compiled = codeop.compile_command(code, "<input>", "exec")
        except (SyntaxError, OverflowError, ValueError):
            return _dumps({"status": "invalid"})
        lines = code.split("\n")
        last = lines[-1] if lines[-1].strip() or len(lines) == 1 else None
        if compiled is not None and (last is None or not last[:1].isspace()):
            return _dumps({"status": "complete"})
        if last is None:
            last = next((line for line in reversed(lines) if line.strip()), "")
        indent = last[: len(last) - len(last.lstrip())]
        if last.rstrip().endswith(":"):
            indent += "    "
        return _dumps({"status": "incomplete", "indent": indent})


def _input_unavailable(prompt=""):
    raise RuntimeError("input() is not available in this kernel yet: the frontend's stdin channel is not wired up")
