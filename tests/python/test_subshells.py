"""Kernel subshells (JEP 91) through jupyter_client: subshells are created,
listed and deleted on the control channel, and a shell request whose header
names one runs on that subshell's own thread, concurrently with the main
shell, with its own busy/idle, output, input, error handling and interrupt.

The same tests run against ipykernel with MAHTAB_KERNEL_NAME=python3, except
where marked."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import KERNEL_NAME, REPLY_TIMEOUT, Kernel, kernel_with_model


def control(kernel: Kernel, msg_type: str, content: dict | None = None) -> dict:
    msg_id = kernel.send(msg_type, content or {}, channel="control")
    return kernel.reply_to(msg_id, "control")["content"]


def create(kernel: Kernel) -> str:
    reply = control(kernel, "create_subshell_request")
    assert reply["status"] == "ok", reply
    return reply["subshell_id"]


def send(kernel: Kernel, code: str, subshell: str | None, **content) -> str:
    """An execute_request for `subshell` (None: the main shell); its msg_id."""
    msg = kernel.kc.session.msg("execute_request", {"code": code, "silent": False, "allow_stdin": False, **content})
    msg["header"]["subshell_id"] = subshell
    kernel.kc.shell_channel.send(msg)
    return msg["header"]["msg_id"]


def run(kernel: Kernel, code: str, subshell: str | None, timeout: float = REPLY_TIMEOUT):
    return kernel.finish(code, send(kernel, code, subshell), timeout)


def stdout(execution) -> str:
    return "".join(m["content"]["text"] for m in execution.iopub if m["msg_type"] == "stream")


def test_subshells_are_advertised_created_listed_and_deleted(kernel: Kernel) -> None:
    info = kernel.request("kernel_info")
    assert "kernel subshells" in info["supported_features"]
    assert control(kernel, "list_subshell_request")["subshell_id"] == []
    first, second = create(kernel), create(kernel)
    assert first != second
    assert control(kernel, "list_subshell_request")["subshell_id"] == [first, second]
    assert control(kernel, "delete_subshell_request", {"subshell_id": first})["status"] == "ok"
    assert control(kernel, "list_subshell_request")["subshell_id"] == [second]
    # Deleting what does not exist is an error, and changes nothing.
    assert control(kernel, "delete_subshell_request", {"subshell_id": first})["status"] == "error"
    assert control(kernel, "list_subshell_request")["subshell_id"] == [second]


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="ipykernel raises in its shell channel thread and never replies")
def test_a_request_for_no_such_subshell_gets_an_error_reply(kernel: Kernel) -> None:
    msg_id = send(kernel, "print('lost')", "no-such-subshell")
    reply = kernel.reply_to(msg_id)
    assert reply["content"]["status"] == "error"
    assert "no-such-subshell" in reply["content"]["evalue"]
    assert run(kernel, "1 + 1", None).reply["status"] == "ok"


def test_each_subshell_runs_on_a_thread_of_its_own_in_the_same_namespace(kernel: Kernel) -> None:
    run(kernel, "import threading\nshared = 'from main'", None)
    before = int(stdout(run(kernel, "print(threading.active_count())", None)))
    subshell = create(kernel)
    during = int(stdout(run(kernel, "print(threading.active_count())", None)))
    assert during == before + 1

    code = "print(threading.get_ident() == threading.main_thread().ident)"
    assert stdout(run(kernel, code, None)).strip() == "True"
    in_subshell = run(kernel, code + "\nprint(shared)\nfrom_subshell = 42", subshell)
    assert stdout(in_subshell).split() == ["False", "from", "main"]
    assert stdout(run(kernel, "print(from_subshell)", None)).strip() == "42"

    assert control(kernel, "delete_subshell_request", {"subshell_id": subshell})["status"] == "ok"
    # The thread ends once its subshell is gone.
    deadline = time.monotonic() + REPLY_TIMEOUT
    while int(stdout(run(kernel, "print(threading.active_count())", None))) != before:
        assert time.monotonic() < deadline, "the subshell's thread still runs"
        time.sleep(0.1)


@pytest.mark.parametrize("are_subshells", [(False, True), (True, False), (True, True)])
def test_cells_on_different_shells_run_at_the_same_time(kernel: Kernel, are_subshells) -> None:
    shells = [create(kernel) if is_subshell else None for is_subshell in are_subshells]
    run(kernel, "import threading, time\nbarrier = threading.Barrier(2, timeout=10)", None)
    # Each waits for the other at the barrier: only concurrent cells get past.
    first = send(kernel, "barrier.wait(); started_0 = True; time.sleep(0.5); ended_0 = True", shells[0])
    second = send(kernel, "barrier.wait(); time.sleep(0.25); assert started_0 and 'ended_0' not in dir()", shells[1])
    for msg_id in (first, second):
        reply = kernel.reply_to(msg_id)
        assert reply["content"]["status"] == "ok", reply["content"]


def test_a_subshell_answers_while_the_main_shell_runs_a_long_cell(kernel: Kernel) -> None:
    subshell = create(kernel)
    run(kernel, "import time\nprogress = 0", None)
    long = send(kernel, "print('started', flush=True)\nfor progress in range(1, 31):\n    time.sleep(0.1)", None)
    kernel.wait_for("iopub", lambda m: m["msg_type"] == "stream" and m["parent_header"]["msg_id"] == long, "the long cell running")
    peek = run(kernel, "print(progress)", subshell)
    assert peek.reply["status"] == "ok"
    assert 0 <= int(stdout(peek)) < 30, "the subshell answered before the loop ended"
    # Its reply came before the long cell's.
    main_reply = kernel.reply_to(long)
    shell_log = kernel.logs["shell"]
    assert shell_log.index(main_reply) > next(i for i, m in enumerate(shell_log) if m["parent_header"]["msg_id"] == peek.msg_id)


def test_busy_idle_output_and_replies_belong_to_each_shells_own_request(kernel: Kernel) -> None:
    subshell = create(kernel)
    run(kernel, "import time", None)
    main = send(kernel, "time.sleep(0.3); print('from main')", None)
    sub = send(kernel, "time.sleep(0.3); print('from subshell')", subshell)
    for msg_id, text, shell in ((main, "from main", None), (sub, "from subshell", subshell)):
        reply = kernel.reply_to(msg_id)
        assert reply["parent_header"].get("subshell_id") == shell
        messages = kernel.iopub_until_idle(msg_id)
        states = Counter(m["content"]["execution_state"] for m in messages if m["msg_type"] == "status")
        assert states == {"busy": 1, "idle": 1}, messages
        assert "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream") == text + "\n"
    # Nothing of one went to the other (a print may come as several stream
    # messages: its text and its newline).
    texts = {}
    for m in kernel.logs["iopub"]:
        if m["msg_type"] == "stream":
            msg_id = m["parent_header"]["msg_id"]
            texts[msg_id] = texts.get(msg_id, "") + m["content"]["text"]
    assert texts == {main: "from main\n", sub: "from subshell\n"}


def test_execution_counts_are_kernel_wide(kernel: Kernel) -> None:
    subshell = create(kernel)
    counts = [run(kernel, "1", shell).reply["execution_count"] for shell in (None, subshell, None)]
    assert counts == [1, 2, 3]


@pytest.mark.parametrize("are_subshells", [(False, True), (True, False), (True, True)])
def test_a_failure_aborts_only_its_own_shells_queue(kernel: Kernel, are_subshells) -> None:
    failing, other = [create(kernel) if is_subshell else None for is_subshell in are_subshells]
    msg_ids = [
        send(kernel, "import time; time.sleep(0.5); raise ValueError('no')", failing),
        send(kernel, "print('queued behind the failure')", failing),
        send(kernel, "import time; time.sleep(1)", other),
        send(kernel, "print('other')", other),
    ]
    statuses = [kernel.reply_to(msg_id)["content"]["status"] for msg_id in msg_ids]
    assert statuses == ["error", "aborted", "ok", "ok"]
    assert run(kernel, "print('after')", failing).reply["status"] == "ok"


def test_input_in_a_subshell_asks_the_client_that_sent_it(kernel: Kernel) -> None:
    subshell = create(kernel)
    msg_id = send(kernel, "answer = input('name? ')\nprint('hello', answer)", subshell, allow_stdin=True)
    request = kernel.wait_for("stdin", lambda m: m["msg_type"] == "input_request", "the input_request")
    assert request["parent_header"]["msg_id"] == msg_id
    assert request["content"]["prompt"] == "name? "
    kernel.kc.input("subshell")
    execution = kernel.finish("", msg_id)
    assert stdout(execution) == "hello subshell\n"


def test_completion_works_on_a_subshell(kernel: Kernel) -> None:
    subshell = create(kernel)
    run(kernel, "subshell_variable = 1", None)
    msg = kernel.kc.session.msg("complete_request", {"code": "subshell_var", "cursor_pos": 12})
    msg["header"]["subshell_id"] = subshell
    kernel.kc.shell_channel.send(msg)
    reply = kernel.reply_to(msg["header"]["msg_id"])
    assert reply["parent_header"]["subshell_id"] == subshell
    assert "subshell_variable" in reply["content"]["matches"]


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="ipykernel's interrupt reaches the main thread only")
def test_an_interrupt_stops_a_subshells_cell_and_leaves_it_usable(kernel: Kernel) -> None:
    subshell = create(kernel)
    run(kernel, "spins = 0", None)
    # Interrupted as soon as the client knows it is there: before or after
    # its code started, it ends.
    msg_id = send(kernel, "while True:\n    spins += 1", subshell)
    kernel.wait_for("iopub", lambda m: m["msg_type"] == "execute_input" and m["parent_header"]["msg_id"] == msg_id, "the loop starting")
    control(kernel, "interrupt_request")
    reply = kernel.reply_to(msg_id)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert stdout(run(kernel, "print('still here')", subshell)) == "still here\n"
    assert run(kernel, "1 + 1", None).reply["status"] == "ok"

    # The stop button of a frontend with the kernelspec's signal mode: SIGINT.
    msg_id = send(kernel, "print('looping', flush=True)\nwhile True:\n    spins += 1", subshell)
    kernel.wait_for("iopub", lambda m: m["msg_type"] == "stream" and m["parent_header"]["msg_id"] == msg_id, "the loop running")
    kernel.km.interrupt_kernel()
    reply = kernel.reply_to(msg_id)
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert run(kernel, "1 + 1", subshell).reply["status"] == "ok"


BLOCKING_CELLS = {
    # One C call for the whole minute: no bytecode runs until it returns.
    "sleep": "import time\nprint('blocked', flush=True)\ntime.sleep(60)\nprint('slept through')",
    # A read nobody will ever answer.
    "socket": "import socket\nreader, writer = socket.socketpair()\nprint('blocked', flush=True)\nreader.recv(1)",
}


def interrupt_blocked(kernel: Kernel, code: str, subshell: str | None, how: str) -> dict:
    """Runs `code`, interrupts it once it prints, and returns its reply."""
    msg_id = send(kernel, code, subshell)
    kernel.wait_for("iopub", lambda m: m["msg_type"] == "stream" and m["parent_header"]["msg_id"] == msg_id, "the cell blocking")
    if how == "signal":
        kernel.km.interrupt_kernel()
    else:
        control(kernel, "interrupt_request")
    # Far less than the minute the sleep would take.
    return kernel.reply_to(msg_id, timeout=REPLY_TIMEOUT)["content"]


@pytest.mark.parametrize("how", ["signal", "message"])
@pytest.mark.parametrize("blocked", sorted(BLOCKING_CELLS))
def test_an_interrupt_ends_a_cell_blocked_in_one_call_on_the_main_shell(kernel: Kernel, blocked: str, how: str) -> None:
    reply = interrupt_blocked(kernel, BLOCKING_CELLS[blocked], None, how)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    assert run(kernel, "print('next')", None).reply["status"] == "ok"


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="ipykernel's interrupt reaches the main thread only")
@pytest.mark.parametrize("how", ["signal", "message"])
def test_an_interrupt_ends_a_single_long_sleep_in_a_subshell(kernel: Kernel, how: str) -> None:
    subshell = create(kernel)
    reply = interrupt_blocked(kernel, BLOCKING_CELLS["sleep"], subshell, how)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    # The next sleep in the same subshell is a whole one, not cut short.
    ex = run(kernel, "import time\nstart = time.monotonic()\ntime.sleep(0.3)\nprint(time.monotonic() - start >= 0.3)", subshell)
    assert stdout(ex) == "True\n", ex.describe()
    # Invalid lengths are refused as the real sleep refuses them.
    ex = run(kernel, "time.sleep(-1)", subshell)
    assert ex.reply["ename"] == "ValueError", ex.describe()


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="ipykernel's interrupt reaches the main thread only")
def test_an_interrupt_ends_a_long_numpy_call_in_a_subshell_when_it_returns(kernel: Kernel) -> None:
    """A C call that never looks for signals (on the main shell either):
    the cell ends as the call returns, before its next statement."""
    subshell = create(kernel)
    code = (
        "import numpy as np\nx = np.random.default_rng(0).random((1500, 1500))\n"
        "print('blocked', flush=True)\nfor _ in range(20):\n    x = np.linalg.inv(x @ x.T + np.eye(1500))\nprint('went on')"
    )
    reply = interrupt_blocked(kernel, code, subshell, "message")
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    assert run(kernel, "print('next')", subshell).reply["status"] == "ok"


def test_a_kernel_with_subshells_shuts_down(kernel: Kernel) -> None:
    subshell = create(kernel)
    run(kernel, "1", subshell)
    reply = control(kernel, "shutdown_request", {"restart": False})
    assert reply["status"] == "ok"
    deadline = time.monotonic() + 10
    while kernel.km.is_alive():
        assert time.monotonic() < deadline, "the kernel still runs"
        time.sleep(0.1)


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="ipykernel 7.4 does not exit while a subshell's cell runs")
def test_a_kernel_shuts_down_while_a_subshell_cell_runs(kernel: Kernel) -> None:
    subshell = create(kernel)
    msg_id = send(kernel, "print('sleeping', flush=True)\nimport time; time.sleep(60)", subshell)
    kernel.wait_for("iopub", lambda m: m["msg_type"] == "stream" and m["parent_header"]["msg_id"] == msg_id, "the cell running")
    assert control(kernel, "shutdown_request", {"restart": False})["status"] == "ok"
    deadline = time.monotonic() + 10
    while kernel.km.is_alive():
        assert time.monotonic() < deadline, "the kernel still runs"
        time.sleep(0.1)


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")
def test_ask_in_a_subshell_streams_and_runs_code_under_its_own_request(tmp_path: Path) -> None:
    answer = "Adding.\n```python\nfrom_subshell_agent = 40 + 2\nprint(from_subshell_agent)\n```"
    with kernel_with_model(tmp_path, [answer]) as (kernel, _):
        subshell = create(kernel)
        execution = run(kernel, "%%ask\nadd forty and two", subshell)
        assert execution.reply["status"] == "ok", execution.reply
        assert stdout(execution).startswith("Adding.")
        panels = [m["content"]["data"]["text/plain"] for m in execution.iopub if m["msg_type"] == "display_data"]
        assert "[output]\n42" in panels, panels
        # Nothing of the run went anywhere but to the subshell's request.
        strays = [m for m in kernel.logs["iopub"] if m["msg_type"] in ("stream", "display_data") and m["parent_header"].get("msg_id") != execution.msg_id]
        assert not strays, strays
        assert stdout(run(kernel, "print(from_subshell_agent)", None)) == "42\n"


def answer_prompt(kernel: Kernel, prompt: dict, value: str) -> None:
    """An input_reply whose parent is `prompt`, as JupyterLab sends it."""
    kernel.kc.stdin_channel.send(kernel.kc.session.msg("input_reply", {"value": value}, parent=prompt))


def prompt_for(kernel: Kernel, msg_id: str) -> dict:
    return kernel.wait_for(
        "stdin",
        lambda m: m["msg_type"] == "input_request" and m["parent_header"].get("msg_id") == msg_id,
        f"the prompt of {msg_id}",
    )


def test_two_prompts_waiting_at_once_each_get_their_own_answer(kernel: Kernel) -> None:
    subshell = create(kernel)
    main = send(kernel, "a = input('main? ')", None, allow_stdin=True)
    main_prompt = prompt_for(kernel, main)
    sub = send(kernel, "b = input('sub? ')", subshell, allow_stdin=True)
    sub_prompt = prompt_for(kernel, sub)
    # Answered in the other order than asked.
    answer_prompt(kernel, sub_prompt, "for the subshell")
    answer_prompt(kernel, main_prompt, "for the main shell")
    for msg_id in (main, sub):
        assert kernel.reply_to(msg_id)["content"]["status"] == "ok"
        kernel.iopub_until_idle(msg_id)
    shown = kernel.execute("print(a, '|', b)").assert_ok()
    assert shown.stdout == "for the main shell | for the subshell\n", shown.describe()


@pytest.mark.skipif(
    KERNEL_NAME == "python3", reason="ipykernel 7 interrupts only the main shell's cell; the prompt waits on"
)
def test_an_interrupt_reaches_input_waiting_in_a_subshell_while_the_main_shell_is_idle(kernel: Kernel) -> None:
    subshell = create(kernel)
    kernel.execute("kept = 'yes'").assert_ok()
    sub = send(kernel, "b = input('sub? ')", subshell, allow_stdin=True)
    prompt_for(kernel, sub)
    kernel.km.interrupt_kernel()
    reply = kernel.reply_to(sub)
    assert reply["content"]["status"] == "error", reply
    assert reply["content"]["ename"] == "KeyboardInterrupt", reply
    kernel.iopub_until_idle(sub)
    assert run(kernel, "print(kept)", subshell).reply["status"] == "ok"
    assert kernel.execute("print(kept)").assert_ok().stdout == "yes\n"


@pytest.mark.skipif(KERNEL_NAME == "python3", reason="ask() is mahtab's")
def test_an_interrupt_reaches_ask_waiting_in_a_subshell_while_the_main_shell_is_idle(tmp_path: Path) -> None:
    # A model server that takes the request and never answers.
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    silent.settimeout(REPLY_TIMEOUT)
    with kernel_with_model(tmp_path, []) as (kernel, llm):
        llm_url = "http://127.0.0.1:%d/v1" % silent.getsockname()[1]
        kernel.execute("%ask_config --provider openai").assert_ok()
        kernel.execute(f"import os; os.environ['OPENAI_BASE_URL'] = {llm_url!r}").assert_ok()
        subshell = create(kernel)
        sub = send(kernel, "from mahtab import ask\nanswer = ask('hello?')", subshell)
        kernel.wait_for(
            "iopub",
            lambda m: m["msg_type"] == "execute_input" and m["parent_header"].get("msg_id") == sub,
            "the subshell cell's start",
        )
        conn, _ = silent.accept()  # the request arrived; the model is "thinking"
        kernel.km.interrupt_kernel()
        reply = kernel.reply_to(sub)
        conn.close()
        assert reply["content"]["status"] == "error", reply
        assert reply["content"]["ename"] == "KeyboardInterrupt", reply
        kernel.iopub_until_idle(sub)
        assert kernel.execute("print('still here')").assert_ok().stdout == "still here\n"
    silent.close()


def test_top_level_await_in_a_subshell_while_the_main_shell_has_tasks_pending(kernel: Kernel) -> None:
    # The main shell's loop runs its task between cells.
    kernel.execute(
        "import asyncio\n"
        "ticks = 0\n"
        "async def tick():\n"
        "    global ticks\n"
        "    while True:\n"
        "        ticks += 1\n"
        "        await asyncio.sleep(0.01)\n"
        "ticker = asyncio.get_event_loop().create_task(tick())"
    ).assert_ok()
    subshell = create(kernel)
    done = run(kernel, "await asyncio.sleep(0.05)\nprint('awaited in the subshell')", subshell)
    assert done.reply["status"] == "ok", done.describe()
    assert stdout(done) == "awaited in the subshell\n", done.describe()
    # The main shell's task goes on, on its own loop.
    first = kernel.execute("print(ticks)").assert_ok().stdout
    kernel.execute("import time; time.sleep(0.1)").assert_ok()
    assert int(kernel.execute("print(ticks)").assert_ok().stdout) >= int(first), "the ticker stopped"
    kernel.execute("ticker.cancel()").assert_ok()


@pytest.mark.skipif(
    KERNEL_NAME == "python3", reason="ipykernel 7's shells share one last error: the main cell reports the subshell's"
)
def test_two_cells_failing_at_once_each_report_their_own_error(kernel: Kernel) -> None:
    subshell = create(kernel)
    # The main cell's error takes a while to describe, which leaves time for
    # the subshell's cell to fail between the main cell showing its error and
    # answering.
    main = send(
        kernel,
        "import time\n"
        "class SlowError(Exception):\n"
        "    def __str__(self):\n"
        "        time.sleep(0.5)\n"
        "        return 'main failed'\n"
        "raise SlowError()",
        None,
    )
    kernel.wait_for(
        "iopub",
        lambda m: m["msg_type"] == "error" and m["parent_header"].get("msg_id") == main,
        "the main cell's error",
    )
    sub = run(kernel, "raise ValueError('subshell failed')", subshell)
    main_reply = kernel.reply_to(main)["content"]
    kernel.iopub_until_idle(main)
    assert sub.reply["ename"] == "ValueError", sub.reply
    assert "subshell failed" in "\n".join(sub.reply["traceback"]), sub.reply
    assert main_reply["ename"] == "SlowError", main_reply
    assert "SlowError" in "\n".join(main_reply["traceback"]), main_reply
    assert "subshell failed" not in "\n".join(main_reply["traceback"]), main_reply
