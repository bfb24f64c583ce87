"""A real HTTP server on loopback that speaks the OpenAI chat completions
streaming format (SSE chunks, usage, ``[DONE]``) with scripted answers, for
tests that need the agent's exact behaviour rather than a model's: one
answer per request, in order, and a verdict that the request is done when
the script runs out (or, with ``otherwise``, what it makes of the request).
Every request body is recorded."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DONE = '{"is_complete": true, "reasoning": "done", "next_action": ""}'


def schema_instance(schema: dict):
    """The plainest value a JSON schema allows: the first of an enum, true,
    zero, an empty list, "done", an object of its properties in order."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {name: schema_instance(sub) for name, sub in schema.get("properties", {}).items()}
    return {"boolean": True, "integer": 0, "number": 0, "array": [], "null": None}.get(kind, "done")


def code_or_schema(code: str):
    """An ``otherwise`` for FakeLlm: a request with an answer schema gets
    the plainest answer it allows; any other gets `code`."""

    def answer(body: dict) -> str:
        schema = body.get("response_format", {}).get("json_schema", {}).get("schema")
        return json.dumps(schema_instance(schema)) if schema else code

    return answer


class FakeLlm:
    def __init__(self, answers: list[str], otherwise=None) -> None:
        self.answers = list(answers)
        self.otherwise = otherwise
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                # The context window, as llama.cpp's server says it.
                if self.path != "/props":
                    self.send_error(404)
                    return
                body = json.dumps({"default_generation_settings": {"n_ctx": 32768}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with fake._lock:
                    fake.requests.append(body)
                    if fake.answers:
                        answer = fake.answers.pop(0)
                    else:
                        answer = fake.otherwise(body) if fake.otherwise else DONE
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                pieces = [answer[i : i + 7] for i in range(0, len(answer), 7)]
                for piece in pieces:
                    self._event({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
                self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                self._event({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": len(pieces)}})
                self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")

            def _event(self, data: dict) -> None:
                self._chunk(("data: " + json.dumps(data) + "\n\n").encode())

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return "http://127.0.0.1:%d/v1" % self.server.server_address[1]

    def env(self) -> dict[str, str]:
        """The environment that points a kernel at this server. Its answers
        come in order: a judged "done" is not compared with other solutions
        (two more answers), as in the Rust tests' scripted servers."""
        return {"OPENAI_BASE_URL": self.base_url, "MAHTAB_MODEL": "fake-model", "MAHTAB_CROSS_CHECKS": "0"}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
