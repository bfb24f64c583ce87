"""The table of requests the runtime serves (``mahtab.protocol``)."""

import json

import pytest

from mahtab import protocol


class Recorder:
    """A runtime that records what it is asked."""

    def __init__(self):
        self.calls = []

    def do_complete(self, content):
        self.calls.append(("complete", content))
        return {"matches": ["x"]}

    def do_inspect(self, content):
        return {"status": "error", "found": False}

    def do_comm_msg(self, msg):
        self.calls.append(("comm_msg", msg))


def test_a_request_is_served_by_its_method_and_the_reply_says_ok():
    runtime = Recorder()
    reply = json.loads(protocol.serve(runtime, "complete_request", '{"code": "x"}'))
    assert reply == {"matches": ["x"], "status": "ok"}
    assert runtime.calls == [("complete", {"code": "x"})]
    assert json.loads(protocol.serve(runtime, "inspect_request", "{}"))["status"] == "error"


def test_a_comm_message_gets_the_whole_message_and_no_reply():
    runtime = Recorder()
    assert protocol.serve(runtime, "comm_msg", '{"comm_id": "c"}', [b"\x00"]) == "{}"
    assert runtime.calls == [("comm_msg", {"content": {"comm_id": "c"}, "buffers": [b"\x00"], "metadata": {}})]


@pytest.mark.parametrize("msg_type", ["execute_request", "kernel_info_request", "complete", "do_complete", "bogus"])
def test_an_unknown_message_type_is_refused_by_name(msg_type):
    runtime = Recorder()
    with pytest.raises(ValueError, match="^unsupported request " + msg_type + "$"):
        protocol.serve(runtime, msg_type, "{}")
    assert runtime.calls == []


def test_every_handler_in_the_table_exists_on_both_runtimes():
    pytest.importorskip("IPython")
    from mahtab.ipython_runtime import IPythonRuntime
    from mahtab.plain_runtime import Runtime

    for runtime in (Runtime, IPythonRuntime):
        for method in [*protocol.REPLIED.values(), *protocol.COMM_MESSAGES.values()]:
            assert callable(getattr(runtime, method, None)), (runtime.__name__, method)
