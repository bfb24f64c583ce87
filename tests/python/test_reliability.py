"""Reliability through jupyter_client, used the way clients use it: interrupts
sent by the KernelManager, several clients made by one KernelManager, clients
that stop reading, and an interrupt while the debugger waits for a command.
Each of these once lost a cell's output or left the kernel without a reply."""

from __future__ import annotations

import time

import psutil
import pytest
import zmq
from conftest import KERNEL_NAME, REPLY_TIMEOUT, Kernel, curve_client


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


@pytest.mark.skipif(
    KERNEL_NAME == "python3",
    reason="ipykernel sets ROUTER_HANDOVER: the newest connection takes the shared identity "
    "and the first client's request is lost",
)
def test_two_clients_of_one_manager_get_their_own_replies_while_a_cell_runs(kernel: Kernel) -> None:
    # Both clients declare the manager's session id as their ROUTER identity,
    # on shell and on stdin alike.
    first, second = kernel.kc, kernel.km.client()
    second.start_channels()
    try:
        second.wait_for_ready(timeout=REPLY_TIMEOUT)
        cell = first.execute("import time; time.sleep(0.5); slow = 'done'")
        kernel.wait_for(
            "iopub",
            lambda m: m["msg_type"] == "execute_input" and m["parent_header"].get("msg_id") == cell,
            "the slow cell's start",
        )
        second.kernel_info()
        second_got = second.get_shell_msg(timeout=REPLY_TIMEOUT)
        first_got = kernel.reply_to(cell)
        # input() in the second client's cell asks the second client.
        asking = second.execute("name = input('name? ')", allow_stdin=True)
        prompt = second.get_stdin_msg(timeout=REPLY_TIMEOUT)
        second.input("bob")
        asked = second.get_shell_msg(timeout=REPLY_TIMEOUT)
        # (The clients' message ids collide, so read the result from a reply.)
        second.execute("", user_expressions={"seen": "(slow, name)"})
        seen = second.get_shell_msg(timeout=REPLY_TIMEOUT)
    finally:
        second.stop_channels()
    assert second_got["msg_type"] == "kernel_info_reply", second_got
    assert first_got["msg_type"] == "execute_reply", first_got
    assert first_got["content"]["status"] == "ok", first_got
    assert prompt["content"]["prompt"] == "name? ", prompt
    assert prompt["parent_header"]["msg_id"] == asking, prompt
    assert asked["msg_type"] == "execute_reply" and asked["content"]["status"] == "ok", asked
    assert not [m for m in kernel.logs["stdin"] if m["msg_type"] == "input_request"], kernel.logs["stdin"]
    assert seen["content"]["user_expressions"]["seen"]["data"]["text/plain"] == "('done', 'bob')", seen


def stalled_socket(kernel: Kernel, kind: int, channel: str) -> zmq.Socket:
    """A socket on `channel` that takes in at most one message and then no
    more, as a suspended client or a dead remote link does: its receive
    queue and buffer are as small as they go, and nobody reads it."""
    info = kernel.km.get_connection_info()
    sock = zmq.Context.instance().socket(kind)
    sock.rcvhwm = 1
    sock.rcvbuf = 1024
    sock.linger = 0
    curve_client(sock, kernel.km)
    sock.connect(f"{info['transport']}://{info['ip']}:{info[channel + '_port']}")
    return sock


def test_an_iopub_subscriber_that_stops_reading_delays_nobody(kernel: Kernel) -> None:
    stalled = stalled_socket(kernel, zmq.SUB, "iopub")
    try:
        stalled.subscribe(b"")
        # Subscribed once it is greeted (or, from a kernel without welcome,
        # once any message reaches it); then it reads no more.
        deadline = time.monotonic() + REPLY_TIMEOUT
        while not stalled.poll(100):
            assert time.monotonic() < deadline, "the stalled subscriber was never subscribed"
            kernel.execute("pass")
        stalled.recv_multipart()
        big = kernel.execute("for _ in range(400):\n    print('x' * 99_999)", timeout=120).assert_ok()
        assert len(big.stdout) == 40_000_000
        for i in range(5):
            assert kernel.execute(f"print({i})").assert_ok().stdout == f"{i}\n"
        # Shutting down does not wait for the subscriber either.
        process = psutil.Process(kernel.km.provisioner.process.pid)
        kernel.kc.shutdown()
        process.wait(timeout=REPLY_TIMEOUT)
    finally:
        stalled.close()


def test_a_client_that_stops_reading_its_replies_delays_nobody_and_costs_bounded_memory(kernel: Kernel) -> None:
    # History replies as big as this cell: a thousand of them (half a
    # gigabyte) are far more than a stalled client's buffers take in.
    kernel.execute("padding = '" + "x" * 500_000 + "'").assert_ok()
    history = {"hist_access_type": "tail", "n": 1, "output": False, "raw": True}
    assert len(str(kernel.request("history", **history))) > 500_000
    stalled = stalled_socket(kernel, zmq.DEALER, "shell")
    try:
        for _ in range(1000):
            kernel.kc.session.send(stalled, "history_request", history)
        # Served after all of them (one shell, in order).
        for i in range(5):
            assert kernel.execute(f"print({i})", timeout=120).assert_ok().stdout == f"{i}\n"
        # What waits for the stalled client is bounded (128 MiB), not all it was sent.
        rss = psutil.Process(kernel.km.provisioner.process.pid).memory_info().rss
        assert rss < 350 * 2**20, f"kernel RSS {rss / 2**20:.0f} MiB"
    finally:
        stalled.close()


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
