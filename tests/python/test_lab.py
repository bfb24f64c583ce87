"""JupyterLab in a real headless browser: a real `jupyter lab` server on
loopback (random port and token) and Debian's Chromium driven by Playwright
(tests/browser/lab.mjs) open a copy of the basics notebook with a %%ask cell
added (its model a scripted server in the OpenAI format), pick the mahtab
kernel, run every cell and check what the page shows:
the pandas table, the plot, the widget, input(), the %%ask panels (the
approval question answered in the page, the "changed" panel), the
stop button interrupting a long cell, and the debugger stopping a cell at a
breakpoint set in its gutter. Screenshots go to target/test-artifacts/.
Also: scripts/lab.sh (`scripts/demo.sh --lab`) serves the demo notebooks on
loopback behind a token and prints the URL.

Needs Chromium and the node packages: scripts/browser-env.sh installs both
(scripts/test.sh runs it)."""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import psutil
import pytest

from fake_llm import FakeLlm
from conftest import JUPYTER, KERNEL_NAME, REPO_ROOT, reap

pytestmark = pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="the notebook has a %%ask cell")

PROVIDER_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_PROVIDER", "MAHTAB_MODEL")
BROWSER_SCRIPT = REPO_ROOT / "tests" / "browser" / "lab.mjs"
ARTIFACTS = REPO_ROOT / "target" / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")

LAB_START_TIMEOUT = 60
# The browser script's own waits are shorter; this bounds a hung browser.
BROWSER_TIMEOUT = 240
LAB_EXIT_TIMEOUT = 20

# `--approve always`: the browser answers the question before the code runs.
ASK_CELL = (
    "%%ask --max-turns 1 --approve always\n"
    "Write one Python code block that assigns 6*7 to a variable named answer and prints it."
)

# The answer of the scripted model the %%ask cell talks to: what Lab shows of
# a run is checked, not what a model happens to write (test_ask_local and the
# console test use the real local model).
ASK_ANSWER = "Here is the code.\n```python\nanswer = 6 * 7\nprint(answer)\n```"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_notebook(root: Path) -> str:
    notebook = nbformat.read(REPO_ROOT / "notebooks" / "basics.ipynb", as_version=4)
    # No kernelspec in the copy: Lab asks which kernel to start, and the
    # browser picks mahtab by its display name.
    notebook.metadata.pop("kernelspec", None)
    notebook.cells.append(nbformat.v4.new_code_cell(ASK_CELL))
    nbformat.write(notebook, root / "lab.ipynb")
    return "lab.ipynb"


def wait_for_lab(server: subprocess.Popen, url: str, token: str, log: Path) -> None:
    deadline = time.monotonic() + LAB_START_TIMEOUT
    request = urllib.request.Request(f"{url}/api/status", headers={"Authorization": f"token {token}"})
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"jupyter lab exited with {server.returncode}\n{log.read_text()}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                json.load(response)
                return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.2)  # poll interval, not a wait for anything in particular
    pytest.fail(f"jupyter lab did not answer /api/status within {LAB_START_TIMEOUT} s\n{log.read_text()}")


def stop_lab(server: subprocess.Popen, runtime_dir: Path) -> list[str]:
    """Stop the server (SIGTERM: it shuts its kernels down first); return the
    command lines of kernels that were still running and had to be killed."""
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(LAB_EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    # Kernels are found by their connection file, which lives in the runtime dir.
    kernels = [
        p for p in psutil.process_iter(["cmdline"]) if any(str(runtime_dir) in a for a in p.info["cmdline"] or [])
    ]
    return reap(kernels, 10)


def test_lab_runs_the_notebook_in_chromium(tmp_path: Path) -> None:
    run_notebook_in_lab(tmp_path, gateway=None)


def test_lab_runs_the_notebook_on_a_kernel_behind_enterprise_gateway(tmp_path: Path) -> None:
    """The same notebook, with Lab started with --gateway-url: the kernel is
    started by Enterprise Gateway (mahtab launch, DistributedProcessProxy)."""
    from test_gateway import MAHTAB, enterprise_gateway

    gateway_root = tmp_path / "gateway"
    gateway_root.mkdir()
    with enterprise_gateway(gateway_root, {}, kernelspecs="distributed") as gateway:
        run_notebook_in_lab(tmp_path, gateway=gateway)
    launched = [
        p for p in psutil.process_iter(["cmdline"])
        if (p.info["cmdline"] or [""])[0] == str(MAHTAB) and "launch" in p.info["cmdline"]
    ]  # fmt: skip
    assert not reap(launched, 10), "kernels the gateway launched are still running"


def start_notebook_session(server, notebook: str) -> str:
    """Starts the notebook's session through Lab's server (a test_gateway
    Server; the gateway starts its kernel) and runs a cell there from a client
    of the test's own; returns the kernel's id.

    Why before the page: with any kernel, the page's first websocket fails its
    handshake (Lab asks for the v1 subprotocol; jupyter_server answers with
    none when it forwards to a gateway) and Lab retries at once, while
    jupyter_server keeps its own connection to the gateway for the failed one
    open. If the gateway is still setting that one up (its first
    kernel_info round trip to a new kernel) when the retry arrives, it waits
    for it to close before serving the retry: 30-50 s, until its ping times
    out. A kernel that has answered a websocket client before is past that
    round trip, so the retry replaces an open connection and goes on."""
    from test_gateway import KERNEL_NAME as GATEWAY_KERNEL_NAME, Channels

    session = server.api("POST", "/api/sessions", {
        "path": notebook, "name": notebook, "type": "notebook", "kernel": {"name": GATEWAY_KERNEL_NAME},
    })  # fmt: skip
    kernel_id = session["kernel"]["id"]
    channels = Channels(server, kernel_id)
    try:
        reply, _ = channels.execute("1 + 1")
        assert reply["content"]["status"] == "ok", reply
    finally:
        channels.close()
    return kernel_id


def run_notebook_in_lab(tmp_path: Path, gateway: tuple[str, str, Path] | None) -> None:
    """Lab in Chromium runs the basics notebook; with `gateway` (its URL,
    token and log), on a kernel behind the gateway that the notebook's
    session started before the page opened (see start_notebook_session)."""
    if not CHROMIUM.exists() or not (BROWSER_SCRIPT.parent / "node_modules" / "playwright-core").exists():
        pytest.fail("Chromium or playwright-core is missing: run scripts/browser-env.sh", pytrace=False)

    root, config, data, runtime = (tmp_path / d for d in ("root", "config", "data", "runtime"))
    for d in (root, config, data, runtime):
        d.mkdir()
    notebook = write_notebook(root)
    # A fresh Lab configuration: no remembered workspace, and no "official
    # Jupyter news?" prompt over the page (nor any news fetched).
    settings = config / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')

    llm = FakeLlm([ASK_ANSWER])
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    if gateway is None:
        env.update(llm.env())
    else:
        # A gateway's kernel gets what the server sends as KERNEL_* variables.
        env.update({f"KERNEL_{name}": value for name, value in llm.env().items()})
        env["JUPYTER_GATEWAY_AUTH_TOKEN"] = gateway[1]
    env.update(
        # Kernelspecs only from .venv (its prefix also holds the widgets' Lab
        # extension); state that Lab and the kernel write goes to the test's dirs.
        JUPYTER_PATH=str(REPO_ROOT / ".venv" / "share" / "jupyter"),
        JUPYTER_DATA_DIR=str(data),
        JUPYTER_CONFIG_DIR=str(config),
        JUPYTER_RUNTIME_DIR=str(runtime),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    env.pop("MPLBACKEND", None)
    port, token = free_port(), secrets.token_hex(24)
    url = f"http://127.0.0.1:{port}"
    command = [
        str(JUPYTER), "lab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}",
        # Nothing from the network: no news, no update check, no extension listing.
        "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]  # fmt: skip
    if os.geteuid() == 0:
        command.append("--allow-root")
    if gateway is not None:
        command += [f"--gateway-url={gateway[0]}", "--debug"]
    log = tmp_path / "lab.log"
    with log.open("w") as log_file:
        server = subprocess.Popen(
            command, cwd=root, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
    leftovers: list[str] = []
    output, returncode, gateway_kernel, notebook_kernels = "", None, None, []
    try:
        wait_for_lab(server, url, token, log)
        if gateway is not None:
            from test_gateway import Server

            lab_api = Server(url, token, [log])
            gateway_kernel = start_notebook_session(lab_api, notebook)
        browser_env = dict(os.environ, LAB_URL=url, LAB_TOKEN=token, NOTEBOOK=notebook, ARTIFACTS=str(ARTIFACTS))
        try:
            result = subprocess.run(
                ["node", str(BROWSER_SCRIPT)],
                cwd=BROWSER_SCRIPT.parent,
                env=browser_env,
                capture_output=True,
                text=True,
                timeout=BROWSER_TIMEOUT,
            )
            output, returncode = result.stdout + result.stderr, result.returncode
        except subprocess.TimeoutExpired as exc:
            # TimeoutExpired carries bytes even when the run used text=True.
            output = b"".join(x or b"" for x in (exc.stdout, exc.stderr)).decode(errors="replace")
            output, returncode = f"{output}\n(timed out after {BROWSER_TIMEOUT} s)", None
        if gateway is not None:
            sessions = lab_api.api("GET", "/api/sessions")
            notebook_kernels = [s["kernel"]["id"] for s in sessions if s["path"] == notebook]
    finally:
        leftovers = stop_lab(server, runtime)
        llm.close()
    (tmp_path / "browser.log").write_text(output)
    gateway_log = "" if gateway is None else f"--- gateway (last lines) ---\n{''.join(gateway[2].read_text().splitlines(True)[-60:])}"
    assert returncode == 0, (
        f"the browser script failed ({returncode})\n--- browser ---\n{output}\n"
        f"--- jupyter lab (last lines) ---\n{''.join(log.read_text().splitlines(True)[-60:])}\n{gateway_log}"
    )
    assert not leftovers, f"kernels still running after jupyter lab stopped: {leftovers}"
    if gateway_kernel is not None:
        assert notebook_kernels == [gateway_kernel], f"the notebook ran on {notebook_kernels}, not on {gateway_kernel}"
    # The agent asked the model once, with the cell's request; then the form
    # the named value must have was asked, and a review looked at the value
    # before the run said "done".
    assert len(llm.requests) == 3, llm.requests
    assert "6*7" in llm.requests[0]["messages"][-1]["content"]
    assert "The values the request names, as they are now:" in llm.requests[2]["messages"][-1]["content"]
    if gateway is None:
        # The run's record is beside the notebook (jupyter_server told the
        # kernel which notebook it runs), under the id Lab gave the cell.
        record = json.loads((root / "lab.ask.json").read_text())
        (run,) = record["cells"]
        assert run["cell_id"] and run["prompt"] == ASK_CELL.split("\n", 1)[1], run
        assert [block["code"] for block in run["blocks"]] == ["answer = 6 * 7\nprint(answer)"], run


# -- scripts/lab.sh (what `scripts/demo.sh --lab` runs after building) ---------------

LAB_URL_LINE = re.compile(r"(http://127\.0\.0\.1:(\d+))/lab/tree/basics\.ipynb\?token=([0-9a-f]{48})\b")


def read_line(stream, deadline: float) -> str:
    """One line of the script's stdout, or "" once the deadline has passed."""
    remaining = deadline - time.monotonic()
    if remaining <= 0 or not select.select([stream], [], [], remaining)[0]:
        return ""
    return stream.readline()


def test_lab_script_serves_the_demo_notebooks_on_loopback_with_a_token(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    port = free_port()
    env = dict(
        os.environ,
        MAHTAB_LAB_PORT=str(port),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTER_RUNTIME_DIR=str(runtime),
    )
    log = tmp_path / "lab.log"
    with log.open("w") as log_file:
        server = subprocess.Popen(
            ["bash", str(REPO_ROOT / "scripts" / "lab.sh")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            start_new_session=True,
        )
    leftovers: list[str] = []
    try:
        deadline = time.monotonic() + LAB_START_TIMEOUT
        printed = ""
        while not (match := LAB_URL_LINE.search(printed)) and (line := read_line(server.stdout, deadline)):
            printed += line
        assert match, f"no URL with a token on stdout\n--- stdout ---\n{printed}\n--- log ---\n{log.read_text()}"
        url, token = match.group(1), match.group(3)
        assert int(match.group(2)) == port
        wait_for_lab(server, url, token, log)

        def get(path: str, with_token: bool = True) -> tuple[int, bytes]:
            headers = {"Authorization": f"token {token}"} if with_token else {}
            try:
                with urllib.request.urlopen(urllib.request.Request(url + path, headers=headers), timeout=10) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as error:
                return error.code, b""

        assert get("/api/status", with_token=False)[0] == 403, "the server answers without its token"
        status, body = get("/api/kernelspecs")
        assert status == 200 and "mahtab" in json.loads(body)["kernelspecs"]
        for name in ("basics.ipynb", "ask.ipynb"):
            assert get(f"/api/contents/{name}")[0] == 200, f"{name} is not in Lab's root"
        status, body = get(f"/lab/tree/basics.ipynb?token={token}", with_token=False)
        assert status == 200 and b"JupyterLab" in body
        listening = {c.laddr.ip for c in psutil.Process(server.pid).net_connections("inet") if c.status == "LISTEN"}
        assert listening == {"127.0.0.1"}, f"listening on {listening}"
    finally:
        leftovers = stop_lab(server, runtime)
    assert not leftovers, f"kernels still running after jupyter lab stopped: {leftovers}"
