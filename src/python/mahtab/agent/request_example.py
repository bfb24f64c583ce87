"""The example a request gives, as data the run's code can be tried on.

A request often shows other data than the notebook holds: "I have a
dataframe like this:" with a small table, then the result wanted for it.
That pair is a test the code can be run against: build the example's
inputs (the request's own code that makes them, or a table it prints, read
back into a DataFrame), run the turn's code on a scratch namespace with
them bound in place of the notebook's values, and compare what it makes
with the written result (`shown_result`). The notebook and its values are
never touched.

An example counts only when it stands in for every value the code read
that the request does not show as it is: the first printed table with the
same columns (the data comes before the result wanted), or a value of the
same kind that the request's code makes under the same name. Anything
less (a scalar the prose states in words, a table whose printout does not
read back) and nothing is said.

The request's code is also run on the notebook's own data (`attempted`):
a request often shows what the user tried and what that printed, and a
value that is their attempt is not confirmed by a printout of it.
"""

import ast
import io
import numbers
import re
import sys
from typing import Any, NamedTuple

from mahtab.agent import candidates, printed_tokens, shown_result, typed_values

# The longest printed table read back as an example, and the longest
# piece of code searched for the code that makes one.
MAX_TABLE_LINES = 60
MAX_CODE_LINES = 80

# Builtins the request's code that makes an example may not name.
_NOT_CALLED = frozenset(
    ("eval", "exec", "compile", "__import__", "open", "getattr", "setattr", "delattr", "globals", "locals",
     "vars", "breakpoint", "input", "exit", "quit")
)


def _modules():
    """The names a request's code takes for granted (``pd``, ``np``)."""
    found = {}
    for alias, module in (("pd", "pandas"), ("np", "numpy")):
        if module in sys.modules:
            found[alias] = sys.modules[module]
    return found


def _made_by_code(runtime, request):
    """The values the request's own code pieces assign, each piece that
    only makes values run in turn on a scratch namespace (a piece that
    fails or may not be tried adds nothing): name to (value, the piece that
    made it)."""
    made = _modules()
    start = dict(made)
    source = {}
    for piece, code in _code_in(request):
        if not _makes_values(code):
            continue
        scratch, _why = candidates.try_candidate(runtime, code, made)
        if scratch is None:
            continue
        for name, value in scratch.items():
            if name != "__builtins__" and made.get(name) is not value:
                source[name] = piece
        made = {name: value for name, value in scratch.items() if name != "__builtins__"}
    return {
        name: (value, source[name]) for name, value in made.items()
        if name not in start and name in source and not name.startswith("_")
    }


def _code_in(request):
    """The code in the request, as (piece, code) in order: each run of
    lines that parses as Python within a piece (a piece may start with a
    sentence, "Say I have df, created with:"), its imports left out."""
    for piece in shown_result.pieces(request):
        if not shown_result.is_code(piece):
            continue
        lines = _imports_dropped(piece).splitlines()
        if len(lines) > MAX_CODE_LINES:
            continue
        start = 0
        while start < len(lines):
            end = next((end for end in range(len(lines), start, -1) if _parses(lines[start:end])), None)
            if end is None or not shown_result.is_code(lines[start]):
                start += 1
                continue
            yield piece, "\n".join(lines[start:end])
            start = end


def _parses(lines):
    try:
        ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return False
    return True


def _makes_values(code):
    """Whether the code only binds values and defines functions (a print
    or a bare name aside): data built for an example, not a loop, a file
    written or a model trained, which is not run for a check."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    # (Text pasted into a request is not the user's code to run: nothing
    # that runs other code, reaches files or looks names up by string.)
    if any(isinstance(node, ast.Name) and node.id in _NOT_CALLED for node in ast.walk(tree)):
        return False
    for node in tree.body:
        if isinstance(node, ast.Expr):
            call = node.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print":
                continue
            if isinstance(node.value, (ast.Name, ast.Constant, ast.Attribute)):
                continue
            return False
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.FunctionDef)):
            return False
    return True


def _imports_dropped(piece):
    """The piece without its import lines (``pd`` and ``np`` are given):
    a request's imports may name modules this kernel lacks."""
    return "\n".join(line for line in piece.splitlines() if not re.match(r"\s*(import |from \S+ import )", line))


def _tables(piece):
    """The tables the piece prints, each as its lines: a header line of
    names, then the rows with as many fields (or one more: the index),
    with rows of dots (a printout's elision) and emphasis marks left out."""
    lines = [line.replace("**", "") for line in piece.splitlines() if line.strip()]
    found, index = [], 0
    while index < len(lines) - 1:
        header = shown_result.table_header("\n".join(lines[index:index + 2]))
        if [word.lower() for word in lines[index].split()] != header or not header:
            index += 1
            continue
        table = [lines[index]]
        index += 1
        while index < len(lines):
            fields = len(lines[index].split())
            if re.fullmatch(r"[\s.]+", lines[index]):
                index += 1
                continue
            if fields not in (len(header), len(header) + 1):
                break
            table.append(lines[index])
            index += 1
        if 1 < len(table) <= MAX_TABLE_LINES:
            found.append(table)
    return found


def read_table(lines, like):
    """The table printed in `lines`, read back as a DataFrame with the
    columns (and, where they convert, the dtypes) of `like`; None when it
    does not read back to those columns."""
    import pandas as pd

    try:
        # (A header one field shorter than the rows: the first field is
        # the index, as pandas prints it.)
        table = pd.read_csv(io.StringIO("\n".join(lines)), sep=r"\s+", engine="python")
    except Exception:  # not a table after all
        return None
    wanted = [str(column) for column in like.columns]
    found = [str(column) for column in table.columns]
    if sorted(found) != sorted(wanted) and sorted(found[1:]) == sorted(wanted):
        # A first column the table lacks ("id"): the rows' labels.
        table = table.set_index(table.columns[0])
        found = found[1:]
    elif sorted(found) != sorted(wanted) or len(set(found)) != len(found):
        return None
    # The notebook's columns, in its order.
    table = table[[table.columns[found.index(name)] for name in wanted]]
    table.columns = like.columns
    for column in like.columns:
        table[column] = _converted(table[column], like[column])
    return table


def _converted(column, like):
    """The column read back as the notebook's column `like` holds its
    values: its dtype, or, for a column of mixed objects, a number for
    each field that reads as one (a printout shows 1 and "1" alike)."""
    import pandas as pd

    try:
        if pd.api.types.is_datetime64_any_dtype(like.dtype):
            return pd.to_datetime(column)
        if like.dtype == object:
            mixed = any(isinstance(item, numbers.Number) for item in like.head(1000))
            return column.map(_number_or_text if mixed else _text).astype(object)
        return column.astype(like.dtype)
    except Exception:  # a value that is not of that kind: as read
        return column


def _text(field):
    return field if isinstance(field, str) or field != field else str(field)


def _number_or_text(field):
    if not isinstance(field, str):
        return field
    for kind in (int, float):
        try:
            return kind(field)
        except ValueError:
            pass
    return field


def _same_kind(example, value):
    if hasattr(value, "columns"):
        return hasattr(example, "columns") and [str(c) for c in example.columns] == [str(c) for c in value.columns]
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return type(example) is type(value) and getattr(example, "ndim", None) == value.ndim
    return type(example) is type(value)


def _alike(name, value, inputs):
    """Whether another input is a table with the same columns (which
    printed table is which is then not known)."""
    columns = [str(column) for column in value.columns]
    return any(
        other != name and hasattr(table, "columns") and [str(c) for c in table.columns] == columns
        for other, table in inputs.items()
    )


def example_inputs(runtime, request, inputs):
    """The request's example for `inputs` (name to value, as the run's
    code read them): (the same names bound to the example's values, the
    pieces they were built from), or None when the request gives no example
    for one of them. Inputs the request shows as they are keep their
    values."""
    made = None
    example, used = {}, []
    pieces = [(piece, printed_tokens.tokens(piece)) for piece in shown_result.pieces(request)]
    for name, value in inputs.items():
        texts = shown_result.printouts(value)
        if any(shown_result.shows_value(piece, found, value, texts, cover=0) for piece, found in pieces):
            example[name] = value
            continue
        if made is None:
            made = _made_by_code(runtime, request)
        if name in made and _same_kind(made[name][0], value):
            example[name], piece = made[name]
            used.append(piece)
            continue
        if not hasattr(value, "columns") or _alike(name, value, inputs):
            return None
        # The first such table: a request shows its data before the result
        # (which may have the same columns).
        table = next(
            ((table, piece) for piece, _ in pieces for lines in _tables(piece)
             for table in [read_table(lines, value)] if table is not None),
            None,
        )
        if table is None:
            return None
        example[name], piece = table
        used.append(piece)
    if all(example[name] is inputs[name] for name in inputs):
        return None  # no other data: the comparison on this data has said what it can
    return example, used


class Attempt(NamedTuple):
    """A value the request's own code makes from the notebook's data."""

    name: str  # what the code binds it to (``_attempt_value`` for a last bare expression)
    value: Any
    piece: str  # the piece of the request the code is in
    code: str  # the code that ran, its last expression bound to ``name``


def attempted(runtime, request, inputs):
    """The values the request's own code makes from the notebook's data
    (`inputs`, name to value as the run's code read them), as `Attempt`s:
    each run of code that reads one of them and only binds values (its
    last line may be an expression, as a notebook shows one), run on a
    scratch copy. What the user tried, whose printout a request often
    shows after it."""
    namespace = _modules()
    namespace.update(inputs)
    made = []
    for piece, code in _code_in(request):
        code = _last_expression_kept(code)
        if code is None or not set(shown_result.names_read(code)) & set(inputs) or not _makes_values(code):
            continue
        scratch, _why = candidates.try_candidate(runtime, code, namespace)
        if scratch is None:
            continue
        made.extend(
            Attempt(name, value, piece, code) for name, value in scratch.items()
            if not name.startswith("__") and namespace.get(name) is not value
            and not callable(value) and type(value).__name__ != "module" and _new_value(value, inputs)
        )
    return made


def _new_value(value, inputs):
    """Whether `value` is other than every input: the scratch run works
    on copies, so an input left alone (or shown by a bare name) comes back
    as a copy, equal to the original, and is not something the code made."""
    for item in inputs.values():
        try:
            if item is value or candidates.same_value(item, value):
                return False
        except Exception:  # values that cannot be compared
            continue
    return True


def judged_on_data(runtime, request, value, inputs, name):
    """`shown_result.judge` of the value against the notebook's data
    (`inputs`), except that a value the request's own code makes from that
    data, shown only after that code, is "attempted", not "matches": the
    printout that follows an attempt is most likely what it printed, not
    what the user wants (a result written before the attempt still
    counts)."""
    found = shown_result.judge(request, value, list(inputs.values()), name)
    if found != "matches":
        return found
    tried = [made.piece for made in attempted(runtime, request, inputs) if candidates.same_value(value, made.value)]
    if not tried:
        return found
    pieces = shown_result.pieces(request)
    first_try = min(pieces.index(piece) for piece in tried)
    texts = shown_result.printouts(value)
    shown_before = any(
        shown_result.shows_value(piece, printed_tokens.tokens(piece), value, texts)
        for piece in pieces[:first_try]
    )
    return found if shown_before else "attempted"


class WrittenVerdict(NamedTuple):
    """What the result a request writes out says of a value the run made:
    it "matches" (on this data, or `on_example`: the run's code made it
    from the request's example) or "differs" from `written` (on this data,
    or `on_example`, where `value` is what the code made from the
    example)."""

    verdict: str
    on_example: bool = False
    written: Any = None
    value: Any = None


def written_verdict(runtime, request, codes, namespace, inputs, name):
    """The written result's word on the value `name` holds in `namespace`
    after `codes` ran on `inputs` (the values they read, as they were
    before): judged on the notebook's data first; where that says nothing,
    the codes tried on the request's example. None when nothing can be
    said, or when a match is a value typed in (built from no data) or made
    with values typed in where the notebook holds its own, unread: no sign
    that the code computes it."""
    value = namespace[name]
    found = judged_on_data(runtime, request, value, inputs, name)
    tried = None if found is not None else _tried_on_example(runtime, request, codes, namespace, inputs, name)
    on_example = tried is not None and tried[0] == "matches"
    if found == "matches" or on_example:
        if (typed_values.typed_in(codes, name, namespace) or typed_values.typed_items(codes, value, inputs.values())
                or typed_values.typed_over_unread(codes, namespace)):
            return None
        return WrittenVerdict("matches", on_example)
    if isinstance(found, tuple):
        return WrittenVerdict("differs", written=found[1])
    if tried is not None and isinstance(tried[0], tuple):
        return WrittenVerdict("differs", on_example=True, written=tried[0][1], value=tried[1])
    return None


def _tried_on_example(runtime, request, codes, namespace, inputs, name):
    """What the result the request writes out for its example says of the
    codes run on that example in place of the inputs, with the value they
    made there: ("matches" or ("differs", piece), value), or None when
    nothing can be said."""
    # Codes that type data in over what they read (the request's example
    # copied over the notebook's data) make the same from any data: the
    # example tests nothing.
    if set(inputs) & typed_values.typed_names(codes, namespace):
        return None
    # Nor does code that picks rows by labels written into it: right on the
    # example where its result is those rows, a guess on any other data.
    if any(_picks_written_rows(code) for code in codes):
        return None
    # Nor does code that writes in the example's values where the notebook
    # holds its own in a variable the code never reads.
    if typed_values.typed_over_unread(codes, namespace):
        return None
    given = example_inputs(runtime, request, inputs)
    if given is None:
        return None
    example, pieces = given
    value = run_on(runtime, codes, namespace, example, name)
    if value is None:
        return None
    judgement = shown_result.judge(request, value, list(example.values()), name, pieces)
    return None if judgement is None else (judgement, value)


# The calls that take the rows to keep or drop as their first argument.
_ROW_CALLS = frozenset(("drop", "take", "reindex"))


def _picks_written_rows(code):
    """Whether the code picks rows by a list of labels or positions written
    into it: ``df.loc[[1, 3]]``, ``df.iloc[[0, 2], :]``, ``df.drop([2])``."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr in ("loc", "iloc"):
            rows = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
            if _written_list(rows):
                return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ROW_CALLS:
            given = [k.value for k in node.keywords if k.arg == "index"]
            if not _on_columns(node):
                given += node.args[:1] + [k.value for k in node.keywords if k.arg in ("labels", "indices")]
            if any(_written_list(argument) for argument in given):
                return True
    return False


def _on_columns(call):
    """Whether a call's labels are columns (``axis=1``, ``axis='columns'``):
    names the request gives, not rows."""
    return any(
        k.arg == "axis" and isinstance(k.value, ast.Constant) and k.value.value in (1, "columns")
        for k in call.keywords
    ) or (len(call.args) > 1 and isinstance(call.args[1], ast.Constant) and call.args[1].value in (1, "columns"))


def _written_list(node):
    """A list or tuple of constants written out."""
    return isinstance(node, (ast.List, ast.Tuple)) and bool(node.elts) and all(
        isinstance(item, ast.Constant) or (isinstance(item, ast.UnaryOp) and isinstance(item.operand, ast.Constant))
        for item in node.elts
    )


# The name an attempt's last expression is kept under.
_LAST = "_attempt_value"


def _last_expression_kept(code):
    """The code with a last bare expression (not a print) assigned to a
    name of its own, so its value is kept; None when it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr) and not (
        isinstance(last.value, ast.Call) and isinstance(last.value.func, ast.Name) and last.value.func.id == "print"
    ):
        tree.body[-1] = ast.Assign(targets=[ast.Name(_LAST, ast.Store())], value=last.value)
        ast.fix_missing_locations(tree)
        return ast.unparse(tree)
    return code


def run_on(runtime, codes, namespace, example, name):
    """The value `name` holds after `codes` run one after another on a
    scratch copy of `namespace` with `example` bound over it; None when a
    code fails there or may not be tried (then nothing is known)."""
    scratch = dict(namespace)
    scratch.update(example)
    if name not in example:
        scratch.pop(name, None)
    for code in codes:
        scratch, _why = candidates.try_candidate(runtime, code, scratch)
        if scratch is None:
            return None
    return scratch.get(name)


def names_read(codes):
    """The names the codes read, in order, once each."""
    read = []
    for code in codes:
        read.extend(shown_result.names_read(code))
    return list(dict.fromkeys(read))
