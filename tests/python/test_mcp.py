"""`mahtab mcp` driven by the official MCP SDK's stdio client, against a real
kernel that a jupyter_client "notebook" uses at the same time: the tools are
listed; `execute` runs in the live namespace, shows in the notebook's IOPub,
and answers while a notebook cell runs; `variables` and `inspect` answer
during both; a long cell reports progress, answers "still running", is
followed with `read_output` and stopped with `interrupt`; a failing cell
aborts nothing the notebook queued behind it; a figure comes back as a
small PNG image; `ask` runs the agent with a scripted model over
real HTTP, under the approval rules."""

from __future__ import annotations

import base64
import contextlib
import queue
import re
import struct
from pathlib import Path

import anyio
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import KERNEL_NAME, Kernel, kernel_with_model
from fake_llm import DONE

pytestmark = pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="mahtab mcp is mahtab's")

# Every call's own limit: a safety net, far above what any call here takes.
CALL_LIMIT = 60.0


def mcp_command(connection_file: str) -> dict:
    """`mahtab mcp` for the kernelspec's mahtab: the binary's, or the wheel's
    `python -m mahtab` (what comes before `kernel` in its argv)."""
    argv = KernelSpecManager().get_kernel_spec(KERNEL_NAME).argv
    start = argv[: argv.index("kernel")]
    return {"command": start[0], "args": [*start[1:], "mcp", "--existing", connection_file]}


@contextlib.asynccontextmanager
async def mcp_session(kernel: Kernel, stateless: bool = False):
    """An MCP session with `mahtab mcp` for `kernel`: initialised (protocol
    2025-11-25), or with `stateless` the newest protocol's discovery."""
    params = StdioServerParameters(**mcp_command(kernel.km.connection_file))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await (session.discover() if stateless else session.initialize())
            yield session


def run(kernel: Kernel, steps, stateless: bool = False) -> None:
    """Runs the async `steps(session)` against a fresh MCP session."""

    async def main() -> None:
        async with mcp_session(kernel, stateless) as session:
            await steps(session)

    anyio.run(main)


async def call(session: ClientSession, tool: str, progress: list[str] | None = None, **arguments) -> types.CallToolResult:
    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        if progress is not None:
            progress.append(message or "")

    return await session.call_tool(tool, arguments, read_timeout_seconds=CALL_LIMIT, progress_callback=on_progress)


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def execution_id(result: types.CallToolResult) -> int:
    return int(re.match(r"execution (\d+)", text(result)).group(1))


def test_tools_are_listed_and_execute_runs_in_the_namespace_the_notebook_sees(kernel: Kernel) -> None:
    async def steps(session: ClientSession) -> None:
        listed = await session.list_tools()
        assert {t.name for t in listed.tools} == {"execute", "ask", "read_output", "variables", "inspect", "interrupt"}
        schema = next(t for t in listed.tools if t.name == "execute").input_schema
        assert schema["required"] == ["code"], schema
        result = await call(session, "execute", code="x = 41\nprint('hi')\nx + 1")
        assert not result.is_error, text(result)
        assert re.search(r"done in [\d.]+ s\nhi\nOut\[\d+\]: 42\n$", text(result)), text(result)
        failed = await call(session, "execute", code="1/0")
        assert failed.is_error
        assert "failed after" in text(failed) and "ZeroDivisionError: division by zero" in text(failed)
        # Nobody can answer input(): it fails at once instead of hanging.
        asked = await call(session, "execute", code="input('name? ')")
        assert asked.is_error and "StdinNotImplementedError" in text(asked), text(asked)

    run(kernel, steps)
    # The notebook's client saw the server's cell, and shares its namespace.
    shown = kernel.wait_for(
        "iopub",
        lambda m: m["msg_type"] == "execute_input" and m["content"]["code"].startswith("x = 41"),
        "the MCP cell's execute_input",
    )
    assert shown["parent_header"]["session"] != kernel.kc.session.session
    assert kernel.execute("x").assert_ok().result()["text/plain"] == "41"


def test_the_newest_protocol_without_initialize_works_too(kernel: Kernel) -> None:
    async def steps(session: ClientSession) -> None:
        assert session.protocol_version == "2026-07-28"
        progress: list[str] = []
        result = await call(session, "execute", progress, code="import time\nprint('hello')\ntime.sleep(0.5)")
        assert not result.is_error and "hello" in text(result), text(result)
        assert "hello" in progress, progress

    run(kernel, steps, stateless=True)


def notebook_cell_running(kernel: Kernel, msg_id: str) -> bool:
    """Whether the notebook's cell `msg_id` has not gone idle (IOPub read so far)."""
    while True:
        try:
            kernel.logs["iopub"].append(kernel.kc.get_iopub_msg(timeout=0.05))
        except queue.Empty:
            break
    return not any(
        m["parent_header"].get("msg_id") == msg_id
        and m["msg_type"] == "status"
        and m["content"]["execution_state"] == "idle"
        for m in kernel.logs["iopub"]
    )


def test_execute_variables_and_inspect_answer_while_a_notebook_cell_runs(kernel: Kernel, tmp_path: Path) -> None:
    notebook_cell = "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.02)\nnotebook_done = True"
    msg_id = kernel.kc.execute(notebook_cell, allow_stdin=False)
    kernel.wait_for(
        "iopub", lambda m: m["msg_type"] == "execute_input" and m["parent_header"]["msg_id"] == msg_id, "the notebook cell"
    )

    async def steps(session: ClientSession) -> None:
        result = await call(session, "execute", code="y = [1, 2, 3]\nlen(y)")
        assert re.search(r"Out\[\d+\]: 3", text(result)), text(result)
        # The notebook's cell is still running: it has not gone idle.
        assert notebook_cell_running(kernel, msg_id)
        listed = text(await call(session, "variables"))
        assert "y: list len=3 = [1, 2, 3]" in listed, listed
        described = text(await call(session, "inspect", expression="y"))
        assert described.startswith("y: list, 3 items of int"), described
        missing = await call(session, "inspect", expression="nope + 1")
        assert not missing.is_error
        assert text(missing) == "cannot evaluate nope + 1: NameError: name 'nope' is not defined"

    run(kernel, steps)
    (tmp_path / "go").touch()
    kernel.finish(notebook_cell, msg_id).assert_ok()
    assert kernel.execute("(notebook_done, y)").result()["text/plain"] == "(True, [1, 2, 3])"


def test_a_long_cell_reports_progress_is_followed_and_interrupted(kernel: Kernel) -> None:
    code = "import time\nfor step in range(100000):\n    print('step', step, flush=True)\n    time.sleep(0.02)"

    async def steps(session: ClientSession) -> None:
        progress: list[str] = []
        result = await call(session, "execute", progress, code=code, wait=1)
        assert not result.is_error
        assert "still running after" in text(result), text(result)
        assert any(message.startswith("step ") for message in progress), progress
        number = execution_id(result)
        busy = await call(session, "execute", code="1 + 1")
        assert busy.is_error and f"execution {number} is still running" in text(busy)
        # The namespace answers while the cell runs.
        listed = text(await call(session, "variables"))
        assert "step: int" in listed, listed
        followed = await call(session, "read_output", execution=number, wait=0.5)
        assert "still running" in text(followed)
        assert len(text(followed)) > len(text(result))
        stopped = await call(session, "interrupt")
        assert stopped.is_error
        assert f"execution {number}" in text(stopped) and "KeyboardInterrupt" in text(stopped), text(stopped)
        nothing = await call(session, "interrupt")
        assert text(nothing) == "nothing started here is running"
        after = await call(session, "execute", code="step > 0")
        assert re.search(r"Out\[\d+\]: True", text(after)), text(after)

    run(kernel, steps)


# Each blocks in one C call: the interrupt must end the call itself, not
# wait for the next bytecode. With the main shell idle the server's cell runs
# there, where the signal also ends a read, not only a sleep.
BLOCKING_CELLS = {
    "sleep": "import time\ntime.sleep(60)",
    "socket": "import socket\nleft, right = socket.socketpair()\nleft.recv(1)",
}


@pytest.mark.parametrize("blocked", sorted(BLOCKING_CELLS))
def test_interrupt_ends_a_cell_blocked_in_one_call(kernel: Kernel, blocked: str) -> None:
    async def steps(session: ClientSession) -> None:
        result = await call(session, "execute", code=BLOCKING_CELLS[blocked], wait=0.5)
        assert "still running after" in text(result), text(result)
        # Far less than the minute the sleep would take.
        with anyio.fail_after(CALL_LIMIT / 3):
            stopped = await call(session, "interrupt")
        assert "KeyboardInterrupt" in text(stopped), text(stopped)
        after = await call(session, "execute", code="print('awake')")
        assert "awake" in text(after), text(after)

    run(kernel, steps)


ON_MAIN_THREAD = "import threading\nthreading.current_thread() is threading.main_thread()"


def test_cells_run_on_the_idle_main_shell_and_on_a_subshell_while_a_notebook_cell_runs(
    kernel: Kernel, tmp_path: Path
) -> None:
    notebook_cell = "import os, time\nprint('started', flush=True)\nwhile not os.path.exists('go'):\n    time.sleep(0.02)"

    async def steps(session: ClientSession) -> None:
        idle = await call(session, "execute", code=ON_MAIN_THREAD)
        assert re.search(r"Out\[\d+\]: True", text(idle)), text(idle)
        # A notebook cell started after the server connected (it sees the
        # cell's busy status) holds the main shell: the next cell goes to the
        # server's subshell and answers while the notebook cell runs.
        msg_id = kernel.kc.execute(notebook_cell, allow_stdin=False)
        kernel.wait_for(
            "iopub",
            lambda m: m["msg_type"] == "stream" and m["parent_header"].get("msg_id") == msg_id,
            "the notebook cell's output",
        )
        busy = await call(session, "execute", code=ON_MAIN_THREAD)
        assert re.search(r"Out\[\d+\]: False", text(busy)), text(busy)
        assert notebook_cell_running(kernel, msg_id)
        (tmp_path / "go").touch()
        kernel.finish(notebook_cell, msg_id).assert_ok()

    run(kernel, steps)


# Says which thread it runs on, holds its shell until the file `go` names
# exists, then fails.
FAILING_WHEN_TOLD = (
    "import os, threading, time\n"
    "print('main thread:', threading.current_thread() is threading.main_thread(), flush=True)\n"
    "while not os.path.exists({go!r}):\n"
    "    time.sleep(0.02)\n"
    "raise ValueError('planned')"
)


def test_a_failing_server_cell_aborts_nothing_the_notebook_queued_behind_it(kernel: Kernel, tmp_path: Path) -> None:
    """The server's cell runs on the idle main shell, so a notebook cell sent
    while it runs waits behind it there; when the server's cell fails, that
    cell still runs (the server sends `stop_on_error: false`: one cell at a
    time, it has nothing of its own to abort)."""
    # The same queue behind the notebook's own failing cell is aborted, as
    # the protocol says: this is also the check that a cell sent while the
    # failing one waits for its file reaches the queue in time.
    control = tmp_path / "control"
    first = kernel.kc.execute(FAILING_WHEN_TOLD.format(go=str(control)), allow_stdin=False)
    kernel.wait_for(
        "iopub",
        lambda m: m["msg_type"] == "stream" and m["parent_header"].get("msg_id") == first,
        "the failing notebook cell's output",
    )
    behind = kernel.kc.execute("control_ran = True", allow_stdin=False)
    control.touch()
    assert [kernel.reply_to(msg_id)["content"]["status"] for msg_id in (first, behind)] == ["error", "aborted"]

    async def steps(session: ClientSession) -> None:
        go = tmp_path / "go"
        started = await call(session, "execute", code=FAILING_WHEN_TOLD.format(go=str(go)), wait=0.5)
        assert "still running after" in text(started), text(started)
        assert "main thread: True" in text(started), text(started)
        queued = kernel.kc.execute("queued_ran = True", allow_stdin=False)
        go.touch()
        failed = await call(session, "read_output", execution=execution_id(started), wait=CALL_LIMIT / 3)
        assert "ValueError: planned" in text(failed), text(failed)
        assert kernel.reply_to(queued)["content"]["status"] == "ok"

    run(kernel, steps)
    assert kernel.execute("queued_ran").result()["text/plain"] == "True"


def test_two_execute_calls_at_once_start_one_cell(kernel: Kernel) -> None:
    """rmcp serves calls concurrently: of two `execute` calls sent together,
    one runs and the other is told which cell is running, never both."""

    async def steps(session: ClientSession) -> None:
        results: list[types.CallToolResult] = []

        async def one(code: str) -> None:
            results.append(await call(session, "execute", code=code))

        async with anyio.create_task_group() as group:
            group.start_soon(one, "import time\ntime.sleep(1)\nfirst = 1")
            group.start_soon(one, "import time\ntime.sleep(1)\nsecond = 2")
        refused = [r for r in results if r.is_error]
        ran = [r for r in results if not r.is_error]
        assert len(refused) == 1 and len(ran) == 1, [text(r) for r in results]
        assert re.search(r"execution \d+ is still running", text(refused[0])), text(refused[0])
        both = text(await call(session, "execute", code="('first' in globals()) + ('second' in globals())"))
        assert re.search(r"Out\[\d+\]: 1\n", both), both

    run(kernel, steps)


def test_long_output_shows_its_start_and_end_and_the_rest_is_read_later(kernel: Kernel) -> None:
    async def steps(session: ClientSession) -> None:
        result = await call(session, "execute", code="for i in range(3000):\n    print('line %05d' % i)")
        shown = text(result)
        assert "line 00000" in shown and "line 02999" in shown
        assert "line 01500" not in shown
        offset = int(re.search(r"bytes left out: read_output with execution=\d+, offset=(\d+)", shown).group(1))
        rest = text(await call(session, "read_output", execution=execution_id(result), offset=offset))
        assert "line 01000" in rest, rest[:300]
        assert "more bytes: read_output" in rest
        unknown = await call(session, "read_output", execution=999)
        assert unknown.is_error and "there is no execution 999" in text(unknown)

    run(kernel, steps)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_a_figure_comes_back_as_a_small_png_image(kernel: Kernel) -> None:
    code = "import matplotlib.pyplot as plt\nplt.figure(figsize=(8, 6), dpi=200)\nplt.plot([1, 3, 2])\nplt.show()"

    async def steps(session: ClientSession) -> None:
        result = await call(session, "execute", code=code)
        assert not result.is_error, text(result)
        images = [c for c in result.content if isinstance(c, types.ImageContent)]
        assert len(images) == 1 and images[0].mime_type == "image/png"
        # The inline backend trims the figure's edges; the longer side is cut to 768.
        width, height = png_size(base64.b64decode(images[0].data))
        assert width == 768 and 500 < height < 600, (width, height)
        # The text names the figure; no base64 in it.
        assert "[image] <Figure size 1600x1200 with 1 Axes>" in text(result), text(result)
        assert len(text(result)) < 500

    run(kernel, steps)


def test_ask_runs_the_agent_and_its_approval_rules_hold(tmp_path: Path) -> None:
    code = "```python\nz = 7\n```"
    answers = [code, DONE, "```python\nflag = 'ran'\n```", "Not run, then.", DONE]
    with kernel_with_model(tmp_path, answers) as (kernel, llm):

        async def steps(session: ClientSession) -> None:
            result = await call(session, "ask", request="Set z to 7.")
            assert not result.is_error, text(result)
            assert "added    z: int = 7" in text(result), text(result)
            # Approval needs someone to answer; over MCP no one can, so the
            # block is refused and the model is told.
            refused = await call(session, "ask", request="set the flag", options="--approve always --max-turns 2")
            assert not refused.is_error, text(refused)

        run(kernel, steps)
        told = llm.requests[3]["messages"][-1]["content"]
        assert "Not run: every block needs the user's approval" in told, told
        assert kernel.execute("(z, 'flag' in globals())").result()["text/plain"] == "(7, False)"


def test_the_server_connects_again_when_its_kernel_restarts(tmp_path: Path) -> None:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name=KERNEL_NAME, cwd=str(tmp_path))
    kernel = Kernel(km, kc)

    async def steps(session: ClientSession) -> None:
        assert not (await call(session, "execute", code="before = 1")).is_error
        # The stop-and-start a notebook's "restart kernel" does: the same
        # connection file, a new process.
        await anyio.to_thread.run_sync(lambda: km.restart_kernel(now=False))
        with anyio.fail_after(CALL_LIMIT):
            after = await call(session, "execute", code="print('before' in globals())")
        assert not after.is_error, text(after)
        assert "False" in text(after), text(after)
        listed = await call(session, "variables")
        assert not listed.is_error, text(listed)

    try:
        run(kernel, steps)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_server_ends_when_its_kernel_goes_away(tmp_path: Path) -> None:
    from jupyter_client.manager import start_new_kernel
    from mcp.shared.exceptions import MCPError

    km, kc = start_new_kernel(kernel_name=KERNEL_NAME, cwd=str(tmp_path))
    kernel = Kernel(km, kc)

    async def steps(session: ClientSession) -> None:
        assert not (await call(session, "execute", code="1 + 1")).is_error
        kc.stop_channels()
        km.shutdown_kernel(now=False)
        # A kernel shut down (its connection file removed) ends the server;
        # a call fails instead of waiting for ever.
        with anyio.fail_after(CALL_LIMIT):
            with pytest.raises(MCPError):
                result = await call(session, "execute", code="2 + 2")
                raise AssertionError(f"answered after the kernel went away: {text(result)}")

    try:
        run(kernel, steps)
    finally:
        if km.is_alive():
            km.shutdown_kernel(now=True)
