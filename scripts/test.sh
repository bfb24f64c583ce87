#!/usr/bin/env bash
# Runs every test: formatting and lints, Rust unit and integration tests
# (the real binary on real sockets), then the Python tests that drive the
# installed kernelspec through real Jupyter clients (jupyter_client's
# conformance suite, jupyter console).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

echo "==> cargo fmt --check"
cargo fmt --check
echo "==> cargo clippy"
cargo clippy --release --all-targets --quiet -- -D warnings

bash scripts/build-and-install.sh

echo "==> cargo test (release: the same build the Python tests use)"
MAHTAB_TEST_PYTHON="$root/.venv/bin/python" cargo test --release

echo "==> Python tests through real Jupyter clients"
.venv/bin/python -m pytest tests/python -q -p no:cacheprovider
