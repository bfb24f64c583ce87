"""Serves a GGUF model with llama.cpp (the xllamacpp package) on a free
loopback port, OpenAI-compatible, until SIGTERM or until the kernel that
started it is gone. Prints "READY <url>" once it listens. Started by the
kernel for %%ask when no provider is configured.

Usage: python -c <this file> MODEL_PATH THREADS KERNEL_PID CONTEXT_TOKENS
"""

import os
import signal
import sys
import time

import xllamacpp

# The kernel (given, not read with getppid: it may be gone already). Its
# death also sends SIGTERM (the parent-death signal); the parent is watched
# too, in case a signal is lost.
kernel = int(sys.argv[3])

params = xllamacpp.CommonParams()
params.model.path = sys.argv[1]
params.n_ctx = int(sys.argv[4])
# One slot: its prompt cache keeps the longest prefix it shares with the
# next request, so the calls of a run reuse the processed system prompt.
params.n_parallel = 1
params.cpuparams.n_threads = int(sys.argv[2])
params.cpuparams_batch.n_threads = int(sys.argv[2])
params.hostnames = ["127.0.0.1"]
params.port = 0  # any free port
params.model_alias = {"local-model"}
server = xllamacpp.Server(params)
print("READY", server.listening_address, flush=True)

# Nothing to save, and the server's own shutdown may wait on its threads:
# leave at once. The handler exits itself: one that set a threading.Event
# deadlocked when the signal came while the main thread held that Event's
# lock in wait() (seen: a server left running after a gateway stopped its
# kernel, its main thread blocked on the lock).
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: os._exit(0))
while os.getppid() == kernel:
    time.sleep(1)
os._exit(0)
