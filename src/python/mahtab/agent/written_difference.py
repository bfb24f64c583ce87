"""Where a value differs from the result the request writes out, said in a
line or two, for the model the value is sent back to.

Shown two printouts and told "find what differs", a small model often
sends the same code again: it cannot see the difference any more than it
saw it the first time. Said by code, the difference is plain: the columns
one has and the other lacks, how many rows or items each holds, or the
first row or item whose numbers differ. Only what the printouts show for
certain is said; where the shapes agree and no row can be lined up with
another, nothing is.
"""

import math
import re

from mahtab.agent import printed_tokens, shown_result, written_labels

# How long a row or item may be, quoted, before it is cut.
QUOTED_CHARS = 120


def difference(written, value, name):
    """Sentences saying where `value` (named `name`) differs from the
    written result `written` (a piece of the request), most telling
    first, or "" when the printouts show nothing certain."""
    try:
        said = _transposed(written, value, name) or _shape(written, value, name) or _first_difference(
            written, value, name)
    except Exception:  # a value whose own methods fail: nothing certain
        return ""
    return " ".join(said)


def _transposed(written, value, name):
    """That the value is the written table with its rows and columns
    swapped, where its transpose prints as the written result does (a
    small model told only "not the written result" sends the same
    groupby again)."""
    if not hasattr(value, "columns") or value.shape[0] == value.shape[1] == 1:
        return []
    flipped = value.T
    found = printed_tokens.tokens(written)
    # (A table the written one shows as it is, printed without its header,
    # is no swapped one.)
    if shown_result.shows_value(written, found, value, shown_result.printouts(value)) or not shown_result.shows_value(
            written, found, flipped, shown_result.printouts(flipped)):
        return []
    return [f"`{name}` is the written result with its rows and columns swapped: end the code with "
            f"`{name} = {name}.T`."]


def _shape(written, value, name):
    """What the written table's columns and rows, or the written list's
    items, say of the value's shape, where it is another."""
    header, rows = _written_table(written)
    if len(header) >= 2:
        return _table_shape(header, rows, value, name)
    items = _written_items(written)
    length = _length(value)
    if items is not None and length is not None and len(items) != length:
        return [f"The written result holds {len(items)} items; `{name}` holds {length}."]
    grid = _written_grid(written)
    shape = getattr(value, "shape", None)
    if grid is not None and isinstance(shape, tuple) and len(shape) == 2 and grid != shape:
        return [f"The written result has {_rows(*grid)}; `{name}` has {_rows(*shape)}."]
    return []


def _rows(rows, columns):
    return f"{rows} row{'s' if rows != 1 else ''} of {columns}"


def _written_grid(written):
    """(rows, columns) of the written result's one nested list of numbers
    (``[[1, 2], [3, 4]]``, as an array literal or printout writes it, on
    one line or several), or None when it holds no such list, or more
    than one, or rows of other lengths."""
    groups = shown_result.bracketed(" ".join(written.split()))
    if len(groups) != 1:
        return None
    rows = shown_result.bracketed(groups[0][1:-1])
    if not rows or any("[" in row[1:] for row in rows):
        return None
    lengths = set()
    for row in rows:
        found = printed_tokens.tokens(row)
        if not found or not all(token[0] == "n" for token in found):
            return None
        lengths.add(len(found))
    return (len(rows), lengths.pop()) if len(lengths) == 1 else None


def _table_shape(header, rows, value, name):
    if not hasattr(value, "columns"):
        kind = type(value).__name__
        return [f"The written result is a table with the columns {_listed(header)}; `{name}` is a {kind}."]
    columns = [str(column) for column in value.columns]
    lower = {column.lower() for column in columns}
    indexed = {str(level).lower() for level in getattr(value.index, "names", ()) if level is not None}
    said = []
    missing = [word for word in header if word.lower() not in lower]
    in_index = [word for word in missing if word.lower() in indexed]
    missing = [word for word in missing if word.lower() not in indexed]
    written = {word.lower() for word in header}
    extra = [column for column in columns if column.lower() not in written]
    if missing:
        said.append(f"The written result has the column(s) {_listed(missing)}, which `{name}` lacks.")
    if in_index:
        said.append(f"The written result has {_listed(in_index)} as a column; `{name}` has it as its index.")
    if extra:
        said.append(f"`{name}` has the column(s) {_listed(extra)}, which the written result does not.")
    if rows and len(rows) != len(value):
        said.append(f"The written result has {len(rows)} rows; `{name}` has {len(value)}.")
    return said


def _first_difference(written, value, name):
    """The first row (of a table printed on lines) or item (of a list on
    one line) whose numbers differ, quoted from both, where a printout of
    the value holds as many numbers as the written result."""
    wanted = _numbers(written)
    if not wanted:
        return []
    for text in shown_result.printouts(value):
        if len(_numbers(text)) != len(wanted):
            continue
        if "\n" in written.strip() and "\n" in text.strip():
            return _first_row(written, text, name)
        return _first_item(wanted, _numbers(text), name)
    return []


def _first_row(written, text, name):
    """The first pair of lines, the written result's and the printout's,
    that hold numbers and differ in them, lined up line by line."""
    written_rows = [line for line in written.splitlines() if _numbers(line)]
    printed_rows = [line for line in text.splitlines() if _numbers(line)]
    if len(written_rows) != len(printed_rows):
        return []
    for want, got in zip(written_rows, printed_rows):
        a, b = _numbers(want), _numbers(got)
        if len(a) != len(b):
            return []
        if not all(printed_tokens.same_token(x, y) for x, y in zip(a, b)):
            return [f"The first row that differs: the written result has `{_quoted(want)}` where `{name}` has `{_quoted(got)}`."]
    return []


def _first_item(wanted, got, name):
    for number, (a, b) in enumerate(zip(wanted, got), 1):
        if not printed_tokens.same_token(a, b):
            return [f"Item {number} is the first that differs: the written result has {_shown(a)} where `{name}` has {_shown(b)}."]
    return []


def _written_table(written):
    """The written table's column names, as written, and the lines under
    them that hold a row (each as many tokens as the header or one more,
    an index, give or take one, a cell left empty); ([], []) when the
    piece prints no table with a header of names."""
    found = shown_result.table_header_at(written)
    # (A series printout's rows, ``left NaN`` over ``right -3.0``, read
    # as a header of names over a row: no table.)
    if found is None or written_labels.prints_series(written):
        return [], []
    start, lines = found
    header = lines[start].split()
    # (A "header" of numbers is a row of a table printed without one.)
    if any(_is_number(word) for word in header):
        return [], []
    rows = []
    for line in lines[start + 1:]:
        count = len(line.split())
        if not len(header) - 1 <= count <= len(header) + 2:
            break
        rows.append(line)
    # (A line of names under the header is the index's name, not a row.)
    return header, [row for row in rows if _numbers(row)]


def _written_items(written):
    """The items of the written result's one bracketed list of numbers,
    or None when it holds no such list, or more than one."""
    stripped = written.strip()
    groups = re.findall(r"\[[^\[\]]*\]", stripped)
    if len(groups) != 1 or stripped.count("[") != 1:
        return None
    found = printed_tokens.tokens(groups[0])
    return found if found and all(token[0] == "n" for token in found) else None


def _length(value):
    """How many items a list, tuple, Series or 1-D array holds; None for
    anything else."""
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        return shape[0] if len(shape) == 1 else None
    if isinstance(value, (list, tuple)):
        return len(value)
    return None


def _numbers(text):
    return [token for token in printed_tokens.tokens(text) if token[0] == "n"]


def _is_number(word):
    return re.fullmatch(r"[-+]?\d+(\.\d*)?", word) is not None


def _listed(words):
    return ", ".join(f"`{word}`" for word in words)


def _quoted(line):
    line = " ".join(line.split())
    return line if len(line) <= QUOTED_CHARS else line[:QUOTED_CHARS] + " ..."


def _shown(token):
    number = token[1]
    whole = math.isfinite(number) and number == int(number) and token[2] == 0
    return repr(int(number)) if whole else repr(number)
