"""Runs a notebook top to bottom through a Jupyter kernel with nbclient and
prints each cell's source and text output, the way a reader would see them.

Usage: python scripts/run_notebook.py NOTEBOOK [--kernel NAME] [--timeout S]
Exits non-zero if a cell raises (unless the cell is tagged raises-exception).
The kernel runs in a fresh temporary directory, so files the notebook writes
(a skill in .mahtab/skills, say) leave nothing behind.
"""

import argparse
import sys
import tempfile

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def text_of(output):
    kind = output.get("output_type")
    if kind == "stream":
        return output.get("text", "")
    if kind in ("execute_result", "display_data"):
        data = output.get("data", {})
        shown = data.get("text/plain", "")
        rich = sorted(m for m in data if m != "text/plain")
        if rich:
            shown += f"    [also {', '.join(rich)}]"
        return shown + "\n"
    if kind == "error":
        return f"{output.get('ename')}: {output.get('evalue')}\n"
    return ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook")
    parser.add_argument("--kernel", default="mahtab")
    parser.add_argument("--timeout", type=int, default=120)
    args = parser.parse_args()

    notebook = nbformat.read(args.notebook, as_version=4)
    failed = False
    with tempfile.TemporaryDirectory(prefix="mahtab-notebook-") as workdir:
        client = NotebookClient(
            notebook, kernel_name=args.kernel, timeout=args.timeout, resources={"metadata": {"path": workdir}}
        )
        try:
            client.execute()
        except CellExecutionError as error:
            failed = True
            print(f"cell failed: {error}", file=sys.stderr)
    for index, cell in enumerate(notebook.cells, 1):
        if cell.cell_type != "code":
            continue
        print(f"--- In [{cell.get('execution_count') or ' '}] (cell {index})")
        print(cell.source)
        output = "".join(text_of(o) for o in cell.get("outputs", []))
        if output:
            print("--- output")
            print(output, end="")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
