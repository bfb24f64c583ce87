"""How often the form question gets the form of the result right, and how
sure the local model is of its answer when it does and when it does not.

Before a review, the kernel asks the model what the variable a request names
must hold (`prompts/expected_form.md`: one number, several values, a table,
...) and sends a value of plainly another form back (`parse::form`). An answer
that is wrong there sends a right result back: told "`x` must hold one value",
a small model reduces the solution of a linear system to its mean. This asks
the question, offline, for each development task whose right value is known
(the project's own tasks, the names a request puts in backticks; DS-1000's,
the name its last line leaves to fill in), reads the chance the model gave
the form it chose among the forms' first tokens (`logprobs`), and counts, at
each bar of that chance, the answers the check would act on, how many of them
would send the right value back, and how many name its form (those would send
a value of the other form back).

Names whose form the request states (`a DataFrame named pricey`) are left
out, as the kernel asks nothing there. Held-out requests are counted, never
read one by one.

    .venv/bin/python bench/form_question.py [--split dev|held-out] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

import agent_eval  # noqa: E402
from review_replay import Judge  # noqa: E402
from written_results import bound_inputs, target  # noqa: E402

FORMS = ("one number", "several values", "a table", "text", "true or false", "cannot tell")
SCHEMA = {
    "type": "object",
    "properties": {
        "form": {"type": "string", "enum": list(FORMS)},
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 4},
    },
    "required": ["form", "shape"],
    "additionalProperties": False,
}
# The form each answer asks for, as `parse::form` reads it.
ASKS = {"one number": "one", "text": "one", "true or false": "one", "several values": "several",
        "a table": "table"}
BARS = (0, 50, 70, 80, 90)


# `parse::form`'s kind words, "<kind> of <what> named" reach and the words
# that end such a phrase: where the request states the form, the kernel
# asks nothing.
KIND_WORDS = {"dict": "several", "dictionary": "several", "mapping": "several", "list": "several",
              "tuple": "several", "array": "several", "ndarray": "several", "series": "several",
              "dataframe": "table", "frame": "table", "table": "table", "number": "one", "integer": "one",
              "int": "one", "float": "one", "scalar": "one", "string": "one", "str": "one", "boolean": "one"}
OF_WORDS = 5
PHRASE_ENDS = {"in", "from", "for", "with", "by", "on", "at", "to", "into", "per", "and", "or"}


def stated_form(request, name):
    """The form the request gives the name in so many words
    (`parse::form::stated_form`), or None."""
    words = [w.lower() for w in re.split(r"[^\w]+", request) if w]
    word = lambda i: words[i] if 0 <= i < len(words) else ""  # noqa: E731
    stated = None
    for i in [i for i, w in enumerate(words) if w == name.lower()]:
        before = word(i - 1)
        if before in ("named", "called"):
            before = word(i - 2) if word(i - 2) in KIND_WORDS else None
            if before is None:
                for at in range(i - 2, max(i - 1 - (OF_WORDS + 1), 0) - 1, -1):
                    if words[at] == "of":
                        before = word(at - 1)
                        break
                    if words[at] in PHRASE_ENDS:
                        break
        after = None
        if word(i + 1) == "as":
            after = word(i + 3) if word(i + 2) in ("a", "an") else word(i + 2)
        for form in (KIND_WORDS.get(before or ""), KIND_WORDS.get(after or "")):
            if form is None:
                continue
            if stated is not None and stated != form:
                return None
            stated = form
    return stated


def held(value):
    """The form the value has and how many values it holds, as
    `parse::form::held` reads a value's description; None for a kind it
    does not read."""
    kind = type(value).__name__
    if kind == "DataFrame":
        return "table", value.size
    if kind in ("Series", "Index"):
        return "several", len(value)
    if kind == "ndarray":
        return ("table" if value.ndim > 1 else "several"), value.size
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return "several", len(value)
    if isinstance(value, (bool, int, float, complex, str)) or kind in (
            "float64", "float32", "int64", "int32", "bool_", "str_", "Timestamp", "Timedelta", "Decimal",
            "Fraction", "datetime", "date"):
        return "one", 1
    return None


def sends_back(asked, value_form):
    """Whether the check sends a value of `value_form` back when the
    answer asked for `asked` (`parse::form::form_contradiction`)."""
    form, count = value_form
    if asked == "one":
        return form in ("several", "table") and count > 1
    if asked in ("several", "table"):
        return form == "one"
    return False


def chance_of_choice(tokens):
    """The form chosen and the chance the model gave it, against the other
    forms, at the token that begins the form's name."""
    text = ""
    for token in tokens:
        if re.search(r'"form"\s*:\s*"?$', text.rstrip()) and token["token"].strip(' "'):
            mass = {}
            for choice in token["top_logprobs"]:
                start = choice["token"].strip(' "').lower()
                named = [form for form in FORMS if start and form.startswith(start)]
                if len(named) == 1:
                    mass[named[0]] = mass.get(named[0], 0.0) + math.exp(choice["logprob"])
            total = sum(mass.values())
            return mass, total
        text += token["token"]
    return {}, 0.0


def own_values(task):
    """(name, right value) for each name the project's task puts in
    backticks that its solution makes or changes."""
    with tempfile.TemporaryDirectory(prefix="mahtab-form-") as cwd, contextlib.chdir(cwd):
        for name, text in task.files.items():
            Path(cwd, name).write_text(text)
        namespace = {}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(task.setup, namespace)
            before = dict(namespace)
            exec(task.solution, namespace)
    names = dict.fromkeys(re.findall(r"`([A-Za-z_]\w*)`", task.prompt))
    return [(name, namespace[name]) for name in names
            if name in namespace and (name not in before or namespace[name] is not before[name])]


def public_values(task):
    if not task.kind.startswith("ds1000"):
        return []
    name = target(task.prompt)
    if not name:
        return []
    namespace, _ = bound_inputs(task, [task.solution])
    return [(name, namespace["_eval_expected"])]


def questions(split):
    """(task, name, right value, its form) for each question of the split."""
    own = {t.name for t in agent_eval.TASKS}
    tasks = [t for t in agent_eval.TASKS if agent_eval.split_of(t) == split]
    tasks += [t for t in agent_eval.public_tasks(agent_eval.DEFAULT_BENCHMARKS) if agent_eval.split_of(t) == split]
    for task in tasks:
        try:
            found = own_values(task) if task.name in own else public_values(task)
        except Exception:  # a task whose solution does not run here
            continue
        for name, value in found:
            form = held(value)
            if form is not None and stated_form(task.prompt, name) is None:
                yield task, name, value, form


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="dev", choices=("dev", "held-out"))
    parser.add_argument("--local", default="coder-1.5b", choices=sorted(agent_eval.LOCAL_MODELS))
    parser.add_argument("--limit", type=int, default=0, help="at most this many questions")
    parser.add_argument("--json", type=Path, help="write each answer here")
    args = parser.parse_args()
    system = (ROOT / "prompts" / "expected_form.md").read_text()
    asked = list(questions(args.split))
    if args.limit:
        asked = asked[:args.limit]
    judge = Judge(args.local)
    answers = []
    try:
        for task, name, _, form in asked:
            message = f"Request: {task.prompt.strip()}\nVariable: {name}"
            text, tokens, _ = judge.ask(system, message, SCHEMA, 1024, odds=True)
            try:
                said = json.loads(text).get("form")
            except (json.JSONDecodeError, AttributeError):
                said = None
            mass, total = chance_of_choice(tokens)
            chance = mass.get(said, 0.0) / total if total and said else None
            answer = {"task": task.name, "name": name, "held": form[0], "count": form[1], "said": said,
                      "chance": chance, "wrong_check": sends_back(ASKS.get(said), form),
                      "names_form": ASKS.get(said) == form[0]}
            answers.append(answer)
            if args.split == "dev":
                print(f"  {task.name:<20} {name:<10} {form[0]:<8} said {said!s:<15} "
                      f"{'' if chance is None else f'{chance:.0%}':>5}"
                      f"{'  SENDS THE RIGHT VALUE BACK' if answer['wrong_check'] else ''}",
                      file=sys.stderr, flush=True)
    finally:
        judge.close()
    if args.json:
        args.json.write_text(json.dumps(answers, indent=1))
    print(f"{len(answers)} form questions, {args.split} split; the check acts where the answer names a form "
          f"and the model gave it at least the bar:")
    print(f"{'bar':>5} {'acted on':>9} {'right value sent back':>22} {'names its form':>15}")
    for bar in BARS:
        acted = [a for a in answers if a["said"] in ASKS and a["chance"] is not None and a["chance"] * 100 >= bar]
        print(f"{bar:>4}% {len(acted):>9} {sum(a['wrong_check'] for a in acted):>22} "
              f"{sum(a['names_form'] for a in acted):>15}")


if __name__ == "__main__":
    os.environ.setdefault("MAHTAB_CONFIG", os.devnull)
    main()
