"""Shared setup for the Python-side tests that drive the kernel through real
Jupyter clients (jupyter_client, jupyter_kernel_test, jupyter console).

The kernel under test is chosen by name with MAHTAB_KERNEL_NAME (default
"mahtab"). Set it to "python3" to run the same tests against ipykernel, the
reference implementation.

Run with the project venv, whose prefix holds the kernelspecs:
    .venv/bin/python -m pytest tests/python
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

REPO_ROOT = Path(__file__).resolve().parents[2]

# Name of the kernelspec to test.
KERNEL_NAME = os.environ.get("MAHTAB_KERNEL_NAME") or "mahtab"

# The venv's `jupyter` launcher; it resolves kernelspecs from the same venv.
JUPYTER = REPO_ROOT / ".venv" / "bin" / "jupyter"

# Upper bound for any single test. This is a safety net, not a timing assumption:
# every wait in these tests has its own shorter timeout. The only wait without one
# is in jupyter_kernel_test itself (IopubWelcomeTests blocks on get_iopub_msg() with
# no timeout), so a kernel that never sends iopub_welcome would otherwise hang the run.
TEST_TIMEOUT_SECONDS = 300


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
