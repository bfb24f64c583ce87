"""The README and the book (``docs/``) hold together: every relative link
reaches a file, the book's summary lists every page and only pages that
exist, no page runs on for long without a heading, the help the kernel
prints names a page that is there, and every code block is run or checked
here or in `src/book_examples.rs` (settings, `%%ask` cells, `mahtab`
command lines), or marked `illustration` in its info string."""

import re
import shlex
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
    from mahtab.agent.magics import ASK_HELP

    named = re.findall(r"docs/src/[\w-]+\.md", ASK_HELP)
    assert named and all((ROOT / path).is_file() for path in named), ASK_HELP


FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def code_blocks(page):
    """The fenced blocks of `page`: (info string's words, text)."""
    return [(re.split(r"[ ,]+", info.strip()), text) for info, text in FENCE.findall(page.read_text())]


def shell_commands(text):
    """Each command of a shell block as words: continuations joined,
    comments and leading NAME=value settings dropped."""
    commands = []
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            words.pop(0)
        if words:
            commands.append(words)
    return commands


def flags_known(flags, source):
    unknown = [flag for flag in flags if not re.search(rf"[\"'\s|(]{re.escape(flag)}\b", source)]
    return not unknown, unknown


def why_unchecked(words):
    """Why a shell command of the book is not checked (None: it is, here or
    by src/book_examples.rs)."""
    flags = [w.split("=")[0] for w in words if w.startswith("--") and w != "--"]
    if "mahtab" in words or any(w.endswith("/mahtab") for w in words):
        return None  # the command line is parsed by mahtab's own definition (Rust)
    if words[0] in ("bash", "source"):
        script = ROOT / words[1]
        if not script.is_file():
            return f"{words[1]} is not there"
        ok, unknown = flags_known(flags, script.read_text())
        return None if ok else f"{words[1]} does not know {unknown}"
    if words[0] == ".venv/bin/python" and words[1].endswith(".py"):
        script = ROOT / words[1]
        if not script.is_file():
            return f"{words[1]} is not there"
        ok, unknown = flags_known(flags, script.read_text())
        return None if ok else f"{words[1]} does not know {unknown}"
    if words[:3] == [".venv/bin/python", "-m", "pytest"]:
        missing = [w for w in words[3:] if not w.startswith("-") and not (ROOT / w).exists()]
        return f"no such test path: {missing}" if missing else None
    if words[:2] == ["pip", "install"] and all(w.startswith("target/wheels/") for w in words[2:]):
        return wrong_wheels(words[2:])
    if words[:3] == [".venv/bin/python", "-m", "maturin"]:
        pinned = "maturin==" in (ROOT / "scripts" / "requirements.txt").read_text()
        return None if pinned else "maturin is not in .venv"
    if words == ["jupyter", "kernelspec", "list"]:
        return None
    if words[0] == "cargo" and words[1] in ("build", "test"):
        tests = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--test"]
        missing = [t for t in tests if not (ROOT / "tests" / t).is_dir() and not (ROOT / "tests" / f"{t}.rs").is_file()]
        return f"no such test target: {missing}" if missing else None
    return f"`{words[0]}` is not a command this test can check"


def wrong_wheels(paths):
    """Why wheel paths do not name the wheel the build makes (its version,
    an extra the package declares), if they do not."""
    import tomllib

    version = tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for path in paths:
        name, _, extra = path.partition("[")
        if not re.fullmatch(rf"target/wheels/mahtab-{re.escape(version)}-cp3\d+-(?:cp3\d+|abi3)-\w+\.whl", name):
            return f"{path} is not a wheel of mahtab {version}"
        if extra and extra.rstrip("]") not in extras:
            return f"{path}: the wheel has no extra {extra.rstrip(']')}"
    return None


BLOCKS = [(page, info, text) for page in [ROOT / "README.md", *PAGES] for info, text in code_blocks(page)]


@pytest.mark.parametrize("page, info, text", [b for b in BLOCKS if b[1][0] == "sh"], ids=lambda v: getattr(v, "name", ""))
def test_every_shell_command_is_checked_or_marked_as_illustration(page, info, text):
    if "illustration" in info:
        return
    for words in shell_commands(text):
        why = why_unchecked(words)
        assert why is None, f"{page.name}: `{' '.join(words)}`: {why} (or mark the block sh,illustration)"


def test_the_shell_check_finds_wrong_commands():
    assert why_unchecked(["bash", "scripts/test.sh", "--fast"]) is None
    assert "does not know" in why_unchecked(["bash", "scripts/test.sh", "--slow"])
    assert "not there" in why_unchecked(["bash", "scripts/no-such.sh"])
    assert "does not know" in why_unchecked([".venv/bin/python", "bench/agent_eval.py", "--no-such-option"])
    assert why_unchecked([".venv/bin/python", "bench/agent_eval.py", "--local", "--graphs", "single"]) is None
    assert "no such test target" in why_unchecked(["cargo", "test", "--test", "nope"])
    assert "not a command" in why_unchecked(["pip", "install", "x"])
    assert "not a wheel of mahtab" in why_unchecked(["pip", "install", "target/wheels/mahtab-0.0.9-cp311-cp311-any.whl"])
    assert "no extra" in why_unchecked(["pip", "install", "target/wheels/mahtab-0.1.0-cp311-cp311-any.whl[gpu]"])


@pytest.mark.parametrize("page, info, text", [b for b in BLOCKS if b[1][0] == "python"], ids=lambda v: getattr(v, "name", ""))
def test_every_python_cell_of_the_book_runs(page, info, text):
    if "illustration" in info:
        return
    exec(compile(text, f"{page.name} code block", "exec"), {})
