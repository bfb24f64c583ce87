"""``sys.stdout`` and ``sys.stderr`` of the kernel, and which request a
thread's output belongs to.

Output goes to the request being served unless Python code chose another for
its thread or task (``set_thread_parent``): a background thread printing to
the cell that started it, a subshell's cell, an asyncio task between cells.
"""

import contextvars
import functools
import io
import os

from mahtab.runtime.messages import dumps

# The request a thread's output belongs to, when Python code chose one with
# set_thread_parent (a header, JSON text); otherwise output goes to the
# request being served. A context variable, so each thread (and asyncio task)
# has its own. Until someone chooses one, the streams write without looking
# (KernelStream) and the flag spares each publish the lookup.
THREAD_PARENT = contextvars.ContextVar("mahtab_thread_parent", default=None)
_thread_parents_used = False
_STREAMS = []  # the KernelStreams, told when thread parents come into use


def _header_of(parent):
    """The header in ``parent``: a message (with ``header``) or a header."""
    if not parent:
        return {}
    header = parent.get("header", parent)
    return dict(header) if isinstance(header, dict) else {}


def look_for_thread_parents():
    """From now on every write and publish looks for its thread's parent.
    Returns whether they looked already."""
    global _thread_parents_used
    looked_before = _thread_parents_used
    _thread_parents_used = True
    for stream in _STREAMS:
        stream._write_each_time_anew()
    return looked_before


def stop_looking_for_thread_parents():
    """Undoes :func:`look_for_thread_parents` (no thread chose a parent)."""
    global _thread_parents_used
    _thread_parents_used = False
    for stream in _STREAMS:
        stream._write_without_looking()


def set_thread_parent(parent):
    """Output of the calling thread (or task) goes to ``parent``'s request
    from now on (``parent``: a message or its header, as ``get_parent()``
    returns it). Returns a token for :func:`reset_thread_parent`."""
    look_for_thread_parents()
    return THREAD_PARENT.set(dumps(_header_of(parent)))


def reset_thread_parent(token):
    """Undoes the :func:`set_thread_parent` call that returned ``token``."""
    THREAD_PARENT.reset(token)


def thread_parent():
    """The header the calling thread chose (JSON text), or None."""
    return THREAD_PARENT.get() if _thread_parents_used else None


class KernelStream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr``: text goes to the kernel's stream buffer.

    In a process forked from the kernel (``os.fork``, multiprocessing's fork
    start method) only the forking thread exists: the kernel's threads that
    carry output to the client are gone, and locks they held stay held. There
    the streams write to file descriptors 1 and 2 instead, which are the
    kernel's capture pipes, so the kernel reads what the child prints and
    shows it in the running cell. Lines go out whole (line buffering, and a
    pipe write of up to 4 KiB is never interleaved with another).
    """

    _in_child = None  # the descriptor's writer, in a forked child

    def __init__(self, bridge, name):
        super().__init__()
        self._bridge = bridge
        self._name = name
        # In the common case (no forked child, no thread with a parent of
        # its own) writing is the bridge's own method, bound to the stream's
        # name: print() finds it on the instance and calls Rust without a
        # Python frame, which a print loop would pay thousands of times.
        self.write = functools.partial(bridge.write, name)
        _STREAMS.append(self)
        os.register_at_fork(after_in_child=self._write_to_the_descriptor)

    def _write_to_the_descriptor(self):
        raw = io.FileIO(self.fileno(), "w", closefd=False)
        self._in_child = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", line_buffering=True)
        self._write_each_time_anew()

    def _write_each_time_anew(self):
        """From now on every write decides where it goes (``write`` below)."""
        self.__dict__.pop("write", None)

    def _write_without_looking(self):
        """Back to the bridge's own write (no thread with a parent of its own)."""
        if self._in_child is None:
            self.write = functools.partial(self._bridge.write, self._name)

    @property
    def name(self):
        return "<" + self._name + ">"

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "strict"

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        # The kernel captures the process's fd 1 and 2 into the same streams,
        # so code that writes to the descriptor (faulthandler, C code) is shown.
        return 1 if self._name == "stdout" else 2

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        if self._in_child is not None:
            return self._in_child.write(text)
        parent = THREAD_PARENT.get()
        if parent is None:
            self._bridge.write(self._name, text)
        else:
            self._bridge.write_for(self._name, text, parent)
        return len(text)

    # ipykernel's streams offer these too.
    def _is_master_process(self):
        return self._in_child is None

    def set_thread_parent(self, parent):
        return set_thread_parent(parent)

    def reset_thread_parent(self, token):
        reset_thread_parent(token)

    def flush(self):
        if self._in_child is not None:
            self._in_child.flush()
            return
        self._bridge.flush()
