"""History outlives the kernel: cells run in one kernel process are in the
history of the next one started on the same machine (for mahtab, a small
SQLite file in the Jupyter data directory)."""

from __future__ import annotations

import os

from jupyter_client.manager import start_new_kernel

from conftest import KERNEL_NAME


def run_and_read_history(env: dict[str, str], code: str) -> list[list]:
    km, kc = start_new_kernel(kernel_name=KERNEL_NAME, startup_timeout=60, env=env)
    try:
        reply = kc.execute_interactive(code, timeout=30)
        assert reply["content"]["status"] == "ok", reply["content"]
        msg_id = kc.history(hist_access_type="tail", n=10, output=False, raw=True)
        while True:
            reply = kc.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                return [list(entry) for entry in reply["content"]["history"]]
    finally:
        kc.stop_channels()
        # A normal shutdown (shutdown_request), as a restart does.
        km.shutdown_kernel()


def test_history_survives_a_restart(tmp_path) -> None:
    env = dict(os.environ)
    # Fresh, private locations for both the Jupyter data dir and IPython's,
    # so the test sees exactly the cells it ran.
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "jupyter")
    env["IPYTHONDIR"] = str(tmp_path / "ipython")

    first = run_and_read_history(env, "first_session = 1")
    assert [entry[2] for entry in first] == ["first_session = 1"]

    second = run_and_read_history(env, "second_session = 2")
    sources = [entry[2] for entry in second]
    assert sources == ["first_session = 1", "second_session = 2"], second
    sessions = [entry[0] for entry in second]
    assert sessions[0] < sessions[1], "each kernel is its own history session"
