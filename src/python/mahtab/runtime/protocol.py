"""How the runtime serves the requests the kernel hands it besides cells.
The kernel names the runtime method that serves each (its
``RuntimeRequest``, the one list of them) and whether a reply is due, so no
table of message types is kept here.
"""

import json

from mahtab.runtime.messages import dumps


def serve(runtime, method, replies, content_json, buffers=()):
    """Serves a request with ``runtime``'s ``method``; returns the reply
    content as JSON text. A request answered with a reply (``replies``)
    gets its content and returns the reply's (``status`` is "ok" unless it
    says otherwise); a comm message gets the whole message (content,
    buffers, metadata) and ``{}`` is returned. Raises ValueError for a
    method that serves no request."""
    handler = getattr(runtime, method, None) if method.startswith("do_") else None
    if not callable(handler):
        raise ValueError("no runtime method serves " + method)
    content = json.loads(content_json)
    if not replies:
        handler({"content": content, "buffers": list(buffers), "metadata": {}})
        return "{}"
    reply = handler(content)
    reply.setdefault("status", "ok")
    return dumps(reply)
