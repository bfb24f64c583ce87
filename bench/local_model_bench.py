"""The shared local model server, measured as notebooks use it: N kernels
(mahtab, installed in the project venv) with no provider configured, in a
Jupyter runtime directory of the run's own, each asking one %%ask in turn.
The first starts the server (loading the model, reading the prompt cold);
the others find it and reuse it. Per kernel: its time to the model's first
streamed text, the run's time, and what the summary line says (started or
reused, tokens from the cache); then the resident memory of every kernel
and of the server, against one kernel with its server (what each notebook
held when every kernel started a server of its own).

With --concurrent the later kernels ask at once, to show the server's slots
serving them side by side. A report: it asserts nothing.

Usage: .venv/bin/python bench/local_model_bench.py [--kernels 3] [--model coder-1.5b]
           [--concurrent] [--json OUT]
"""

import argparse
import json
import os
import tempfile
import threading
from pathlib import Path
from time import perf_counter

import psutil
from jupyter_client.manager import start_new_kernel

PROVIDER_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_PROVIDER", "MAHTAB_MODEL",
                      "MAHTAB_LOCAL_MODEL_URL", "JUPYTER_RUNTIME_DIR", "MAHTAB_CONFIG")
MARKER = "mahtab-local-model-server"
REQUEST = "%%ask --max-turns 1 --new\nWhat is 2 + 3? Store it in x."
TIMEOUT = 300


def ask(kc, code):
    """Runs a cell; returns the time to the model's first text, the total
    time and the summary line."""
    started = perf_counter()
    first = summary = None
    msg_id = kc.execute(code)
    while True:
        msg = kc.get_iopub_msg(timeout=TIMEOUT)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        # The kernel's own notices are in parentheses; the model's text is not.
        if kind == "stream" and first is None and not content["text"].startswith(("(", "⋯")):
            first = perf_counter() - started
        if kind == "display_data" and content["metadata"].get("mahtab", {}).get("kind") == "summary":
            summary = content["data"]["text/plain"]
        if kind == "status" and content["execution_state"] == "idle":
            return first, perf_counter() - started, summary


def rss(pid):
    try:
        return psutil.Process(pid).memory_info().rss
    except psutil.NoSuchProcess:
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=3)
    parser.add_argument("--model", default="coder-1.5b")
    parser.add_argument("--concurrent", action="store_true", help="the later kernels ask at once")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    runtime = tempfile.mkdtemp(prefix="mahtab-bench-runtime-")
    settings = Path(runtime) / "settings.toml"
    settings.write_text(f'local_model = "{args.model}"\n')
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    env.update(JUPYTER_RUNTIME_DIR=runtime, MAHTAB_CONFIG=str(settings))
    kernels, rows = [], []
    try:
        for _ in range(args.kernels):
            kernels.append(start_new_kernel(kernel_name="mahtab", env=env, cwd=tempfile.mkdtemp()))
        rows.append(ask(kernels[0][1], REQUEST))
        later = [kc for _, kc in kernels[1:]]
        if args.concurrent:
            results = [None] * len(later)
            threads = [threading.Thread(target=lambda i=i, kc=kc: results.__setitem__(i, ask(kc, REQUEST)))
                       for i, kc in enumerate(later)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            rows.extend(results)
        else:
            rows.extend(ask(kc, REQUEST) for kc in later)
        servers = [p for p in psutil.process_iter(["cmdline"]) if MARKER in (p.info["cmdline"] or [])
                   and any(a.startswith(runtime) for a in p.info["cmdline"])]
        kernel_rss = [rss(km.provisioner.pid) for km, _ in kernels]
        server_rss = sum(rss(p.pid) for p in servers)
    finally:
        for km, kc in kernels:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        for server in [p for p in psutil.process_iter(["cmdline"]) if MARKER in (p.info["cmdline"] or [])
                       and any(a.startswith(runtime) for a in p.info["cmdline"])]:
            server.terminate()

    print(f"{args.kernels} kernels, local model {args.model}, {os.cpu_count()} cores"
          f"{', the later ones asking at once' if args.concurrent else ''}\n")
    print(f"{'kernel':<8} {'first text':>10} {'cell':>8}  summary")
    for i, (first, total, summary) in enumerate(rows):
        first_text = f"{first:.2f} s" if first is not None else "-"
        print(f"{i + 1:<8} {first_text:>10} {total:>6.2f} s  {summary}")
    gb = 1e9
    one = kernel_rss[0] + server_rss
    together = sum(kernel_rss) + server_rss
    print(f"\nservers running: {len(servers)}; resident memory: server {server_rss / gb:.2f} GB, kernels "
          + ", ".join(f"{r / gb:.2f}" for r in kernel_rss) + " GB")
    print(f"all {args.kernels} kernels and the server: {together / gb:.2f} GB = {together / one:.2f}x one kernel"
          f" with its server ({one / gb:.2f} GB; {args.kernels} servers of their own: {args.kernels * one / gb:.2f} GB)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "kernels": args.kernels, "model": args.model, "concurrent": args.concurrent,
            "runs": [{"first_text": f, "seconds": t, "summary": s} for f, t, s in rows],
            "servers": len(servers), "server_rss": server_rss, "kernel_rss": kernel_rss,
        }, indent=2))


if __name__ == "__main__":
    main()
