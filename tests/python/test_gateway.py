"""mahtab behind Jupyter Enterprise Gateway, as it ships (3.3.0 from PyPI, in
an environment of its own: it needs jupyter_client<7 and jupyter_server<2).

The gateway's DistributedProcessProxy starts the kernel with `mahtab launch`
(the kernelspec `mahtab install --gateway distributed` writes); for a host of
its own (localhost) it runs the command directly, still through the whole
launcher protocol: the sealed connection information sent to its response
address, and signals and shutdown over the kernel's communication port. A
real Jupyter server of the current stack, started with --gateway-url, is the
client: kernels are started, driven and stopped through its REST API and
websocket, as JupyterLab does.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil
import pytest
import websocket
from conftest import local_model_servers
from fake_llm import FakeLlm

REPO_ROOT = Path(__file__).resolve().parents[2]
GATEWAY_VENV = REPO_ROOT / ".venv-gateway"
GATEWAY_PYTHON = GATEWAY_VENV / "bin" / "python"
KUBERNETES_SCRIPTS = GATEWAY_VENV / "share" / "enterprise-gateway" / "etc" / "kernel-launchers" / "kubernetes" / "scripts"
# The mahtab command that writes the kernelspecs: the binary, or with
# MAHTAB_COMMAND the wheel's console script, whose kernelspecs run
# `python -m mahtab launch` in the wheel's environment.
WHEEL = "MAHTAB_COMMAND" in os.environ
MAHTAB = Path(os.environ.get("MAHTAB_COMMAND", REPO_ROOT / "target" / "release" / "mahtab"))
# The environment the kernels run in.
VENV_PYTHON = MAHTAB.with_name("python") if WHEEL else REPO_ROOT / ".venv" / "bin" / "python"
# How a launched kernel's command line starts.
KERNEL_COMMAND = [str(VENV_PYTHON), "-m", "mahtab"] if WHEEL else [str(MAHTAB)]
DOCKERFILE = REPO_ROOT / "kernelspec" / "kubernetes" / "Dockerfile"
KERNEL_POD = Path(__file__).with_name("kernel_pod.py")
KERNEL_NAME = "mahtab_distributed"
# Started like a Kubernetes pod (see kernel_pod.py), on this host.
POD_KERNEL_NAME = "mahtab_pod"

SERVER_START_TIMEOUT = 60
REPLY_TIMEOUT = 60  # the gateway's own kernel start takes a few seconds
PROCESS_EXIT_TIMEOUT = 30
# Loading the local model and a turn of it on 2 cores.
LOCAL_MODEL_TIMEOUT = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(proc: subprocess.Popen, url: str, headers: dict[str, str], log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{proc.args[0]} exited with {proc.returncode}\n{log.read_text()}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)  # poll interval while the server starts
    pytest.fail(f"{url} did not answer within {SERVER_START_TIMEOUT} s\n{log.read_text()}")


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def kernel_processes(kernel_id: str) -> list[psutil.Process]:
    """The mahtab processes launched for `kernel_id` (its id is in their argv)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if cmdline[: len(KERNEL_COMMAND)] == KERNEL_COMMAND and kernel_id in cmdline:
            found.append(proc)
    return found


class Server:
    """A Jupyter server whose kernels live behind the gateway."""

    def __init__(self, url: str, token: str, logs: list[Path], llm: FakeLlm | None = None):
        self.url = url
        self.token = token
        self.logs = logs
        self.llm = llm  # the scripted model the server's kernels are pointed at
        self.gateway: Server | None = None  # the gateway behind a Jupyter server

    def logs_text(self) -> str:
        return "\n".join(f"--- {log.name} ---\n{log.read_text()[-6000:]}" for log in self.logs)

    def api(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=REPLY_TIMEOUT) as response:
                text = response.read()
        except urllib.error.HTTPError as e:
            pytest.fail(f"{method} {path}: HTTP {e.code} {e.read()[:2000]!r}\n{self.logs_text()}")
        return json.loads(text) if text else None


class Channels:
    """A kernel's websocket through the server, in its JSON form."""

    def __init__(self, server: Server, kernel_id: str):
        url = server.url.replace("http://", "ws://") + f"/api/kernels/{kernel_id}/channels"
        self.ws = websocket.create_connection(
            url, header=[f"Authorization: token {server.token}"], timeout=REPLY_TIMEOUT
        )
        self.session = uuid.uuid4().hex
        self.received: list[dict] = []
        self.answered: list[dict] = []  # input requests already answered

    def close(self) -> None:
        self.ws.close()

    def send(self, channel: str, msg_type: str, content: dict, parent: dict | None = None) -> str:
        msg_id = uuid.uuid4().hex
        header = {
            "msg_id": msg_id,
            "msg_type": msg_type,
            "session": self.session,
            "username": "test",
            "date": "2026-01-01T00:00:00.000000Z",
            "version": "5.3",
        }
        message = {
            "header": header,
            "parent_header": parent or {},
            "metadata": {},
            "content": content,
            "channel": channel,
            "buffers": [],
        }
        self.ws.send(json.dumps(message))
        return msg_id

    def wait_for(self, matches: Callable[[dict], bool], what: str, timeout: float = REPLY_TIMEOUT) -> dict:
        deadline = time.monotonic() + timeout
        for message in self.received:
            if matches(message):
                return message
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                kinds = [(m["channel"], m["msg_type"]) for m in self.received[-30:]]
                pytest.fail(f"no {what} within {timeout} s; last received: {kinds}")
            self.ws.settimeout(remaining)
            try:
                message = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                continue
            self.received.append(message)
            if matches(message):
                return message

    def execute(
        self, code: str, answers: Iterator[str] = iter(()), timeout: float = REPLY_TIMEOUT
    ) -> tuple[dict, list[dict]]:
        """Runs `code`; answers input requests from `answers`; returns the
        execute_reply and the cell's IOPub messages up to its idle."""
        msg_id = self.send("shell", "execute_request", {
            "code": code, "silent": False, "store_history": True,
            "user_expressions": {}, "allow_stdin": True, "stop_on_error": True,
        })
        ours = lambda m: m["parent_header"].get("msg_id") == msg_id  # noqa: E731
        while True:
            message = self.wait_for(
                lambda m: ours(m) and (
                    (m["channel"] == "iopub" and m["msg_type"] == "status"
                     and m["content"]["execution_state"] == "idle")
                    or (m["channel"] == "stdin" and m not in self.answered)
                ),
                f"idle or input request for {code!r}",
                timeout,
            )
            if message["channel"] == "stdin":
                self.answered.append(message)
                self.send("stdin", "input_reply", {"value": next(answers)}, parent=message["header"])
                continue
            break
        reply = self.wait_for(lambda m: ours(m) and m["channel"] == "shell", f"execute_reply for {code!r}")
        outputs = [m for m in self.received if ours(m) and m["channel"] == "iopub"]
        return reply, outputs


def text_of(outputs: list[dict], name: str = "stdout") -> str:
    return "".join(m["content"]["text"] for m in outputs if m["msg_type"] == "stream" and m["content"]["name"] == name)


def model_free_environment() -> dict[str, str]:
    """This process's environment without model settings, so that a kernel
    gets them only where a user of the server puts them."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "MAHTAB_", "KERNEL_"))}


@contextlib.contextmanager
def enterprise_gateway(root: Path, gateway_env: dict[str, str], kernelspecs: str = "all") -> Iterator[tuple[str, str, Path]]:
    """Enterprise Gateway on loopback (with `gateway_env` on top of its
    settings here), serving the mahtab kernelspecs (`kernelspecs` "all", or
    "distributed" for that one only); yields its URL, token and log."""
    gateway_bin = GATEWAY_VENV / "bin" / "jupyter-enterprisegateway"
    if not gateway_bin.exists():
        pytest.fail("Enterprise Gateway is missing: run scripts/gateway-env.sh", pytrace=False)
    prefix = root / "prefix"
    subprocess.run(
        [str(MAHTAB), "install", "--gateway", "distributed", "--prefix", str(prefix), "--python", str(VENV_PYTHON)],
        check=True, capture_output=True,
    )
    if kernelspecs == "all":
        install_kubernetes_kernelspec(prefix)
        # A kernel started from the pod the gateway's Kubernetes launcher makes
        # for the mahtab_kubernetes kernelspec: its environment, the image's command.
        kernels = prefix / "share" / "jupyter" / "kernels"
        argv = [str(GATEWAY_PYTHON), str(KERNEL_POD), "run", str(kernels / "mahtab_kubernetes"), str(DOCKERFILE),
                str(MAHTAB), str(VENV_PYTHON), "{kernel_id}", "{port_range}", "{response_address}", "{public_key}"]
        pod_spec = json.loads((kernels / KERNEL_NAME / "kernel.json").read_text())
        pod_spec.update(argv=argv, display_name="mahtab as a pod")
        (kernels / POD_KERNEL_NAME).mkdir()
        (kernels / POD_KERNEL_NAME / "kernel.json").write_text(json.dumps(pod_spec))
    port, token = free_port(), secrets.token_hex(24)
    log = root / "gateway.log"
    env = {
        **model_free_environment(),
        "JUPYTER_PATH": str(prefix / "share" / "jupyter"),
        "JUPYTER_DATA_DIR": str(root / "gateway-data"),
        "JUPYTER_RUNTIME_DIR": str(root / "gateway-runtime"),
        # CI runs as root, whom the gateway refuses to start kernels for by default.
        "EG_UNAUTHORIZED_USERS": "nobody-in-particular",
        "EG_RESPONSE_IP": "127.0.0.1",
        "EG_RESPONSE_PORT": str(free_port()),
        "EG_KERNEL_LOG_DIR": str(root),
        "EG_REMOTE_HOSTS": "localhost",
        # The Jupyter server lists kernels (off by default in the gateway).
        "EG_LIST_KERNELS": "True",
        **gateway_env,
    }
    with log.open("w") as out:
        eg = subprocess.Popen(
            [str(gateway_bin), "--ip=127.0.0.1", f"--port={port}", "--port_retries=0",
             f"--EnterpriseGatewayApp.auth_token={token}", "--log-level=DEBUG"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            # Kernels it starts on this host work here, not in the repository.
            cwd=root,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(eg, f"{url}/api/kernelspecs", {"Authorization": f"token {token}"}, log)
        yield url, token, log
    finally:
        stop(eg)


@contextlib.contextmanager
def gateway_and_server(root: Path, gateway_env: dict[str, str]) -> Iterator[Server]:
    """Enterprise Gateway and a Jupyter server in front of it, whose users'
    %%ask is pointed at a scripted model (through KERNEL_* variables)."""
    llm = FakeLlm([])
    try:
        with enterprise_gateway(root, gateway_env) as (gateway_url, token, gateway_log):
            server_port = free_port()
            server_log = root / "server.log"
            server_env = {
                **model_free_environment(),
                # What a user sets for a remote kernel's %%ask: the server passes
                # KERNEL_* variables on with every kernel start.
                **{f"KERNEL_{name}": value for name, value in llm.env().items()},
                "JUPYTER_GATEWAY_AUTH_TOKEN": token,
                "JUPYTER_CONFIG_DIR": str(root / "server-config"),
                "JUPYTER_RUNTIME_DIR": str(root / "server-runtime"),
            }
            with server_log.open("w") as log:
                jupyter_server = subprocess.Popen(
                    [str(REPO_ROOT / ".venv" / "bin" / "jupyter-server"), "--no-browser", "--allow-root",
                     "--ip=127.0.0.1", f"--port={server_port}", "--port-retries=0",
                     f"--IdentityProvider.token={token}", f"--gateway-url={gateway_url}",
                     f"--ServerApp.root_dir={root}"],
                    env=server_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )
            try:
                url = f"http://127.0.0.1:{server_port}"
                wait_for_http(jupyter_server, f"{url}/api/status", {"Authorization": f"token {token}"}, server_log)
                server = Server(url, token, [gateway_log, server_log], llm)
                server.gateway = Server(gateway_url, token, [gateway_log])
                yield server
            finally:
                stop(jupyter_server)
    finally:
        llm.close()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The gateway starting kernels on a host of its own (no SSH)."""
    with gateway_and_server(tmp_path_factory.mktemp("gateway"), {}) as server:
        yield server


class SshHost:
    """A host of the test's own: a network namespace joined to this one by
    a veth pair, running Debian's sshd, with a key made for the test. It
    shares the file system, so the binary and the Python environment are at
    the same paths there, as the DistributedProcessProxy requires."""

    def __init__(self, root: Path):
        sshd = Path("/usr/sbin/sshd")
        if os.geteuid() != 0 or not sshd.exists():
            pytest.fail("the SSH test needs root and openssh-server: run scripts/gateway-env.sh", pytrace=False)
        tag = os.getpid() % 60000
        self.namespace = f"mahtab-{tag}"
        self.outside, inside = f"mh{tag}", f"mn{tag}"
        net = f"10.{213 + tag // 250 % 40}.{tag % 250}"
        self.gateway_ip, self.ip = f"{net}.1", f"{net}.2"
        self.home = root / "home"
        ssh_dir = self.home / ".ssh"
        ssh_dir.mkdir(parents=True)
        host_key, client_key = root / "host_key", ssh_dir / "id_ed25519"
        for key in (host_key, client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        (root / "authorized_keys").write_text(Path(f"{client_key}.pub").read_text())
        # The gateway's SSH client rejects unknown hosts.
        (ssh_dir / "known_hosts").write_text(f"{self.ip} {Path(f'{host_key}.pub').read_text()}")
        config = root / "sshd_config"
        config.write_text(
            f"ListenAddress {self.ip}\nHostKey {host_key}\nAuthorizedKeysFile {root / 'authorized_keys'}\n"
            f"PidFile {root / 'sshd.pid'}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        )
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        self.sshd: subprocess.Popen | None = None
        for command in (
            f"ip netns add {self.namespace}",
            f"ip link add {self.outside} type veth peer name {inside}",
            f"ip link set {inside} netns {self.namespace}",
            f"ip addr add {self.gateway_ip}/24 dev {self.outside}",
            f"ip link set {self.outside} up",
            f"ip netns exec {self.namespace} ip addr add {self.ip}/24 dev {inside}",
            f"ip netns exec {self.namespace} ip link set {inside} up",
            f"ip netns exec {self.namespace} ip link set lo up",
        ):
            subprocess.run(command.split(), check=True, capture_output=True)
        log = (root / "sshd.log").open("w")
        self.sshd = subprocess.Popen(
            ["ip", "netns", "exec", self.namespace, str(sshd), "-D", "-e", "-f", str(config)],
            stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            try:
                socket.create_connection((self.ip, 22), timeout=2).close()
                break
            except OSError:
                if self.sshd.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"sshd did not start\n{(root / 'sshd.log').read_text()}")
                time.sleep(0.1)  # poll interval while sshd starts

    def close(self) -> None:
        if self.sshd is not None:
            stop(self.sshd)
        subprocess.run(["ip", "netns", "del", self.namespace], capture_output=True)
        subprocess.run(["ip", "link", "del", self.outside], capture_output=True)


@pytest.fixture(scope="module")
def ssh_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, SshHost]]:
    """The gateway starting kernels on another host, over SSH."""
    root = tmp_path_factory.mktemp("ssh-gateway")
    host = SshHost(root)
    try:
        env = {
            "EG_REMOTE_HOSTS": host.ip,
            "EG_REMOTE_USER": "root",
            # Where the remote host reaches the gateway.
            "EG_RESPONSE_IP": host.gateway_ip,
            # The gateway's SSH client finds its key and known_hosts in ~/.ssh.
            "HOME": str(host.home),
        }
        with gateway_and_server(root, env) as server:
            yield server, host
    finally:
        host.close()


def install_kubernetes_kernelspec(prefix: Path) -> Path:
    if not KUBERNETES_SCRIPTS.exists():
        pytest.fail("Enterprise Gateway's launchers are missing: run scripts/gateway-env.sh", pytrace=False)
    subprocess.run(
        [str(MAHTAB), "install", "--gateway", "kubernetes", "--image", "example.org/mahtab-kernel:test",
         "--launcher-scripts", str(KUBERNETES_SCRIPTS), "--prefix", str(prefix), "--python", str(VENV_PYTHON)],
        check=True, capture_output=True,
    )
    return prefix / "share" / "jupyter" / "kernels" / "mahtab_kubernetes"


def start_kernel(server: Server, name: str = KERNEL_NAME) -> tuple[str, Channels]:
    kernel = server.api("POST", "/api/kernels", {"name": name})
    return kernel["id"], Channels(server, kernel["id"])


def run_cells(channels: Channels) -> int:
    """Output, a display, an error and input() round trip; returns the pid
    the cells ran in."""
    reply, outputs = channels.execute("import os\nprint('hello from', os.getpid())")
    assert reply["content"]["status"] == "ok", reply["content"]
    pid = int(text_of(outputs).split()[-1])

    _, outputs = channels.execute("from IPython.display import HTML\ndisplay(HTML('<b>bold</b>'))")
    displays = [m for m in outputs if m["msg_type"] == "display_data"]
    assert displays and displays[0]["content"]["data"]["text/html"] == "<b>bold</b>", outputs

    reply, outputs = channels.execute("1 / 0")
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "ZeroDivisionError"
    assert any(m["msg_type"] == "error" for m in outputs)

    reply, outputs = channels.execute("name = input('who? ')\nprint('hi', name)", iter(["gateway"]))
    assert reply["content"]["status"] == "ok", reply["content"]
    assert "hi gateway" in text_of(outputs)
    return pid


def interrupt_long_cell(server: Server, kernel_id: str, channels: Channels) -> None:
    """A long cell, stopped through the REST API; the namespace survives."""
    channels.execute("kept = 42")
    msg_id = channels.send("shell", "execute_request", {
        "code": "import time\nprint('sleeping', flush=True)\ntime.sleep(120)", "silent": False,
        "store_history": True, "user_expressions": {}, "allow_stdin": False, "stop_on_error": True,
    })
    channels.wait_for(
        lambda m: m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream",
        "the long cell's first output",
    )
    server.api("POST", f"/api/kernels/{kernel_id}/interrupt")
    reply = channels.wait_for(
        lambda m: m["parent_header"].get("msg_id") == msg_id and m["channel"] == "shell",
        "the interrupted cell's reply",
    )
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    _, outputs = channels.execute("print(kept)")
    assert text_of(outputs).strip() == "42", "the namespace survives an interrupt"


def restart(server: Server, kernel_id: str, channels: Channels) -> Channels:
    """Restarts the kernel through the REST API: its process ends, a new one
    serves a fresh namespace; returns the channels to the new one."""
    first = kernel_processes(kernel_id)
    assert first, "the launched kernel process is running"
    server.api("POST", f"/api/kernels/{kernel_id}/restart")
    _, still = psutil.wait_procs(first, timeout=PROCESS_EXIT_TIMEOUT)
    assert not still, "a restart ends the kernel's first process"
    channels.close()
    channels = Channels(server, kernel_id)
    _, outputs = channels.execute("print('kept' in globals())")
    assert text_of(outputs).strip() == "False", "a restarted kernel starts afresh"
    running = kernel_processes(kernel_id)
    assert running and {p.pid for p in running}.isdisjoint(p.pid for p in first)
    return channels


def test_the_gateway_lists_the_mahtab_kernelspec(gateway: Server) -> None:
    specs = gateway.api("GET", "/api/kernelspecs")["kernelspecs"]
    assert KERNEL_NAME in specs, sorted(specs)
    spec = specs[KERNEL_NAME]["spec"]
    assert spec["argv"][len(KERNEL_COMMAND)] == "launch"
    assert "{public_key}" in spec["argv"]


def test_cells_run_through_the_gateway(gateway: Server) -> None:
    kernel_id, channels = start_kernel(gateway)
    try:
        pid = run_cells(channels)
        # The cells ran in the process the gateway launched for this kernel.
        assert pid in [p.pid for p in kernel_processes(kernel_id)]
    finally:
        channels.close()
        gateway.api("DELETE", f"/api/kernels/{kernel_id}")


def test_ask_runs_in_the_remote_kernel_with_settings_from_the_client(gateway: Server) -> None:
    assert gateway.llm is not None
    gateway.llm.answers.append("Computing remotely.\n```python\nremote = 6 * 7\nprint(remote)\n```")
    kernel_id, channels = start_kernel(gateway)
    try:
        # --fresh: a record of an earlier run (in the remote kernel's working
        # directory) would be replayed; this test is about the model call.
        reply, outputs = channels.execute("%%ask --max-turns 1 --fresh\nmultiply six by seven")
        assert reply["content"]["status"] == "ok", reply["content"]
        assert text_of(outputs).startswith("Computing remotely."), outputs
        panels = [m["content"]["data"]["text/plain"] for m in outputs if m["msg_type"] == "display_data"]
        assert "[output]\n42" in panels, panels
        # The model was asked by the remote kernel, for this cell.
        assert "multiply six by seven" in json.dumps(gateway.llm.requests[-1])
        _, outputs = channels.execute("print(remote)")
        assert text_of(outputs) == "42\n"
        # The client's KERNEL_* settings reach the cells' environment too.
        _, outputs = channels.execute("import os; print(os.environ.get('MAHTAB_MODEL'))")
        assert text_of(outputs) == "fake-model\n"
    finally:
        channels.close()
        gateway.api("DELETE", f"/api/kernels/{kernel_id}")


def test_ask_without_a_provider_runs_the_local_model_in_the_remote_kernel(gateway: Server) -> None:
    """Started on the gateway itself, with no model settings at all: %%ask
    starts the local model inside the remote kernel's environment, as the
    shared server of the gateway's user, which outlives the kernel and
    serves the next one (the conftest stops it at the end)."""
    if WHEEL:
        pytest.skip("the wheel's environment has no local extra (tests/wheel checks what %%ask says then)")
    eg = gateway.gateway
    assert eg is not None
    asked_at = time.time()
    kernel_id, channels = start_kernel(eg)
    try:
        reply, outputs = channels.execute("%%ask --max-turns 1 --fresh\nSay hello.", timeout=LOCAL_MODEL_TIMEOUT)
        assert reply["content"]["status"] == "ok", reply["content"]
        assert "(starting the local model" in text_of(outputs), outputs
        (kernel,) = kernel_processes(kernel_id)
        servers = [p for p in local_model_servers() if p.create_time() >= asked_at - 1]
        assert len(servers) == 1, "one local model server runs for the gateway's user"
        # A session of its own: signals to the kernel's process group miss it.
        assert os.getsid(servers[0].pid) == servers[0].pid != os.getsid(kernel.pid)
    finally:
        channels.close()
        eg.api("DELETE", f"/api/kernels/{kernel_id}")
    _, alive = psutil.wait_procs([kernel], timeout=PROCESS_EXIT_TIMEOUT)
    assert not alive, "the kernel ended"
    assert servers[0].is_running() and servers[0].status() != psutil.STATUS_ZOMBIE

    kernel_id, channels = start_kernel(eg)
    try:
        reply, outputs = channels.execute("%%ask --max-turns 1 --fresh\nSay hello.", timeout=LOCAL_MODEL_TIMEOUT)
        assert reply["content"]["status"] == "ok", reply["content"]
        summaries = [m["content"]["data"]["text/plain"] for m in outputs if m["msg_type"] == "display_data"
                     and m["content"]["metadata"].get("mahtab", {}).get("kind") == "summary"]
        assert summaries and "shared server, reused" in summaries[0], outputs
    finally:
        channels.close()
        eg.api("DELETE", f"/api/kernels/{kernel_id}")
        # Started by the gateway's kernels, whose environment the gateway
        # makes: stopped here.
        for server in servers:
            server.terminate()
        psutil.wait_procs(servers, timeout=10)


def test_interrupt_restart_and_shutdown_through_the_gateway(gateway: Server) -> None:
    kernel_id, channels = start_kernel(gateway)
    try:
        # The gateway sends SIGINT over the kernel's communication port.
        interrupt_long_cell(gateway, kernel_id, channels)
        channels = restart(gateway, kernel_id, channels)
    finally:
        channels.close()
        gateway.api("DELETE", f"/api/kernels/{kernel_id}")
    _, alive = psutil.wait_procs(kernel_processes(kernel_id), timeout=PROCESS_EXIT_TIMEOUT)
    assert not alive, f"kernel processes left after shutdown: {[p.cmdline() for p in alive]}"
    assert kernel_id not in [k["id"] for k in gateway.api("GET", "/api/kernels")]


def test_the_launchers_files_are_private_and_a_shutdown_on_its_port_stops_the_kernel(gateway: Server) -> None:
    eg = gateway.gateway
    assert eg is not None
    kernel_id, channels = start_kernel(eg)
    try:
        # The connection file (it holds the key) is in the kernel's Jupyter
        # runtime directory, made new, readable by its owner only.
        _, outputs = channels.execute(
            "from jupyter_core.paths import jupyter_runtime_dir; print(jupyter_runtime_dir())"
        )
        runtime = Path(text_of(outputs).strip())
        connection_file = runtime / f"kernel-{kernel_id}.json"
        assert connection_file.stat().st_mode & 0o777 == 0o600
        assert runtime.stat().st_mode & 0o077 == 0, oct(runtime.stat().st_mode)
        ports = {v for k, v in json.loads(connection_file.read_text()).items() if k.endswith("_port")}
        # The communication port is the one the kernel listens on besides those.
        (kernel,) = kernel_processes(kernel_id)
        listening = {c.laddr.port for c in kernel.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
        (comm_port,) = listening - ports
    finally:
        channels.close()
    with socket.create_connection(("127.0.0.1", comm_port), timeout=REPLY_TIMEOUT) as sock:
        sock.sendall(b'{"shutdown": 1}')
    _, alive = psutil.wait_procs([kernel], timeout=PROCESS_EXIT_TIMEOUT)
    assert not alive, "the gateway's shutdown request stops the kernel"
    assert not connection_file.exists(), "the connection file goes with the kernel"
    # The gateway may restart the kernel it saw die; leave nothing behind.
    request = urllib.request.Request(
        f"{eg.url}/api/kernels/{kernel_id}", method="DELETE", headers={"Authorization": f"token {eg.token}"}
    )
    with contextlib.suppress(urllib.error.URLError):
        urllib.request.urlopen(request, timeout=REPLY_TIMEOUT).close()
    _, alive = psutil.wait_procs(kernel_processes(kernel_id), timeout=PROCESS_EXIT_TIMEOUT)
    assert not alive


def test_the_kubernetes_kernelspec_makes_a_pod_of_the_image(tmp_path: Path) -> None:
    """Enterprise Gateway's own launcher and pod template, with the kernelspec
    `mahtab install --gateway kubernetes` writes; the Kubernetes API is a
    recorder (no cluster here), the pod is checked with the kubernetes
    client's own model."""
    spec_dir = install_kubernetes_kernelspec(tmp_path)
    rendered = subprocess.run(
        [str(GATEWAY_PYTHON), str(KERNEL_POD), "render", str(spec_dir), "k-1", "40000..41000", "10.0.0.5:8877", "KEY"],
        capture_output=True, text=True, timeout=60,
    )
    assert rendered.returncode == 0, rendered.stderr
    pod = json.loads(rendered.stdout.splitlines()[-1])
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "example.org/mahtab-kernel:test"
    assert "command" not in container, "the image's CMD (mahtab launch) runs"
    env = {item["name"]: item["value"] for item in container["env"]}
    # What mahtab launch reads from the pod's environment.
    assert env["KERNEL_ID"] == "k-1" and env["PORT_RANGE"] == "40000..41000"
    assert env["RESPONSE_ADDRESS"] == "10.0.0.5:8877" and env["PUBLIC_KEY"] == "KEY"
    assert pod["spec"]["securityContext"]["runAsUser"] == 1000
    assert pod["metadata"]["labels"]["kernel_id"] == "k-1"


def test_the_kernel_image_builds_where_a_container_builder_runs() -> None:
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no container builder here (docker info fails): the image definition is not built")
    built = subprocess.run(
        ["docker", "build", "-f", str(DOCKERFILE), "-t", "mahtab-kernel:test", str(REPO_ROOT)],
        capture_output=True, text=True, timeout=3600,
    )
    assert built.returncode == 0, built.stderr[-4000:]


def test_a_kernel_started_as_its_pod_would_be_serves_through_the_gateway(gateway: Server) -> None:
    """The pod's environment (rendered by the gateway's launcher) and the
    image's command, run on this host: the kernel reaches the gateway with
    nothing but what a pod gets."""
    kernel_id, channels = start_kernel(gateway, POD_KERNEL_NAME)
    try:
        run_cells(channels)
    finally:
        channels.close()
        gateway.api("DELETE", f"/api/kernels/{kernel_id}")


def network_namespace(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def test_kernels_run_on_a_remote_host_over_ssh(ssh_gateway: tuple[Server, SshHost]) -> None:
    server, host = ssh_gateway
    kernel_id, channels = start_kernel(server)
    try:
        pid = run_cells(channels)
        # The kernel runs on the other host: in its network namespace, where
        # sshd started it.
        assert network_namespace(pid) != network_namespace(os.getpid())
        assert network_namespace(pid) == network_namespace(host.sshd.pid)
        assert pid in [p.pid for p in kernel_processes(kernel_id)]
        interrupt_long_cell(server, kernel_id, channels)
        channels = restart(server, kernel_id, channels)
        _, outputs = channels.execute("import os\nprint(os.getpid())")
        new_pid = int(text_of(outputs))
        assert new_pid != pid and network_namespace(new_pid) == network_namespace(host.sshd.pid)
    finally:
        channels.close()
        server.api("DELETE", f"/api/kernels/{kernel_id}")
    _, alive = psutil.wait_procs(kernel_processes(kernel_id), timeout=PROCESS_EXIT_TIMEOUT)
    assert not alive, f"kernel processes left on the remote host: {[p.cmdline() for p in alive]}"


@pytest.fixture(scope="module")
def kernel_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, subprocess.Popen]]:
    """Jupyter Kernel Gateway (websocket mode) on the local mahtab kernelspec."""
    root = tmp_path_factory.mktemp("kernel-gateway")
    port, token = free_port(), secrets.token_hex(24)
    log = root / "kernel-gateway.log"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(root / "runtime")}
    with log.open("w") as out:
        kg = subprocess.Popen(
            [str(REPO_ROOT / ".venv" / "bin" / "jupyter-kernelgateway"), "--KernelGatewayApp.ip=127.0.0.1",
             f"--KernelGatewayApp.port={port}", "--KernelGatewayApp.port_retries=0",
             f"--KernelGatewayApp.auth_token={token}"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_http(kg, f"{url}/api/kernelspecs", {"Authorization": f"token {token}"}, log)
        yield Server(url, token, [log]), kg
    finally:
        stop(kg)


def test_kernel_gateway_runs_mahtab(kernel_gateway: tuple[Server, subprocess.Popen]) -> None:
    server, kg = kernel_gateway
    kernel_id, channels = start_kernel(server, "mahtab")
    try:
        pid = run_cells(channels)
        kernel = psutil.Process(pid)
        assert kernel.cmdline()[: len(KERNEL_COMMAND)] == KERNEL_COMMAND and kernel.ppid() == kg.pid
        interrupt_long_cell(server, kernel_id, channels)
    finally:
        channels.close()
        server.api("DELETE", f"/api/kernels/{kernel_id}")
    _, alive = psutil.wait_procs([kernel], timeout=PROCESS_EXIT_TIMEOUT)
    assert not alive, "the kernel process ends when the gateway shuts it down"
