"""Public benchmark items as tasks for bench/agent_eval.py, converted when the
evaluation runs from the data in the shared benchmarks folder (never copied
into this repository; formats, licences and caveats in its README):

- DS-1000's Pandas and Numpy problems (CC BY-SA 4.0) that validated under
  the kernel's pandas and numpy: the problem's own inputs (its test case 1,
  with `random` and `numpy.random` seeded) are bound in the notebook as its
  `exec_context` binds them, the request is the problem's text, and the check
  is the problem's own `exec_test` against the answer its reference logic
  computes. Function-style problems (a `def f(...)` to complete) and those
  whose `test_string` inspects the solution's source are left out: an agent
  answers in notebook cells, not in one completion.
- InfiAgent-DABench's questions (CC BY-NC 4.0) that need only pandas and
  numpy and whose labels can be judged: the CSV file in the working
  directory, the request is the question, its constraints and its answer
  names, the answers go into a dict `answers`, and each labelled answer is
  compared with its label (numbers within half a unit of the last decimal
  the label is written to, or 1e-6; text without regard to case, quotes,
  spaces, underscores and hyphens; lists element by element, in any order).

Each task's checker runs hidden from the agent (its helpers are `_eval_*`
names, which the namespace summary leaves out)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from agent_tasks import Task

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"

# DABench questions that need more than pandas and numpy (the benchmark
# README's lists: scipy, then scikit-learn), and those whose labels cannot
# be judged as they stand.
DABENCH_NEEDS_MORE = frozenset({
    10, 11, 19, 33, 34, 39, 66, 72, 109, 124, 125, 130, 136, 139, 140, 142, 144, 175, 177, 222, 244, 249, 252, 268,
    269, 282, 297, 298, 300, 304, 309, 326, 337, 350, 355, 375, 408, 410, 413, 415, 419, 428, 429, 431, 449, 452, 465,
    522, 529, 530, 575, 602, 644, 647, 652, 658, 667, 668, 684, 685, 729, 730, 734, 736, 738, 756,
    7, 23, 30, 70, 118, 137, 224, 275, 363, 424, 432, 521, 523, 549, 550, 590, 671, 673, 674, 727,
})  # fmt: skip
DABENCH_UNJUDGEABLE = frozenset({116, 352, 473, 273, 554, 572, 734, 741, 743, 451})

# The checker of a DS-1000 task: the problem's code_context, run apart from
# the notebook's names; its test case 1, seeded as it was validated.
DS1000_HIDDEN = """
def _eval_prepare():
    import random
    import numpy
    random.seed(0)
    numpy.random.seed(0)
    context = {{}}
    exec({context!r}, context)
    given, expected = context["generate_test_case"](1)
    return context, given, expected

_eval_context, _eval_input, _eval_expected = _eval_prepare()

def _eval_check():
    names = dict(globals())
    exec({suffix!r}, names)
    return bool(_eval_context["exec_test"](names["result"], _eval_expected))
"""

# The checker of a DABench task: each labelled answer against `answers`.
DABENCH_HIDDEN = """
def _eval_check(labels={labels!r}):
    import math
    import re

    found = globals().get("answers")
    if not isinstance(found, dict):
        return False
    # A key written in the format's own notation ("@mean[mean_value]",
    # "@mean", or without its "@") is the answer's name, as the benchmark's
    # own parser reads it.
    found = {{re.sub(r"^@?(\\w+)(?:\\[.*\\])?$", r"\\1", str(key).strip()): value for key, value in found.items()}}

    def words(value):
        return re.sub(r"[\\s_\\-'\\"]", "", str(value)).lower()

    def number(value):
        try:
            return float(str(value).strip().rstrip("%"))
        except ValueError:
            return None

    def same(value, label):
        wanted = number(label)
        got = number(value) if not isinstance(value, bool) else None
        if wanted is not None and got is not None:
            decimals = len(label.strip().split(".")[1]) if "." in label else 0
            return math.isclose(got, wanted, abs_tol=max(1e-6, 0.5 * 10 ** -decimals + 1e-9))
        if "," in label:
            parts = [p.strip() for p in label.split(",")]
            values = list(value) if isinstance(value, (list, tuple)) else [p.strip() for p in str(value).split(",")]
            if len(values) != len(parts):
                return False
            return sorted(words(v) for v in values) == sorted(words(p) for p in parts) or all(
                same(v, p) for v, p in zip(values, parts))
        return words(value) == words(label)

    return all(name in found and same(found[name], label) for name, label in labels)
"""


def ds1000_tasks(root: Path) -> list[Task]:
    records = [json.loads(line) for line in gzip.open(root / "ds1000" / "problems.jsonl.gz", "rt")]
    validated = set(json.loads((root / "ds1000" / "validated.json").read_text())["validated"])
    tasks = []
    for record in records:
        meta, context = record["metadata"], record["code_context"]
        prompt = record["prompt"]
        if meta["problem_id"] not in validated or "def test_string" in context or "BEGIN SOLUTION\n<code>" not in prompt:
            continue
        exec_context = re.search(r'exec_context = r"""(.*?)"""', context, re.S)
        if not exec_context or "[insert]" not in exec_context.group(1):
            continue
        prefix, suffix = exec_context.group(1).split("[insert]")
        if "def f(" in prefix or "result" not in suffix + prompt:
            continue
        problem, _, rest = prompt.partition("\nA:\n")
        answer_line = rest.split("</code>")[-1].split("BEGIN SOLUTION")[0].strip()
        if not answer_line or "test_input" not in prefix:
            continue
        request = (
            f"{problem.replace('Problem:', '', 1).strip()}\n\n"
            f"The inputs are already defined in the notebook. Write the code that does this:\n{answer_line}"
        )
        hidden = DS1000_HIDDEN.format(context=context, suffix=suffix)
        setup = prefix.replace("test_input", "_eval_input").strip()
        solution = record["reference_code"]
        tasks.append(Task(
            name=f"ds1000_{meta['problem_id']}", kind=f"ds1000-{meta['library'].lower()}",
            setup=setup, prompt=request, solution=solution, check="_eval_check()", hidden_setup=hidden,
            wrong_solution="result = None",
        ))
    return tasks


def dabench_tasks(root: Path) -> list[Task]:
    folder = root / "dabench"
    questions = [json.loads(line) for line in open(folder / "questions.jsonl", encoding="utf-8")]
    labels = {record["id"]: record["common_answers"]
              for record in (json.loads(line) for line in open(folder / "labels.jsonl", encoding="utf-8"))}
    tasks = []
    for question in questions:
        number = question["id"]
        if number in DABENCH_NEEDS_MORE or number in DABENCH_UNJUDGEABLE:
            continue
        file = question["file_name"]
        answer_names = re.findall(r"@(\w+)\[", question["format"])
        wanted = [(name, str(value)) for name, value in labels[number]]
        if not answer_names or not all(name in answer_names for name, _ in wanted):
            continue
        text = re.sub(r"^\d+\.\s*", "", question["question"].strip())
        constraints = question["constraints"].strip().strip("{}").strip()
        form = question["format"].strip().strip("{}").strip()
        request = (
            f"{text}\n{constraints}\nThe data is in the file {file!r} in the working directory. "
            f"Store the answers in a dict named `answers`, from each answer's name to its value; "
            f"their names and forms: {form}"
        )
        solution = "answers = " + repr({name: value for name, value in wanted})
        tasks.append(Task(
            name=f"dabench_{number}", kind=f"dabench-{question['level']}",
            setup="", prompt=request, solution=solution, check="_eval_check()",
            files={file: (folder / "tables" / file).read_text(encoding="utf-8", errors="replace")},
            hidden_setup=DABENCH_HIDDEN.format(labels=wanted), wrong_solution="answers = {}",
        ))
    return tasks


def public_tasks(root: Path = DEFAULT_DIR) -> list[Task]:
    """Every convertible item of both benchmarks, or none when the folder is
    not there."""
    if not (root / "ds1000").is_dir() or not (root / "dabench").is_dir():
        return []
    return ds1000_tasks(root) + dabench_tasks(root)
