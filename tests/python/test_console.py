"""End-to-end tests with the real `jupyter console` frontend:

- piped (non-tty) stdin, which exposes the IOPub slow-joiner race;
- an interactive session in a pseudo-terminal (pexpect): prompt, output,
  a multi-line block that relies on is_complete_request, Ctrl-C interrupting
  a running cell, and `exit` ending the console and its kernel;
- `%%ask` cells typed into that interface, answered by a scripted model
  server and by the local model.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
from pathlib import Path

import pexpect
import psutil
import pytest
from conftest import JUPYTER, KERNEL_NAME, reap
from fake_llm import FakeLlm

PROVIDER_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_PROVIDER", "MAHTAB_MODEL")

CONSOLE_TIMEOUT = 30  # whole piped session, kernel start-up included
STARTUP_TIMEOUT = 60  # first prompt in the interactive session
STEP_TIMEOUT = 20  # any later step of the interactive session
KERNEL_EXIT_TIMEOUT = 10  # kernel gone after the console has exited


def console_command(connection_file: Path, *extra: str) -> list[str]:
    # -f pins the connection file, whose path then appears on the kernel's command
    # line (kernelspec argv "{connection_file}"); that is how we find the kernel
    # process afterwards, even once the exited console has orphaned it.
    return [str(JUPYTER), "console", "--kernel", KERNEL_NAME, "-f", str(connection_file), *extra]


def kernel_processes(connection_file: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if str(connection_file) in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


def reap_kernel(connection_file: Path) -> list[str]:
    """Wait for the kernel started with this connection file to exit; kill it
    if it does not. Returns the command lines of kernels that had to be killed."""
    return reap(kernel_processes(connection_file), KERNEL_EXIT_TIMEOUT)


# -- a) piped stdin ------------------------------------------------------------
#
# With --simple-prompt, jupyter console reads each line with input(), so a pipe
# works as stdin (without it, prompt_toolkit warns "Input is not a terminal" and
# the test would also depend on is_complete). Lines are then submitted
# back-to-back with no human delay: the console sends one kernel_info_request,
# waits for the reply on shell, and immediately sends execute_request. It never
# checks that its IOPub SUB socket is connected (unlike jupyter_client's
# wait_for_ready, and it ignores iopub_welcome). If the kernel serves shell
# before the SUB's subscription has reached its IOPub socket, the kernel's iopub
# messages for that execution are silently dropped (ZeroMQ's "slow joiner");
# run_cell() then waits forever for status: idle, the "42" never appears and the
# console never exits. A human typing at a terminal hides the race; this test
# does not. The race is timing dependent, hence a few repetitions.
#
# ipykernel 7.4 itself loses this race: about half of its runs hang here (the
# kernel logs the execute_request and its reply, the console receives only
# iopub_welcome, sent once the late subscription arrives); in other runs the
# subscription lands mid-execution and only the "42" is lost. So against python3
# these two symptoms are expected failures; the mahtab kernel must show neither.
#
# `exit` must end the console by itself: the kernel answers it with an
# execute_reply payload {"source": "ask_exit"}. The line after `exit` proves it:
# had the console kept reading, it would print "after-exit", then hit EOF and
# ask "Do you really want to exit".

PIPED_INPUT = "print(6*7)\nexit\nprint('after' + '-exit')\n"


class ConsoleHung(AssertionError):
    """jupyter console did not finish the piped session in time."""


class OutputLost(AssertionError):
    """The console finished, but the output of print(6*7) never reached it."""


def _text(output: str | bytes | None) -> str:
    # TimeoutExpired carries bytes even when the run used text=True.
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


@pytest.mark.xfail(
    KERNEL_NAME == "python3",
    raises=(ConsoleHung, OutputLost),
    strict=False,
    reason="ipykernel loses the IOPub slow-joiner race against jupyter console",
)
@pytest.mark.parametrize("attempt", range(3))
def test_piped_input_runs_and_exit_ends_console(attempt: int, tmp_path: Path) -> None:
    connection_file = tmp_path / "kernel.json"
    try:
        result = subprocess.run(
            console_command(connection_file, "--simple-prompt"),
            input=PIPED_INPUT,
            capture_output=True,
            text=True,
            timeout=CONSOLE_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConsoleHung(
            f"jupyter console did not exit within {CONSOLE_TIMEOUT} s. If stdout ends "
            "at the first prompt, the first execution's iopub messages were lost "
            "(slow joiner).\n"
            f"--- stdout ---\n{_text(exc.stdout)}\n--- stderr ---\n{_text(exc.stderr)}"
        ) from None
    finally:
        leftover_kernels = reap_kernel(connection_file)

    transcript = f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    assert result.returncode == 0, transcript
    assert "In [1]:" in result.stdout, transcript
    after_first_prompt = result.stdout.split("In [1]:", 1)[1]
    if not re.search(r"\b42\b", after_first_prompt):
        # The subscription arrived during the execution: status idle got through,
        # the stream message before it did not.
        raise OutputLost(f"no 42 after the first prompt (slow joiner?)\n{transcript}")
    assert "after-exit" not in result.stdout, f"`exit` did not end the console\n{transcript}"
    assert "Do you really want to exit" not in result.stdout, transcript
    assert not leftover_kernels, f"kernel still running after console exit: {leftover_kernels}"


# -- b) interactive session in a pseudo-terminal --------------------------------
#
# This uses the full prompt_toolkit interface, not --simple-prompt: the simple
# prompt submits every line as its own cell and never sends is_complete_request,
# so multi-line input would be impossible. TERM=dumb makes prompt_toolkit print
# plain text (no colours, no cursor movement), so prompts can be matched as-is.
# Keys are sent as "\r", which is what a terminal sends for Enter.


class Console:
    """A jupyter console in a pty, with a transcript for failure messages."""

    def __init__(self, connection_file: Path, without: tuple[str, ...] = (), extra_env: dict | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k not in without}
        env.update(extra_env or {})
        env["TERM"] = "dumb"
        env.pop("JUPYTER_CONSOLE_TEST", None)  # it would force the simple prompt
        cmd = console_command(connection_file)
        self.transcript = io.StringIO()
        # The kernel starts in the console's directory, the test's own: files
        # its cells and agent write (an %%ask record) stay out of the repository.
        self.child = pexpect.spawn(
            cmd[0],
            cmd[1:],
            cwd=str(connection_file.parent),
            env=env,
            encoding="utf-8",
            codec_errors="replace",
            dimensions=(40, 250),  # wide enough that no line wraps
            timeout=STEP_TIMEOUT,
        )
        self.child.logfile_read = self.transcript

    def expect(self, pattern, what: str, timeout: float = STEP_TIMEOUT) -> str:
        """Wait for regex `pattern`; return the output that preceded it."""
        try:
            self.child.expect(pattern, timeout=timeout)
        except (pexpect.TIMEOUT, pexpect.EOF) as exc:
            reason = "timed out" if isinstance(exc, pexpect.TIMEOUT) else "console exited"
            pytest.fail(
                f"{reason} waiting for {what} ({pattern!r})\n"
                f"--- console transcript ---\n{self.transcript.getvalue()}"
            )
        return self.child.before

    def enter(self, line: str) -> None:
        self.child.send(line + "\r")

    def prompt(self, n: int, timeout: float = STEP_TIMEOUT) -> str:
        return self.expect(rf"In \[{n}\]: ", f"prompt In [{n}]", timeout)

    def close(self) -> None:
        self.child.close(force=True)


def test_interactive_session(tmp_path: Path) -> None:
    connection_file = tmp_path / "kernel.json"
    console = Console(connection_file)
    try:
        console.prompt(1, timeout=STARTUP_TIMEOUT)

        # Even a one-liner needs an is_complete_reply ("complete") to run at once.
        console.enter("print(1)")
        console.expect(r"\r\n1\r\n", "output of print(1)")
        console.prompt(2)

        # The console asks the kernel (is_complete_request) on every Enter. The
        # first two lines must be "incomplete", the blank line ends the block, so
        # it runs as ONE cell: the next prompt is In [3]. The body is indented by
        # hand, so the test holds whether or not the kernel sends an indent hint.
        console.enter("for i in range(3):")
        console.enter("    print(i)")
        console.enter("")
        block_output = console.prompt(3)
        # An "unknown" or "complete" reply makes the console run the first line
        # alone (SyntaxError). Without any reply within 1 s it warns about
        # is_complete_request and stops asking the kernel for the whole session.
        for bad in ("Error", "is_complete"):
            assert bad not in block_output, (
                f"the for block did not run as one cell ({bad!r} in its output)\n"
                f"--- console transcript ---\n{console.transcript.getvalue()}"
            )
        assert re.search(r"\r\n0\r\n1\r\n2\r\n", block_output), (
            "the for block did not print 0, 1, 2\n"
            f"--- console transcript ---\n{console.transcript.getvalue()}"
        )

        # Ctrl-C while a cell runs: the terminal's SIGINT reaches only the console
        # (the kernel runs in its own session), which turns it into a kernel
        # interrupt: SIGINT to the kernel's process group, or interrupt_request
        # if the kernelspec says interrupt_mode "message". We wait for the cell's
        # output "sleeping" (the echoed input reads 'sl' + 'eeping', so it cannot
        # match) to know the cell is running before pressing Ctrl-C.
        console.enter("print('sl' + 'eeping'); import time; time.sleep(30)")
        console.expect(r"\r\nsleeping\r\n", "output of the sleeping cell")
        console.child.sendintr()
        console.expect("KeyboardInterrupt", "KeyboardInterrupt (the sleep lasts 30 s)")
        console.prompt(4)

        console.enter("print('alive')")
        console.expect(r"\r\nalive\r\n", "output after the interrupt")
        console.prompt(5)

        console.enter("exit")
        console.expect(pexpect.EOF, "the console to exit")
        console.child.close()
        assert console.child.exitstatus == 0, (
            f"console exit status {console.child.exitstatus}\n"
            f"--- console transcript ---\n{console.transcript.getvalue()}"
        )
    finally:
        console.close()
        leftover_kernels = reap_kernel(connection_file)
    assert not leftover_kernels, f"kernel still running after console exit: {leftover_kernels}"


# -- c) %%ask cells in the interactive console --------------------------------------
#
# `%%ask` is a cell magic, and by IPython's rules (ipykernel and IPython's own
# terminal answer the same) a cell magic is complete once its text ends in an
# empty line. On the first Enter on a blank line the console checks
# "%%ask ...\nrequest\n", whose last line is the request, so it adds a line;
# the second Enter runs the cell.
#
# What the console shows of a run is checked against a scripted model server
# (tests/python/fake_llm.py), so the check does not hang on what a model
# happens to write: streamed prose, the code panel and the output panel as
# plain text (the code itself is not streamed: it shows once, as its panel),
# the review's verdict, then the run's summary line. The local model, used when
# no provider is configured, is then checked for what does not depend on its
# words: it starts, answers, and its server's log stays out of the terminal.

ASK_TIMEOUT = 240  # model start-up and one turn of a 135M model on 2 cores
SCRIPTED_ANSWER = "Here is the code.\n```python\nanswer = 6 * 7\nprint('the answer is', answer)\n```\n"


def ask(console: Console, request: str) -> None:
    console.enter("%%ask --max-turns 1")
    console.enter(request)
    console.enter("")
    console.enter("")


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")
def test_ask_cell_in_the_console(tmp_path: Path) -> None:
    connection_file = tmp_path / "kernel.json"
    llm = FakeLlm([SCRIPTED_ANSWER])
    console = Console(connection_file, without=PROVIDER_VARIABLES, extra_env=llm.env())
    try:
        console.prompt(1, timeout=STARTUP_TIMEOUT)
        ask(console, "Assign 6*7 to a variable named answer and print it.")

        seen = console.transcript.getvalue
        streamed = console.expect(r"\[code, turn 1\]\r\n", "the code panel", ASK_TIMEOUT)
        assert "Here is the code." in streamed, f"the prose was not streamed before the code panel\n{seen()}"
        assert "```" not in streamed, f"the code block was streamed as text too\n{seen()}"
        console.expect(r"answer = 6 \* 7\r\n", "the code in its panel")
        console.expect(r"\[output\]\r\n", "the output panel of the code")
        console.expect(r"the answer is 42\r\n", "the code's output in its panel")
        console.expect(r"✓ ", "the streamed verdict")
        console.expect(r"done · checked: answer: int: 42 · OpenAI-compatible server fake-model · 1 turn",
                       "the summary line, with what the review checked")
        # One cell: the request line did not run as Python on its own.
        after = console.prompt(2)
        assert "SyntaxError" not in after, seen()

        # The agent's code ran in the console's namespace.
        console.enter("print(answer + 1)")
        console.expect(r"\r\n43\r\n", "a variable the agent's code set")
        console.prompt(3)
        console.enter("exit")
        console.expect(pexpect.EOF, "the console to exit")
    finally:
        console.close()
        llm.close()
        leftover_kernels = reap_kernel(connection_file)
    assert not leftover_kernels, f"kernel still running after console exit: {leftover_kernels}"
    # The answer, the form the named value must have (asked before it is
    # seen), then the review that looked at the value.
    assert len(llm.requests) == 3, f"expected an answer, a question and a review, got {len(llm.requests)} requests"
    question = llm.requests[1]["messages"][-1]["content"]
    assert question.endswith("\nVariable: answer"), question
    review = llm.requests[2]["messages"][-1]["content"]
    assert "The values the request names, as they are now:\nanswer: int: 42" in review, review


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")
def test_ask_cell_in_the_console_with_the_local_model(tmp_path: Path) -> None:
    connection_file = tmp_path / "kernel.json"
    # A runtime directory of its own: no shared model server is running there.
    console = Console(connection_file, without=PROVIDER_VARIABLES,
                      extra_env={"JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")})
    try:
        console.prompt(1, timeout=STARTUP_TIMEOUT)
        ask(console, "Write one Python code block that assigns 6*7 to a variable named answer and prints it.")

        seen = console.transcript.getvalue
        console.expect(r"\(starting the local model", "the notice that the local model starts", ASK_TIMEOUT)
        console.expect(r"shared server, started; mahtab local-model --stop stops it\) · \d+ turn",
                       "the summary line", ASK_TIMEOUT)
        after = console.prompt(2, timeout=ASK_TIMEOUT)
        assert "SyntaxError" not in after, seen()

        console.enter("print('still' + ' here')")
        console.expect(r"\r\nstill here\r\n", "output of the next cell")
        console.prompt(3)
        # The model server's own log stays in the kernel's log (at debug
        # level), out of the console the kernel shares its stderr with.
        assert "llama" not in seen() and "ggml" not in seen(), seen()
        console.enter("exit")
        console.expect(pexpect.EOF, "the console to exit")
    finally:
        console.close()
        leftover_kernels = reap_kernel(connection_file)
    assert not leftover_kernels, f"kernel still running after console exit: {leftover_kernels}"
