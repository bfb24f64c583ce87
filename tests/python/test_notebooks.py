"""The demo notebooks in notebooks/ run top to bottom through the installed
kernelspec with nbclient, as `jupyter nbconvert --execute` would, and produce
the outputs that matter (types and MIME types, no errors)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import KERNEL_NAME, REPO_ROOT
from fake_llm import FakeLlm, code_or_schema

NOTEBOOKS = REPO_ROOT / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
REVENUE_CODE = "```python\nrevenue = float((sales.price * sales.qty).sum())\nprint(revenue)\n```"
PROVIDER_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_PROVIDER", "MAHTAB_MODEL")


def run(name: str, tmp_path: Path, env: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """Runs notebooks/`name` in a fresh kernel; %%ask uses the local model,
    or the provider `env` names."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    # The kernel inherits this process's environment: keep it off any
    # provider configured on the machine, so %%ask uses the local model.
    saved = {k: os.environ.pop(k) for k in (*PROVIDER_VARIABLES, "JUPYTER_DATA_DIR", *(env or {})) if k in os.environ}
    # The saved %%ask conversation (and history) go to the test's own directory.
    os.environ["JUPYTER_DATA_DIR"] = str(tmp_path / "data")
    os.environ.update(env or {})
    try:
        NotebookClient(
            notebook,
            kernel_name=KERNEL_NAME,
            # A cell's own limit: an %%ask answered by the local model on a
            # slow CPU takes minutes.
            timeout=600,
            resources={"metadata": {"path": str(tmp_path)}},
        ).execute()
    finally:
        for variable in ["JUPYTER_DATA_DIR", *(env or {})]:
            del os.environ[variable]
        os.environ.update(saved)
    return notebook


def outputs(cell) -> list:
    return cell.get("outputs", [])


def test_notebooks_are_saved_without_outputs() -> None:
    for path in NOTEBOOKS.glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name} has saved outputs"


def rich(cell, mime: str) -> list:
    """The cell's display_data and execute_result outputs that carry `mime`."""
    return [o for o in outputs(cell) if o.output_type in ("display_data", "execute_result") and mime in o.data]


def test_basics_notebook(tmp_path: Path) -> None:
    cells = [c for c in run("basics.ipynb", tmp_path).cells if c.cell_type == "code"]
    for cell in cells:
        assert all(o.output_type != "error" for o in outputs(cell)), cell.source
    by_source = {c.source.split("\n", 1)[0]: c for c in cells}
    assert "Python 3." in outputs(cells[0])[0].text
    assert outputs(cells[1])[0].output_type == "execute_result"
    streams = {o.name for o in outputs(cells[2]) if o.output_type == "stream"}
    assert streams == {"stdout", "stderr"}
    badges = [o for o in outputs(cells[3]) if o.output_type in ("display_data", "execute_result")]
    assert len(badges) == 2 and all("text/html" in o.data for o in badges)

    (table,) = rich(by_source["import pandas as pd"], "text/html")
    assert "<table" in table.data["text/html"] and "cube" in table.data["text/html"]

    (plot,) = rich(by_source["import matplotlib.pyplot as plt"], "image/png")
    assert base64.b64decode(plot.data["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")

    (view,) = rich(by_source["import ipywidgets as widgets"], WIDGET_VIEW)
    assert view.data[WIDGET_VIEW]["model_id"], view.data
    assert "3 squared is 9" in view.data["text/plain"], "the label was computed when shown"

    # nbclient takes no input: the input() cell falls back instead of failing.
    (greeting,) = [o for o in outputs(by_source["try:"]) if o.output_type == "stream"]
    assert greeting.text == "Hello, headless reader!\n"


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")
def test_ask_notebook(tmp_path: Path) -> None:
    cells = [c for c in run("ask.ipynb", tmp_path).cells if c.cell_type == "code"]
    for cell in cells:
        assert all(o.output_type != "error" for o in outputs(cell)), cell.source
    table = outputs(cells[0])[0]
    assert "text/html" in table.data and "<table" in table.data["text/html"]
    by_source = {c.source.split("\n", 1)[0]: c for c in cells}
    asks = [c for c in cells if c.source.startswith("%%ask")]
    assert len(asks) == 3
    # The last cell asks the model to follow the skill the one before wrote.
    for ask in asks + [by_source["found = rlm('Which line reports an error, and what went wrong?', log, max_turns=3)"]]:
        kinds = [o.metadata.get("mahtab", {}).get("kind") for o in outputs(ask) if o.output_type == "display_data"]
        assert kinds and kinds[-1] == "summary", (ask.source, kinds)
        assert any(o.output_type == "stream" for o in outputs(ask)), f"the answer streamed into the cell: {ask.source}"

    # The tools, called by the reader: the one error of the generated log, with a line around it.
    searched = "".join(o.text for o in outputs(by_source["from mahtab.tools import grep, peek"]) if o.output_type == "stream")
    assert (
        "13217- 13216 INFO" in searched
        and "13218: 13217 ERROR db: connection pool exhausted (64 of 64 in use)" in searched
        and "13219- 13218 INFO" in searched
    ), searched
    # The skill the notebook wrote, in the kernel's working directory, is listed.
    (listed,) = rich(by_source["from pathlib import Path"], "text/plain")
    assert listed.data["text/plain"] == "{'table-summary': 'Summarise a pandas DataFrame for a reader in a hurry.'}"
    assert (tmp_path / ".mahtab" / "skills" / "table-summary.md").is_file()


@pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")
def test_graphs_notebook(tmp_path: Path) -> None:
    # A scripted model over real HTTP: what is checked here is the notebook
    # and each graph's panels, not a model's words (every graph meets the
    # local model in test_ask_local).
    llm = FakeLlm([], otherwise=code_or_schema(REVENUE_CODE))
    try:
        cells = [c for c in run("graphs.ipynb", tmp_path, llm.env()).cells if c.cell_type == "code"]
    finally:
        llm.close()
    # The four graphs that ask a model asked this one, each with its own system prompt.
    assert len({r["messages"][0]["content"] for r in llm.requests}) >= 4, len(llm.requests)
    for cell in cells:
        assert all(o.output_type != "error" for o in outputs(cell)), cell.source
    by_source = {c.source.split("\n", 1)[0]: c for c in cells}

    listed = "".join(o.text for o in outputs(by_source["%ask_graph"]) if o.output_type == "stream")
    for graph in ("default", "analyst", "planner", "triage", "rlm"):
        assert f"  {graph} " in listed, listed
    (drawn,) = rich(by_source["%ask_graph triage"], "text/markdown")
    assert "```mermaid" in drawn.data["text/markdown"] and "review -.-> pre_plan" in drawn.data["text/markdown"]

    def kinds(cell) -> list:
        return [o.metadata.get("mahtab", {}).get("kind") for o in outputs(cell) if o.output_type == "display_data"]

    asks = {c.source.split("\n", 1)[0]: c for c in cells if c.source.startswith("%%ask")}
    assert len(asks) == 5
    for first_line, cell in asks.items():
        assert kinds(cell) and kinds(cell)[-1] in ("summary", "trace"), (first_line, kinds(cell))
        assert "summary" in kinds(cell), first_line
    # Only what does not depend on the model's words: the informer's panel,
    # the triage's trace and its fast path.
    planner = asks["%%ask --graph planner --informer --max-turns 1 --new"]
    informed = [o for o in outputs(planner) if o.get("metadata", {}).get("mahtab", {}).get("kind") == "key_information"]
    assert informed and "sales: DataFrame, 4 rows x 3 columns" in informed[0].data["text/plain"], kinds(planner)
    # The triage planned the same request (a classification first) and
    # handed it on; the plain one took the pattern path.
    planned = asks["%%ask --graph triage --max-turns 1 --trace --new"]
    (trace,) = [o for o in outputs(planned) if o.get("metadata", {}).get("mahtab", {}).get("kind") == "trace"]
    assert "pre_plan → classify →" in trace.data["text/plain"], trace.data["text/plain"]
    triage = asks["%%ask --graph triage --max-turns 1 --new"]
    fast = "".join(o.text for o in outputs(triage) if o.output_type == "stream")
    assert fast.startswith("triage: runs print(describe(sales)) (no model call)"), fast
