#!/usr/bin/env bash
# Creates (or refreshes) .venv-gateway: Jupyter Enterprise Gateway as it ships
# on PyPI, for the tests that run mahtab as a remote kernel behind it. Its
# pins (jupyter_client<7, jupyter_server<2) would downgrade .venv, hence an
# environment of its own. Also installs Debian's openssh-server, the remote
# host's sshd in the SSH test, and iproute2, which makes that host's network
# namespace. The gateway's own kernel launchers and kernelspec templates are
# not in its wheel but in its source distribution on PyPI: their etc/ folder
# goes to .venv-gateway/share/enterprise-gateway (the benchmark starts
# ipykernel with its Python launcher; the Kubernetes test renders its pod
# template). Idempotent.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-gateway"
requirements="$root/scripts/requirements-gateway.txt"
stamp="$venv/.requirements.sha256"
python="${MAHTAB_BASE_PYTHON:-python3}"

if [[ ! -x /usr/sbin/sshd || ! -x /usr/sbin/ip ]]; then
    echo "==> installing Debian's openssh-server and iproute2 (apt-get)"
    log="$(mktemp)"
    # apt's chatter goes to a log that is shown only if the install fails.
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends openssh-server iproute2; } >"$log" 2>&1; then
        cat "$log" >&2; exit 1
    fi
    rm -f "$log"
fi

if [[ ! -x "$venv/bin/python" ]]; then
    echo "==> creating the Enterprise Gateway environment in .venv-gateway"
    "$python" -m venv "$venv"
fi
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "==> installing Enterprise Gateway into .venv-gateway"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -r "$requirements"
    echo "==> unpacking Enterprise Gateway's launchers from its source distribution"
    sdist="$(mktemp -d)"
    "$venv/bin/python" -m pip download --quiet --no-deps --no-binary :all: -d "$sdist" -r "$requirements"
    rm -rf "$venv/share/enterprise-gateway"
    mkdir -p "$venv/share/enterprise-gateway"
    tar -xzf "$sdist"/jupyter_enterprise_gateway-*.tar.gz -C "$venv/share/enterprise-gateway" \
        --strip-components=1 --wildcards '*/etc/kernel-launchers' '*/etc/kernelspecs'
    rm -rf "$sdist"
    echo "$want" > "$stamp"
fi
