"""Checks the links of the built book: every relative link and image of
every page reaches a file of the book, and every `#anchor` an element with
that id on the page it names. External links are counted, not fetched (the
tests run offline).

Usage: python scripts/check_book_links.py BOOK_DIR"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# Pages mdBook writes for itself, whose links are its own.
GENERATED = {"print.html", "404.html", "toc.html"}


class Page(HTMLParser):
    """The ids and the links (href, src) of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id":
                self.ids.add(value)
            elif name in ("href", "src"):
                self.links.append(value)


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def broken_links(book: Path) -> tuple[list[str], int]:
    """The broken links of the book at `book` ("page: link: why"), and how
    many external links it has."""
    pages = {path: parse(path) for path in sorted(book.rglob("*.html"))}
    broken: list[str] = []
    external = 0
    for path, page in pages.items():
        if path.name in GENERATED:
            continue
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//"):
                external += 1
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{path.relative_to(book)}: {link}: no such file")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(book)}: {link}: no such anchor")
    return broken, external


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    book = Path(sys.argv[1]).resolve()
    broken, external = broken_links(book)
    for line in broken:
        print(f"broken link: {line}", file=sys.stderr)
    pages = sum(1 for _ in book.rglob("*.html"))
    print(f"book links: {pages} pages, {len(broken)} broken, {external} external (not fetched)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
