"""bench/prompt_log.py passes each call on to the model server with the
server's key, hands back its answer as the server sent it (streamed or
whole), and writes the request and the answer's text down."""

import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
from prompt_log import PromptLog, answer_text  # noqa: E402

KEY = "server-key"
STREAM = (
    'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
    'data: {"choices":[{"delta":{"content":"{\\"is_complete\\": "}}]}\n\n'
    'data: {"choices":[{"delta":{"content":"true}"}}]}\n\n'
    'data: {"choices":[],"usage":{"prompt_tokens":5}}\n\n'
    "data: [DONE]\n\n"
)


class Upstream(BaseHTTPRequestHandler):
    """An OpenAI-style server that answers only callers with its key."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            self.send_response(401)
            self.end_headers()
            return
        if body.get("stream"):
            data, kind = STREAM.encode(), "text/event-stream"
        else:
            message = {"role": "assistant", "content": "whole answer"}
            data, kind = json.dumps({"choices": [{"message": message}]}).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def proxy(tmp_path):
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    log = tmp_path / "calls.jsonl"
    proxy = PromptLog(f"http://127.0.0.1:{upstream.server_address[1]}", KEY, str(log))
    yield proxy, log
    proxy.close()
    upstream.shutdown()
    upstream.server_close()


def post(url, body):
    request = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.headers.get("Content-Type"), response.read().decode()


def test_a_streamed_call_is_passed_through_with_the_key_and_logged(proxy):
    proxy, log = proxy
    body = {"stream": True, "messages": [{"role": "user", "content": "Request:\nsum it"}]}
    status, kind, text = post(proxy.url, body)
    assert (status, kind, text) == (200, "text/event-stream", STREAM)
    [line] = log.read_text().splitlines()
    logged = json.loads(line)
    assert logged["request"] == body
    assert logged["answer"] == '{"is_complete": true}'
    assert KEY not in line


def test_a_whole_answer_is_logged_by_its_message(proxy):
    proxy, log = proxy
    post(proxy.url, {"messages": []})
    post(proxy.url, {"messages": [], "n": 2})
    answers = [json.loads(line)["answer"] for line in log.read_text().splitlines()]
    assert answers == ["whole answer", "whole answer"]


def test_an_answer_that_is_not_json_is_kept_as_text():
    assert answer_text(b"upstream failed", streamed=False) == "upstream failed"
    assert answer_text(b"data: {broken\n\n", streamed=True) == "data: {broken\n\n"
