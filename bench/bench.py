"""Benchmark Jupyter kernels side by side through one Python client.

Every kernel is launched and driven by the same jupyter_client KernelManager
and BlockingKernelClient in this one process, so the figures differ only by
kernel:

  mahtab     the kernelspec installed in the project venv
             (.venv/share/jupyter/kernels/mahtab); skipped if absent
  wheel      the wheel's kernel (python -m mahtab) in .venv-wheel, made by
             scripts/wheel-env.sh; skipped if absent
  ipykernel  the venv's python -m ipykernel_launcher
  echo       bench/echo_kernel.py, a pyzmq kernel that does nothing and so
             shows the floor set by the client, sockets and message encoding

Per kernel: cold start, time to the first cell's reply, trivial-cell latency
(sequential p50/p99, pipelined throughput), completion, inspect and
is_complete latency, a big stdout stream with an exact-text check, RSS,
interrupt latency and shutdown time; then ratios to ipykernel. This is a
report, not a test: nothing is asserted, and a kernel that fails is killed and
reported.
See bench/README.md for what each figure means.

`mahtab-curve` and `ipykernel-curve` are the same two kernels started as a
client that requires transport encryption starts them (CurveZMQ), for the
cost of encryption beside the same kernel in the clear.

Usage: .venv/bin/python bench/bench.py [--kernels mahtab,wheel,ipykernel,echo,mahtab-curve,ipykernel-curve]
                                        [--cells 500] [--lines 200000] [--json OUT]
"""

import argparse
import json
import math
import os
import platform
import signal
import statistics
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from time import perf_counter

import jupyter_client
import zmq
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

BENCH_DIR = Path(__file__).resolve().parent
VENV = BENCH_DIR.parent / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
VENV_KERNELS = VENV / "share" / "jupyter" / "kernels"
# The wheel's environment (scripts/wheel-env.sh), for the `wheel` kernel.
WHEEL_PYTHON = BENCH_DIR.parent / ".venv-wheel" / "bin" / "python"

# Every wait is bounded; a kernel that exceeds one is killed and reported.
START_TIMEOUT = 60.0
SYNC_ATTEMPT_TIMEOUT = 1.0
CELL_TIMEOUT = 30.0
REQUEST_TIMEOUT = 30.0  # complete, inspect, is_complete; the first may load jedi
PIPELINE_TIMEOUT = 300.0
BIG_OUTPUT_TIMEOUT = 300.0
INTERRUPT_TIMEOUT = 15.0  # the interrupted cell would otherwise sleep 30 s
LIVENESS_CHECK_INTERVAL = 0.5

INTERRUPT_ROUNDS = 5
REQUEST_REPEATS = 50  # per request kind, after the first one
TRIVIAL_CELL = "1+1"
COMPLETE_CODES = ("import o", "import os; os.pa")
INSPECT_CODE = "len"
IS_COMPLETE_CODE = "for i in range(3):"
# An is_complete_reply's status is the verdict on the code; only "error" is a failure.
IS_COMPLETE_STATUSES = ("complete", "incomplete", "invalid", "unknown")
# The cell announces on stdout that it has reached user code: interrupting as
# soon as execute_input arrives races the kernel's own code (ipykernel then
# logs "KeyboardInterrupt caught in kernel" and carries on sleeping).
SLEEP_CELL = 'import time; print("sleeping", flush=True); time.sleep(30)'


@dataclass(frozen=True)
class Kernel:
    name: str
    spec_name: str
    runs_code: bool  # False for echo: it cannot print, sleep, complete or be interrupted
    # Started as a client requiring encryption starts it: CurveZMQ keys in
    # the connection file, every channel over ZMTP's CURVE mechanism.
    encrypted: bool = False


KERNELS = {
    "mahtab": Kernel("mahtab", "mahtab", runs_code=True),
    "wheel": Kernel("wheel", "bench-mahtab-wheel", runs_code=True),
    "ipykernel": Kernel("ipykernel", "bench-ipykernel", runs_code=True),
    "echo": Kernel("echo", "bench-echo", runs_code=False),
    "mahtab-curve": Kernel("mahtab-curve", "mahtab", runs_code=True, encrypted=True),
    "ipykernel-curve": Kernel("ipykernel-curve", "bench-ipykernel", runs_code=True, encrypted=True),
}

BENCH_SPECS = {
    # The wheel's kernel as its kernelspec starts it, with the wheel
    # environment's interpreter.
    "bench-mahtab-wheel": {
        "argv": [str(WHEEL_PYTHON), "-m", "mahtab", "kernel", "--debugger", "-f", "{connection_file}"],
        "display_name": "mahtab wheel (bench)",
        "language": "python",
        "interrupt_mode": "signal",
    },
    "bench-ipykernel": {
        "argv": [str(VENV_PYTHON), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "ipykernel (bench)",
        "language": "python",
        "metadata": {"supported_encryption": ["curve"]},
    },
    "bench-echo": {
        "argv": [str(VENV_PYTHON), str(BENCH_DIR / "echo_kernel.py"), "-f", "{connection_file}"],
        "display_name": "echo (bench)",
        "language": "python",
        "interrupt_mode": "message",
    },
}


def kernel_spec_manager(jupyter_path):
    """Write the bench kernelspecs under jupyter_path/kernels and return a
    manager that sees only those and the ones installed in the venv."""
    kernels_dir = jupyter_path / "kernels"
    for spec_name, spec in BENCH_SPECS.items():
        if spec_name == "bench-mahtab-wheel" and not WHEEL_PYTHON.exists():
            continue  # reported as skipped
        spec_dir = kernels_dir / spec_name
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return KernelSpecManager(kernel_dirs=[str(kernels_dir), str(VENV_KERNELS)])


@dataclass
class Outcome:
    """What has arrived for one request."""

    reply: dict | None = None
    replied_at: float | None = None
    idle_at: float | None = None

    @property
    def done_at(self):
        return max(self.replied_at, self.idle_at)

    def complete(self, need_idle):
        return self.reply is not None and (self.idle_at is not None or not need_idle)


class KernelRun:
    """One kernel process and a BlockingKernelClient connected to it."""

    def __init__(self, ksm, spec_name, encrypted=False):
        self.km = KernelManager(
            kernel_name=spec_name,
            kernel_spec_manager=ksm,
            transport_encryption="required" if encrypted else "disabled",
        )
        self.kc = None
        self.launched_at = None
        self.poller = zmq.Poller()
        self.channels = {}

    @property
    def pid(self):
        return self.km.provisioner.process.pid

    def start(self):
        """Launch the kernel; return seconds from launch to the first kernel_info_reply."""
        self.launched_at = perf_counter()
        self.km.start_kernel()
        self.kc = self.km.client()
        self.kc.start_channels()
        for channel in (self.kc.shell_channel, self.kc.iopub_channel):
            self.poller.register(channel.socket, zmq.POLLIN)
            self.channels[channel.socket] = channel
        msg_id = self.kc.kernel_info()
        outcome = self.wait([msg_id], START_TIMEOUT, need_idle=False)[msg_id]
        return outcome.replied_at - self.launched_at

    def sync_iopub(self):
        """Send kernel_info_requests until one's idle status arrives on iopub.

        PUB sockets drop messages until the subscription has propagated, so
        nothing is timed before this succeeds.
        """
        deadline = perf_counter() + START_TIMEOUT
        while True:
            try:
                self.wait([self.kc.kernel_info()], SYNC_ATTEMPT_TIMEOUT)
                return
            except TimeoutError:
                if perf_counter() > deadline:
                    raise TimeoutError(f"no iopub traffic within {START_TIMEOUT:g} s") from None

    def wait(self, msg_ids, timeout, *, need_idle=True, on_iopub=None):
        """Read shell and iopub until every request in msg_ids has its reply and,
        if need_idle, its iopub idle status. Returns {msg_id: Outcome}.

        on_iopub(msg) is called for every iopub message of those requests.
        Messages belonging to other requests are dropped.
        """
        outcomes = {msg_id: Outcome() for msg_id in msg_ids}
        pending = len(outcomes)
        deadline = perf_counter() + timeout
        while pending:
            remaining = deadline - perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"{pending} of {len(outcomes)} requests unfinished after {timeout:g} s")
            ready = self.poller.poll(1000 * min(remaining, LIVENESS_CHECK_INTERVAL))
            if not ready and not self.km.is_alive():
                raise RuntimeError("kernel process died")
            for socket, _ in ready:
                channel = self.channels[socket]
                msg = channel.get_msg(timeout=0)
                arrived = perf_counter()
                outcome = outcomes.get(msg["parent_header"].get("msg_id"))
                if outcome is None:
                    continue
                was_complete = outcome.complete(need_idle)
                if channel is self.kc.shell_channel:
                    outcome.reply, outcome.replied_at = msg, arrived
                else:
                    if on_iopub is not None:
                        on_iopub(msg)
                    if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                        outcome.idle_at = arrived
                if outcome.complete(need_idle) and not was_complete:
                    pending -= 1
        return outcomes

    def drain_iopub(self):
        """Drop the iopub messages already queued (busy/idle of requests whose
        idle is not waited for), so they don't pile up."""
        channel = self.kc.iopub_channel
        while channel.msg_ready():
            channel.get_msg(timeout=0)

    def shutdown(self):
        """Return seconds taken by the normal shutdown path of KernelManager."""
        self.kc.stop_channels()
        started = perf_counter()
        self.km.shutdown_kernel(now=False)
        return perf_counter() - started

    def close(self):
        """Stop the client and kill the kernel if it is still there."""
        if self.kc is not None:
            self.kc.stop_channels()
        if self.km.has_kernel:
            self.km.shutdown_kernel(now=True)


def require_ok(reply, ok=("ok",)):
    content = reply["content"]
    if content["status"] not in ok:
        raise RuntimeError(f"{reply['msg_type']} status {content['status']}: "
                           f"{content.get('ename')} {content.get('evalue')}")


def first_execute(run):
    """Seconds from launch to the execute_reply of a trivial cell sent as soon
    as the first kernel_info_reply has arrived. Its idle is not waited for:
    iopub may not be subscribed yet."""
    msg_id = run.kc.execute(TRIVIAL_CELL)
    outcome = run.wait([msg_id], START_TIMEOUT, need_idle=False)[msg_id]
    require_ok(outcome.reply)
    return outcome.replied_at - run.launched_at


def trivial_sequential(run, cells):
    """Seconds from send to reply-and-idle for each of `cells` trivial cells, one at a time."""
    latencies = []
    for _ in range(cells):
        sent = perf_counter()
        msg_id = run.kc.execute(TRIVIAL_CELL)
        outcome = run.wait([msg_id], CELL_TIMEOUT)[msg_id]
        require_ok(outcome.reply)
        latencies.append(outcome.done_at - sent)
    return latencies


def trivial_pipelined(run, cells):
    """Seconds from sending the first of `cells` trivial cells (all sent at
    once) until the last reply and idle have arrived."""
    sent = perf_counter()
    msg_ids = [run.kc.execute(TRIVIAL_CELL) for _ in range(cells)]
    outcomes = run.wait(msg_ids, PIPELINE_TIMEOUT).values()
    for outcome in outcomes:
        require_ok(outcome.reply)
    return max(outcome.done_at for outcome in outcomes) - sent


def request_latencies(run, send, repeats, ok=("ok",)):
    """Seconds from send() to its reply, for one request and then `repeats`
    more, one at a time, and the first reply's content. Idle is not waited
    for; iopub is drained after each reply instead."""
    latencies, first_reply = [], None
    for _ in range(1 + repeats):
        sent = perf_counter()
        msg_id = send()
        outcome = run.wait([msg_id], REQUEST_TIMEOUT, need_idle=False)[msg_id]
        run.drain_iopub()
        require_ok(outcome.reply, ok)
        latencies.append(outcome.replied_at - sent)
        first_reply = first_reply or outcome.reply
    return latencies, first_reply["content"]


def completions(run, repeats):
    """complete_request latencies for each of COMPLETE_CODES, cursor at the
    end, with the first reply's matches."""
    results = {}
    for code in COMPLETE_CODES:
        latencies, content = request_latencies(run, partial(run.kc.complete, code, len(code)), repeats)
        results[code] = {"latencies_s": latencies, "matches": content["matches"]}
    return results


def inspection(run, repeats):
    """inspect_request latencies for INSPECT_CODE, cursor at the end, detail level 0."""
    code = INSPECT_CODE
    latencies, content = request_latencies(run, partial(run.kc.inspect, code, len(code), 0), repeats)
    return {"code": code, "latencies_s": latencies, "found": content["found"]}


def is_complete_check(run, repeats):
    """is_complete_request latencies for IS_COMPLETE_CODE."""
    code = IS_COMPLETE_CODE
    latencies, content = request_latencies(run, partial(run.kc.is_complete, code), repeats, IS_COMPLETE_STATUSES)
    return {"code": code, "latencies_s": latencies, "status": content["status"]}


def big_output(run, lines):
    """Print `lines` short lines; time to idle, stream message count, exact-text check."""
    stream_messages = 0
    stdout = []

    def on_iopub(msg):
        nonlocal stream_messages
        if msg["msg_type"] == "stream":
            stream_messages += 1
            if msg["content"]["name"] == "stdout":
                stdout.append(msg["content"]["text"])

    sent = perf_counter()
    msg_id = run.kc.execute(f"for i in range({lines}): print(i)")
    outcome = run.wait([msg_id], BIG_OUTPUT_TIMEOUT, on_iopub=on_iopub)[msg_id]
    require_ok(outcome.reply)
    text = "".join(stdout)
    expected = "".join(f"{i}\n" for i in range(lines))
    return {
        "seconds_to_idle": outcome.idle_at - sent,
        "stream_messages": stream_messages,
        "stdout_chars": len(text),
        "expected_chars": len(expected),
        "text_ok": text == expected,
    }


def interrupts(run, rounds):
    """Seconds from km.interrupt_kernel() (called once a sleeping cell's first
    stdout arrives) to its KeyboardInterrupt execute_reply, per round."""
    latencies = []
    for _ in range(rounds):
        interrupted_at = None

        def on_iopub(msg):
            nonlocal interrupted_at
            if msg["msg_type"] == "stream" and interrupted_at is None:
                interrupted_at = perf_counter()
                run.km.interrupt_kernel()

        msg_id = run.kc.execute(SLEEP_CELL)
        outcome = run.wait([msg_id], INTERRUPT_TIMEOUT, on_iopub=on_iopub)[msg_id]
        content = outcome.reply["content"]
        if content["status"] != "error" or content.get("ename") != "KeyboardInterrupt":
            raise RuntimeError(f"interrupt gave status {content['status']} {content.get('ename')}")
        latencies.append(outcome.replied_at - interrupted_at)
    return latencies


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def progress(kernel, text):
    print(f"  {kernel}: {text}", file=sys.stderr, flush=True)


def bench_kernel(kernel, ksm, args):
    """Run every measurement on one fresh kernel; return the raw figures."""
    raw = {"argv": ksm.get_kernel_spec(kernel.spec_name).argv}
    run = KernelRun(ksm, kernel.spec_name, kernel.encrypted)
    try:
        raw["cold_start_s"] = run.start()
        raw["pid"] = run.pid
        raw["rss_start_mb"] = rss_mb(run.pid)
        progress(kernel.name, f"started in {raw['cold_start_s'] * 1000:.0f} ms (pid {run.pid})")
        if kernel.runs_code:
            raw["first_execute_s"] = first_execute(run)
            raw["rss_first_cell_mb"] = rss_mb(run.pid)
            progress(kernel.name, f"first cell replied {raw['first_execute_s'] * 1000:.0f} ms after launch")
        run.sync_iopub()
        if kernel.runs_code:
            raw["complete"] = completions(run, REQUEST_REPEATS)
            raw["inspect"] = inspection(run, REQUEST_REPEATS)
            raw["is_complete"] = is_complete_check(run, REQUEST_REPEATS)
            progress(kernel.name, f"complete, inspect and is_complete requests done (1 + {REQUEST_REPEATS} each)")
        raw["cell_latencies_s"] = trivial_sequential(run, args.cells)
        progress(kernel.name, f"{args.cells} sequential cells done")
        raw["pipelined_s"] = trivial_pipelined(run, args.cells)
        progress(kernel.name, f"{args.cells} pipelined cells done")
        if kernel.runs_code:
            raw["big_output"] = big_output(run, args.lines)
            progress(kernel.name, f"{args.lines} lines printed")
            raw["interrupt_s"] = interrupts(run, INTERRUPT_ROUNDS)
            progress(kernel.name, f"{INTERRUPT_ROUNDS} interrupts done")
        else:
            raw["note"] = ("first cell, requests, big output and interrupts not measured: "
                           "the echo kernel runs no code")
        raw["rss_end_mb"] = rss_mb(run.pid)
        raw["shutdown_s"] = run.shutdown()
        progress(kernel.name, "shut down")
    except Exception as exc:
        raw["error"] = f"{type(exc).__name__}: {exc}"
        progress(kernel.name, f"FAILED, killing it: {raw['error']}")
    finally:
        run.close()
    return raw


def nearest_rank(values, percent):
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]


def summarize(raw, cells):
    """Table figures (None where not measured) from one kernel's raw figures."""

    def ms(seconds):
        return None if seconds is None else seconds * 1000

    def first_ms(request):
        return ms(request["latencies_s"][0]) if request else None

    def repeats_p50_ms(request):
        return ms(nearest_rank(request["latencies_s"][1:], 50)) if request else None

    latencies = raw.get("cell_latencies_s")
    pipelined = raw.get("pipelined_s")
    complete = raw.get("complete", {})
    big = raw.get("big_output", {})
    irq = raw.get("interrupt_s")
    figures = {
        "cold start (ms)": ms(raw.get("cold_start_s")),
        f"first `{TRIVIAL_CELL}` reply (ms)": ms(raw.get("first_execute_s")),
        "trivial cell p50 (ms)": ms(nearest_rank(latencies, 50)) if latencies else None,
        "trivial cell p99 (ms)": ms(nearest_rank(latencies, 99)) if latencies else None,
        "pipelined total (ms)": ms(pipelined),
        "pipelined cells/s": cells / pipelined if pipelined else None,
    }
    for code in COMPLETE_CODES:
        request = complete.get(code)
        figures[f"complete `{code}` first (ms)"] = first_ms(request)
        figures[f"complete `{code}` p50 (ms)"] = repeats_p50_ms(request)
        figures[f"complete `{code}` matches"] = len(request["matches"]) if request else None
    return figures | {
        f"inspect `{INSPECT_CODE}` p50 (ms)": repeats_p50_ms(raw.get("inspect")),
        f"is_complete `{IS_COMPLETE_CODE}` p50 (ms)": repeats_p50_ms(raw.get("is_complete")),
        "big output to idle (ms)": ms(big.get("seconds_to_idle")),
        "big output stream msgs": big.get("stream_messages"),
        "big output text": {True: "ok", False: "MISMATCH"}.get(big.get("text_ok")),
        "RSS after start (MB)": raw.get("rss_start_mb"),
        "RSS after first cell (MB)": raw.get("rss_first_cell_mb"),
        "RSS after run (MB)": raw.get("rss_end_mb"),
        "interrupt first (ms)": ms(irq[0]) if irq else None,
        "interrupt median rest (ms)": ms(statistics.median(irq[1:])) if irq else None,
        "shutdown (ms)": ms(raw.get("shutdown_s")),
    }


def fmt(value):
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def ratio(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
        return a / b
    return None


def print_report(names, summaries, notes):
    """One column per kernel, then one ratio column per kernel against ipykernel."""
    rows = list(next(iter(summaries.values())))
    base = "ipykernel" if "ipykernel" in summaries else None
    compared = [name for name in names if base and name != base]
    header = ["figure", *names, *(f"{name}/{base}" for name in compared)]
    table = [header]
    for row in rows:
        values = [summaries[name][row] for name in names]
        ratios = [ratio(summaries[name][row], summaries[base][row]) for name in compared]
        table.append([row, *map(fmt, values), *map(fmt, ratios)])
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for i, line in enumerate(table):
        print("  ".join(cell.ljust(w) if j == 0 else cell.rjust(w) for j, (cell, w) in enumerate(zip(line, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    if "mahtab" in summaries and "echo" in summaries:
        p50 = "trivial cell p50 (ms)"
        print(f"\n{p50} mahtab/echo: {fmt(ratio(summaries['mahtab'][p50], summaries['echo'][p50]))}")
    if notes:
        print()
        for name, note in notes.items():
            print(f"{name}: {note}")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default="mahtab,ipykernel,echo",
                        help="comma-separated, from: " + ", ".join(KERNELS))
    parser.add_argument("--cells", type=int, default=500, help="trivial cells per pass (default 500)")
    parser.add_argument("--lines", type=int, default=200_000, help="lines printed by the big-output cell (default 200000)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write all raw figures to this file")
    args = parser.parse_args()
    args.kernels = [name.strip() for name in args.kernels.split(",") if name.strip()]
    unknown = [name for name in args.kernels if name not in KERNELS]
    if unknown or not args.kernels:
        parser.error(f"unknown kernels {unknown}; choose from {', '.join(KERNELS)}")
    if args.cells < 1 or args.lines < 1:
        parser.error("--cells and --lines must be positive")
    return args


def exit_on_sigterm(signum, frame):
    """Turn SIGTERM into SystemExit so the running kernel is killed on the way out."""
    sys.exit(128 + signum)


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    meta = {
        "python": platform.python_version(),
        "jupyter_client": jupyter_client.__version__,
        "pyzmq": zmq.__version__,
        "cpus": os.cpu_count(),
        "cells": args.cells,
        "lines": args.lines,
        "interrupt_rounds": INTERRUPT_ROUNDS,
        "request_repeats": REQUEST_REPEATS,
    }
    raws, notes = {}, {}
    with tempfile.TemporaryDirectory(prefix="mahtab-bench-") as jupyter_path:
        ksm = kernel_spec_manager(Path(jupyter_path))
        for name in args.kernels:
            kernel = KERNELS[name]
            if kernel.spec_name not in ksm.find_kernel_specs():
                where = "(bash scripts/wheel-env.sh makes it)" if name == "wheel" else f"in {VENV_KERNELS}"
                notes[name] = f"skipped: no kernelspec {kernel.spec_name!r} {where}"
                raws[name] = {"skipped": notes[name]}
                continue
            print(f"benchmarking {name}", file=sys.stderr, flush=True)
            raws[name] = bench_kernel(kernel, ksm, args)
            note = raws[name].get("error") or raws[name].get("note")
            if note:
                notes[name] = note

    ran = [name for name in args.kernels if "skipped" not in raws[name]]
    summaries = {name: summarize(raws[name], args.cells) for name in ran}
    print(f"python {meta['python']}, jupyter_client {meta['jupyter_client']}, {meta['cpus']} CPUs; "
          f"{args.cells} trivial cells, {args.lines} lines, 1 + {REQUEST_REPEATS} of each request, "
          f"{INTERRUPT_ROUNDS} interrupts\n")
    if summaries:
        print_report(ran, summaries, notes)
    else:
        print("\n".join(f"{name}: {note}" for name, note in notes.items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "kernels": raws, "summary": summaries}, indent=1))
        print(f"\nraw figures written to {args.json}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted")
