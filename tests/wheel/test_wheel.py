"""The wheel, installed with pip into a fresh environment that has no Rust
toolchain (scripts/wheel-env.sh makes it; run these tests with its Python):
Jupyter lists the kernel with no further command, cells run in that
environment's own interpreter, nbclient runs notebooks/basics.ipynb, an
interrupt stops a running cell, `jupyter console` answers a cell, `%%ask`
with no provider says how to get the local model with pip, and
`mahtab install` writes a kernelspec for another prefix that starts the same
module."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pexpect
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient

from kernel_messages import TIMEOUT, execute, text_of

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.prefix) / "bin"


@pytest.fixture(autouse=True)
def private_jupyter_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only this environment's kernelspecs: no user-level ones, no JUPYTER_PATH."""
    monkeypatch.delenv("JUPYTER_PATH", raising=False)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))


def test_there_is_no_rust_toolchain_here() -> None:
    assert shutil.which("cargo") is None and shutil.which("rustc") is None, os.environ["PATH"]


def test_jupyter_lists_the_kernel_right_after_pip_install() -> None:
    listed = subprocess.run(
        [str(BIN / "jupyter"), "kernelspec", "list", "--json"], capture_output=True, text=True, check=True
    )
    spec = json.loads(listed.stdout)["kernelspecs"]["mahtab"]
    assert Path(spec["resource_dir"]) == Path(sys.prefix) / "share" / "jupyter" / "kernels" / "mahtab"
    assert spec["spec"]["argv"][:4] == ["python", "-m", "mahtab", "kernel"], spec
    assert spec["spec"]["metadata"]["debugger"] is True


def test_cells_run_in_this_environment_and_an_interrupt_stops_one(tmp_path: Path) -> None:
    km, kc = start_new_kernel(kernel_name="mahtab", startup_timeout=TIMEOUT, cwd=str(tmp_path))
    try:
        reply, messages = execute(kc, "import sys, mahtab\nprint(sys.executable)\ntype(get_ipython()).__name__")
        assert reply["status"] == "ok", reply
        assert text_of(messages) == f"{sys.executable}\n'ZMQInteractiveShell'"
        # The kernel's own package is the one it was built with; ask() is there.
        reply, messages = execute(kc, "callable(mahtab.ask), mahtab.__file__")
        assert text_of(messages) == "(True, 'mahtab/__init__.py')", text_of(messages)

        msg_id = kc.execute("import time\nfor _ in range(600):\n    time.sleep(0.1)")
        busy = kc.get_iopub_msg(timeout=TIMEOUT)
        while not (busy["parent_header"].get("msg_id") == msg_id and busy["msg_type"] == "execute_input"):
            busy = kc.get_iopub_msg(timeout=TIMEOUT)
        started = time.monotonic()
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=TIMEOUT)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
        assert time.monotonic() - started < 30
        reply, messages = execute(kc, "'still here'")
        assert text_of(messages) == "'still here'"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)


def test_ask_without_a_provider_or_the_local_extra_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_MODELS_DIR", "MAHTAB_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MAHTAB_CONFIG", os.devnull)
    km, kc = start_new_kernel(kernel_name="mahtab", startup_timeout=TIMEOUT, cwd=str(tmp_path))
    try:
        reply, messages = execute(kc, "%%ask\nSay hello.")
        assert reply["status"] == "error" and reply["ename"] == "AskConfigError", reply
        (panel,) = [m["content"]["data"]["text/plain"] for m in messages if m["msg_type"] == "display_data"]
        assert 'Install it with: pip install "mahtab[local]"' in panel, panel
        reply, messages = execute(kc, "1 + 1")
        assert text_of(messages) == "2", "the kernel goes on"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)


def test_nbclient_runs_the_basics_notebook(tmp_path: Path) -> None:
    notebook = nbformat.read(REPO_ROOT / "notebooks" / "basics.ipynb", as_version=4)
    NotebookClient(
        notebook, kernel_name="mahtab", timeout=120, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    cells = [c for c in notebook.cells if c.cell_type == "code"]
    for cell in cells:
        assert all(o.output_type != "error" for o in cell.outputs), cell.source
    assert f"running in {sys.prefix}" in cells[0].outputs[0].text
    plots = [o for c in cells for o in c.outputs if o.output_type == "display_data" and "image/png" in o.data]
    assert plots and base64.b64decode(plots[0].data["image/png"]).startswith(b"\x89PNG")


def test_jupyter_console_answers_a_cell(tmp_path: Path) -> None:
    console = pexpect.spawn(
        str(BIN / "jupyter"), ["console", "--kernel", "mahtab", "--simple-prompt"],
        cwd=str(tmp_path), encoding="utf-8", timeout=TIMEOUT,
    )
    try:
        console.expect(r"In \[1\]: ")
        console.sendline("print(6 * 7)")
        console.expect("42")
        console.expect(r"In \[2\]: ")
        console.sendline("exit")
        console.expect(pexpect.EOF)
    finally:
        console.close(force=True)


def test_mahtab_install_writes_a_kernelspec_that_starts_this_module(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    done = subprocess.run(
        [str(BIN / "mahtab"), "install", "--prefix", str(prefix), "--name", "mahtab_here"],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    spec = json.loads((prefix / "share" / "jupyter" / "kernels" / "mahtab_here" / "kernel.json").read_text())
    assert spec["argv"] == [sys.executable, "-m", "mahtab", "kernel", "--debugger", "-f", "{connection_file}"]
    manager = KernelSpecManager(kernel_dirs=[str(prefix / "share" / "jupyter" / "kernels")])
    assert manager.get_kernel_spec("mahtab_here").argv[0] == sys.executable
