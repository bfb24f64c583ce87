"""How the runtime serves the requests the kernel names by method
(``mahtab.runtime.protocol``)."""

import json
import re
from pathlib import Path

import pytest

from mahtab.runtime import protocol


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

    def shutdown(self):
        self.calls.append(("shutdown", None))


def test_a_request_is_served_by_its_method_and_the_reply_says_ok():
    runtime = Recorder()
    reply = json.loads(protocol.serve(runtime, "do_complete", True, '{"code": "x"}'))
    assert reply == {"matches": ["x"], "status": "ok"}
    assert runtime.calls == [("complete", {"code": "x"})]
    assert json.loads(protocol.serve(runtime, "do_inspect", True, "{}"))["status"] == "error"


def test_a_comm_message_gets_the_whole_message_and_no_reply():
    runtime = Recorder()
    assert protocol.serve(runtime, "do_comm_msg", False, '{"comm_id": "c"}', [b"\x00"]) == "{}"
    assert runtime.calls == [("comm_msg", {"content": {"comm_id": "c"}, "buffers": [b"\x00"], "metadata": {}})]


@pytest.mark.parametrize("method", ["shutdown", "do_bogus", "complete_request", "__init__", ""])
def test_a_method_that_serves_no_request_is_refused_by_name(method):
    runtime = Recorder()
    with pytest.raises(ValueError, match="^no runtime method serves " + method + "$"):
        protocol.serve(runtime, method, True, "{}")
    assert runtime.calls == []


def test_every_method_the_kernel_names_exists_on_both_runtimes():
    pytest.importorskip("IPython")
    from mahtab.runtime.ipython import IPythonRuntime
    from mahtab.runtime.plain import Runtime

    declared = Path(__file__).resolve().parents[3] / "src" / "python" / "runtime_request.rs"
    methods = set(re.findall(r'"(do_\w+)"', declared.read_text()))
    assert "do_complete" in methods and "do_comm_open" in methods, methods
    for runtime in (Runtime, IPythonRuntime):
        for method in methods:
            assert callable(getattr(runtime, method, None)), (runtime.__name__, method)
