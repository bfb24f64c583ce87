"""Reliability through jupyter_client, used the way clients use it: interrupts
sent by the KernelManager, several clients made by one KernelManager, and an
interrupt while the debugger waits for a command. Each of these once lost a
cell's output or left the kernel without a reply."""

from __future__ import annotations

from conftest import REPLY_TIMEOUT, Kernel


def test_interrupts_while_idle_leave_the_next_cell_intact(kernel: Kernel) -> None:
    # In message mode, KernelManager.interrupt_kernel() sends interrupt_requests
    # from a session whose id its clients share and whose message ids they
    # count afresh, so the next cell's id was an interrupt's and the client
    # took that interrupt's busy/idle for the cell's: it ended the cell before
    # its output. The kernelspec asks for signals, as ipykernel's does.
    for _ in range(5):
        kernel.km.interrupt_kernel()
    seen: list[dict] = []
    reply = kernel.kc.execute_interactive("print('hello')", timeout=REPLY_TIMEOUT, output_hook=seen.append)
    assert reply["content"]["status"] == "ok", reply
    states = [m["content"]["execution_state"] for m in seen if m["msg_type"] == "status"]
    assert states == ["busy", "idle"], seen
    assert [m["content"]["text"] for m in seen if m["msg_type"] == "stream"] == ["hello\n"], seen
    assert [m["msg_type"] for m in seen if m["msg_type"] != "status"] == ["execute_input", "stream"], seen


def test_two_clients_of_one_manager_are_both_answered(kernel: Kernel) -> None:
    # KernelManager.client() gives every client the manager's session id (also
    # their ROUTER identity) and message ids counted from the same start, so
    # the two requests below have the same session and msg_id.
    first, second = kernel.kc, kernel.km.client()
    second.start_channels()
    try:
        second.wait_for_ready(timeout=REPLY_TIMEOUT)
        replies = [
            client.execute(f"ran_{name} = True", reply=True, timeout=REPLY_TIMEOUT)
            for client, name in ((first, "first"), (second, "second"))
        ]
    finally:
        second.stop_channels()
    assert [r["content"]["status"] for r in replies] == ["ok", "ok"], replies
    assert replies[0]["parent_header"]["msg_id"] == replies[1]["parent_header"]["msg_id"]
    assert [r["content"]["execution_count"] for r in replies] == [1, 2], replies
    ran = kernel.execute("print(ran_first and ran_second)").assert_ok()
    assert ran.stdout == "True\n", ran.describe()


def test_an_interrupt_while_pdb_waits_ends_the_cell(kernel: Kernel) -> None:
    kernel.execute("kept = 'yes'").assert_ok()
    msg_id = kernel.kc.execute("import pdb; pdb.set_trace()\nafter = 1", allow_stdin=True)
    prompt = kernel.wait_for("stdin", lambda m: m["msg_type"] == "input_request", "the debugger's prompt")
    assert prompt["content"]["prompt"] == "ipdb> ", prompt
    kernel.km.interrupt_kernel()
    kernel.reply_to(msg_id)
    kernel.iopub_until_idle(msg_id)
    # Answered and idle: the debugger did not prompt again (nobody would answer).
    assert kernel.execute("print(kept)").assert_ok().stdout == "yes\n"


def test_debug_magic_inspects_the_last_error_over_stdin(kernel: Kernel) -> None:
    kernel.execute("def f(x):\n    secret = x * 2\n    return 1 / 0\nf(21)")
    prompts, answers, seen = [], iter(["p secret", "q"]), []

    def answer(msg: dict) -> None:
        prompts.append(msg["content"]["prompt"])
        kernel.kc.input(next(answers))

    reply = kernel.kc.execute_interactive(
        "%debug", allow_stdin=True, stdin_hook=answer, output_hook=seen.append, timeout=REPLY_TIMEOUT
    )
    assert reply["content"]["status"] == "ok", reply
    assert prompts == ["ipdb> ", "ipdb> "], prompts
    assert {"name": "stdout", "text": "42\n"} in [m["content"] for m in seen if m["msg_type"] == "stream"], seen
