#!/usr/bin/env bash
# Installs what the JupyterLab browser test needs: Debian's Chromium (the test
# drives /usr/bin/chromium; Playwright downloads no browser of its own) and the
# pinned node packages of tests/browser. Idempotent and quiet when all is there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ ! -x /usr/bin/chromium ]]; then
    echo "==> installing Debian's chromium (apt-get)"
    log="$(mktemp)"
    # apt's chatter goes to a log that is shown only if the install fails.
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; } >"$log" 2>&1; then
        cat "$log" >&2; exit 1
    fi
    rm -f "$log"
fi

if ! command -v npm >/dev/null; then
    echo "node (20 or later) and npm are needed for the browser test" >&2; exit 1
fi

browser="$root/tests/browser"
stamp="$browser/node_modules/.package-lock.sha256"
want="$(sha256sum "$browser/package-lock.json" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "==> installing the browser test's node packages (npm ci)"
    # playwright-core never downloads browsers; this keeps npm from asking anyway.
    (cd "$browser" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --silent --no-audit --no-fund)
    echo "$want" > "$stamp"
fi
