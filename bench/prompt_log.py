"""Every prompt the kernels send the local model, and its answer, written down.

A development run's transcript (`agent_eval.py --show`) shows the cell, not
what the hidden calls read: the review's message, the form question, the
cross-check's solutions. With `--prompts FILE`, the evaluation puts this
proxy between the kernels and its local model server (the kernels are
pointed at it with `MAHTAB_LOCAL_MODEL_URL`, as at a server of one's own)
and appends one JSON line per call to FILE: the request as sent, and the
answer's text (a streamed answer's pieces joined). Only for the development
split: held-out work is never read one by one.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer_text(body: bytes, streamed: bool) -> str:
    """The text of an OpenAI-style answer, streamed (server-sent events) or whole."""
    try:
        if not streamed:
            message = json.loads(body)["choices"][0]["message"]
            return message.get("content") or json.dumps(message.get("tool_calls"))
        pieces = []
        for line in body.decode("utf-8", "replace").splitlines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices") or []:
                pieces.append((choice.get("delta") or {}).get("content") or "")
        return "".join(pieces)
    except (ValueError, KeyError, IndexError, TypeError):
        return body.decode("utf-8", "replace")


class PromptLog:
    """A loopback proxy to `upstream` (with its `key`) that logs to `path`."""

    def __init__(self, upstream: str, key: str, path: str):
        target = urllib.parse.urlsplit(upstream)
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0: the answer ends when the connection closes, so a
            # stream is passed on piece by piece without re-chunking it.
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self.forward(None)

            def do_POST(self):
                self.forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def forward(self, body):
                connection = http.client.HTTPConnection(target.hostname, target.port, timeout=900)
                headers = {"Authorization": f"Bearer {key}"}
                if body is not None:
                    headers["Content-Type"] = "application/json"
                connection.request(self.command, self.path, body=body, headers=headers)
                response = connection.getresponse()
                self.send_response(response.status)
                for name, value in response.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.end_headers()
                received = bytearray()
                while chunk := response.read1(65536):
                    received.extend(chunk)
                    self.wfile.write(chunk)
                    self.wfile.flush()
                connection.close()
                if body is None:
                    return
                request = json.loads(body)
                line = json.dumps({"path": self.path, "request": request,
                                   "answer": answer_text(bytes(received), bool(request.get("stream")))})
                with lock, open(path, "a", encoding="utf-8") as log:
                    log.write(line + "\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{target.path}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
