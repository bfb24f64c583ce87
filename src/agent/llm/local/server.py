"""The shared local model server: serves a GGUF model with llama.cpp (the
xllamacpp package), OpenAI-compatible, on a free loopback port, for every
kernel of this user. Started detached by the first kernel that needs it
(src/agent/llm/local/shared.rs); later kernels find it through its server
file, which it writes once it answers: mode 0600 in Jupyter's runtime
directory, with its URL and the random key every request must carry.

It stops by itself when nothing has asked it anything for IDLE_SECONDS, when
its model file changes, or on SIGTERM, and takes its server file with it.

The kernel that starts it holds the start lock and passes it as fd 3: it is
held until the server file is written, so a second kernel waits for this
server instead of starting another, even if the first is interrupted.

Usage: python -c <this file> mahtab-local-model-server MODEL_KEY MODEL_PATH
           THREADS CONTEXT_TOKENS SLOTS IDLE_SECONDS SERVER_FILE LOCK_FILE
"""

import fcntl
import json
import os
import secrets
import signal
import sys
import time
import urllib.request

import xllamacpp

_, model_key, model_path, threads, context, slots, idle, server_file, lock_file = sys.argv[1:10]
idle = float(idle)


def inherited_start_lock():
    """Fd 3 if it is the start lock the starting kernel handed over (checked:
    started by hand, fd 3 may be anything, and is not to be closed)."""
    try:
        held, lock = os.fstat(3), os.stat(lock_file)
    except OSError:
        return None
    return 3 if (held.st_dev, held.st_ino) == (lock.st_dev, lock.st_ino) else None


start_lock = inherited_start_lock()
# Seconds between looks at the server's counters and the model file.
POLL = max(0.2, min(5.0, idle / 10))


def model_identity():
    """What tells the model file apart from a replaced one."""
    try:
        st = os.stat(model_path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def write_private(path, text):
    """Writes `path` whole or not at all, readable by this user only."""
    partial = f"{path}.{os.getpid()}.partial"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)


def leave():
    """Removes the server file, if it is still this server's (under the start
    lock, so a kernel starting a successor never loses its file), and exits."""
    try:
        lock = os.open(lock_file, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        lock = None
    deadline = time.monotonic() + 2
    while lock is not None:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                break  # a kernel holds it long: the pid check below still holds
            time.sleep(0.02)
    try:
        with open(server_file) as f:
            if json.load(f).get("pid") == os.getpid():
                os.unlink(server_file)
    except (OSError, ValueError):
        pass
    # Nothing to save, and the server's own shutdown may wait on its threads.
    os._exit(0)


# The handler exits itself: one that set a threading.Event deadlocked when
# the signal came while the main thread held that Event's lock in wait().
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, lambda *_: leave())

identity = model_identity()
key = secrets.token_urlsafe(32)
params = xllamacpp.CommonParams()
params.model.path = model_path
params.n_ctx = int(context)
# Several slots, one KV cache: each kernel's request gets a slot of its own
# with its own cached prompt, and any one request may use the whole window.
params.n_parallel = int(slots)
params.kv_unified = True
# Prompts evicted from a slot are kept in memory, within this bound.
params.cache_ram_mib = 512
params.cpuparams.n_threads = int(threads)
params.cpuparams_batch.n_threads = int(threads)
params.hostnames = ["127.0.0.1"]
params.port = 0  # any free port
params.api_keys = [key]
params.endpoint_metrics = True
params.model_alias = {"local-model"}
server = xllamacpp.Server(params)
url = server.listening_address.rstrip("/")

# Written only once the model answers, so a server file means a server.
deadline = time.monotonic() + 120
while True:
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as response:
            if response.status == 200:
                break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("the model server never became healthy")
    time.sleep(0.1)

write_private(
    server_file,
    json.dumps({
        "pid": os.getpid(),
        "url": url,
        "key": key,
        "model": model_key,
        "model_file": model_path,
        "started": time.time(),
        "idle_seconds": idle,
        "slots": int(slots),
    }),
)
del key
if start_lock is not None:
    os.close(start_lock)
print("READY", url, flush=True)
# The kernel that started this server stops reading: nothing more goes to
# its pipe (a write there after it is gone would end this process).
os.dup2(2, 1)


def activity():
    """The server's counters: any change, or a request in progress, is use."""
    counters = {}
    for line in server.handle_metrics().splitlines():
        name, _, value = line.partition(" ")
        if name.startswith("llamacpp:") and not name.endswith("_seconds"):
            counters[name] = value
    return counters


last_seen, last_used = activity(), time.monotonic()
while True:
    time.sleep(POLL)
    if model_identity() != identity:
        print("the model file changed: stopping", file=sys.stderr, flush=True)
        leave()
    seen = activity()
    if seen != last_seen or seen.get("llamacpp:requests_processing", "0") != "0":
        last_seen, last_used = seen, time.monotonic()
    elif time.monotonic() - last_used > idle:
        print(f"idle for {idle:.0f} s: stopping", file=sys.stderr, flush=True)
        leave()
