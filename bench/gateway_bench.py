"""Start-to-first-reply through Jupyter Enterprise Gateway, mahtab beside
ipykernel, in one run.

One gateway (3.3.0, from .venv-gateway; see scripts/gateway-env.sh) serves
four kernelspecs written to a temporary directory:

  ipykernel              the venv's python -m ipykernel_launcher -f {connection_file}
                         (the gateway's local process proxy)
  mahtab                 mahtab kernel -f {connection_file}, the same way
  ipykernel_distributed  the gateway's own Python launcher (launch_ipykernel.py,
                         from its source distribution) starting ipykernel,
                         through the DistributedProcessProxy and the kernel
                         launcher protocol (on this host, so without SSH)
  mahtab_distributed     mahtab launch, the same way

For each start, timed from the client's POST /api/kernels:
  started     the POST's answer (the gateway answers once the kernel's
              connection information is in)
  first reply the kernel_info_reply to a request sent over the kernel's
              websocket as soon as it opened
  first cell  the execute_reply of `1+1` sent right after that
then the kernel is deleted. Each kernel is started --starts times, in turns;
medians are printed with mahtab's ratio to ipykernel started the same way.
A report, not a test: it asserts nothing about timings.

    bash scripts/gateway-env.sh
    .venv/bin/python bench/gateway_bench.py [--starts 5]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import websocket

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
GATEWAY = ROOT / ".venv-gateway" / "bin" / "jupyter-enterprisegateway"
MAHTAB = ROOT / "target" / "release" / "mahtab"
GATEWAY_ETC = ROOT / ".venv-gateway" / "share" / "enterprise-gateway" / "etc"
KERNELS = ["ipykernel", "mahtab", "ipykernel_distributed", "mahtab_distributed"]
# mahtab's kernel -> the ipykernel started the same way.
BASELINES = {"mahtab": "ipykernel", "mahtab_distributed": "ipykernel_distributed"}
TIMEOUT = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_kernelspecs(prefix: Path) -> None:
    kernels = prefix / "share" / "jupyter" / "kernels"
    subprocess.run(
        [str(MAHTAB), "install", "--prefix", str(prefix), "--python", str(VENV_PYTHON)],
        check=True, capture_output=True,
    )
    subprocess.run(
        [str(MAHTAB), "install", "--gateway", "distributed", "--prefix", str(prefix), "--python", str(VENV_PYTHON)],
        check=True, capture_output=True,
    )
    (kernels / "ipykernel").mkdir(parents=True)
    spec = {
        "argv": [str(VENV_PYTHON), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "ipykernel", "language": "python",
    }
    (kernels / "ipykernel" / "kernel.json").write_text(json.dumps(spec))
    launcher = GATEWAY_ETC / "kernel-launchers" / "python" / "scripts" / "launch_ipykernel.py"
    argv = [str(VENV_PYTHON), str(launcher)]
    for option in ("kernel-id", "response-address", "public-key", "port-range"):
        argv += [f"--RemoteProcessProxy.{option}", "{" + option.replace("-", "_") + "}"]
    argv += ["--RemoteProcessProxy.spark-context-initialization-mode", "none"]
    proxy = "enterprise_gateway.services.processproxies.distributed.DistributedProcessProxy"
    spec = {
        "argv": argv, "display_name": "ipykernel (distributed)", "language": "python",
        "metadata": {"process_proxy": {"class_name": proxy}},
    }
    (kernels / "ipykernel_distributed").mkdir(parents=True)
    (kernels / "ipykernel_distributed" / "kernel.json").write_text(json.dumps(spec))


class Gateway:
    def __init__(self, work: Path):
        prefix = work / "prefix"
        write_kernelspecs(prefix)
        self.token = secrets.token_hex(16)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "MAHTAB_"))},
            "JUPYTER_PATH": str(prefix / "share" / "jupyter"),
            "JUPYTER_DATA_DIR": str(work / "data"),
            "JUPYTER_RUNTIME_DIR": str(work / "runtime"),
            "EG_UNAUTHORIZED_USERS": "nobody-in-particular",
            "EG_RESPONSE_IP": "127.0.0.1",
            "EG_RESPONSE_PORT": str(free_port()),
            "EG_KERNEL_LOG_DIR": str(work),
            "EG_REMOTE_HOSTS": "localhost",
        }
        self.log = (work / "gateway.log").open("w")
        self.proc = subprocess.Popen(
            [str(GATEWAY), "--ip=127.0.0.1", f"--port={port}", "--port_retries=0",
             f"--EnterpriseGatewayApp.auth_token={self.token}"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.api("GET", "/api/kernelspecs")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"the gateway did not start; see {work / 'gateway.log'}")
                time.sleep(0.2)  # poll interval while the gateway starts

    def api(self, method: str, path: str, body: dict | None = None):
        request = urllib.request.Request(
            self.url + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            text = response.read()
        return json.loads(text) if text else None

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def request(ws, channel: str, msg_type: str, content: dict) -> str:
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": msg_type, "session": "bench", "username": "bench",
              "date": "2026-01-01T00:00:00Z", "version": "5.3"}
    ws.send(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "content": content,
                        "channel": channel, "buffers": []}))
    return msg_id


def reply_to(ws, msg_id: str) -> dict:
    while True:
        message = json.loads(ws.recv())
        if message["channel"] == "shell" and message["parent_header"].get("msg_id") == msg_id:
            return message


def one_start(gateway: Gateway, name: str) -> dict[str, float]:
    began = time.perf_counter()
    kernel = gateway.api("POST", "/api/kernels", {"name": name})
    started = time.perf_counter()
    ws = websocket.create_connection(
        gateway.url.replace("http", "ws") + f"/api/kernels/{kernel['id']}/channels",
        header=[f"Authorization: token {gateway.token}"], timeout=TIMEOUT,
    )
    try:
        reply_to(ws, request(ws, "shell", "kernel_info_request", {}))
        first_reply = time.perf_counter()
        code = {"code": "1+1", "silent": False, "store_history": True, "user_expressions": {},
                "allow_stdin": False, "stop_on_error": True}
        reply = reply_to(ws, request(ws, "shell", "execute_request", code))
        first_cell = time.perf_counter()
        if reply["content"]["status"] != "ok":
            sys.exit(f"{name}: 1+1 failed: {reply['content']}")
    finally:
        ws.close()
        gateway.api("DELETE", f"/api/kernels/{kernel['id']}")
    return {
        "started (ms)": (started - began) * 1000,
        "first reply (ms)": (first_reply - began) * 1000,
        "first cell (ms)": (first_cell - began) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5, help="starts of each kernel (default 5)")
    args = parser.parse_args()
    if not GATEWAY.exists() or not GATEWAY_ETC.exists():
        sys.exit("Enterprise Gateway is missing: run scripts/gateway-env.sh")
    with tempfile.TemporaryDirectory() as work:
        gateway = Gateway(Path(work))
        try:
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in KERNELS}
            for turn in range(args.starts):
                for name in KERNELS:
                    print(f"start {turn + 1}/{args.starts}: {name}", file=sys.stderr)
                    runs[name].append(one_start(gateway, name))
        finally:
            gateway.close()
    figures = list(runs["ipykernel"][0])
    medians = {name: {f: statistics.median(run[f] for run in runs[name]) for f in figures} for name in KERNELS}
    print(f"Enterprise Gateway 3.3.0, {args.starts} starts each, medians (ms), and mahtab's ratio to ipykernel")
    print(f"{'':18}" + "".join(f"{name:>23}" for name in KERNELS) + "".join(f"{'ratio ' + name:>25}" for name in BASELINES))
    for figure in figures:
        row = f"{figure.removesuffix(' (ms)'):18}" + "".join(f"{medians[name][figure]:23.0f}" for name in KERNELS)
        row += "".join(f"{medians[name][figure] / medians[base][figure]:25.2f}" for name, base in BASELINES.items())
        print(row)


if __name__ == "__main__":
    main()
