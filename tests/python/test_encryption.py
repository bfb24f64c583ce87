"""Transport encryption as clients ask for it: jupyter_client with
`transport_encryption="required"` provisions CurveZMQ keys for a kernelspec
that declares `supported_encryption: ["curve"]`, and every channel then
speaks ZMTP's CURVE mechanism (libzmq, through pyzmq, on the client side).

Cells, input(), interrupts and comms work over it; the bytes on the wire
carry no code in the clear; a client without the key, with the wrong one or
with a mangled handshake gets nothing while the right client goes on; a
50 MB message crosses; a recorded session replayed runs nothing; libzmq's own heartbeats (ZMTP 3.1 PING) are answered.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest
import zmq
from jupyter_client.manager import KernelManager
from zmq.utils.monitor import recv_monitor_message

from conftest import KERNEL_NAME, KERNEL_STARTUP_TIMEOUT, REPLY_TIMEOUT, Kernel, curve_client


@pytest.fixture
def encrypted(tmp_path: Path):
    """A kernel started the way a client that requires encryption starts it."""
    env = dict(
        os.environ,
        IPYTHONDIR=str(tmp_path / "ipython"),
        JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
    )
    env.pop("PYTEST_CURRENT_TEST", None)
    km = KernelManager(kernel_name=KERNEL_NAME, transport_encryption="required")
    km.start_kernel(cwd=str(tmp_path), env=env)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=KERNEL_STARTUP_TIMEOUT)
        yield Kernel(km, kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def endpoint(kernel: Kernel, channel: str) -> str:
    info = kernel.km.get_connection_info()
    return f"tcp://{info['ip']}:{info[channel + '_port']}"


def wait_for_event(monitor: zmq.Socket, wanted: set[int], what: str) -> int:
    """The first of `wanted` socket events; fails after REPLY_TIMEOUT."""
    deadline = time.monotonic() + REPLY_TIMEOUT
    seen = []
    while time.monotonic() < deadline:
        if monitor.poll(100):
            event = recv_monitor_message(monitor)["event"]
            seen.append(event)
            if event in wanted:
                return event
    raise AssertionError(f"no {what} within {REPLY_TIMEOUT} s; events seen: {seen}")


HANDSHAKE_FAILED = {
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
    zmq.EVENT_HANDSHAKE_FAILED_AUTH,
    zmq.EVENT_DISCONNECTED,
}


def test_cells_input_interrupts_and_comms_work_encrypted(encrypted: Kernel) -> None:
    assert encrypted.km.curve_publickey, "jupyter_client provisioned no keys"
    info = encrypted.request("kernel_info")
    if KERNEL_NAME == "mahtab":
        assert info["transport_encryption"] == "curve", info
    assert encrypted.execute("x = 6 * 7\nprint(x)").assert_ok().stdout == "42\n"

    # input() over the stdin channel.
    msg_id = encrypted.kc.execute("answer = input('name? ')\nprint('hi', answer)", allow_stdin=True)
    request = encrypted.wait_for("stdin", lambda m: m["msg_type"] == "input_request", "input_request")
    assert request["content"]["prompt"] == "name? "
    encrypted.kc.input("mahtab")
    assert encrypted.finish("input", msg_id).assert_ok().stdout == "hi mahtab\n"

    # An interrupt (SIGINT, the kernelspec's interrupt_mode) ends a blocking call.
    msg_id = encrypted.kc.execute("import time\ntime.sleep(60)")
    encrypted.wait_for(
        "iopub",
        lambda m: m["msg_type"] == "execute_input" and m["parent_header"].get("msg_id") == msg_id,
        "the sleeping cell to start",
    )
    encrypted.km.interrupt_kernel()
    interrupted = encrypted.finish("sleep", msg_id)
    assert interrupted.reply["status"] == "error", interrupted.describe()
    assert interrupted.reply["ename"] == "KeyboardInterrupt", interrupted.describe()

    # A comm to an unknown target is closed by the kernel, over IOPub.
    comm_id = uuid.uuid4().hex
    encrypted.send("comm_open", {"comm_id": comm_id, "target_name": "no.such.target", "data": {}})
    encrypted.wait_for(
        "iopub",
        lambda m: m["msg_type"] == "comm_close" and m["content"].get("comm_id") == comm_id,
        f"comm_close for {comm_id}",
    )
    assert encrypted.execute("print(x)").assert_ok().stdout == "42\n"


class Recorder:
    """A TCP proxy in front of one port that keeps every byte it passes (or
    only what clients send)."""

    def __init__(self, target: tuple[str, int], keep_answers: bool = True) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.target = target
        self.keep_answers = keep_answers
        self.seen = bytearray()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b, keep in ((client, upstream, True), (upstream, client, self.keep_answers)):
                threading.Thread(target=self._pump, args=(a, b, keep), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, keep: bool) -> None:
        while data := source.recv(65536):
            if keep:
                with self.lock:
                    self.seen += data
            sink.sendall(data)
        sink.close()

    def close(self) -> None:
        self.server.close()


def test_the_wire_carries_no_code_or_output_in_the_clear(encrypted: Kernel) -> None:
    info = encrypted.km.get_connection_info()
    recorder = Recorder((info["ip"], info["shell_port"]))
    client = encrypted.km.client()
    client.shell_port = recorder.port
    client.start_channels()
    try:
        marker = "the_marker_" + uuid.uuid4().hex
        reply = client.execute_interactive(f"print({marker!r})\n{marker!r}", timeout=REPLY_TIMEOUT)
        assert reply["content"]["status"] == "ok", reply
        with recorder.lock:
            seen = bytes(recorder.seen)
        assert len(seen) > 1000, "the shell channel went elsewhere"
        assert b"CURVE" in seen[:128], "the greeting names CURVE"
        assert marker.encode() not in seen
        assert b"execute_request" not in seen and b"execute_reply" not in seen
    finally:
        client.stop_channels()
        recorder.close()


def test_clients_without_the_key_get_nothing_and_the_kernel_goes_on(encrypted: Kernel) -> None:
    context = zmq.Context.instance()
    strangers = []
    # In the clear; and with CURVE, but not the server's key.
    plain = context.socket(zmq.DEALER)
    wrong_key = context.socket(zmq.DEALER)
    public, secret = zmq.curve_keypair()
    wrong_key.curve_publickey, wrong_key.curve_secretkey = public, secret
    wrong_key.curve_serverkey = zmq.curve_keypair()[0]
    try:
        for sock in (plain, wrong_key):
            sock.linger = 0
            # libzmq drops the stranger's pipe once its handshake is refused;
            # a send after that would block for good, and that is not a reply.
            sock.sndtimeo = 2000
            monitor = sock.get_monitor_socket()
            sock.connect(endpoint(encrypted, "shell"))
            strangers.append((sock, monitor))
            try:
                encrypted.kc.session.send(sock, "kernel_info_request", {})
            except zmq.Again:
                pass
            wait_for_event(monitor, HANDSHAKE_FAILED, "refused handshake")
        # A raw client whose HELLO is garbage, and one that stops mid-INITIATE.
        info = encrypted.km.get_connection_info()
        for payload in (b"\x04\xc8\x05HELLO" + os.urandom(194), b"\x04\x13\x08INITIATE" + os.urandom(10)):
            with socket.create_connection((info["ip"], info["shell_port"]), timeout=REPLY_TIMEOUT) as raw:
                greeting = b"\xff" + b"\0" * 8 + b"\x7f\x03\x00CURVE" + b"\0" * 15 + b"\0" + b"\0" * 31
                raw.sendall(greeting + payload)
                received = b""
                while chunk := raw.recv(4096):  # until the kernel closes it
                    received += chunk
                # At most the kernel's greeting (no WELCOME), then the close.
                assert received[:1] == b"\xff" and len(received) <= 64, received
        for sock, _ in strangers:
            assert not sock.poll(0), "a stranger got a reply"
        assert encrypted.execute("print('still here')").assert_ok().stdout == "still here\n"
    finally:
        for sock, monitor in strangers:
            sock.disable_monitor()
            monitor.close()
            sock.close()


@pytest.mark.skipif(
    KERNEL_NAME != "mahtab", reason="ipykernel 7.4 stops answering the test's client after the replay (not investigated)"
)
def test_a_replayed_session_runs_nothing(encrypted: Kernel) -> None:
    """Everything a real client sent, HELLO to its execute_request, sent
    again on a new connection: the replayed INITIATE cannot carry the new
    connection's cookie, so nothing past WELCOME is answered or run."""
    info = encrypted.km.get_connection_info()
    recorder = Recorder((info["ip"], info["shell_port"]), keep_answers=False)
    client = encrypted.km.client()
    client.shell_port = recorder.port
    client.start_channels()
    try:
        reply = client.execute_interactive("runs = globals().get('runs', 0) + 1", timeout=REPLY_TIMEOUT)
        assert reply["content"]["status"] == "ok", reply
    finally:
        client.stop_channels()
        recorder.close()
    with recorder.lock:
        sent = bytes(recorder.seen)
    assert len(sent) > 300, "the client's bytes were not recorded"
    with socket.create_connection((info["ip"], info["shell_port"]), timeout=REPLY_TIMEOUT) as raw:
        raw.sendall(sent)
        answered = b""
        while chunk := raw.recv(65536):  # until the kernel closes it
            answered += chunk
    # At most the greeting and a WELCOME (2 + 168 bytes), then the close.
    assert len(answered) <= 64 + 2 + 168, len(answered)
    assert encrypted.execute("print(runs)").assert_ok().stdout == "1\n"


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="mahtab mcp is mahtab's")
def test_mahtab_mcp_reaches_an_encrypted_kernel(encrypted: Kernel) -> None:
    from test_mcp import call, run, text

    async def steps(session) -> None:
        result = await call(session, "execute", code="y = 21 * 2\nprint(y)")
        assert "42" in text(result), text(result)

    run(encrypted, steps)
    # The notebook's client sees what the MCP client made.
    assert encrypted.execute("print(y)").assert_ok().stdout == "42\n"


def test_a_50_mb_message_crosses_both_ways(encrypted: Kernel) -> None:
    size = 50_000_000
    ex = encrypted.execute(f"big = {'x' * size!r}\nlen(big)", timeout=120).assert_ok()
    assert ex.result()["text/plain"] == str(size)
    ex = encrypted.execute("print(big, end='')", timeout=120).assert_ok()
    assert len(ex.stdout) == size


@pytest.mark.parametrize("transport", ["encrypted", "kernel"])
def test_libzmq_heartbeats_are_answered(transport: str, request: pytest.FixtureRequest) -> None:
    """A libzmq client with ZMQ_HEARTBEAT_TIMEOUT drops a connection that
    does not answer its PINGs; an idle kernel must keep answering them,
    encrypted or not."""
    encrypted: Kernel = request.getfixturevalue(transport)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.linger = 0
    curve_client(sock, encrypted.km)
    sock.heartbeat_ivl = 50
    sock.heartbeat_timeout = 300
    monitor = sock.get_monitor_socket()
    try:
        sock.connect(endpoint(encrypted, "shell"))
        wait_for_event(monitor, {zmq.EVENT_HANDSHAKE_SUCCEEDED}, "handshake")
        # Idle for many heartbeat timeouts: any disconnect shows up here.
        deadline = time.monotonic() + 2.0
        while (left := deadline - time.monotonic()) > 0:
            if monitor.poll(int(left * 1000) + 1):
                event = recv_monitor_message(monitor)["event"]
                assert event != zmq.EVENT_DISCONNECTED, "the connection was dropped for want of PONGs"
        encrypted.kc.session.send(sock, "kernel_info_request", {})
        assert sock.poll(REPLY_TIMEOUT * 1000), "no kernel_info_reply"
        _, reply = encrypted.kc.session.feed_identities(sock.recv_multipart())
        assert encrypted.kc.session.deserialize(reply)["msg_type"] == "kernel_info_reply"
    finally:
        sock.disable_monitor()
        monitor.close()
        sock.close()
