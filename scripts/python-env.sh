#!/usr/bin/env bash
# Creates (or refreshes) the project-local Python environment in .venv.
# Idempotent: packages are reinstalled only when scripts/requirements.txt changes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
requirements="$root/scripts/requirements.txt"
stamp="$venv/.requirements.sha256"
python="${MAHTAB_BASE_PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
    echo "==> creating Python environment in .venv (from $("$python" --version 2>&1))"
    "$python" -m venv "$venv"
fi
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "==> installing Python packages into .venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -r "$requirements"
    echo "$want" > "$stamp"
fi
