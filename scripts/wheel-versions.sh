#!/usr/bin/env bash
# The wheel (one, for CPython's stable ABI) on each other CPython version
# the kernel supports (3.10, 3.12, 3.13; on 3.11 test.sh tests it in full):
# installed into a fresh environment of that version without Rust on PATH,
# and tested there (tests/wheel, without the notebook whose pandas needs
# 3.11). A version with no interpreter on this machine (python3.X on PATH,
# or pyenv's) is reported and left out.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

find_python() {
    local version="$1" candidate
    for candidate in "$(command -v "python$version" || true)" "$HOME"/.pyenv/versions/"$version".*/bin/python"$version"; do
        if [[ -x "$candidate" ]] && "$candidate" -c 'import venv' 2> /dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

for version in 3.10 3.12 3.13; do
    if ! python="$(find_python "$version")"; then
        echo "==> no Python $version here: the wheel is not tested on it"
        continue
    fi
    venv=".venv-wheel-$version"
    WHEEL_PYTHON="$python" WHEEL_VENV="$venv" WHEEL_REQUIREMENTS=scripts/requirements-wheel-versions.txt \
        bash scripts/wheel-env.sh "$venv/bin/python" -m pytest tests/wheel -q -p no:cacheprovider -k "not nbclient"
done
