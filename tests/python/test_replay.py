"""Notebooks with %%ask cells rerun the same way. nbclient (what
`jupyter nbconvert --execute` and papermill use) runs a notebook with three
%%ask cells against a scripted model server in the OpenAI format: the first
run asks the model and leaves a record beside the notebook; the second run,
in a fresh kernel, makes no model request and leaves the same values. A
changed prompt asks again, `--fresh` asks and replaces the record, a corrupt
or newer record stops the cell with nothing run, approvals apply to replayed
code, `%ask_code` hands the code to the frontend as the next cell, and
`mahtab export` writes a copy that runs on ipykernel."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from conftest import KERNEL_NAME, REPO_ROOT, kernel_with_model
from fake_llm import FakeLlm

pytestmark = pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")

SETUP = "import pandas as pd\nsales = pd.DataFrame({'product': ['a', 'b', 'c'], 'price': [2.0, 5.0, 1.5], 'qty': [3, 1, 10]})"
TOTAL = "%%ask --once\nAdd a column total (price times qty) to sales."
REVENUE = "%%ask --once\nStore the sum of the total column in revenue."
# The default graph: its review (and any other judgement) gets the fake
# server's "done" once the script runs out, so this cell comes last.
RANKED = "%%ask --max-turns 1\nList the products from the largest total to the smallest, in ranked."
SHOW = "print(repr(revenue), ranked, list(sales.columns))"

ANSWERS = [
    "```python\nsales['total'] = sales.price * sales.qty\n```",
    "```python\nrevenue = float(sales.total.sum())\nprint(revenue)\n```",
    "```python\nranked = sales.sort_values('total', ascending=False)['product'].tolist()\nprint(ranked)\n```",
]
MAHTAB = REPO_ROOT / "target" / "release" / "mahtab"
SHOWN = "26.0 ['c', 'a', 'b'] ['product', 'price', 'qty', 'total']\n"


def write(folder: Path, cells: list[str]) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    notebook.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "Mahtab", "language": "python"}
    path = folder / "analysis.ipynb"
    nbformat.write(notebook, path)
    return path


def execute(path: Path, answers: list[str], kernel: str = KERNEL_NAME, **env: str) -> tuple[nbformat.NotebookNode, FakeLlm]:
    """Runs the notebook at `path` with nbclient in a fresh kernel started in
    its folder, whose %%ask talks to a scripted model; the executed notebook
    and the model server (with the requests it had)."""
    llm = FakeLlm(answers)
    notebook = nbformat.read(path, as_version=4)
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ANTHROPIC_", "MAHTAB_", "JPY_")):
            del os.environ[name]
    os.environ.update(llm.env(), JUPYTER_DATA_DIR=str(path.parent / "data"), **env)
    try:
        NotebookClient(notebook, kernel_name=kernel, timeout=120, resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
        llm.close()
    return notebook, llm


def text_of(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def panels(cell, kind: str) -> list[str]:
    """The text of the cell's panels of this kind (code, output, replay, ...)."""
    return [
        o.data["text/plain"] for o in cell.outputs
        if o.output_type == "display_data" and o.metadata.get("mahtab", {}).get("kind") == kind
    ]  # fmt: skip


def kinds(cell) -> list[str]:
    return [o.metadata.get("mahtab", {}).get("kind") for o in cell.outputs if o.output_type == "display_data"]


def test_a_notebook_reruns_from_its_record_with_no_model_call(tmp_path: Path) -> None:
    path = write(tmp_path, [SETUP, TOTAL, REVENUE, RANKED, SHOW])
    first, llm = execute(path, ANSWERS)
    assert text_of(first.cells[4]) == SHOWN
    asked = len(llm.requests)
    assert asked >= 3, llm.requests
    # No notebook named to the kernel (nbclient does not): the record is in
    # its working directory, readable, one run per cell.
    record = json.loads((tmp_path / "mahtab-ask.json").read_text())
    assert record["mahtab_ask_record"] == 1
    assert [run["prompt"] for run in record["cells"]] == [c.split("\n", 1)[1] for c in (TOTAL, REVENUE, RANKED)]
    (block,) = record["cells"][1]["blocks"]
    assert block["code"] == "revenue = float(sales.total.sum())\nprint(revenue)"
    assert any(line.startswith("revenue") for line in block["changes"]), block

    second, llm = execute(path, [])
    assert llm.requests == [], "a replay asks the model nothing"
    assert text_of(second.cells[4]) == SHOWN, "the same values"
    for cell in second.cells[1:4]:
        assert kinds(cell)[0] == "replay" and kinds(cell)[-1] == "summary", kinds(cell)
        (replayed,) = panels(cell, "replay")
        assert "replayed: 1 block from" in replayed and "--fresh" in replayed, replayed
        assert "no model call" in panels(cell, "summary")[0]
    assert panels(second.cells[2], "output") == ["[output]\n26.0"], "the replayed block's output shows"

    # A changed prompt asks the model (once, with --once); the others replay.
    changed = REVENUE.replace("sum", "total")
    path = write(tmp_path, [SETUP, TOTAL, changed, RANKED, SHOW])
    third, llm = execute(path, ["```python\nrevenue = float(sales['total'].sum())\n```"])
    assert len(llm.requests) == 1 and "Store the total" in llm.requests[0]["messages"][-1]["content"]
    assert text_of(third.cells[4]) == SHOWN

    # --fresh asks and replaces the cell's record; the next run replays the new code.
    path = write(tmp_path, [SETUP, TOTAL.replace("--once", "--once --fresh"), changed, RANKED, SHOW])
    _, llm = execute(path, ["```python\nsales['total'] = sales['qty'] * sales['price'] + 0\n```"])
    assert len(llm.requests) == 1
    path = write(tmp_path, [SETUP, TOTAL, changed, RANKED, SHOW])
    fourth, llm = execute(path, [])
    assert llm.requests == []
    assert "sales['qty'] * sales['price'] + 0" in panels(fourth.cells[1], "code")[0]


def test_the_record_is_beside_the_notebook_the_server_names(tmp_path: Path) -> None:
    """jupyter_server tells the kernel its notebook in JPY_SESSION_NAME (the
    Lab test checks it under a real server); VS Code in
    __vsc_ipynb_file__. A console's session names no notebook."""
    path = write(tmp_path, [SETUP, TOTAL])
    execute(path, ANSWERS[:1], JPY_SESSION_NAME=str(path))
    assert (tmp_path / "analysis.ask.json").is_file() and not (tmp_path / "mahtab-ask.json").exists()
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    path = write(elsewhere, ["__vsc_ipynb_file__ = %r" % str(tmp_path / "vsc.ipynb"), SETUP, TOTAL])
    execute(path, ANSWERS[:1], JPY_SESSION_NAME="console-1")
    assert (tmp_path / "vsc.ask.json").is_file() and not (elsewhere / "mahtab-ask.json").exists()


@pytest.mark.parametrize(
    "content, says",
    [
        ('{"mahtab_ask_record": 7, "cells": []}', "written by a newer mahtab"),
        ("{not json", "is unreadable"),
    ],
)
def test_a_record_it_cannot_read_stops_the_cell_with_nothing_run(tmp_path: Path, content: str, says: str) -> None:
    (tmp_path / "mahtab-ask.json").write_text(content)
    path = write(tmp_path, [SETUP, TOTAL])
    with pytest.raises(CellExecutionError) as failed:
        execute(path, ANSWERS[:1])
    assert says in str(failed.value) and "--fresh" in str(failed.value)
    assert (tmp_path / "mahtab-ask.json").read_text() == content, "the record is left as it was"


def test_replayed_code_asks_for_approval_and_ask_code_makes_the_next_cell(tmp_path: Path) -> None:
    with kernel_with_model(tmp_path, ANSWERS[:1]) as (kernel, llm):
        for code in (SETUP, TOTAL):
            kernel.execute(code).assert_ok()
        assert len(llm.requests) == 1
        # %ask_code: the code the cell ran goes to the frontend as the next cell.
        (payload,) = kernel.execute("%ask_code").assert_ok().reply["payload"]
        assert payload["source"] == "set_next_input" and payload["replace"] is False
        assert payload["text"].startswith("# %%ask, as code:\n# Add a column total")
        assert payload["text"].endswith("sales['total'] = sales.price * sales.qty\n")
        # Replayed code asks first like new code: with --approve always and
        # no one to answer (no stdin), the replay stops before the block runs.
        kernel.execute("del sales['total']").assert_ok()
        kernel.execute("%ask_config --approve always").assert_ok()
        reply = kernel.execute(TOTAL, allow_stdin=False).reply
        assert reply["status"] == "error" and "replay stopped at block 1 of 1" in reply["evalue"], reply
        kernel.execute("assert 'total' not in sales").assert_ok()
        # A replayed block that fails stops the cell with the error and the
        # way to ask afresh.
        kernel.execute("%ask_config --approve risky").assert_ok()
        kernel.execute("del sales").assert_ok()
        reply = kernel.execute(TOTAL).reply
        assert reply["status"] == "error", reply
        assert "replay stopped at block 1 of 1: NameError" in reply["evalue"] and "--fresh" in reply["evalue"], reply
        assert len(llm.requests) == 1, "still no model call"


def test_the_export_runs_on_ipykernel(tmp_path: Path) -> None:
    path = write(tmp_path, [SETUP, TOTAL, "%ask_config --max-turns 2", REVENUE, RANKED, SHOW])
    execute(path, ANSWERS)
    out = tmp_path / "exported.ipynb"
    done = subprocess.run([str(MAHTAB), "export", str(path), "-o", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "3 %%ask cells as 3 code cells" in done.stdout and "1 agent setting line(s) removed" in done.stdout
    exported = nbformat.read(out, as_version=4)
    nbformat.validate(exported)
    assert not any("%ask" in cell.source for cell in exported.cells if cell.cell_type == "code")
    ran, _ = execute(out, [], kernel="python3")
    assert text_of(ran.cells[-1]) == SHOWN
