"""Rich output: the mime bundle of a value (as IPython's formatter makes
it), and ``display()``, ``update_display()``, ``clear_output()`` and the
displayhook of the plain-Python runtime (the IPython runtime has IPython's).
"""

import builtins
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


class PlainDisplay:
    """The display functions of the plain-Python runtime, which the runtime
    puts in the user's namespace, and its ``sys.displayhook``. Needs the
    runtime's ``publish``, ``execution_count`` and ``_agent_displays``."""

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
                self._agent_displays.append(data)
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
