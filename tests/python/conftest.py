"""Shared setup for the Python-side tests that drive the kernel through real
Jupyter clients (jupyter_client, jupyter_kernel_test, jupyter console).

The kernel under test is chosen by name with MAHTAB_KERNEL_NAME (default
"mahtab"). Set it to "python3" to run the same tests against ipykernel, the
reference implementation.

Run with the project venv, whose prefix holds the kernelspecs:
    .venv/bin/python -m pytest tests/python
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import psutil
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_client.manager import start_new_kernel

REPO_ROOT = Path(__file__).resolve().parents[2]

# MAHTAB_TEST_ENCRYPTION=required (or auto) starts every kernel of the run
# as a client requiring transport encryption starts it: jupyter_client puts
# CurveZMQ keys in the connection file and every channel speaks CURVE. The
# same tests then check the kernel over an encrypted connection, including
# those that start kernels through other libraries (jupyter_kernel_test).
TRANSPORT_ENCRYPTION = os.environ.get("MAHTAB_TEST_ENCRYPTION")
if TRANSPORT_ENCRYPTION:
    from jupyter_client.manager import KernelManager

    _manager_init = KernelManager.__init__

    def _encrypted_manager_init(self, *args, **kwargs):
        kwargs.setdefault("transport_encryption", TRANSPORT_ENCRYPTION)
        _manager_init(self, *args, **kwargs)

    KernelManager.__init__ = _encrypted_manager_init

# Name of the kernelspec to test.
KERNEL_NAME = os.environ.get("MAHTAB_KERNEL_NAME") or "mahtab"

# The venv's `jupyter` launcher; it resolves kernelspecs from the same venv.
JUPYTER = REPO_ROOT / ".venv" / "bin" / "jupyter"

# Upper bound for any single test. This is a safety net, not a timing assumption:
# every wait in these tests has its own shorter timeout. The only wait without one
# is in jupyter_kernel_test itself (IopubWelcomeTests blocks on get_iopub_msg() with
# no timeout), so a kernel that never sends iopub_welcome would otherwise hang the run.
# Set well above what the longest tests take on a machine of this kind whose CPU is three
# times slower than the one they were written on (the replay of every graph over every
# task, the graphs notebook: over 300 s there), so that it catches a hang, not a slow CPU.
TEST_TIMEOUT_SECONDS = 900


class TimeLimitExceeded(Exception):
    """Raised inside a test that ran longer than TEST_TIMEOUT_SECONDS."""


@pytest.fixture(scope="session", autouse=True)
def kernelspec_installed() -> None:
    """Fail fast, with a helpful message, if the kernelspec is missing."""
    try:
        KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        pytest.fail(
            f"kernelspec {KERNEL_NAME!r} is not installed in this environment. "
            "Install it into .venv, or set MAHTAB_KERNEL_NAME=python3 to test ipykernel.",
            pytrace=False,
        )
    if not JUPYTER.exists():
        pytest.fail(f"{JUPYTER} not found; run scripts/python-env.sh", pytrace=False)


@pytest.fixture(autouse=True)
def per_test_time_limit():
    """Abort a test that exceeds TEST_TIMEOUT_SECONDS (SIGALRM, main thread)."""

    def on_alarm(signum, frame):
        raise TimeLimitExceeded(f"test exceeded {TEST_TIMEOUT_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TEST_TIMEOUT_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def curve_client(sock, km) -> None:
    """Makes `sock` a CurveZMQ client of `km`'s kernel if that kernel serves
    encrypted (a fresh key pair of its own, as jupyter_client's channels
    have); call before connecting."""
    if km.curve_publickey:
        import zmq

        sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
        sock.curve_serverkey = km.curve_publickey


# -- A kernel driven through jupyter_client, for request/reply tests ------------
#
# Every message received on any channel is kept in a log, so a wait for one
# request's messages never loses messages of another (interleaved requests,
# comm traffic, kernel_info on shell and control). Every wait has a timeout and
# fails the test with what was received so far.

KERNEL_STARTUP_TIMEOUT = 60
REPLY_TIMEOUT = 30  # any single reply, or a cell's outputs up to its idle


def _summary(msgs: list[dict]) -> str:
    lines = []
    for m in msgs:
        content = repr(m["content"])
        if len(content) > 300:
            content = content[:300] + "..."
        lines.append(f"  {m['msg_type']} parent={m['parent_header'].get('msg_id')}: {content}")
    return "\n".join(lines) or "  (nothing)"


@dataclass
class Execution:
    """One execute_request: its reply and the IOPub messages it caused (up to idle)."""

    code: str
    msg_id: str
    reply: dict  # execute_reply content
    iopub: list[dict] = field(default_factory=list)  # full messages, busy..idle

    def of_type(self, *msg_types: str) -> list[dict]:
        """Contents of this execution's IOPub messages of the given types, in order."""
        return [m["content"] for m in self.iopub if m["msg_type"] in msg_types]

    def types(self) -> list[str]:
        return [m["msg_type"] for m in self.iopub]

    def stream(self, name: str) -> str:
        return "".join(c["text"] for c in self.of_type("stream") if c["name"] == name)

    @property
    def stdout(self) -> str:
        return self.stream("stdout")

    @property
    def stderr(self) -> str:
        return self.stream("stderr")

    def describe(self) -> str:
        return f"code: {self.code!r}\nreply: {self.reply!r}\niopub:\n{_summary(self.iopub)}"

    def assert_ok(self) -> "Execution":
        assert self.reply["status"] == "ok", self.describe()
        assert not self.of_type("error"), self.describe()
        return self

    def result(self) -> dict:
        """The single execute_result's data."""
        results = self.of_type("execute_result")
        assert len(results) == 1, f"expected one execute_result\n{self.describe()}"
        return results[0]["data"]


class Kernel:
    """A started kernel plus a blocking client, with logged, timed waits."""

    def __init__(self, km, kc) -> None:
        self.km = km
        self.kc = kc
        self.logs: dict[str, list[dict]] = {c: [] for c in ("iopub", "shell", "control", "stdin")}
        self._getters = {
            "iopub": kc.get_iopub_msg,
            "shell": kc.get_shell_msg,
            "control": kc.get_control_msg,
            "stdin": kc.get_stdin_msg,
        }

    # -- waiting --------------------------------------------------------------

    def wait_for(
        self,
        channel: str,
        predicate: Callable[[dict], bool],
        what: str,
        timeout: float = REPLY_TIMEOUT,
    ) -> dict:
        """First message on `channel` (already logged or new) matching `predicate`."""
        log = self.logs[channel]
        for m in log:
            if predicate(m):
                return m
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"timed out after {timeout} s waiting on {channel} for {what}\n"
                    f"{channel} messages so far:\n{_summary(log)}"
                )
            try:
                m = self._getters[channel](timeout=remaining)
            except queue.Empty:
                continue
            log.append(m)
            if predicate(m):
                return m

    def reply_to(self, msg_id: str, channel: str = "shell", timeout: float = REPLY_TIMEOUT) -> dict:
        return self.wait_for(
            channel,
            lambda m: m["parent_header"].get("msg_id") == msg_id,
            f"the reply to {msg_id}",
            timeout,
        )

    def iopub_until_idle(self, msg_id: str, timeout: float = REPLY_TIMEOUT) -> list[dict]:
        """IOPub messages whose parent is msg_id, up to and including its idle."""
        self.wait_for(
            "iopub",
            lambda m: m["parent_header"].get("msg_id") == msg_id
            and m["msg_type"] == "status"
            and m["content"]["execution_state"] == "idle",
            f"status idle for {msg_id}",
            timeout,
        )
        return [m for m in self.logs["iopub"] if m["parent_header"].get("msg_id") == msg_id]

    # -- requests ---------------------------------------------------------------

    def send(self, msg_type: str, content: dict, channel: str = "shell") -> str:
        """Send an arbitrary request; returns its msg_id."""
        msg = self.kc.session.msg(msg_type, content)
        getattr(self.kc, f"{channel}_channel").send(msg)
        return msg["header"]["msg_id"]

    def execute(self, code: str, timeout: float = REPLY_TIMEOUT, **kwargs: Any) -> Execution:
        """Execute and wait for both the reply and the idle (what frontends do)."""
        kwargs.setdefault("allow_stdin", False)
        msg_id = self.kc.execute(code, **kwargs)
        return self.finish(code, msg_id, timeout)

    def finish(self, code: str, msg_id: str, timeout: float = REPLY_TIMEOUT) -> Execution:
        reply = self.reply_to(msg_id, "shell", timeout)
        assert reply["msg_type"] == "execute_reply", reply
        iopub = self.iopub_until_idle(msg_id, timeout)
        return Execution(code, msg_id, reply["content"], iopub)

    def request(
        self, method: str, *args: Any, timeout: float = REPLY_TIMEOUT, **kwargs: Any
    ) -> dict:
        """Call a KernelClient request method (complete, inspect, history, ...);
        returns the reply content."""
        msg_id = getattr(self.kc, method)(*args, **kwargs)
        reply = self.reply_to(msg_id, "shell", timeout)
        return reply["content"]


@pytest.fixture
def kernel(tmp_path: Path):
    """A fresh kernel per test, started in the test's tmp dir, with private
    IPYTHONDIR and JUPYTER_DATA_DIR there, so its history database (IPython's per
    profile; mahtab's in the Jupyter data dir) is not the user's. Only the
    kernel's environment changes: the kernelspec is still found as usual."""
    env = dict(
        os.environ,
        IPYTHONDIR=str(tmp_path / "ipython"),
        JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
    )
    env.pop("MPLBACKEND", None)  # the kernel must pick its own inline backend
    # ipykernel turns off its fd 1/2 capture when it sees this pytest variable.
    env.pop("PYTEST_CURRENT_TEST", None)
    km, kc = start_new_kernel(
        kernel_name=KERNEL_NAME,
        startup_timeout=KERNEL_STARTUP_TIMEOUT,
        cwd=str(tmp_path),
        env=env,
    )
    try:
        yield Kernel(km, kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@contextlib.contextmanager
def kernel_with_model(tmp_path: Path, answers: list[str], **extra_env: str):
    """A fresh kernel whose %%ask talks to a scripted model (fake_llm.FakeLlm,
    which it yields with the kernel), with no provider of the machine's;
    ``extra_env`` goes to the kernel's environment too."""
    from fake_llm import FakeLlm

    llm = FakeLlm(answers)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "MAHTAB_"))}
    env.update(llm.env(), JUPYTER_DATA_DIR=str(tmp_path / "data"), IPYTHONDIR=str(tmp_path / "ipython"))
    env.update(extra_env)
    km, kc = start_new_kernel(kernel_name=KERNEL_NAME, startup_timeout=KERNEL_STARTUP_TIMEOUT, cwd=str(tmp_path), env=env)
    try:
        yield Kernel(km, kc), llm
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        llm.close()


def reap(procs: list[psutil.Process], timeout: float) -> list[str]:
    """Wait up to `timeout` for `procs` to exit; kill those that do not.
    Returns the command lines of the ones that had to be killed."""
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    leftovers = []
    for proc in alive:
        try:
            leftovers.append(" ".join(proc.cmdline()))
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    return leftovers


# -- The shared local model server ----------------------------------------------
#
# The kernel's local model server is shared by the user's kernels and outlives
# them by design (src/agent/llm/local/shared.rs); a test that starts one stops
# it, so none is left running and no two tests' servers fill the memory.

# The first argument of every shared server's command line (shared::MARKER).
LOCAL_MODEL_MARKER = "mahtab-local-model-server"


def local_model_servers(runtime_dir: Path | None = None) -> list[psutil.Process]:
    """This user's shared local model servers; with `runtime_dir`, those whose
    server file is there (the path is on their command line)."""
    servers = []
    for proc in psutil.process_iter(["cmdline", "uids"]):
        cmdline = proc.info["cmdline"] or []
        if LOCAL_MODEL_MARKER not in cmdline or proc.info["uids"].effective != os.geteuid():
            continue
        if runtime_dir is None or any(arg.startswith(f"{runtime_dir}/") for arg in cmdline):
            servers.append(proc)
    return servers


# The kernels the tests start inherit this mark, and so do the servers they
# start: a server of the user's own, running beside the tests, is never stopped.
TEST_SESSION = os.environ.setdefault("MAHTAB_TEST_SESSION", f"{os.getpid()}-{time.time()}")


@pytest.fixture(autouse=True)
def local_model_servers_stopped():
    """Stops every shared local model server the test started."""
    started = time.time()
    yield
    mine = []
    for proc in local_model_servers():
        with contextlib.suppress(psutil.Error):
            if proc.create_time() >= started - 1 and proc.environ().get("MAHTAB_TEST_SESSION") == TEST_SESSION:
                proc.terminate()
                mine.append(proc)
    reap(mine, timeout=10)
