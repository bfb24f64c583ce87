"""Protocol conformance: runs the public jupyter_kernel_test suite (0.7.0)
against the kernel, with every sample attribute the suite knows filled in
(the samples are ipykernel's, so the suite also passes against `python3`).

Tests for features the mahtab kernel does not have yet are listed in
PENDING_PYTHON_FEATURES. They are skipped when testing the `mahtab` kernel,
unless MAHTAB_CONFORMANCE_FULL=1. Against any other kernel (e.g. python3)
everything runs. When a feature lands, delete its name from the set; when
the set is empty, delete the mechanism.
"""

from __future__ import annotations

import os

# Import the module, not the classes: a TestCase imported into this namespace
# would be collected by pytest and run a second time with its defaults.
import jupyter_kernel_test as jkt
from conftest import KERNEL_NAME

PENDING_REASON = "pending: Python features issue"

PENDING_PYTHON_FEATURES = {
    "test_completion",
    "test_is_complete",
    "test_pager",
    "test_display_data",
    "test_history",
    "test_inspect",
    "test_clear_output",
}


def skip_pending_features() -> bool:
    return KERNEL_NAME == "mahtab" and os.environ.get("MAHTAB_CONFORMANCE_FULL") != "1"


class MahtabKernelTests(jkt.KernelTests):
    kernel_name = KERNEL_NAME

    # kernel_info_reply.language_info
    language_name = "python"
    file_extension = ".py"

    # stream output
    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"

    # complete_request
    completion_samples = [{"text": "zi", "matches": {"zip"}}]

    # is_complete_request
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples = ["import = 7q"]

    # execute_reply payload {"source": "page"}
    code_page_something = "zip?"

    # execute_reply status "error" with exactly one iopub "error" message
    code_generate_error = "raise"

    # iopub execute_result (text/plain)
    code_execute_result = [
        {"code": "1+2+3", "result": "6"},
        {"code": "[n*n for n in range(1, 4)]", "result": "[1, 4, 9]"},
    ]

    # iopub display_data
    code_display_data = [
        {
            "code": "from IPython.display import HTML, display; display(HTML('<b>test</b>'))",
            "mime": "text/html",
        },
        {
            "code": "from IPython.display import Math, display; display(Math(r'\\frac{1}{2}'))",
            "mime": "text/latex",
        },
    ]

    # history_request; the pattern must match one of code_execute_result's codes
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "range", "search")
    if KERNEL_NAME == "python3":
        # ipykernel answers a "range" request for the current session with session
        # number 0 (IPython's in-memory history) although "tail" reported the real
        # number, so the suite's range check fails on it. The suite's own ipykernel
        # example leaves "range" out too. The mahtab kernel must pass it.
        supported_history_operations = ("tail", "search")

    # inspect_request
    code_inspect_sample = "zip"

    # iopub clear_output
    code_clear_output = "from IPython.display import clear_output; clear_output()"

    def setUp(self) -> None:
        super().setUp()
        if skip_pending_features() and self._testMethodName in PENDING_PYTHON_FEATURES:
            self.skipTest(PENDING_REASON)


class MahtabIopubWelcomeTests(jkt.IopubWelcomeTests):
    kernel_name = KERNEL_NAME
    support_iopub_welcome = True


# -- Checks on this file itself, so a suite upgrade cannot silently skip tests --


def _suite_settings(suite: type) -> set[str]:
    """Public non-method class attributes the suite defines (its sample knobs)."""
    return {
        name
        for name in vars(suite)
        if not name.startswith("_") and not callable(getattr(suite, name))
    }


def test_every_suite_setting_is_provided() -> None:
    for ours, suite in [
        (MahtabKernelTests, jkt.KernelTests),
        (MahtabIopubWelcomeTests, jkt.IopubWelcomeTests),
    ]:
        settings = _suite_settings(suite)
        assert "kernel_name" in settings  # sanity check of the introspection
        missing = sorted(name for name in settings if not vars(ours).get(name))
        assert not missing, f"{ours.__name__} leaves suite settings at their defaults: {missing}"


def test_pending_features_name_real_suite_tests() -> None:
    suite_tests = {name for name in dir(jkt.KernelTests) if name.startswith("test_")}
    assert PENDING_PYTHON_FEATURES <= suite_tests, PENDING_PYTHON_FEATURES - suite_tests
