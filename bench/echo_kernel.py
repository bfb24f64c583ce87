"""A minimal Jupyter kernel written directly on pyzmq: the benchmark's floor.

It does no work at all, so whatever time a request takes against it is the
cost of the client (jupyter_client), the sockets and the message encoding.

Usage: python echo_kernel.py -f CONNECTION_FILE

Behaviour:
  * shell/control/stdin are ROUTER sockets (stdin is bound but never used),
    iopub is PUB, heartbeat is a REP socket that echoes every frame back;
  * messages are signed with HMAC-SHA256 using the key from the connection
    file, and incoming messages with a bad signature are dropped;
  * kernel_info_request (shell or control) gets a valid kernel_info_reply whose
    language_info names python;
  * execute_request publishes execute_input and an execute_result of "2" for
    any code, and replies ok with the execution count;
  * interrupt_request (control) replies ok; shutdown_request (control) replies
    and then exits;
  * every request is wrapped in status busy / idle on iopub.
"""

import argparse
import hashlib
import hmac
import json
import platform
import uuid
from datetime import datetime, timezone

import zmq

PROTOCOL_VERSION = "5.3"
DELIMITER = b"<IDS|MSG>"


class EchoKernel:
    """Owns the sockets and answers requests until a shutdown_request."""

    def __init__(self, config):
        self.key = config["key"].encode()
        self.session = uuid.uuid4().hex
        self.execution_count = 0
        self.context = zmq.Context()

        def bind(kind, port_name):
            sock = self.context.socket(kind)
            sock.bind(f"{config['transport']}://{config['ip']}:{config[port_name]}")
            return sock

        self.shell = bind(zmq.ROUTER, "shell_port")
        self.control = bind(zmq.ROUTER, "control_port")
        self.stdin = bind(zmq.ROUTER, "stdin_port")
        self.iopub = bind(zmq.PUB, "iopub_port")
        self.heartbeat = bind(zmq.REP, "hb_port")

    # -- wire format --------------------------------------------------------

    def sign(self, frames):
        if not self.key:
            return b""
        mac = hmac.new(self.key, digestmod=hashlib.sha256)
        for frame in frames:
            mac.update(frame)
        return mac.hexdigest().encode()

    def receive(self, sock):
        """Return (identities, message) or None if the signature is wrong."""
        frames = sock.recv_multipart()
        split = frames.index(DELIMITER)
        identities = frames[:split]
        signature, *parts = frames[split + 1 : split + 6]
        if not hmac.compare_digest(signature, self.sign(parts)):
            return None
        header, parent, metadata, content = (json.loads(part) for part in parts)
        message = {"header": header, "parent_header": parent, "metadata": metadata, "content": content}
        return identities, message

    def send(self, sock, identities, msg_type, content, parent):
        header = {
            "msg_id": uuid.uuid4().hex,
            "session": self.session,
            "username": "echo",
            "date": datetime.now(timezone.utc).isoformat(),
            "msg_type": msg_type,
            "version": PROTOCOL_VERSION,
        }
        parts = [json.dumps(part).encode() for part in (header, parent["header"], {}, content)]
        sock.send_multipart([*identities, DELIMITER, self.sign(parts), *parts])

    def publish(self, msg_type, content, parent):
        self.send(self.iopub, [f"kernel.{self.session}.{msg_type}".encode()], msg_type, content, parent)

    # -- handlers -----------------------------------------------------------

    def kernel_info(self, sock, identities, parent):
        self.send(sock, identities, "kernel_info_reply", {
            "status": "ok",
            "protocol_version": PROTOCOL_VERSION,
            "implementation": "echo",
            "implementation_version": "1.0",
            "language_info": {
                "name": "python",
                "version": platform.python_version(),
                "mimetype": "text/x-python",
                "file_extension": ".py",
            },
            "banner": "echo kernel: every cell evaluates to 2",
            "help_links": [],
        }, parent)

    def execute(self, sock, identities, parent):
        content = parent["content"]
        silent = content.get("silent", False)
        if not silent and content.get("store_history", True):
            self.execution_count += 1
        if not silent:
            self.publish("execute_input", {"code": content["code"], "execution_count": self.execution_count}, parent)
            self.publish("execute_result", {
                "execution_count": self.execution_count,
                "data": {"text/plain": "2"},
                "metadata": {},
            }, parent)
        self.send(sock, identities, "execute_reply", {
            "status": "ok",
            "execution_count": self.execution_count,
            "user_expressions": {},
            "payload": [],
        }, parent)

    def interrupt(self, sock, identities, parent):
        self.send(sock, identities, "interrupt_reply", {"status": "ok"}, parent)

    def shutdown(self, sock, identities, parent):
        restart = parent["content"].get("restart", False)
        self.send(sock, identities, "shutdown_reply", {"status": "ok", "restart": restart}, parent)

    # -- main loop ----------------------------------------------------------

    def serve(self):
        handlers = {
            self.shell: {"kernel_info_request": self.kernel_info, "execute_request": self.execute},
            self.control: {
                "kernel_info_request": self.kernel_info,
                "interrupt_request": self.interrupt,
                "shutdown_request": self.shutdown,
            },
        }
        poller = zmq.Poller()
        for sock in (self.shell, self.control, self.heartbeat):
            poller.register(sock, zmq.POLLIN)
        while True:
            for sock, _ in poller.poll():
                if sock is self.heartbeat:
                    sock.send_multipart(sock.recv_multipart())
                    continue
                received = self.receive(sock)
                if received is None:
                    continue
                identities, message = received
                msg_type = message["header"]["msg_type"]
                self.publish("status", {"execution_state": "busy"}, message)
                handler = handlers[sock].get(msg_type)
                if handler is not None:
                    handler(sock, identities, message)
                self.publish("status", {"execution_state": "idle"}, message)
                if msg_type == "shutdown_request":
                    self.context.destroy(linger=1000)
                    return


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-f", dest="connection_file", required=True)
    args = parser.parse_args()
    with open(args.connection_file) as f:
        config = json.load(f)
    if config.get("signature_scheme", "hmac-sha256") != "hmac-sha256":
        parser.error(f"unsupported signature scheme {config['signature_scheme']}")
    EchoKernel(config).serve()


if __name__ == "__main__":
    main()
