#!/usr/bin/env bash
# Builds the book (docs/) with a pinned mdBook into target/book and checks
# its links. mdBook is installed once into .tools/ (ignored by git) with
# cargo; a copy of another version there is replaced.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

MDBOOK_VERSION=0.5.4
tools="$root/.tools/mdbook"
mdbook="$tools/bin/mdbook"
if [[ "$("$mdbook" --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]]; then
    echo "==> installing mdBook $MDBOOK_VERSION into .tools/ (once)"
    source scripts/cargo-env.sh
    # Without default features: no `serve` or `watch` (a web server and a
    # file watcher the build does not use), a third of the compile.
    cargo install mdbook --version "=$MDBOOK_VERSION" --locked --no-default-features \
        --root "$tools" --quiet
fi

echo "==> mdbook build docs"
"$mdbook" build docs --dest-dir "$root/target/book"
bash scripts/python-env.sh >/dev/null
.venv/bin/python scripts/check_book_links.py "$root/target/book"
