"""The README and the book (``docs/``) hold together: every relative link
reaches a file, the book's summary lists every page and only pages that
exist, no page runs on for long without a heading, and the help the
kernel prints names a page that is there."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BOOK = ROOT / "docs" / "src"
PAGES = sorted(BOOK.glob("*.md"))
# About a screenful: longer than this without a heading is hard to find one's way in.
MOST_LINES_WITHOUT_A_HEADING = 60
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(text):
    """The text outside fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_relative_link_reaches_a_file(page):
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.exists(), f"{page.name} links to {target}, which is not there"


def test_the_summary_lists_every_page_once():
    listed = LINK.findall((BOOK / "SUMMARY.md").read_text())
    assert len(listed) == len(set(listed)), listed
    pages = {page.name for page in PAGES} - {"SUMMARY.md"}
    assert set(listed) == pages


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_runs_on_without_a_heading(page):
    run = longest = 0
    for line in prose(page.read_text()).splitlines():
        run = 0 if line.startswith("#") else run + 1
        longest = max(longest, run)
    assert longest <= MOST_LINES_WITHOUT_A_HEADING, f"{page.name}: {longest} lines without a heading"


def test_the_ask_help_names_a_page_of_the_book():
    from mahtab.ipython_runtime import _ASK_HELP

    named = re.findall(r"docs/src/[\w-]+\.md", _ASK_HELP)
    assert named and all((ROOT / path).is_file() for path in named), _ASK_HELP
