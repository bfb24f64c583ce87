"""What both runtimes share (plain Python and IPython): the streams,
``input()`` and ``getpass()``, publishing, the cell's request as the parent
of its asyncio tasks, the event loop between cells, subshells, and the
requests the kernel hands over.

A runtime takes a bridge object whose methods reach Rust:

- ``bridge.write(name, text)`` buffers stream text (``"stdout"``/``"stderr"``);
- ``bridge.flush()`` sends buffered stream text now;
- ``bridge.publish(msg_type, content_json)`` flushes streams, then publishes an
  IOPub message (display_data, execute_result, error, clear_output, ...).
"""

import builtins
import functools
import getpass
import json
import signal
import sys
import threading
import time

from mahtab.runtime import protocol
from mahtab.runtime.comms import CommRequests, install_comms
from mahtab.runtime.debugger import DebuggerRequests, make_pdb_interruptible
from mahtab.runtime.event_loop import run_between_cells, run_on_own_loop
from mahtab.runtime.import_hooks import patch_on_import
from mahtab.runtime.messages import dumps
from mahtab.runtime.streams import THREAD_PARENT, KernelStream, reset_thread_parent, set_thread_parent, thread_parent


def _interruptible_sleep(bridge):
    """``time.sleep`` as the kernel serves it: in a subshell's cell an
    interrupt ends it at once (a signal reaches only the main thread's
    blocking calls); anywhere else it is the real one."""
    real = time.sleep

    @functools.wraps(real)
    def sleep(seconds, /):
        bridge.sleep(real, seconds)

    return sleep


class BaseRuntime(CommRequests, DebuggerRequests):
    """What every runtime shares: stream redirection, publishing, requests, comms."""

    def __init__(self, bridge):
        self.bridge = bridge
        self._agent_displays = None  # a list of mime bundles while agent code runs
        self.comm_manager = install_comms(self)
        sys.stdout = KernelStream(bridge, "stdout")
        sys.stderr = KernelStream(bridge, "stderr")
        builtins.input = self.input
        getpass.getpass = self.getpass
        patch_on_import("pdb", self._debugger)
        time.sleep = _interruptible_sleep(bridge)
        # The kernel raises KeyboardInterrupt through Python's own handler;
        # make sure it is the one CPython calls (the kernel then takes the
        # signal over at the OS level).
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        # Like `python -m ipykernel_launcher`: modules next to the notebook import.
        if "" not in sys.path:
            sys.path.insert(0, "")

    # -- cells and the event loop between them ---------------------------------

    def execute(self, code, execution_count, silent, store_history, user_expressions_json):
        """Runs one cell (``_execute``, the runtime's own) with its request
        as the context's parent, so asyncio tasks it creates, which copy the
        context, print to it when they run later, between or during other
        cells. (Within the cell the streams need not look: the kernel's
        current request is the cell.)"""
        if THREAD_PARENT.get() is not None:  # a subshell's cell, which has its own
            return self._execute(code, execution_count, silent, store_history, user_expressions_json)
        token = THREAD_PARENT.set(self.bridge.parent_header())
        try:
            return self._execute(code, execution_count, silent, store_history, user_expressions_json)
        finally:
            THREAD_PARENT.reset(token)

    def run_event_loop(self, wake_fd):
        """Between cells: runs this thread's asyncio event loop, if it has
        work (tasks a cell created), until the kernel has something to do (a
        byte on ``wake_fd``). Returns whether it ran. Output of the tasks goes
        to the cells that created them."""
        return run_between_cells(wake_fd)

    # -- subshells -------------------------------------------------------------

    def start_subshell(self, inbox, name):
        """Starts a kernel subshell's thread: it serves the commands the
        kernel puts in ``inbox`` until the kernel deletes the subshell."""
        thread = threading.Thread(target=self.bridge.serve_subshell, args=(inbox, self), name=name, daemon=True)
        thread.start()

    def execute_for(self, parent_json, *args):
        """``execute`` on a subshell's thread: its output goes to ``parent``."""
        token = set_thread_parent(json.loads(parent_json))
        try:
            return self.execute(*args)
        finally:
            reset_thread_parent(token)

    def request_for(self, parent_json, *args):
        """``request`` on a subshell's thread, as a child of ``parent``."""
        token = set_thread_parent(json.loads(parent_json))
        try:
            return self.request(*args)
        finally:
            reset_thread_parent(token)

    # -- requests, output and input ---------------------------------------------

    def request(self, method, replies, content_json, buffers=()):
        """Serves a request the kernel names by the method that serves it;
        returns the reply content as JSON text."""
        return protocol.serve(self, method, replies, content_json, buffers)

    def publish(self, msg_type, content, metadata=None, buffers=None):
        metadata_json = None if metadata is None else dumps(metadata)
        buffers = None if not buffers else [bytes(b) for b in buffers]
        self.bridge.publish(msg_type, dumps(content), metadata_json, buffers, thread_parent())

    def input(self, prompt=""):
        """``input()``: asks the frontend over the stdin channel."""
        __tracebackhide__ = True  # IPython leaves this frame out of tracebacks
        return self.bridge.input(str(prompt), False)

    def getpass(self, prompt="Password: ", stream=None):
        """``getpass.getpass()``: like input(), without echo in the frontend."""
        __tracebackhide__ = True
        return self.bridge.input(str(prompt), True)

    # -- what the package's other parts build on (the agent: mahtab.agent) ------
    # A runtime alone serves no agent; mahtab.runtimes mixes one in before
    # these, and code run outside a cell goes through them as a cell would.

    def _serve_special_cell(self, code):
        """Serves ``code`` if it is a cell that is not Python to this runtime
        but another part's (the agent's ``%%ask`` in plain Python); whether
        it was."""
        return False

    def _add_magics(self, shell):
        """Registers other parts' magics with IPython's ``shell``."""

    def note_cell(self, code, store_history, reply=None):
        """Called after each cell the user ran, with its reply."""

    def _as_python(self, code):
        """Code in a cell's syntax as plain Python: the IPython runtime
        turns its magics and shell escapes into calls."""
        return code

    def _run_coroutine(self, coroutine):
        """Runs ``coroutine`` on this thread's event loop (one of its own)."""
        return run_on_own_loop(coroutine)

    def _after_code(self):
        """Runs after code outside a cell ran, failed or not, while its
        output is still captured: the place for what a shell does after
        each execution."""

    def shutdown(self):
        """Called once before the kernel exits."""

    def _debugger(self, pdb):
        """Adjusts the ``pdb`` module when it is first imported."""
        make_pdb_interruptible(pdb)
