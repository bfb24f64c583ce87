"""The %%ask conversation across a real kernel restart through
jupyter_client, with a scripted model over real HTTP: the restarted kernel
continues it, %ask_config says what is kept, --new forgets it, and the saved
file never holds the API key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from conftest import KERNEL_NAME, KERNEL_STARTUP_TIMEOUT, Kernel
from fake_llm import FakeLlm

pytestmark = pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")

PROVIDER_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_PROVIDER", "MAHTAB_MODEL")

KEY = "sk-test-never-saved-0123456789"


def mentions(request: dict, text: str) -> bool:
    return any(text in message["content"] for message in request["messages"])


def test_the_conversation_survives_a_restart_and_new_forgets_it(tmp_path: Path) -> None:
    llm = FakeLlm(["Noted: banana.", "You asked me to remember banana.", "Starting over."])
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    data = tmp_path / "data"
    env.update(llm.env(), OPENAI_API_KEY=KEY, JUPYTER_DATA_DIR=str(data), IPYTHONDIR=str(tmp_path / "ipython"))
    km, kc = start_new_kernel(
        kernel_name=KERNEL_NAME, startup_timeout=KERNEL_STARTUP_TIMEOUT, cwd=str(tmp_path), env=env
    )
    kernel = Kernel(km, kc)
    try:
        kernel.execute(f"%%ask\nRemember the word banana. (My key is {KEY}.)").assert_ok()
        old_pid = km.provisioner.pid
        km.restart_kernel()
        kc.wait_for_ready(timeout=KERNEL_STARTUP_TIMEOUT)
        assert km.provisioner.pid != old_pid, "the kernel process was not restarted"

        kernel.execute("%%ask\nWhich word did I ask you to remember?").assert_ok()
        assert mentions(llm.requests[1], "Remember the word banana"), llm.requests[1]
        assert mentions(llm.requests[1], "Noted: banana.")

        overview = kernel.execute("%ask_config").assert_ok().stdout
        assert "memory     4 messages, kept in " + str(data / "mahtab" / "conversations") in overview, overview
        assert "1 run," in overview, overview
        saved = list((data / "mahtab" / "conversations").glob("*.json"))
        assert len(saved) == 1, saved
        text = saved[0].read_text()
        assert "banana" in text and KEY not in text, text

        kernel.execute("%%ask --new\nLet us start over.").assert_ok()
        assert not mentions(llm.requests[2], "banana"), llm.requests[2]
        assert "banana" not in saved[0].read_text()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        llm.close()


def test_each_notebook_continues_its_own_conversation(tmp_path: Path) -> None:
    """Kernels in one directory keep one conversation per notebook: the one
    jupyter_server names in JPY_SESSION_NAME, or VS Code in its start-up
    cell's __vsc_ipynb_file__; a kernel told neither keeps the directory's."""
    llm = FakeLlm(["Noted: apple.", "Noted: cherry.", "Nothing yet.", "Apple.", "Cherry.", "Nothing here."])
    base = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES and k != "JPY_SESSION_NAME"}
    base.update(llm.env(), JUPYTER_DATA_DIR=str(tmp_path / "data"), IPYTHONDIR=str(tmp_path / "ipython"))

    def ask_in_a_new_kernel(prompt: str, session_name: str | None = None, vscode_file: str | None = None) -> None:
        env = dict(base, **({"JPY_SESSION_NAME": session_name} if session_name else {}))
        km, kc = start_new_kernel(
            kernel_name=KERNEL_NAME, startup_timeout=KERNEL_STARTUP_TIMEOUT, cwd=str(tmp_path), env=env
        )
        try:
            kernel = Kernel(km, kc)
            if vscode_file:
                kernel.execute(f"__vsc_ipynb_file__ = {vscode_file!r}").assert_ok()
            kernel.execute(f"%%ask\n{prompt}").assert_ok()
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)

    lab_notebook, vscode_notebook = str(tmp_path / "lab.ipynb"), str(tmp_path / "vscode.ipynb")
    try:
        ask_in_a_new_kernel("Remember apple.", session_name=lab_notebook)
        ask_in_a_new_kernel("Remember cherry.", vscode_file=vscode_notebook)
        ask_in_a_new_kernel("What do you remember?")
        ask_in_a_new_kernel("What do you remember?", session_name=lab_notebook)
        ask_in_a_new_kernel("What do you remember?", vscode_file=vscode_notebook)
        ask_in_a_new_kernel("What do you remember now?")
    finally:
        llm.close()
    remembered = [[fruit for fruit in ("apple", "cherry") if mentions(r, f"Remember {fruit}.")] for r in llm.requests]
    assert remembered == [["apple"], ["cherry"], [], ["apple"], ["cherry"], []], remembered
    # The directory's own conversation went on too.
    assert mentions(llm.requests[5], "Nothing yet."), llm.requests[5]
    assert len(list((tmp_path / "data" / "mahtab" / "conversations").glob("*.json"))) == 3
