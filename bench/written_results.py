"""How far the comparison with a result the request writes out reaches, and
how often it would send a right answer back, measured on DS-1000's requests
without a model.

For each DS-1000 task of a split, the notebook's inputs are bound as the
evaluation binds them and the kernel's comparison
(`src/python/mahtab/agent/shown_result.py`) is asked about two values of the
variable the request names: the task's own expected value (right), and that
value spoiled (rows or items in reverse order, or doubled where there is one
item: wrong). The inputs are the notebook's variables the task's reference
code reads, as a run's code would read them. The report counts, for the right
values, how many the comparison confirms ("matches"), sends back ("differs":
a right answer rejected) or says nothing of, and for the spoiled values of
tasks whose right value it confirms, how many it sends back. Where it says
nothing, the request's example (`request_example.py`: other data than the
notebook's, shown in the request) is tried: the reference code run on it,
and its value compared with the result written for it (the kernel takes a
match only). Held-out tasks are reported as totals only.

With `--answers`, the model's own answers are judged instead: for each turn of
each DS-1000 run of the given development results (`agent_eval.py --json`,
their `--show` transcripts beside them), the code that ran through up to it
is run on the notebook's data, the task's check says whether its value is
right, and the kernel's comparison whether it would be done by code (it
matches the result written for this data, or for the request's example with
the code run on it), sent back, or left to the review. Run from a worktree
of another commit, it compares that commit's rules on the same answers.

With `--tried`, the values the request's own code makes on the notebook's
data (what the user tried, which a small model often sends back) that are
not the right one are judged as answers, the way the kernel judges them:
how often such a wrong value would be taken for the result written out.

With `--near`, for each task whose right value the comparison confirms,
wrong values that look like it (a row or item left out at either end, one
number off by one, the index dropped, integers as floats, a column left out,
and the same numbers in another shape: `reshaped`) are judged, each only
where the task's own check fails it: how often a near miss would be taken
for the written result.

With `--example`, for each task decided on the request's example (nothing
said on the notebook's data, the reference code's value on the example
matching the result written for it), wrong code that also makes that result
(the example's data typed in over the notebook's, the example's result typed
in, the example's rows picked by their labels) is judged where the task's
check fails it: how often it would be done by code.

With `--typed`, for each task whose right value matches the result written
for the notebook's data: the reference code through the kernel's whole
check (`written_verdict`, which knows the code), and code that makes the
same value with its new columns typed in as lists over the notebook's table
(`df.assign(c=[...])`, the result copied from the request): how often each
would be done by code (the right code always; the typed code never, as it
computes nothing).

    .venv/bin/python bench/written_results.py [--split dev|held-out] [--show]
    .venv/bin/python bench/written_results.py --split held-out --near
    .venv/bin/python bench/written_results.py --split held-out --tried
    .venv/bin/python bench/written_results.py --split held-out --example
    .venv/bin/python bench/written_results.py --split held-out --typed
    .venv/bin/python bench/written_results.py --answers bench/results/dev40-*.json
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import re
import signal
import sys
from collections import Counter
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent / "src" / "python"))

from agent_eval import split_of  # noqa: E402
from public_tasks import DEFAULT_DIR, public_tasks  # noqa: E402

from mahtab.agent import request_example, shown_result, typed_values  # noqa: E402


class Runtime:
    """What trying code on a copy needs of the kernel's runtime here."""

    class bridge:
        @staticmethod
        def user_code_starting():
            pass

    @staticmethod
    def _as_python(code):
        return code


def spoiled(value):
    """The value with its rows or items in reverse order (doubled when it
    has one), or None for a value of another kind."""
    if hasattr(value, "iloc"):
        return value.iloc[::-1] if len(value) > 1 else value * 2
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return value[::-1] if value.size > 1 else value * 2
    if isinstance(value, list) and len(value) > 1:
        return value[::-1]
    return None


def near_misses(value):
    """Wrong values a model makes that look like the right one, by kind:
    a row or item left out at either end, one number off by one, a whole
    number off by a fraction, a word in another case, the index dropped,
    integers as floats, a column left out, the columns in another order."""
    import numpy as np

    found = []
    if hasattr(value, "iloc") or (hasattr(value, "shape") and hasattr(value, "dtype") and value.ndim >= 1):
        rows = value.iloc if hasattr(value, "iloc") else value
        if len(value) > 1:
            found += [("last row left out", rows[:-1]), ("first row left out", rows[1:])]
    elif isinstance(value, list) and len(value) > 1:
        found += [("last row left out", value[:-1]), ("first row left out", value[1:])]
    if hasattr(value, "to_numpy") or (hasattr(value, "dtype") and getattr(value, "ndim", 0) >= 1):
        changed = value.copy()
        flat = changed.to_numpy() if hasattr(changed, "to_numpy") else changed
        if flat.dtype.kind in "if" and flat.size:
            if hasattr(changed, "iloc"):
                if changed.ndim == 1:
                    changed.iloc[0] = changed.iloc[0] + 1
                else:
                    column = next((i for i, kind in enumerate(changed.dtypes) if kind.kind in "if"), None)
                    if column is not None:
                        changed.iloc[0, column] = changed.iloc[0, column] + 1
            else:
                changed.flat[0] = changed.flat[0] + 1
            found.append(("one number off by one", changed))
    if hasattr(value, "index") and hasattr(value, "reset_index"):
        import pandas as pd

        if not (isinstance(value.index, pd.RangeIndex) and value.index.start == 0 and value.index.step == 1):
            found.append(("index dropped", value.reset_index(drop=True)))
    if hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "i":
        found.append(("integers as floats", value.astype(float)))
    elif hasattr(value, "dtypes") and hasattr(value, "columns") and any(d.kind == "i" for d in value.dtypes):
        found.append(("integers as floats", value.astype({c: float for c, d in value.dtypes.items() if d.kind == "i"})))
    if hasattr(value, "columns") and len(value.columns) > 1:
        found.append(("a column left out", value.iloc[:, :-1]))
        found.append(("columns in another order", value[list(value.columns[::-1])]))
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        found.append(("one number off by one", value + 1))
    fraction = a_fraction_off(value)
    if fraction is not None:
        found.append(("a whole number off by a fraction", fraction))
    recased = a_word_recased(value)
    if recased is not None:
        found.append(("a word in another case", recased))
    return found + reshaped(value)


def a_word_recased(value):
    """The table or series with its first text cell that holds letters in
    another case (``str.swapcase``: "Apple" as "aPPLE"); None without one."""
    import pandas as pd

    if not isinstance(value, (pd.DataFrame, pd.Series)):
        return None
    frame = value.to_frame() if isinstance(value, pd.Series) else value.copy()
    for position, (_, column) in enumerate(frame.items()):
        for row, cell in enumerate(column):
            if isinstance(cell, str) and cell.swapcase() != cell:
                frame.iloc[row, position] = cell.swapcase()
                return frame.iloc[:, 0] if isinstance(value, pd.Series) else frame
    return None


def a_fraction_off(value):
    """The value with its first number, a whole one, made 0.3 more (a mean
    where a median was asked for), as floats; None where its first number
    is not whole."""
    import numpy as np

    try:
        if hasattr(value, "iloc"):
            changed = value.astype(float) if value.ndim == 1 else value.copy()
            if value.ndim > 1:
                column = next((c for c, d in value.dtypes.items() if d.kind in "if"), None)
                if column is None:
                    return None
                changed[column] = changed[column].astype(float)
                first = changed[column].iloc[0]
                if first != int(first):
                    return None
                changed.loc[changed.index[0], column] = first + 0.3
                return changed
            if changed.iloc[0] != int(changed.iloc[0]):
                return None
            changed.iloc[0] += 0.3
            return changed
        if isinstance(value, np.ndarray) and value.dtype.kind in "if" and value.size:
            changed = value.astype(float)
            if changed.flat[0] != int(changed.flat[0]):
                return None
            changed.flat[0] += 0.3
            return changed
    except (TypeError, ValueError, OverflowError):  # numbers that are not plain, NaN
        return None
    return None


def reshaped(value):
    """Wrong values with the right numbers in another shape, by kind: a
    one-column table as a series or a series as a table, the first column
    moved into the index or the index moved out into a column, the columns
    or the series renamed, an array as a list or a list as an array. A
    printout compared token by token can hold the same numbers in each."""
    import numpy as np
    import pandas as pd

    found = []
    if isinstance(value, pd.DataFrame):
        if value.shape[1] == 1:
            found.append(("a table as a series", value.iloc[:, 0]))
        if value.shape[1] > 1:
            found.append(("a column moved into the index", value.set_index(value.columns[0])))
        if not isinstance(value.index, pd.RangeIndex):
            found.append(("the index moved into a column", value.reset_index()))
        found.append(("columns renamed", value.rename(columns=lambda column: f"{column}_1")))
    elif isinstance(value, pd.Series):
        found.append(("a series as a table", value.to_frame()))
        if not isinstance(value.index, pd.RangeIndex):
            found.append(("the index moved into a column", value.reset_index()))
        found.append(("series renamed", value.rename(f"{value.name}_1" if value.name is not None else "values")))
    if isinstance(value, (pd.DataFrame, pd.Series)):
        frame = value.to_frame() if isinstance(value, pd.Series) else value
        numeric = [c for c, d in frame.dtypes.items() if d.kind in "if"]
        dated = [c for c, d in frame.dtypes.items() if d.kind == "M"]
        for kind, columns in (("numbers as text", numeric), ("dates as text", dated)):
            if columns:
                changed = frame.astype({c: str for c in columns})
                found.append((kind, changed.iloc[:, 0] if isinstance(value, pd.Series) else changed))
    if isinstance(value, np.ndarray) and value.ndim >= 1:
        found.append(("an array as a list", value.tolist()))
    elif isinstance(value, list) and value:
        try:
            found.append(("a list as an array", np.array(value)))
        except Exception:  # ragged items
            pass
    return found


def measure_near(task):
    """For a task whose right value the comparison confirms: each near
    miss the task's own check fails, with the comparison's verdict on it."""
    namespace, inputs = bound_inputs(task, [task.solution])
    name, right = target(task.prompt), namespace["_eval_expected"]
    if verdict(judged(task.prompt, right, inputs, name)) != "matches":
        return None
    test = namespace["_eval_context"]["exec_test"]
    found = []
    for kind, wrong in near_misses(right):
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                passes = bool(test(wrong, right))
        except Exception:  # the check fails it
            passes = False
        if not passes:
            found.append((kind, verdict(judged(task.prompt, wrong, inputs, name))))
    return found


def typed_code(name, value):
    """Code that types `value` in under `name`, as a model that copies the
    request's example writes it (`pd.DataFrame({...})`, `np.array([...])`);
    None for a value it cannot write so that it reads back the same."""
    import numpy as np
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        index = "" if value.index.equals(pd.RangeIndex(len(value))) else f", index={list(value.index)!r}"
        code = f"{name} = pd.DataFrame({value.to_dict('list')!r}{index})"
    elif isinstance(value, pd.Series):
        code = f"{name} = pd.Series({value.tolist()!r}, index={list(value.index)!r}, name={value.name!r})"
    elif isinstance(value, np.ndarray):
        code = f"{name} = np.array({value.tolist()!r})"
    else:
        code = f"{name} = {value!r}"
    namespace = {"pd": pd, "np": np}
    try:
        exec(code, namespace)
        return code if shown_result.same_value(namespace[name], value) else None
    except Exception:  # a repr that does not read back
        return None


def example_misses(task, namespace, inputs, name, example):
    """Wrong code a model writes that makes the result written for the
    request's example: the example's data typed in over the notebook's
    before the right code (a copy of the request's setup), the example's
    result typed in, or its rows picked by their labels. Each as (kind,
    code), where it can be written."""
    rebound = [typed_code(key, value) for key, value in example.items() if value is not inputs[key]]
    found = []
    if rebound and None not in rebound:
        found.append(("the example typed in over the data", "\n".join([*rebound, task.solution])))
    base = {key: value for key, value in namespace.items() if key not in inputs}
    with contextlib.redirect_stdout(io.StringIO()):
        made = request_example.run_on(Runtime, [task.solution], base, example, name)
    result = made is not None and typed_code(name, made)
    if result:
        found.append(("the example's result typed in", result))
    picked = made is not None and rows_picked(name, made, example)
    if picked:
        found.append(("the example's rows picked by label", picked))
    return found


def rows_picked(name, value, example):
    """Code that picks the rows `value` holds out of an example table by
    their labels (`df.loc[[1, 3]]`): right on the example where the result
    is a selection of its rows, and a guess on other data. None where the
    value is not such a selection."""
    import pandas as pd

    if not isinstance(value, (pd.DataFrame, pd.Series)) or not len(value):
        return None
    for key, table in example.items():
        if not isinstance(table, type(value)) or len(value) >= len(table) or not value.index.isin(table.index).all():
            continue
        try:
            if shown_result.same_value(table.loc[list(value.index)], value):
                return f"{name} = {key}.loc[{list(value.index)!r}]"
        except Exception:  # labels that do not pick rows
            continue
    return None


def measure_example(task):
    """For a task decided on the request's example (nothing said on the
    notebook's data, and the right code's value on the example matches
    the result written for it): what the kernel makes of the right code,
    and of each wrong code (`example_misses`) the task's check fails."""
    namespace, inputs = bound_inputs(task, [task.solution])
    name = target(task.prompt)
    if verdict(judged(task.prompt, namespace["_eval_expected"], inputs, name)) != "nothing":
        return None
    if on_example(task, namespace, inputs, name) != "matches":
        return None
    with contextlib.redirect_stdout(io.StringIO()):
        example, _ = request_example.example_inputs(Runtime, task.prompt, inputs)
    right = kernel_call(task, [task.solution])
    found = []
    for kind, code in example_misses(task, namespace, inputs, name, example):
        try:
            passes, call = kernel_call(task, [code])
        except Exception:  # code that fails on the notebook's data: no value to judge
            continue
        if not passes:
            found.append((kind, call))
    return right, found


def columns_typed(name, value, inputs):
    """Code that makes `value`, a table, from an input table it extends
    (the same rows, the input's columns among its own) with its new columns
    typed in as lists: `df.assign(c=[4, 6])[[...]]`. None where no input
    table is so extended, or a list would not read back the same."""
    import pandas as pd

    if not isinstance(value, pd.DataFrame):
        return None
    for key, table in inputs.items():
        if not isinstance(table, pd.DataFrame) or not table.index.equals(value.index):
            continue
        new = [column for column in value.columns if column not in table.columns]
        if not new or not set(table.columns) <= set(value.columns):
            continue
        typed = ", ".join(f"{column!r}: {value[column].tolist()!r}" for column in new)
        code = f"{name} = {key}.assign(**{{{typed}}})[{list(value.columns)!r}]"
        namespace = {key: table}
        try:
            exec(code, namespace)
        except Exception:  # labels that do not read back
            return None
        return code if shown_result.same_value(namespace[name], value) else None
    return None


def measure_typed(task):
    """For a task whose right value matches the result written for the
    notebook's data: (what the kernel makes of the reference code, of the
    code that types the new columns in, or None where it cannot be
    written)."""
    namespace, inputs = bound_inputs(task, [task.solution])
    name, right = target(task.prompt), namespace["_eval_expected"]
    if verdict(judged(task.prompt, right, inputs, name)) != "matches":
        return None
    typed = columns_typed(name, right, inputs)
    return kernel_call(task, [task.solution])[1], typed and kernel_call(task, [typed])[1]


def target(request):
    """The name the request's closing line leaves to fill in (`result = ...`)."""
    found = re.search(r"^(\w+)\s*=\s*\.\.\.", request.splitlines()[-1])
    return found.group(1) if found else None


def verdict(found):
    return found[0] if isinstance(found, tuple) else (found or "nothing")


def measure(task):
    """(the right value's verdict, the spoiled value's verdict or None, the
    verdict on the request's example or None)."""
    namespace, inputs = bound_inputs(task, [task.solution])
    name, right = target(task.prompt), namespace["_eval_expected"]
    first = verdict(judged(task.prompt, right, inputs, name))
    if first == "attempted":
        return first, None, None
    if first != "matches":
        return first, None, on_example(task, namespace, inputs, name) if first == "nothing" else None
    try:
        wrong = spoiled(right)
    except Exception:  # a value that cannot be reversed or doubled
        wrong = None
    if wrong is None or shown_result.same_value(wrong, right):
        return first, None, None
    return first, verdict(judged(task.prompt, wrong, inputs, name)), None


def judged(request, value, inputs, name):
    """The kernel's verdict on a value against the notebook's data."""
    with contextlib.redirect_stdout(io.StringIO()):
        return request_example.judged_on_data(Runtime, request, value, inputs, name)


def on_example(task, namespace, inputs, name, codes=None):
    """The value `codes` (the reference code unless given) make from the
    request's example beside the result written for it, or None where the
    request gives no example."""
    with contextlib.redirect_stdout(io.StringIO()):
        given = request_example.example_inputs(Runtime, task.prompt, inputs)
        if given is None:
            return None
        example, pieces = given
        base = {key: value for key, value in namespace.items() if key not in inputs}
        value = request_example.run_on(Runtime, codes or [task.solution], base, example, name)
    if value is None:
        return "failed"
    return verdict(shown_result.judge(task.prompt, value, list(example.values()), name, pieces))


def bound_inputs(task, codes):
    """The notebook's namespace as the evaluation binds it, and the inputs
    among it that `codes` read."""
    namespace = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(task.hidden_setup, namespace)
        before = set(namespace)
        exec(task.setup, namespace)
    read = set()
    for code in codes:
        read |= set(shown_result.names_read(code))
    inputs = {
        name: value for name, value in namespace.items()
        if name not in before and name in read and not name.startswith("_") and type(value).__name__ != "module"
    }
    return namespace, inputs


def answered_turns(body):
    """The code of a run's turns, each turn with the blocks of the turns
    before it that ran through (what failed made nothing to compare): the
    run's answer after each turn, as the kernel judges it."""
    from review_replay import python_part

    blocks = [
        (int(found.group(1)), python_part(found.group(2)))
        for found in re.finditer(r"\[code, turn (\d+)\]\n(.*?)\n\[(output|error)\]", body, re.S)
        if found.group(3) == "output"
    ]
    for turn in sorted({turn for turn, _ in blocks}):
        yield [code for made, code in blocks if made <= turn]


def recorded_answers(paths, tasks):
    """(task, the codes of one answer) for each turn's answer of each
    DS-1000 run in the development results `paths`, each answer once
    (a run that repeats an answer, or two graphs giving the same one, do
    not count it twice)."""
    from review_replay import transcripts

    seen = set()
    for path in paths:
        report = json.loads(path.read_text())
        if "held-out" in report.get("provider", "") or any(
            split_of(tasks[r["task"]]) != "dev" for r in report["results"] if r["task"] in tasks
        ):
            sys.exit(f"{path}: held-out runs; their work is not read one by one")
        shown = path.with_suffix(".err")
        if not shown.is_file():
            sys.exit(f"{path}: no --show transcript beside it ({shown.name})")
        for _, name, body in transcripts(shown.read_text()):
            if name not in tasks:
                continue
            for codes in answered_turns(body):
                if (name, tuple(codes)) not in seen:
                    seen.add((name, tuple(codes)))
                    yield tasks[name], codes


class TooLong(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds):
    """Stops code that runs longer than `seconds` (a model's loop)."""
    def stop(*_):
        raise TooLong()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def kernel_call(task, codes):
    """(whether the task's check passes the value the codes leave under
    the name the request fills in, what the kernel makes of that value):
    "done by code" (it matches the result written for this data, or for
    the request's example with the codes run on it), "sent back" (it
    differs from the result written), "to the review", or "no value"
    where the codes leave nothing under that name."""
    namespace, inputs = bound_inputs(task, codes)
    before = {key: copy.deepcopy(value) for key, value in inputs.items()}
    name = target(task.prompt)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), time_limit(30):
        for code in codes:
            exec(code, namespace)
        if name not in namespace:
            return False, "no value"
        try:
            right = bool(eval(task.check, namespace))
        except Exception:  # the check's assertion fails it
            right = False
    with contextlib.redirect_stdout(io.StringIO()):
        found = request_example.written_verdict(Runtime, task.prompt, codes, namespace, before, name)
    if found is None:
        return right, "to the review"
    return right, "done by code" if found.verdict == "matches" else "sent back"


def measure_answers(paths, benchmarks, show):
    tasks = {t.name: t for t in public_tasks(benchmarks) if t.kind.startswith("ds1000")}
    counts, failed = Counter(), 0
    for task, codes in recorded_answers(paths, tasks):
        try:
            right, call = kernel_call(task, codes)
        except Exception:  # code that fails here, or runs too long
            failed += 1
            continue
        counts[(call, right)] += 1
        if show:
            print(f"{task.name:14} {len(codes)} block(s) {'right' if right else 'wrong':5} {call}")
    print(f"the model's answers after each turn in {len(paths)} development run(s) ({failed} that failed here), "
          f"as the kernel takes them:")
    for call in ("done by code", "sent back", "to the review", "no value"):
        print(f"  {call:14} {counts[(call, True)]:3} right {counts[(call, False)]:3} wrong")


def tried_values(task, namespace, inputs):
    """What the request's own code makes from the notebook's data, as the
    kernel finds it (`request_example.attempted`): (name, value) for each
    value it binds and a last bare expression. Most requests show what the
    user tried, and a small model often sends that attempt back: a
    plausible wrong answer, written by the request itself."""
    for attempt in request_example.attempted(Runtime, task.prompt, inputs):
        # Typed in (built from no variable that holds data) is never
        # confirmed by the kernel, as the model's answer would not be.
        if typed_values.typed_in([attempt.code], attempt.name, namespace):
            continue
        yield attempt.name, attempt.value


def measure_tried(task):
    """For each value the request's own code makes that is not the right
    one: the comparison's verdict on it (under the name the request leaves
    to fill in). A "matches" is a wrong answer taken for the written one."""
    namespace, inputs = bound_inputs(task, [task.solution])
    name, right = target(task.prompt), namespace["_eval_expected"]
    found = []
    for key, value in tried_values(task, namespace, inputs):
        try:
            if shown_result.same_value(value, right):
                continue
            found.append((key, verdict(judged(task.prompt, value, inputs, name))))
        except Exception:  # a value that cannot be compared
            continue
    return found


def measured_each(tasks, measure):
    """(task, what `measure` found for it) for each task whose inputs
    build here, and how many did not."""
    measured, failed = [], 0
    for task in tasks:
        try:
            measured.append((task, measure(task)))
        except Exception:  # an input that does not build here
            failed += 1
    return measured, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="dev", choices=("dev", "held-out"))
    parser.add_argument("--benchmarks", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--show", action="store_true", help="each development task's verdicts")
    parser.add_argument("--answers", nargs="+", type=Path,
                        help="development results (agent_eval.py --json, run with --show) whose answers to try")
    parser.add_argument("--tried", action="store_true",
                        help="the values the request's own code makes (what the user tried), judged as answers")
    parser.add_argument("--near", action="store_true",
                        help="wrong values that look like the right one (a row left out, a number off), judged")
    parser.add_argument("--example", action="store_true",
                        help="wrong code that makes the result written for the request's example, judged")
    parser.add_argument("--typed", action="store_true",
                        help="the right code, and code that types the result's new columns in, through the kernel")
    args = parser.parse_args()
    if args.answers:
        measure_answers(args.answers, args.benchmarks, args.show)
        return
    tasks = [t for t in public_tasks(args.benchmarks) if t.kind.startswith("ds1000") and split_of(t) == args.split]
    if not tasks:
        sys.exit(f"no DS-1000 tasks in {args.benchmarks}")
    if args.near:
        counts, confirmed = Counter(), 0
        measured, failed = measured_each(tasks, measure_near)
        for task, found in measured:
            if found is None:
                continue
            confirmed += 1
            for kind, said in found:
                counts[(kind, said)] += 1
                if args.show and args.split == "dev" and said == "matches":
                    print(f"{task.name:14} {kind:24} taken for the written result")
        print(f"DS-1000, {args.split} split: {len(tasks)} tasks ({failed} whose inputs did not build), {confirmed} "
              f"whose right value matches the written result; near misses the task's check fails:")
        for kind in sorted({kind for kind, _ in counts}):
            said = {verdict: counts[(kind, verdict)] for verdict in ("matches", "differs", "nothing", "attempted")}
            print(f"  {kind:24} {sum(said.values()):3}: {said['matches']} taken for the written result, "
                  f"{said['differs']} sent back, {said['nothing']} nothing said")
        return
    if args.example:
        rights, counts = Counter(), Counter()
        measured, failed = measured_each(tasks, measure_example)
        for task, found in measured:
            if found is None:
                continue
            (passes, call), misses = found
            rights[(passes, call)] += 1
            for kind, said in misses:
                counts[(kind, said)] += 1
                if args.show and args.split == "dev":
                    print(f"{task.name:14} {kind:36} {said}")
        print(f"DS-1000, {args.split} split: {len(tasks)} tasks ({failed} whose inputs did not build), "
              f"{sum(rights.values())} decided on the request's example; the right code: "
              + ", ".join(f"{n} {call}{'' if passes else ' (the check fails it)'}" for (passes, call), n in sorted(rights.items())))
        print("wrong code that makes the example's written result, the task's check failing it:")
        for kind in sorted({kind for kind, _ in counts}):
            said = {call: counts[(kind, call)] for call in ("done by code", "sent back", "to the review")}
            print(f"  {kind:36} {sum(said.values()):3}: {said['done by code']} done by code, "
                  f"{said['sent back']} sent back, {said['to the review']} to the review")
        return
    if args.typed:
        rights, typed = Counter(), Counter()
        measured, failed = measured_each(tasks, measure_typed)
        for task, found in measured:
            if found is None:
                continue
            rights[found[0]] += 1
            if found[1]:
                typed[found[1]] += 1
            if args.show and args.split == "dev":
                print(f"{task.name:14} right code: {found[0]:14} typed: {found[1] or '-'}")
        print(f"DS-1000, {args.split} split: {len(tasks)} tasks ({failed} whose inputs did not build), "
              f"{sum(rights.values())} whose right value matches the written result")
        for what, counts in (("the right code", rights), ("its new columns typed in", typed)):
            print(f"  {what:24} {sum(counts.values()):3}: " + ", ".join(f"{n} {call}" for call, n in sorted(counts.items())))
        return
    if args.tried:
        counts = Counter()
        measured, failed = measured_each(tasks, measure_tried)
        for task, found in measured:
            for key, said in found:
                counts[said] += 1
                if args.show and args.split == "dev" and said != "nothing":
                    print(f"{task.name:14} {key:16} {said}")
        print(f"DS-1000, {args.split} split: {len(tasks)} tasks ({failed} whose inputs did not build); values the "
              f"request's own code makes that are not the right one: {sum(counts.values())}: "
              f"{counts['matches']} taken for the written result, {counts['differs']} sent back, "
              f"{counts['nothing']} nothing said, {counts['attempted']} matching but made by the request's own code")
        return
    rights, wrongs, examples = Counter(), Counter(), Counter()
    measured, failed = measured_each(tasks, measure)
    for task, (right, wrong, example) in measured:
        rights[right] += 1
        if wrong:
            wrongs[wrong] += 1
        if example:
            examples[example] += 1
        if args.show and args.split == "dev":
            print(f"{task.name:14} right: {right:8} spoiled: {wrong or '-':8} on the example: {example or '-'}")
    print(f"DS-1000, {args.split} split: {len(tasks)} tasks ({failed} whose inputs did not build)")
    print(f"right values: {rights['matches']} match the written result, {rights['differs']} sent back, "
          f"{rights['nothing']} nothing said, {rights['attempted']} matching but made by the request's own code")
    print(f"spoiled values (where the right one matches): {sum(wrongs.values())}: {wrongs['differs']} sent back, "
          f"{wrongs['matches']} taken for the written result, {wrongs['nothing']} nothing said")
    print(f"where nothing is said, the request's example: {sum(examples.values())} tasks give one: the right code's "
          f"value on it {examples['matches']} matches, {examples['differs']} differs, {examples['nothing']} nothing "
          f"said, {examples['failed']} failed on it")


if __name__ == "__main__":
    main()
