#!/usr/bin/env bash
# Opens JupyterLab with the mahtab kernel on the demo notebooks, listening on
# loopback only, and prints the URL (with its token) to open in a browser.
# Expects scripts/build-and-install.sh to have run; `scripts/demo.sh --lab`
# does both. Lab works on copies in target/demo-notebooks, so the notebooks in
# the repository stay as committed (no outputs); copies already there are kept.
#   MAHTAB_LAB_PORT   the port to listen on (default 8888)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

work="$root/target/demo-notebooks"
mkdir -p "$work"
for notebook in notebooks/*.ipynb; do
    [[ -e "$work/$(basename "$notebook")" ]] || cp "$notebook" "$work/"
done

port="${MAHTAB_LAB_PORT:-8888}"
token="$(.venv/bin/python -c 'import secrets; print(secrets.token_hex(24))')"
extra=()
if [[ "$(id -u)" == 0 ]]; then
    extra+=(--allow-root)
fi
echo "==> JupyterLab on http://127.0.0.1:$port/lab/tree/basics.ipynb?token=$token"
echo "    (notebooks in target/demo-notebooks; Ctrl-C stops the server)"
# The token goes through the environment, not the command line other users can see.
JUPYTER_TOKEN="$token" exec .venv/bin/jupyter lab --no-browser \
    --ServerApp.ip=127.0.0.1 --ServerApp.port="$port" --ServerApp.port_retries=0 \
    --ServerApp.root_dir="$work" "${extra[@]}"
