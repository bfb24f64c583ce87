"""Running a cell through a jupyter_client KernelClient and reading what it
printed: shared by the wheel's tests."""

from __future__ import annotations

import time

# Seconds a cell and its reply may take.
TIMEOUT = 60


def execute(kc, code: str, timeout: float = TIMEOUT) -> tuple[dict, list[dict]]:
    """Runs `code`; its reply and the IOPub messages up to its idle."""
    msg_id = kc.execute(code, allow_stdin=False)
    messages = []
    deadline = time.monotonic() + timeout
    while True:
        message = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(message)
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            break
    reply = kc.get_shell_msg(timeout=timeout)
    assert reply["parent_header"]["msg_id"] == msg_id
    return reply["content"], messages


def text_of(messages: list[dict]) -> str:
    """What the cell printed and its result, as one text."""
    parts = []
    for m in messages:
        if m["msg_type"] == "stream":
            parts.append(m["content"]["text"])
        elif m["msg_type"] == "execute_result":
            parts.append(m["content"]["data"]["text/plain"])
    return "".join(parts)
