#!/usr/bin/env bash
# Builds mahtab's wheel (maturin, from .venv) into target/wheels and installs
# it into a fresh environment, .venv-wheel, made from the same base Python,
# with no Rust toolchain on PATH: what a user of `pip install mahtab` has.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/python-env.sh

echo "==> building the wheel (maturin)"
rm -rf target/wheels
.venv/bin/python -m maturin build --release --strip --quiet -i .venv/bin/python -o target/wheels
wheel="$(ls target/wheels/mahtab-*.whl)"

# PATH without the folders that hold cargo, rustc or rustup.
clean_path=""
IFS=: read -ra folders <<< "$PATH"
for folder in "${folders[@]}"; do
    if [[ -e "$folder/cargo" || -e "$folder/rustc" || -e "$folder/rustup" ]]; then
        continue
    fi
    clean_path="${clean_path:+$clean_path:}$folder"
done
base="$(.venv/bin/python -c 'import sys; print(sys._base_executable)')"
echo "==> a fresh .venv-wheel with $(basename "$wheel")"
rm -rf .venv-wheel
PATH="$clean_path" "$base" -m venv .venv-wheel
PATH="$clean_path" .venv-wheel/bin/python -m pip install --quiet "$wheel" -r scripts/requirements-wheel-test.txt

# With arguments: run them there, with the same PATH (the wheel's tests).
if [[ $# -gt 0 ]]; then
    PATH="$clean_path" exec "$@"
fi
