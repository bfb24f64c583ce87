"""%%ask end to end through the real kernel with the real local model: with
no provider configured the kernel serves SmolLM2-135M (llama.cpp, installed
in the project's environment) and talks to it. The model is small and often
wrong, so these tests check structure (streamed text, code and output
panels, the shared namespace, interrupts), not its answers."""

from __future__ import annotations

import os

import pytest
from jupyter_client.manager import start_new_kernel

from conftest import KERNEL_NAME, Kernel

pytestmark = pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")

PROVIDER_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_PROVIDER", "MAHTAB_MODEL")

# Loading the model and a turn of a 135M model on 2 cores take seconds, not minutes.
ASK_TIMEOUT = 240


@pytest.fixture
def local_kernel(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    env.update(IPYTHONDIR=str(tmp_path / "ipython"), JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"))
    km, kc = start_new_kernel(kernel_name=KERNEL_NAME, startup_timeout=60, cwd=str(tmp_path), env=env)
    try:
        yield Kernel(km, kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel()


def panels(execution, kind):
    """Contents of the execution's %%ask panels of one kind."""
    return [
        c for c in execution.of_type("display_data") if c["metadata"].get("mahtab", {}).get("kind") == kind
    ]


def test_ask_with_the_local_model_streams_runs_code_and_shares_the_namespace(local_kernel) -> None:
    before = set(local_kernel.execute("sorted(globals())").assert_ok().result()["text/plain"].split("'"))
    ask = local_kernel.execute(
        "%%ask --max-turns 1\n"
        "Write one Python code block that assigns 6*7 to a variable named answer and prints it.",
        timeout=ASK_TIMEOUT,
    )
    assert ask.reply["status"] == "ok", ask.describe()
    assert len(ask.of_type("stream")) >= 2, "the answer streams in several messages"
    assert ask.stdout.strip(), "the model's text reaches the cell"
    code, output, summary = panels(ask, "code"), panels(ask, "output") + panels(ask, "error"), panels(ask, "summary")
    assert code and output, ask.describe()
    for panel in code + output:
        assert {"text/plain", "text/markdown"} <= set(panel["data"])
    assert "local-model" in summary[0]["data"]["text/plain"]

    after = set(local_kernel.execute("sorted(globals())").assert_ok().result()["text/plain"].split("'"))
    assert after - before, "the agent's code ran in the user's namespace"


def test_interrupting_the_local_model_stops_the_cell_and_the_kernel_lives_on(local_kernel) -> None:
    msg_id = local_kernel.kc.execute("%%ask\nWrite a very long essay about the history of the Python language.")
    local_kernel.wait_for(
        "iopub",
        lambda m: m["parent_header"].get("msg_id") == msg_id
        and m["msg_type"] == "stream"
        and not m["content"]["text"].startswith("(starting the local model"),
        "the model's first streamed text",
        ASK_TIMEOUT,
    )
    local_kernel.km.interrupt_kernel()
    reply = local_kernel.reply_to(msg_id, timeout=10)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert local_kernel.execute("1 + 1").assert_ok().result()["text/plain"] == "2"
