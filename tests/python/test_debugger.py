"""The Jupyter debug protocol through jupyter_client: Debug Adapter Protocol
requests in debug_request on the control channel, answered in debug_reply,
with the adapter's events as debug_event on IOPub, against debugpy in the
kernel's environment. The same tests run against ipykernel with
MAHTAB_KERNEL_NAME=python3."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import KERNEL_NAME, Kernel, kernel_with_model

CODE = "def f(a, b):\n    c = a + b\n    return c\n\nf(2, 3)"


class Debug:
    """A DAP client over the kernel's control channel."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.seq = 0

    def send(self, command: str, arguments: dict | None = None) -> str:
        self.seq += 1
        request = {"seq": self.seq, "type": "request", "command": command, "arguments": arguments or {}}
        return self.kernel.send("debug_request", request, channel="control")

    def __call__(self, command: str, arguments: dict | None = None) -> dict:
        reply = self.kernel.reply_to(self.send(command, arguments), "control")
        assert reply["msg_type"] == "debug_reply", reply
        return reply["content"]

    def event(self, name: str, after: int = 0) -> dict:
        """The first debug_event `name` among IOPub messages from index `after` on."""
        log = self.kernel.logs["iopub"]
        found = self.kernel.wait_for(
            "iopub",
            lambda m: m["msg_type"] == "debug_event" and m["content"]["event"] == name and log.index(m) >= after,
            f"the debug_event {name}",
        )
        return found["content"]


@pytest.fixture
def debug(kernel: Kernel):
    dap = Debug(kernel)
    reply = dap(
        "initialize",
        {
            "clientID": "test-client",
            "clientName": "testClient",
            "adapterID": "",
            "pathFormat": "path",
            "linesStartAt1": True,
            "columnsStartAt1": True,
            "supportsVariableType": True,
            "supportsVariablePaging": True,
            "supportsRunInTerminalRequest": True,
            "locale": "en",
        },
    )
    assert reply["success"], reply
    assert reply["body"]["supportsConfigurationDoneRequest"], reply
    assert dap("attach")["success"]
    yield dap
    dap("disconnect", {"restart": False, "terminateDebuggee": False})


def stop_in_f(kernel: Kernel, debug: Debug) -> tuple[str, dict]:
    """Runs CODE with a breakpoint in f; returns the cell's msg_id and the stopped event."""
    path = debug("dumpCell", {"code": CODE})["body"]["sourcePath"]
    placed = debug("setBreakpoints", {"breakpoints": [{"line": 2}], "source": {"path": path}, "sourceModified": False})
    assert placed["success"] and placed["body"]["breakpoints"][0]["verified"], placed
    assert debug("configurationDone")["success"]
    start = len(kernel.logs["iopub"])
    msg_id = kernel.kc.execute(CODE)
    return msg_id, debug.event("stopped", after=start)


def test_the_adapter_evaluates_in_the_kernel(debug: Debug) -> None:
    reply = debug("evaluate", {"expression": "'a' + 'b'", "context": "repl"})
    assert reply["success"] and reply["body"]["result"] == "ab", reply


def test_a_dumped_cell_is_where_the_frontend_looks_for_it(kernel: Kernel, debug: Debug) -> None:
    info = debug("debugInfo")["body"]
    assert info["isStarted"] and info["hashMethod"] == "Murmur2" and info["hashSeed"] == 0xC70F6907
    assert info["tmpFileSuffix"] == ".py" and info["richRendering"] and info["exceptionPaths"] == ["Python Exceptions"]
    dumped = debug("dumpCell", {"code": CODE})
    path = dumped["body"]["sourcePath"]
    assert path.startswith(info["tmpFilePrefix"]) and path.endswith(".py"), dumped
    assert Path(path).read_text() == CODE
    debug("setBreakpoints", {"breakpoints": [{"line": 2}], "source": {"path": path}, "sourceModified": False})
    info = debug("debugInfo")["body"]
    assert info["breakpoints"] == [{"source": path, "breakpoints": [{"line": 2}]}], info
    debug("setBreakpoints", {"breakpoints": [], "source": {"path": path}, "sourceModified": False})
    assert not any(entry["breakpoints"] for entry in debug("debugInfo")["body"]["breakpoints"])
    # The cell, once run, compiles under that very name.
    kernel.execute(CODE).assert_ok()
    shown = kernel.execute("print(f.__code__.co_filename)").assert_ok()
    assert shown.stdout == path + "\n"


def test_a_breakpoint_stops_the_cell_until_continue(kernel: Kernel, debug: Debug) -> None:
    msg_id, stopped = stop_in_f(kernel, debug)
    assert stopped["body"]["reason"] == "breakpoint", stopped
    thread = stopped["body"]["threadId"]
    assert thread in debug("debugInfo")["body"]["stoppedThreads"]

    frames = debug("stackTrace", {"threadId": thread})["body"]["stackFrames"]
    assert (frames[0]["name"], frames[0]["line"]) == ("f", 2), frames
    # The kernel's own frames are left out: the cell's are all there is.
    assert [frame["name"] for frame in frames] == ["f", "<module>"], frames
    scopes = debug("scopes", {"frameId": frames[0]["id"]})["body"]["scopes"]
    local = next(scope for scope in scopes if scope["name"] == "Locals")
    variables = debug("variables", {"variablesReference": local["variablesReference"]})["body"]["variables"]
    assert {(v["name"], v["value"], v["type"]) for v in variables} >= {("a", "2", "int"), ("b", "3", "int")}

    # Control requests are answered while the cell is stopped.
    info = kernel.reply_to(kernel.send("kernel_info_request", {}, channel="control"), "control")
    assert info["content"]["status"] == "ok"

    assert debug("next", {"threadId": thread})["success"]
    debug.event("stopped", after=len(kernel.logs["iopub"]) - 1)
    assert debug("continue", {"threadId": thread})["success"]
    reply = kernel.reply_to(msg_id)
    assert reply["content"]["status"] == "ok", reply
    if KERNEL_NAME == "mahtab":  # ipykernel keeps reporting threads it saw stopped
        assert debug("debugInfo")["body"]["stoppedThreads"] == []


def test_after_disconnect_the_kernel_runs_cells_and_can_debug_again(kernel: Kernel) -> None:
    debug = Debug(kernel)
    for _ in range(2):
        assert debug("initialize", {"clientID": "again", "adapterID": ""})["success"]
        assert debug("attach")["success"]
        assert debug("evaluate", {"expression": "6 * 7", "context": "repl"})["body"]["result"] == "42"
        assert debug("disconnect", {"restart": False, "terminateDebuggee": False})["success"]
        assert kernel.execute("print('still here')").assert_ok().stdout == "still here\n"


def test_requests_before_initialize_get_an_empty_reply(kernel: Kernel) -> None:
    assert Debug(kernel)("stackTrace", {"threadId": 1}) == {}
    assert kernel.execute("1 + 1").assert_ok().result()["text/plain"] == "2"


def test_the_debugger_is_advertised(kernel: Kernel) -> None:
    assert "debugger" in kernel.request("kernel_info")["supported_features"]


def test_variables_and_their_rich_views_outside_a_breakpoint(kernel: Kernel, debug: Debug) -> None:
    kernel.execute("text = 'Hello the world'\nclass Shown:\n    def _repr_html_(self):\n        return '<b>shown</b>'\nshown = Shown()").assert_ok()
    variables = {v["name"]: v for v in debug("inspectVariables")["body"]["variables"]}
    assert variables["text"]["value"] == "'Hello the world'" and variables["text"]["type"] == "str", variables
    assert not any(name.startswith("_") or name in ("In", "Out") for name in variables), sorted(variables)
    plain = debug("richInspectVariables", {"variableName": "text"})
    assert plain["success"] and plain["body"]["data"] == {"text/plain": "'Hello the world'"}, plain
    html = debug("richInspectVariables", {"variableName": "shown"})
    assert html["body"]["data"]["text/html"] == "<b>shown</b>", html
    assert debug("richInspectVariables", {"variableName": "not a name"})["body"] == {"data": {}, "metadata": {}}


def test_a_frames_variable_shown_rich_and_copied_to_the_globals(kernel: Kernel, debug: Debug) -> None:
    msg_id, stopped = stop_in_f(kernel, debug)
    thread = stopped["body"]["threadId"]
    frame = debug("stackTrace", {"threadId": thread})["body"]["stackFrames"][0]["id"]
    rich = debug("richInspectVariables", {"variableName": "a", "frameId": frame})
    assert rich["success"] and rich["body"]["data"] == {"text/plain": "2"}, rich
    copied = debug("copyToGlobals", {"srcVariableName": "b", "dstVariableName": "b_from_f", "srcFrameId": frame})
    assert copied["success"], copied
    assert debug("continue", {"threadId": thread})["success"]
    assert kernel.reply_to(msg_id)["content"]["status"] == "ok"
    assert kernel.execute("print(b_from_f)").assert_ok().stdout == "3\n"


def test_a_breakpoint_below_blank_lines_stops_on_its_line(kernel: Kernel, debug: Debug) -> None:
    code = "\n\n" + CODE
    path = debug("dumpCell", {"code": code})["body"]["sourcePath"]
    debug("setBreakpoints", {"breakpoints": [{"line": 7}], "source": {"path": path}, "sourceModified": False})
    debug("configurationDone")
    start = len(kernel.logs["iopub"])
    msg_id = kernel.kc.execute(code)
    thread = debug.event("stopped", after=start)["body"]["threadId"]
    top = debug("stackTrace", {"threadId": thread})["body"]["stackFrames"][0]
    assert (top["line"], top["source"]["path"]) == (7, path), top
    debug("continue", {"threadId": thread})
    assert kernel.reply_to(msg_id)["content"]["status"] == "ok"


def test_modules_and_sources_for_the_frontend(debug: Debug) -> None:
    modules = debug("modules", {"startModule": 0, "moduleCount": 5})["body"]
    assert len(modules["modules"]) >= 5 and modules["totalModules"] >= 5, modules
    if KERNEL_NAME == "mahtab":  # ipykernel looks for the paging fields beside the arguments
        assert len(modules["modules"]) == 5
    first = modules["modules"][0]
    assert first["path"].endswith(".py"), first
    source = debug("source", {"source": {"path": first["path"]}})
    assert source["success"] and source["body"]["content"] == Path(first["path"]).read_text(), source["body"].keys()
    assert not debug("source", {"source": {"path": "/no/such/file.py"}})["success"]


@pytest.mark.parametrize("how", ["interrupt", "disconnect"])
def test_a_cell_stopped_at_a_breakpoint_ends_on_interrupt_or_disconnect(kernel: Kernel, how: str) -> None:
    debug = Debug(kernel)
    assert debug("initialize", {"clientID": "stop", "adapterID": ""})["success"]
    assert debug("attach")["success"]
    msg_id, _ = stop_in_f(kernel, debug)
    if how == "interrupt":
        kernel.km.interrupt_kernel()
        reply = kernel.reply_to(msg_id)["content"]
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        debug("disconnect", {"restart": False, "terminateDebuggee": False})
    else:
        assert debug("disconnect", {"restart": False, "terminateDebuggee": False})["success"]
        assert kernel.reply_to(msg_id)["content"]["status"] == "ok"
    assert kernel.execute("print('usable')").assert_ok().stdout == "usable\n"


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")
def test_the_agents_code_stops_at_a_breakpoint_like_a_cells(tmp_path: Path) -> None:
    agent_code = "agent_total = 20\nagent_total += 22\nprint(agent_total)"
    with kernel_with_model(tmp_path, [f"Adding.\n```python\n{agent_code}\n```"]) as (kernel, _):
        debug = Debug(kernel)
        assert debug("initialize", {"clientID": "agent", "adapterID": ""})["success"]
        assert debug("attach")["success"]
        # The agent's code has the file a cell with that code would have.
        path = debug("dumpCell", {"code": agent_code})["body"]["sourcePath"]
        debug("setBreakpoints", {"breakpoints": [{"line": 2}], "source": {"path": path}, "sourceModified": False})
        start = len(kernel.logs["iopub"])
        msg_id = kernel.kc.execute("%%ask --max-turns 1\nadd twenty and twenty-two")
        thread = debug.event("stopped", after=start)["body"]["threadId"]
        top = debug("stackTrace", {"threadId": thread})["body"]["stackFrames"][0]
        assert (top["source"]["path"], top["line"]) == (path, 2), top
        assert debug("continue", {"threadId": thread})["success"]
        assert kernel.reply_to(msg_id)["content"]["status"] == "ok"
        assert kernel.execute("print(agent_total)").assert_ok().stdout == "42\n"
        debug("disconnect", {"restart": False, "terminateDebuggee": False})


def test_the_variables_panel_costs_bounded_work_for_big_and_deep_values(kernel: Kernel, debug: Debug) -> None:
    kernel.execute(
        "huge = list(range(10_000_000))\n"
        "deep = []\n"
        "for _ in range(100_000):\n"
        "    deep = [deep]\n"
        "text = 'y' * 50_000_000"
    ).assert_ok()
    variables = {v["name"]: v for v in debug("inspectVariables")["body"]["variables"]}
    # mahtab shows at most 500 characters, ipykernel (debugpy) 64 KiB.
    for name in ("huge", "deep", "text"):
        assert len(variables[name]["value"]) <= 70_000, variables[name]["value"][:200]
    assert variables["huge"]["value"].startswith("[0, 1, 2, 3"), variables["huge"]
    assert variables["text"]["value"].startswith("'yyy"), variables["text"]


@pytest.mark.skipif(KERNEL_NAME == "python3", reason="ipykernel waits on a repr that never returns")
def test_a_repr_that_never_returns_holds_up_neither_the_panel_nor_control(kernel: Kernel, debug: Debug) -> None:
    kernel.execute(
        "fine = 42\n"
        "class Stuck:\n"
        "    def __repr__(self):\n"
        "        while True:\n"
        "            pass\n"
        "stuck = Stuck()\n"
        "after = 'listed'"
    ).assert_ok()
    inspect = debug.send("inspectVariables")
    # Answered while the panel's values are being made.
    info = kernel.send("kernel_info_request", {}, channel="control")
    interrupt = kernel.send("interrupt_request", {}, channel="control")
    replies = [
        kernel.wait_for("control", lambda m: m["parent_header"].get("msg_id") in (inspect, info, interrupt), "a reply")
    ]
    assert replies[0]["parent_header"]["msg_id"] != inspect, "control waited for the variables panel"
    panel = kernel.reply_to(inspect, "control")["content"]
    assert panel["success"], panel
    values = {v["name"]: v["value"] for v in panel["body"]["variables"]}
    assert values["fine"] == "42", values
    assert values["stuck"] == "<repr took too long>", values
    assert "after" in values, values
    assert kernel.execute("print(fine)").assert_ok().stdout == "42\n"
