"""Benchmark how much time mahtab adds to a streamed %%ask answer.

A replay provider (a real HTTP server on loopback, in its own process so it
never competes with the client for the GIL) streams a text-only answer of
--tokens tokens, one SSE event per token, in the OpenAI-compatible format and
in the Anthropic Messages format. The installed mahtab kernelspec
(.venv/share/jupyter/kernels/mahtab) is pointed at it through its
environment, and `%%ask --new --no-exec` cells are timed through
jupyter_client. An answer without code ends the default graph after one model
call, so each cell is one stream.

Per cell the server reports when it wrote the first and the last byte of the
stream body; both processes read the same monotonic clock, so these compare
directly with when the client received the first `stream` message and the
cell's idle status. Figures (medians over --reps cells):

  first text   first stream message received - provider's first body byte
  raw stream   provider's last body byte - its first body byte
  added        (execute_request sent -> idle) - raw stream - fixed %%ask cost,
               where the fixed cost is the same measure for a one-token answer
               in the same run (namespace summary, connection, summary panel)
  messages     IOPub stream messages per cell, and the most of them that
               arrived within any one second

Three pacings: "flood" writes the whole answer at once (one write: the
kernel's own processing speed, with the server out of the way); "burst"
writes every token as its own write, as fast as the server can; "paced"
writes --rate tokens per second, like a fast model, where coalescing shows.
This is a report, not a test: it asserts nothing about timings, but it checks
that the streamed text arrives exactly.

Usage: .venv/bin/python bench/stream_bench.py [--tokens 5000] [--reps 7]
            [--rate 1000] [--formats openai,anthropic]
            [--pacings flood,burst,paced] [--json OUT]
"""

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from time import perf_counter, sleep

from jupyter_client.kernelspec import KernelSpecManager

from bench import VENV_KERNELS, KernelRun, progress, require_ok

CELL_TIMEOUT = 120.0
PACINGS = ("flood", "burst", "paced")
REPORT_TIMEOUT = 10.0
WORDS = ("the", "kernel", "streams", "text", "quickly,", "and", "a", "naïve", "café", "answer",
         "keeps", "flowing", "—", "über", "tokens", "to", "the", "cell.")


def token(i):
    """The i-th token of the replayed answer: a word with its leading space,
    a line break now and then; never a code fence."""
    word = WORDS[i % len(WORDS)]
    return (f"\n{word}" if i % 40 == 39 else f" {word}") if i else word


def answer_text(tokens):
    return "".join(token(i) for i in range(tokens))


def openai_events(tokens):
    def chunk(text):
        event = {"id": "r", "object": "chat.completion.chunk", "model": "replay",
                 "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        return f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()

    events = [chunk(token(i)) for i in range(tokens)]
    usage = {"id": "r", "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": tokens,
                                                 "total_tokens": 100 + tokens}}
    events.append(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
    return events


def anthropic_events(tokens):
    def event(name, data):
        return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

    start = event("message_start", {"type": "message_start", "message": {
        "id": "msg_r", "type": "message", "role": "assistant", "content": [], "model": "replay",
        "stop_reason": None, "usage": {"input_tokens": 100, "output_tokens": 1}}})
    start += event("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
    start += event("ping", {"type": "ping"})
    deltas = [event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": token(i)}})
              for i in range(tokens)]
    end = event("content_block_stop", {"type": "content_block_stop", "index": 0})
    end += event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                   "usage": {"output_tokens": tokens}})
    end += event("message_stop", {"type": "message_stop"})
    return [start + deltas[0], *deltas[1:], end]


def serve(port_out, reports):
    """The replay provider (runs in its own process). The model name in the
    request says what to stream: replay-TOKENS-PACING, where PACING is
    "flood" (one write), "burst" (a write per token, no waiting) or a rate in
    tokens per second."""
    cache = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            # The context window, as llama.cpp's server says it.
            payload = json.dumps({"default_generation_settings": {"n_ctx": 32768}}).encode()
            self.send_response(200 if self.path == "/props" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            _, tokens, pacing = body["model"].split("-")
            tokens = int(tokens)
            rate = 0.0 if pacing in ("flood", "burst") else float(pacing)
            fmt = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}[self.path]
            if (fmt, tokens) not in cache:
                make = openai_events if fmt == "openai" else anthropic_events
                # Each event as one HTTP chunk, framed before the clock starts.
                cache[fmt, tokens] = [b"%x\r\n%b\r\n" % (len(e), e) for e in make(tokens)]
            frames = cache[fmt, tokens]
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
            send = self.connection.sendall
            first = perf_counter()
            if pacing == "flood":
                send(head + b"".join(frames))
                frames_left = []
            else:
                send(head + frames[0])
                frames_left = frames[1:]
            for i, frame in enumerate(frames_left, 1):
                if rate:
                    delay = first + i / rate - perf_counter()
                    if delay > 0:
                        sleep(delay)
                send(frame)
            last = perf_counter()
            send(b"0\r\n\r\n")
            self.close_connection = True
            reports.put({"model": body["model"], "format": fmt, "first": first, "last": last,
                         "bytes": sum(len(f) for f in frames), "events": len(frames)})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_out.put(server.server_address[1])
    server.serve_forever()


def median(values):
    return statistics.median(values) if values else None


def ask_cell(run, reports, model, expected):
    """Runs one %%ask cell with the replay model; returns its timings."""
    arrivals = []
    text = []

    def on_iopub(msg):
        if msg["msg_type"] == "stream":
            arrivals.append(perf_counter())
            text.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            raise RuntimeError(f"%%ask failed: {msg['content']['evalue']}")

    sent = perf_counter()
    msg_id = run.kc.execute(f"%%ask --new --no-exec --model {model}\nreplay")
    outcome = run.wait([msg_id], CELL_TIMEOUT, on_iopub=on_iopub)[msg_id]
    require_ok(outcome.reply)
    report = reports.get(timeout=REPORT_TIMEOUT)
    if report["model"] != model:
        raise RuntimeError(f"the server streamed {report['model']}, not {model}")
    shown = "".join(text)
    if shown != expected + "\n":
        raise RuntimeError(f"streamed text differs: {len(shown)} characters shown, "
                           f"{len(expected) + 1} expected")
    # The most messages in any 1 s window (a window starting at a message).
    peak = max(sum(1 for b in arrivals[i:] if b - a < 1.0) for i, a in enumerate(arrivals))
    return {
        "total_s": outcome.idle_at - sent,
        "raw_stream_s": report["last"] - report["first"],
        "first_text_s": arrivals[0] - report["first"],
        "after_last_byte_s": outcome.idle_at - report["last"],
        "stream_messages": len(arrivals),
        "peak_messages_per_s": peak,
        "bytes": report["bytes"],
    }


def bench_format(fmt, ksm, reports, port, args):
    """Every measurement for one wire format, on one fresh kernel."""
    while not reports.empty():  # left over from a format that failed
        reports.get_nowait()
    env = {name: value for name, value in os.environ.items()
           if name not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                           "OPENAI_BASE_URL", "MAHTAB_PROVIDER", "MAHTAB_MODEL")}
    if fmt == "openai":
        env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
    else:
        env["ANTHROPIC_API_KEY"] = "replay-key"
        env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{port}"
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits the bench's environment
    run = KernelRun(ksm, "mahtab")
    try:
        run.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    raw = {"pid": run.pid}
    try:
        run.sync_iopub()
        trivial = []
        for _ in range(20):
            started = perf_counter()
            msg_id = run.kc.execute("1+1")
            trivial.append(run.wait([msg_id], CELL_TIMEOUT)[msg_id].done_at - started)
        raw["trivial_cell_s"] = trivial
        # One warm-up of each kind first: the first %%ask imports the agent's
        # Python side and builds the HTTP client's TLS configuration.
        ask_cell(run, reports, "replay-1-burst", answer_text(1))
        raw["one_token"] = [ask_cell(run, reports, "replay-1-burst", answer_text(1))
                            for _ in range(args.reps)]
        progress(f"mahtab/{fmt}", f"{args.reps} one-token answers")
        expected = answer_text(args.tokens)
        for pacing in args.pacings:
            how = f"{args.rate:g}" if pacing == "paced" else pacing
            model = f"replay-{args.tokens}-{how}"
            raw[pacing] = [ask_cell(run, reports, model, expected) for _ in range(args.reps)]
            progress(f"mahtab/{fmt}", f"{args.reps} {pacing} answers of {args.tokens} tokens")
    except Exception as exc:
        raw["error"] = f"{type(exc).__name__}: {exc}"
        progress(f"mahtab/{fmt}", f"FAILED: {raw['error']}")
    finally:
        run.close()
    return raw


def summarize(raw):
    if "error" in raw:
        return None
    fixed = median([c["total_s"] - c["raw_stream_s"] for c in raw["one_token"]])
    out = {"trivial_cell_ms": median(raw["trivial_cell_s"]) * 1000,
           "one_token_ask_ms": median([c["total_s"] for c in raw["one_token"]]) * 1000,
           "fixed_ask_ms": fixed * 1000}
    for pacing in PACINGS:
        if pacing not in raw:
            continue
        cells = raw[pacing]
        added = [c["total_s"] - c["raw_stream_s"] - fixed for c in cells]
        out[pacing] = {
            "raw_stream_ms": median([c["raw_stream_s"] for c in cells]) * 1000,
            "total_ms": median([c["total_s"] for c in cells]) * 1000,
            "first_text_ms": median([c["first_text_s"] for c in cells]) * 1000,
            "after_last_byte_ms": median([c["after_last_byte_s"] for c in cells]) * 1000,
            "added_ms": median(added) * 1000,
            "added_pct": median([a / c["raw_stream_s"] * 100 for a, c in zip(added, cells)]),
            "stream_messages": median([c["stream_messages"] for c in cells]),
            "peak_messages_per_s": max(c["peak_messages_per_s"] for c in cells),
            "bytes": cells[0]["bytes"],
        }
    return out


def print_report(summaries, raws, args):
    print(f"{args.tokens} tokens per answer, {args.reps} cells per figure (medians); "
          f"paced = {args.rate:g} tokens/s; {os.cpu_count()} CPUs\n")
    for fmt, s in summaries.items():
        if s is None:
            print(f"{fmt}: FAILED: {raws[fmt]['error']}\n")
            continue
        print(f"{fmt}: trivial cell 1+1 {s['trivial_cell_ms']:.2f} ms; one-token %%ask "
              f"{s['one_token_ask_ms']:.1f} ms (fixed %%ask cost {s['fixed_ask_ms']:.1f} ms)")
        print(f"  {'':<8}{'raw stream':>12}{'cell total':>12}{'first text':>12}"
              f"{'added':>10}{'added %':>9}{'last byte→idle':>16}{'stream msgs':>13}{'peak msgs/s':>13}")
        for pacing in (p for p in PACINGS if p in s):
            p = s[pacing]
            print(f"  {pacing:<8}{p['raw_stream_ms']:>9.1f} ms{p['total_ms']:>9.1f} ms"
                  f"{p['first_text_ms']:>9.2f} ms{p['added_ms']:>7.1f} ms{p['added_pct']:>8.2f}%"
                  f"{p['after_last_byte_ms']:>13.1f} ms{p['stream_messages']:>13g}"
                  f"{p['peak_messages_per_s']:>13}")
        print()


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=5000, help="tokens per answer (default 5000)")
    parser.add_argument("--reps", type=int, default=7, help="cells per figure (default 7)")
    parser.add_argument("--rate", type=float, default=1000,
                        help="tokens per second of the paced stream (default 1000)")
    parser.add_argument("--formats", default="openai,anthropic",
                        help="comma-separated, from: openai, anthropic")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write all raw figures to this file")
    parser.add_argument("--pacings", default=",".join(PACINGS),
                        help="comma-separated, from: " + ", ".join(PACINGS))
    args = parser.parse_args()
    args.pacings = [p.strip() for p in args.pacings.split(",") if p.strip()]
    if not args.pacings or set(args.pacings) - set(PACINGS):
        parser.error("--pacings takes " + ", ".join(PACINGS))
    args.formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not args.formats or set(args.formats) - {"openai", "anthropic"}:
        parser.error("--formats takes openai and/or anthropic")
    if args.tokens < 2 or args.reps < 1 or args.rate <= 0:
        parser.error("--tokens must be at least 2, --reps and --rate positive")
    return args


def main():
    args = parse_args()
    ksm = KernelSpecManager(kernel_dirs=[str(VENV_KERNELS)])
    if "mahtab" not in ksm.find_kernel_specs():
        sys.exit(f"no mahtab kernelspec in {VENV_KERNELS}: run scripts/build-and-install.sh")
    context = multiprocessing.get_context("spawn")
    ports, reports = context.Queue(), context.Queue()
    server = context.Process(target=serve, args=(ports, reports), daemon=True)
    server.start()
    try:
        port = ports.get(timeout=REPORT_TIMEOUT)
        raws = {}
        for fmt in args.formats:
            print(f"benchmarking %%ask streaming, {fmt} format", file=sys.stderr, flush=True)
            raws[fmt] = bench_format(fmt, ksm, reports, port, args)
    finally:
        server.terminate()
        server.join()
    summaries = {fmt: summarize(raw) for fmt, raw in raws.items()}
    print_report(summaries, raws, args)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {"tokens": args.tokens, "reps": args.reps, "rate": args.rate, "cpus": os.cpu_count()}
        args.json.write_text(json.dumps({"meta": meta, "raw": raws, "summary": summaries}, indent=1))
        print(f"raw figures written to {args.json}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted")
