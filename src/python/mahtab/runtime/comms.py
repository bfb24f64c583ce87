"""Comms (what ipywidgets talk through): the ``comm`` package wired to the
kernel, and the runtime's side of ``comm_open``, ``comm_msg``,
``comm_close`` and ``comm_info_request``.
"""

import logging


class KernelLogHandler(logging.Handler):
    """Sends log records to the kernel's own log (its stderr), not to a cell."""

    def __init__(self, bridge):
        super().__init__()
        self._bridge = bridge

    def emit(self, record):
        try:
            self._bridge.log(record.levelno, "%s: %s" % (record.name, self.format(record)))
        except Exception:
            self.handleError(record)


def install_comms(runtime):
    """Makes the ``comm`` package (used by ipywidgets) talk through the kernel.

    Returns the comm manager, or None when ``comm`` is not installed.
    """
    try:
        import comm
        from comm.base_comm import BaseComm, CommManager
    except ImportError:
        return None

    class KernelComm(BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            content = {"data": {} if data is None else data, "comm_id": self.comm_id, **keys}
            runtime.publish(msg_type, content, metadata or {}, buffers)

    # The comm package reports protocol trouble (an unknown target, a failing
    # callback) through its logger; that belongs in the kernel's log, as with
    # ipykernel, not in the output of whichever cell is current.
    log = logging.getLogger("Comm")
    log.addHandler(KernelLogHandler(runtime.bridge))
    log.propagate = False

    manager = CommManager()
    comm.create_comm = KernelComm
    comm.get_comm_manager = lambda: manager
    return manager


class CommRequests:
    """The comm messages a runtime serves. Needs the runtime's
    ``comm_manager`` (None without the ``comm`` package) and ``publish``."""

    def do_comm_info(self, content):
        target = content.get("target_name")
        comms = self.comm_manager.comms if self.comm_manager else {}
        return {
            "comms": {
                comm_id: {"target_name": comm.target_name}
                for comm_id, comm in comms.items()
                if target is None or comm.target_name == target
            }
        }

    def do_comm_open(self, msg):
        if self.comm_manager is None:
            # No comm support in this environment: refuse, as the spec asks.
            self.publish("comm_close", {"comm_id": msg["content"].get("comm_id"), "data": {}})
            return
        self.comm_manager.comm_open(None, None, msg)

    def do_comm_msg(self, msg):
        if self.comm_manager is not None:
            self.comm_manager.comm_msg(None, None, msg)

    def do_comm_close(self, msg):
        if self.comm_manager is not None:
            self.comm_manager.comm_close(None, None, msg)
