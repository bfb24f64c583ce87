"""The shared local model server with real processes: real kernels started by
jupyter_client, the real llama.cpp server (xllamacpp) and a real model. The
model is SmolLM2-135M (`local_model = "smollm2"`), which loads in about a
second: these tests are about the server's life (one per user, found and
reused, private, stopped when idle or when its model changes), not about
answers; tests/python/test_ask_local.py runs the 1.5B coder model.

Each test has a Jupyter runtime directory of its own (where kernels find the
server), and the conftest stops every server a test started."""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from jupyter_client.manager import start_new_kernel

from conftest import KERNEL_NAME, REPO_ROOT, Kernel, local_model_servers

pytestmark = pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")

PROVIDER_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_PROVIDER", "MAHTAB_MODEL",
                      "MAHTAB_LOCAL_MODEL_URL", "JUPYTER_RUNTIME_DIR")
MAHTAB = REPO_ROOT / "target" / "release" / "mahtab"
SERVER_FILE = "mahtab-local-model-smollm2.json"

# Loading the 135M model and a short answer on 2 cores take seconds.
ASK_TIMEOUT = 120
# A server stops within a few of its polls after its idle time.
STOP_TIMEOUT = 30


class Setup:
    """Kernels of one user that share a runtime directory and settings."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.runtime = tmp_path / "runtime"
        self.settings = tmp_path / "mahtab.toml"
        self.settings.write_text('local_model = "smollm2"\n')
        self.kernels: list[Kernel] = []

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
        # MAHTAB_REPLAY=0: every cell asks the model (these tests are about its server).
        env.update(JUPYTER_RUNTIME_DIR=str(self.runtime), MAHTAB_CONFIG=str(self.settings), MAHTAB_REPLAY="0")
        return env

    def kernel(self) -> Kernel:
        cwd = self.tmp_path / f"kernel-{len(self.kernels)}"
        cwd.mkdir()
        km, kc = start_new_kernel(kernel_name=KERNEL_NAME, startup_timeout=60, cwd=str(cwd), env=self.env())
        kernel = Kernel(km, kc)
        self.kernels.append(kernel)
        return kernel

    def server_file(self) -> dict:
        return json.loads((self.runtime / SERVER_FILE).read_text())

    def servers(self) -> list[psutil.Process]:
        return local_model_servers(self.runtime)

    def close(self) -> None:
        for kernel in self.kernels:
            kernel.kc.stop_channels()
            if kernel.km.is_alive():
                kernel.km.shutdown_kernel(now=True)


@pytest.fixture
def setup(tmp_path):
    setup = Setup(tmp_path)
    try:
        yield setup
    finally:
        setup.close()


def summary_of(execution) -> str:
    panels = [c for c in execution.of_type("display_data") if c["metadata"].get("mahtab", {}).get("kind") == "summary"]
    assert len(panels) == 1, execution.describe()
    return panels[0]["data"]["text/plain"]


def ask(kernel: Kernel, request: str = "Say hello.") -> str:
    """Runs a one-turn %%ask; returns its summary line."""
    execution = kernel.execute(f"%%ask --max-turns 1 --new\n{request}", timeout=ASK_TIMEOUT)
    assert execution.reply["status"] == "ok", execution.describe()
    return summary_of(execution)


def test_two_kernels_share_one_server_which_outlives_them(setup) -> None:
    first, second = setup.kernel(), setup.kernel()
    assert "shared server, started" in ask(first)
    (server,) = setup.servers()
    assert setup.server_file()["pid"] == server.pid
    # The second kernel's first answer comes from the same server.
    assert "shared server, reused" in ask(second)
    assert [p.pid for p in setup.servers()] == [server.pid]
    # %ask_config says which server runs and how to stop it.
    config = second.execute("%ask_config").assert_ok().stdout
    assert f"shared by this user's kernels: pid {server.pid} at http://127.0.0.1:" in config, config
    assert "mahtab local-model --stop stops it" in config, config
    # Shutting both kernels down (jupyter_client ends each one's whole
    # process group) leaves the server for the next kernel.
    for kernel in setup.kernels:
        kernel.km.shutdown_kernel(now=True)
    assert server.is_running() and server.status() != psutil.STATUS_ZOMBIE
    third = setup.kernel()
    assert "shared server, reused" in ask(third)
    assert [p.pid for p in setup.servers()] == [server.pid]


def test_the_server_file_is_private_and_its_key_is_required(setup) -> None:
    ask(setup.kernel())
    path = setup.runtime / SERVER_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(setup.runtime.stat().st_mode) == 0o700
    server = setup.server_file()
    assert server["url"].startswith("http://127.0.0.1:")
    request = json.dumps({"model": "local-model", "messages": [{"role": "user", "content": "hi"}],
                          "max_tokens": 1}).encode()

    def complete(key: str | None) -> int:
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            with urllib.request.urlopen(urllib.request.Request(
                    server["url"] + "/v1/chat/completions", data=request, headers=headers), timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    assert complete(None) == 401
    assert complete("a guess") == 401
    assert complete(server["key"]) == 200
    # The key is in no output of the kernel's, nor in the server's log.
    log = (setup.runtime / "mahtab-local-model-smollm2.log").read_text(errors="replace")
    assert server["key"] not in log


def test_two_kernels_starting_at_once_start_one_server(setup) -> None:
    kernels = [setup.kernel(), setup.kernel()]
    ids = [k.kc.execute("%%ask --max-turns 1 --new\nSay hello.") for k in kernels]
    summaries = []
    for kernel, msg_id in zip(kernels, ids):
        kernel.reply_to(msg_id, timeout=ASK_TIMEOUT)
        summary = kernel.wait_for(
            "iopub",
            lambda m, msg_id=msg_id: m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "display_data"
            and m["content"]["metadata"].get("mahtab", {}).get("kind") == "summary",
            "the run's summary", ASK_TIMEOUT)
        summaries.append(summary["content"]["data"]["text/plain"])
    assert len(setup.servers()) == 1, summaries
    assert sorted("started" in s for s in summaries) == [False, True], summaries


def test_a_kernel_killed_mid_request_leaves_the_server_serving_the_other(setup) -> None:
    doomed, other = setup.kernel(), setup.kernel()
    msg_id = doomed.kc.execute("%%ask --max-turns 1 --new\nWrite a long essay about the history of Python.")
    doomed.wait_for(
        "iopub",
        lambda m: m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream"
        and not m["content"]["text"].startswith("("),
        "the model's first streamed text", ASK_TIMEOUT)
    (server,) = setup.servers()
    kernel = psutil.Process(doomed.km.provisioner.pid)
    kernel.kill()
    kernel.wait(10)
    assert "shared server, reused" in ask(other)
    assert [p.pid for p in setup.servers()] == [server.pid]


def test_an_interrupt_cancels_only_its_own_kernels_request(setup) -> None:
    first, second = setup.kernel(), setup.kernel()
    ask(first)  # the server is up; both requests below are served at once
    essay = "%%ask --max-turns 1 --new\nWrite a long essay about the history of the Python language."
    ids = [first.kc.execute(essay), second.kc.execute(essay)]
    # Both stream at once: neither waits for the other's answer to end.
    for kernel, msg_id in zip((first, second), ids):
        kernel.wait_for(
            "iopub",
            lambda m, msg_id=msg_id: m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream"
            and not m["content"]["text"].startswith("("),
            "the model's first streamed text", ASK_TIMEOUT)
    first.km.interrupt_kernel()
    # Interrupted, not finished: it was still streaming when the second began.
    reply = first.reply_to(ids[0], timeout=10)
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
    # The other kernel's answer goes on to its end.
    reply = second.reply_to(ids[1], timeout=ASK_TIMEOUT)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert "shared server" in second.wait_for(
        "iopub",
        lambda m: m["parent_header"].get("msg_id") == ids[1] and m["msg_type"] == "display_data"
        and m["content"]["metadata"].get("mahtab", {}).get("kind") == "summary",
        "the other run's summary", 10)["content"]["data"]["text/plain"]
    assert first.execute("1 + 1").assert_ok().result()["text/plain"] == "2"


def test_a_server_file_left_by_a_dead_server_is_replaced(setup) -> None:
    setup.runtime.mkdir(mode=0o700)
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = {"pid": gone.pid, "url": "http://127.0.0.1:9", "key": "old", "model": "smollm2",
             "model_file": "/nowhere.gguf", "started": 0, "idle_seconds": 60, "slots": 4}
    path = setup.runtime / SERVER_FILE
    path.write_text(json.dumps(stale))
    path.chmod(0o600)
    assert "shared server, started" in ask(setup.kernel())
    server = setup.server_file()
    assert server["pid"] != gone.pid and server["key"] != "old"
    assert [p.pid for p in setup.servers()] == [server["pid"]]


def test_the_server_stops_when_idle_and_the_next_ask_starts_another(setup) -> None:
    setup.settings.write_text('local_model = "smollm2"\nlocal_model_idle_minutes = 0.05\n')  # 3 s
    kernel = setup.kernel()
    ask(kernel)
    (server,) = setup.servers()
    _, alive = psutil.wait_procs([server], timeout=STOP_TIMEOUT)
    assert not alive, "the server still runs well after its idle time"
    assert not (setup.runtime / SERVER_FILE).exists(), "a stopped server takes its file with it"
    assert "shared server, started" in ask(kernel)


def test_the_server_stops_when_its_model_file_changes(setup) -> None:
    ask(setup.kernel())
    (server,) = setup.servers()
    model_file = Path(setup.server_file()["model_file"])
    before = model_file.stat()
    try:
        os.utime(model_file, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        _, alive = psutil.wait_procs([server], timeout=STOP_TIMEOUT)
    finally:
        os.utime(model_file, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert not alive, "the server still serves a model file that changed"
    assert not (setup.runtime / SERVER_FILE).exists()


def has_ended(process: psutil.Process) -> bool:
    """Whether `process` has exited: gone, or a zombie its parent has not
    reaped yet (which may be reaped while we look)."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_status_lists_the_server_and_stop_stops_it(setup) -> None:
    ask(setup.kernel())
    (server,) = setup.servers()
    # The server file is removed by hand: the server is still listed.
    (setup.runtime / SERVER_FILE).rename(setup.tmp_path / "moved.json")
    status = subprocess.run([MAHTAB, "local-model", "--status"], capture_output=True, text=True, check=True).stdout
    assert f"pid {server.pid}" in status and "no kernel finds it" in status, status
    (setup.tmp_path / "moved.json").rename(setup.runtime / SERVER_FILE)
    status = subprocess.run([MAHTAB, "local-model", "--status"], capture_output=True, text=True, check=True).stdout
    assert f"smollm2 (pid {server.pid}) at http://127.0.0.1:" in status, status
    assert setup.server_file()["key"] not in status
    stopped = subprocess.run([MAHTAB, "local-model", "--stop"], capture_output=True, text=True, check=True).stdout
    assert f"stopped smollm2 (pid {server.pid})" in stopped, stopped
    assert has_ended(server)
    assert not (setup.runtime / SERVER_FILE).exists()


# A server another user runs, made to look like a shared server of ours: the
# marker and a server file's path on its command line, on loopback, answering
# 200 to everything (a client that only checked the health and its key would
# use it). It prints its port, then the path of every request it gets.
IMPOSTOR = """
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self):
        print(self.path, flush=True)
        body = b'{"data": [{"id": "local-model"}]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def as_nobody() -> None:
    nobody = pwd.getpwnam("nobody")
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user")
def test_another_user_can_neither_read_the_key_nor_pass_off_a_server(setup) -> None:
    ask(setup.kernel())
    path = setup.runtime / SERVER_FILE
    read = subprocess.run(["cat", str(path)], capture_output=True, text=True, preexec_fn=as_nobody, cwd="/")
    assert read.returncode != 0 and "Permission denied" in read.stderr, read
    for server in setup.servers():
        server.terminate()
        server.wait(10)

    impostor = subprocess.Popen(["/usr/bin/python3", "-c", IMPOSTOR, "mahtab-local-model-server", str(path)],
                                stdout=subprocess.PIPE, text=True, preexec_fn=as_nobody, cwd="/")
    try:
        port = int(impostor.stdout.readline())
        planted = {"pid": impostor.pid, "url": f"http://127.0.0.1:{port}", "key": "k", "model": "smollm2",
                   "model_file": "/nowhere.gguf", "started": 0, "idle_seconds": 60, "slots": 4}
        path.write_text(json.dumps(planted))
        path.chmod(0o600)
        assert "shared server, started" in ask(setup.kernels[0])
        assert setup.server_file()["pid"] != impostor.pid
    finally:
        impostor.kill()
        asked = impostor.communicate(timeout=10)[0]
    assert asked == "", f"the other user's server was asked: {asked!r}"
