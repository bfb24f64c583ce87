#!/usr/bin/env bash
# The main job: build mahtab, install it into the project-local Python
# environment, and run a demo notebook through it headless.
#   scripts/demo.sh             run notebooks/basics.ipynb and print its output
#   scripts/demo.sh --console   open `jupyter console --kernel mahtab` instead
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/build-and-install.sh
case "${1:-}" in
    --console)
        exec .venv/bin/jupyter console --kernel mahtab ;;
    "")
        echo "==> running notebooks/basics.ipynb through the mahtab kernel"
        exec .venv/bin/python scripts/run_notebook.py notebooks/basics.ipynb --kernel mahtab ;;
    *)
        echo "usage: scripts/demo.sh [--console]" >&2; exit 2 ;;
esac
