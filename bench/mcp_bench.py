"""A trivial cell through `mahtab mcp` beside the same cell through
jupyter_client, against one mahtab kernel, in one run.

Each round trip runs `x = 1` (no output): through MCP it is one `execute`
tool call of the official SDK's stdio client, answered when the kernel has
gone idle for the cell; through jupyter_client it is `execute` and the wait
for both the execute_reply and IOPub's idle, what a notebook frontend waits
for. The two alternate, so both see the same machine. Medians and 90th
percentiles are printed, with MCP's ratio to jupyter_client. A report, not a
test: it asserts nothing about timings.

    .venv/bin/python bench/mcp_bench.py [--cells 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import anyio
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]
CODE = "x = 1"


def client_round_trip(kc) -> float:
    start = time.perf_counter()
    msg_id = kc.execute(CODE, allow_stdin=False)
    replied = idle = False
    while not (replied and idle):
        if not replied:
            reply = kc.get_shell_msg(timeout=30)
            replied = reply["parent_header"].get("msg_id") == msg_id
        if not idle:
            message = kc.get_iopub_msg(timeout=30)
            idle = (
                message["parent_header"].get("msg_id") == msg_id
                and message["msg_type"] == "status"
                and message["content"]["execution_state"] == "idle"
            )
    return time.perf_counter() - start


async def measure(km, kc, cells: int) -> dict[str, list[float]]:
    # What comes before `kernel` in the kernelspec: the binary, or the wheel's `python -m mahtab`.
    argv = KernelSpecManager().get_kernel_spec("mahtab").argv
    start = argv[: argv.index("kernel")]
    params = StdioServerParameters(command=start[0], args=[*start[1:], "mcp", "--existing", km.connection_file])
    figures: dict[str, list[float]] = {"mcp": [], "jupyter_client": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for index in range(cells + 10):
                start = time.perf_counter()
                result = await session.call_tool("execute", {"code": CODE})
                mcp_time = time.perf_counter() - start
                assert not result.is_error, result
                client_time = client_round_trip(kc)
                if index >= 10:  # the first few warm both paths up
                    figures["mcp"].append(mcp_time)
                    figures["jupyter_client"].append(client_time)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("JUPYTER_PATH", str(ROOT / ".venv" / "share" / "jupyter"))
    km, kc = start_new_kernel(kernel_name="mahtab", startup_timeout=60)
    try:
        figures = anyio.run(measure, km, kc, args.cells)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    summary = {}
    print(f"{args.cells} cells of `{CODE}`, one mahtab kernel, alternating", file=sys.stderr)
    print(f"{'path':<16}{'median ms':>12}{'p90 ms':>10}")
    for path, times in figures.items():
        ordered = sorted(times)
        median = statistics.median(ordered) * 1000
        p90 = ordered[int(len(ordered) * 0.9) - 1] * 1000
        summary[path] = {"median_ms": median, "p90_ms": p90}
        print(f"{path:<16}{median:>12.2f}{p90:>10.2f}")
    ratio = summary["mcp"]["median_ms"] / summary["jupyter_client"]["median_ms"]
    print(f"mcp / jupyter_client (median): {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "raw": figures}, indent=1))


if __name__ == "__main__":
    main()
