#!/usr/bin/env bash
# Runs the tests in stages, each timed, stopping at the first that fails:
#   1. lints and book: formatting, clippy, the book built with mdBook and
#      its links checked;
#   2. unit and integration: the Rust unit tests, the integration tests (the
#      real binary on real sockets, once with IPython in the kernel's
#      environment and once with plain Python) and the Python unit tests;
#   3. clients: the Python tests that drive the installed kernelspec through
#      real Jupyter clients (jupyter_kernel_test, jupyter console, nbclient,
#      JupyterLab in headless Chromium, Jupyter Enterprise Gateway), then some
#      again with every kernel encrypted;
#   4. packaging: the wheel (`pip install mahtab`) in fresh environments
#      without Rust, the client tests against its kernel, other CPythons.
# `--fast` runs stages 1 and 2 only: the everyday loop.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

fast=false
case "${1:-}" in
    --fast) fast=true ;;
    "") ;;
    *) echo "usage: bash scripts/test.sh [--fast]" >&2; exit 2 ;;
esac

stage=""
stage_start=$SECONDS
stage_times=()
begin_stage() {
    stage="$1"
    stage_start=$SECONDS
    echo "=== stage: $stage"
}
end_stage() {
    stage_times+=("$stage: $((SECONDS - stage_start)) s")
    echo "=== stage passed: $stage in $((SECONDS - stage_start)) s"
}

bash scripts/python-env.sh
source scripts/cargo-env.sh
# The local model's server is shared by a user's kernels and outlives them;
# the tests stop the ones they start, and this stops any they left behind:
# those whose environment carries this run's mark (kernels, and the servers
# they start, inherit it), never a server of the user's own.
export MAHTAB_TEST_RUN="$$-$(date +%s)"
stop_local_model_servers() {
    .venv/bin/python - <<'PY'
import os, psutil
mark = os.environ["MAHTAB_TEST_RUN"]
servers = []
for proc in psutil.process_iter(["cmdline"]):
    try:
        if "mahtab-local-model-server" in (proc.info["cmdline"] or []) and proc.environ().get("MAHTAB_TEST_RUN") == mark:
            servers.append(proc)
    except psutil.Error:
        pass
for server in servers:
    print(f"==> stopping a local model server the tests left running (pid {server.pid})")
    server.terminate()
for server in psutil.wait_procs(servers, timeout=10)[1]:
    server.kill()
PY
}
finish() {
    local status=$?
    stop_local_model_servers
    if ((status != 0)) && [[ -n "$stage" ]]; then
        echo "=== stage failed: $stage after $((SECONDS - stage_start)) s (later stages not run)"
    fi
    if ((${#stage_times[@]})); then
        printf '=== %s\n' "${stage_times[@]}"
    fi
}
trap finish EXIT

begin_stage "lints and book"
echo "==> cargo fmt --check"
cargo fmt --check
echo "==> cargo clippy"
cargo clippy --release --all-targets --quiet -- -D warnings
bash scripts/book.sh
end_stage

begin_stage "unit and integration"
bash scripts/build-and-install.sh
# An environment without IPython, for the kernel's plain-Python mode.
if [[ ! -x .venv-plain/bin/python ]]; then
    python3 -m venv .venv-plain
fi

echo "==> cargo test (release: the same build the Python tests use), IPython environment"
MAHTAB_TEST_PYTHON="$root/.venv/bin/python" cargo test --release
echo "==> integration tests again, plain-Python environment"
MAHTAB_TEST_PYTHON="$root/.venv-plain/bin/python" cargo test --release --test it -- --skip data_stack::

echo "==> Python unit tests"
.venv/bin/python -m pytest tests/python/unit -q -p no:cacheprovider
end_stage
if $fast; then
    stage=""
    exit 0
fi

begin_stage "clients"
# Jupyter Enterprise Gateway, for the remote-kernel tests.
bash scripts/gateway-env.sh
# Chromium and playwright-core, for the JupyterLab test.
bash scripts/browser-env.sh
echo "==> Python tests through real Jupyter clients"
# Only the kernelspecs of .venv, whatever else is installed for this user.
# --durations: the slowest tests, named in the log (where a slower machine's time goes).
JUPYTER_PATH="$root/.venv/share/jupyter" JUPYTER_DATA_DIR="$root/.venv/share/jupyter" \
    IPYTHONDIR="$(mktemp -d)" .venv/bin/python -m pytest tests/python -q -p no:cacheprovider --ignore tests/python/unit \
    --durations=12
echo "==> conformance, subshells and reliability again, every kernel started encrypted (CurveZMQ)"
MAHTAB_TEST_ENCRYPTION=required JUPYTER_PATH="$root/.venv/share/jupyter" JUPYTER_DATA_DIR="$root/.venv/share/jupyter" \
    IPYTHONDIR="$(mktemp -d)" .venv/bin/python -m pytest -q -p no:cacheprovider \
    tests/python/test_conformance.py tests/python/test_subshells.py tests/python/test_reliability.py
end_stage

begin_stage "packaging"
echo "==> the wheel, built and installed into a fresh environment without Rust, tested there"
bash scripts/wheel-env.sh .venv-wheel/bin/python -m pytest tests/wheel -q -p no:cacheprovider
echo "==> pip install \"mahtab[local]\": %%ask assembles the model from the extra's packages and answers"
WHEEL_VENV=.venv-wheel-local WHEEL_EXTRAS=local WHEEL_REQUIREMENTS=scripts/requirements-wheel-versions.txt \
    bash scripts/wheel-env.sh .venv-wheel-local/bin/python -m pytest tests/wheel/test_local_extra.py -q -p no:cacheprovider
rm -rf .venv-wheel-local  # 2.2 GB: the packages and the model assembled from them (in a test's temporary folder)
echo "==> client tests (subshells, conformance, debugger, %%ask, guard, MCP, reliability) against the wheel's kernel"
# The wheel's kernelspec under the name the tests use, found first.
rm -rf target/wheel-kernelspec
.venv-wheel/bin/mahtab install --prefix target/wheel-kernelspec --name mahtab > /dev/null
JUPYTER_PATH="$root/target/wheel-kernelspec/share/jupyter" JUPYTER_DATA_DIR="$root/.venv/share/jupyter" \
    IPYTHONDIR="$(mktemp -d)" .venv/bin/python -m pytest -q -p no:cacheprovider \
    tests/python/test_subshells.py tests/python/test_conformance.py tests/python/test_debugger.py \
    tests/python/test_agent_controls.py tests/python/test_guard.py tests/python/test_mcp.py \
    tests/python/test_reliability.py tests/python/test_encryption.py

echo "==> Enterprise Gateway starting the wheel's kernel (python -m mahtab launch)"
MAHTAB_COMMAND="$root/.venv-wheel/bin/mahtab" JUPYTER_PATH="$root/.venv/share/jupyter" \
    JUPYTER_DATA_DIR="$root/.venv/share/jupyter" IPYTHONDIR="$(mktemp -d)" \
    .venv/bin/python -m pytest -q -p no:cacheprovider tests/python/test_gateway.py -k "not kernel_gateway"
echo "==> the same wheel on CPython 3.10, 3.12 and 3.13, each in a fresh environment of its version"
bash scripts/wheel-versions.sh
end_stage
stage=""
