"""The asyncio event loop of the cells: found without making one, and run
between cells while tasks that cells created have work.

Nothing here imports asyncio: a session whose cells never use it does not
pay for it.
"""

import os
import sys
import threading

from mahtab.runtime.streams import look_for_thread_parents, stop_looking_for_thread_parents


def _event_loop_of_this_thread():
    """The asyncio event loop cells on this thread use, or None if none was
    made yet (never makes one, nor imports asyncio). ``await`` in a cell runs
    on IPython's loop and ``asyncio.get_event_loop()`` returns asyncio's loop
    of the thread: the first of the two to exist becomes the other too, so
    tasks of both kinds of cell go on together between cells."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    usable = lambda loop: loop is not None and not loop.is_closed()
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    loop = getattr(local, "_loop", None)
    helpers = sys.modules.get("IPython.core.async_helpers")
    ipython_loop = getattr(helpers, "_asyncio_event_loop", None)
    if not usable(loop) and usable(ipython_loop) and threading.current_thread() is threading.main_thread():
        asyncio.set_event_loop(ipython_loop)
        loop = ipython_loop
    elif usable(loop) and helpers is not None and not usable(ipython_loop):
        helpers._asyncio_event_loop = loop
    if not usable(loop) or loop.is_running():
        return None
    return loop


def _has_work(loop):
    """Whether ``loop`` has callbacks or timers waiting (tasks that will go
    on when it runs)."""
    ready, scheduled = getattr(loop, "_ready", None), getattr(loop, "_scheduled", None)
    if ready is not None and scheduled is not None:
        return bool(ready) or any(not timer.cancelled() for timer in scheduled)
    return any(not task.done() for task in sys.modules["asyncio"].all_tasks(loop))


def run_between_cells(wake_fd):
    """Runs this thread's asyncio event loop, if it has work (tasks a cell
    created), until the kernel has something to do (a byte on ``wake_fd``).
    Returns whether it ran. Output of the tasks goes to the cells that
    created them."""
    loop = _event_loop_of_this_thread()
    if loop is None or not _has_work(loop):
        return False
    looked_before = look_for_thread_parents()

    def woken():
        try:
            while os.read(wake_fd, 4096):
                pass
        except BlockingIOError:
            pass
        loop.stop()

    loop.add_reader(wake_fd, woken)
    try:
        loop.run_forever()
    finally:
        loop.remove_reader(wake_fd)
        if not looked_before:
            stop_looking_for_thread_parents()
    return True


def run_on_own_loop(coroutine):
    """Runs ``coroutine`` to its end on this thread's asyncio event loop,
    made (and set for the thread) if there is none yet."""
    import asyncio

    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:  # no loop set on this thread yet
        loop = None
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    return loop.run_until_complete(coroutine)
