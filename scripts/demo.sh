#!/usr/bin/env bash
# The main job: build mahtab, install it into the project-local Python
# environment, and run the demo notebooks through it headless.
#   scripts/demo.sh             run notebooks/basics.ipynb and notebooks/ask.ipynb
#                               (%%ask uses a local model unless a provider key is set)
#   scripts/demo.sh --console   open `jupyter console --kernel mahtab` instead
#   scripts/demo.sh --lab       open JupyterLab on copies of the notebooks instead,
#                               on 127.0.0.1 only; prints the URL with its token
#                               (scripts/lab.sh; MAHTAB_LAB_PORT, default 8888)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/build-and-install.sh
case "${1:-}" in
    --console)
        exec .venv/bin/jupyter console --kernel mahtab ;;
    --lab)
        exec bash scripts/lab.sh ;;
    "")
        for notebook in notebooks/basics.ipynb notebooks/ask.ipynb; do
            echo "==> running $notebook through the mahtab kernel"
            .venv/bin/python scripts/run_notebook.py "$notebook" --kernel mahtab --timeout 300
        done ;;
    *)
        echo "usage: scripts/demo.sh [--console | --lab]" >&2; exit 2 ;;
esac
