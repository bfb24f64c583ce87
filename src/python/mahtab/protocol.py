"""The requests the kernel hands to the Python runtime, and which of the
runtime's methods serves each: one table, so an unknown message type is
refused by name rather than looked up.
"""

import json

from mahtab.messages import dumps

# Requests answered with a reply: the method gets the request's content and
# returns the reply's (``status`` is "ok" unless it says otherwise).
REPLIED = {
    "is_complete_request": "do_is_complete",
    "complete_request": "do_complete",
    "inspect_request": "do_inspect",
    "history_request": "do_history",
    "comm_info_request": "do_comm_info",
    "debugpy_listen_request": "do_debugpy_listen",
}

# Comm messages: the method gets the whole message (content, buffers,
# metadata); no reply is due.
COMM_MESSAGES = {
    "comm_open": "do_comm_open",
    "comm_msg": "do_comm_msg",
    "comm_close": "do_comm_close",
}


def serve(runtime, msg_type, content_json, buffers=()):
    """Serves a shell message with ``runtime``; returns the reply content as
    JSON text (``{}`` for a comm message). Raises ValueError for a message
    type not in the tables."""
    content = json.loads(content_json)
    if msg_type in COMM_MESSAGES:
        handler = getattr(runtime, COMM_MESSAGES[msg_type])
        handler({"content": content, "buffers": list(buffers), "metadata": {}})
        return "{}"
    if msg_type not in REPLIED:
        raise ValueError("unsupported request " + msg_type)
    reply = getattr(runtime, REPLIED[msg_type])(content)
    reply.setdefault("status", "ok")
    return dumps(reply)
