"""Whether a request writes out the result it expects, and whether the value
the run made is it.

People often show what they want for the data at hand: the table they have,
then the table they want ("desired output:", "I'd like to get"), or an array
literal after "result should be". Such a request carries its own check, one
that needs no judge's knowledge: print the value the run made the ways
Python and pandas print it, and compare the tokens (words, and numbers to
the decimals the request writes them to) with the pieces of the request.

The written result counts only when the request shows every variable the
run's code read, as it was before the run (so its example is about this
data, not another). When a piece of the request is the value's printout
(most of its numbers, no row of a table it prints left out, and the words
it labels rows with held) and its labels and kinds agree with the piece's
(`written_labels`), it is "matches"; the numbers alone, under other labels
or as text, say nothing; when exactly one piece that
shows no input is printed as the value would be (a table with most of its
columns, a bracketed list for a list or array, the value's own printout
with other numbers in it; code only where it assigns
to the value's name, or assigns a value typed in anew to a name the request
assigned before: "I have a = ..., it will return a = ...") and the value,
one that holds items (not a single number or word), matches none, it is "differs", with the piece; otherwise
nothing is said.
"""

import ast
import re
import textwrap
import warnings

from mahtab.agent import written_labels
from mahtab.agent.candidates import same_value
from mahtab.agent.printed_tokens import contains, numbers, same_token, tokens
from mahtab.agent.typed_values import loaded_names

# Pieces shorter than this many tokens say too little to compare.
MIN_TOKENS = 2
# A printout of fewer tokens than this matches only a piece that holds
# nothing else, not any piece that has its number in it.
SHORT_TOKENS = 6
# How many of a piece's numbers a printout must hold to be what it shows.
COVER = 0.75
# How long a piece of the request, and a printout, may be before it is not
# compared (a long one is not written out by hand).
MAX_CHARS = 4000

def printouts(value):
    """The ways the value is printed (repr, str, the table's or series's
    text without its index, a list of its items), each as text."""
    texts = []

    def add(make):
        try:
            # (pandas warns of repeated column names when it prints a table
            # one of these ways: a warning the user would see under the cell.)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                text = make()
        except Exception:
            return
        if isinstance(text, str) and len(text) <= MAX_CHARS and text not in texts:
            texts.append(text)

    add(lambda: repr(value))
    add(lambda: str(value))
    if _items(value) > MAX_CHARS // 2:
        # Printed whole, it would be longer than any piece compared: not
        # worth the time printing a large table takes.
        return texts
    if hasattr(value, "to_string"):
        add(lambda: value.to_string())
        add(lambda: value.to_string(index=False))
        add(lambda: value.to_string(header=False))
    if hasattr(value, "tolist"):
        add(lambda: repr(value.tolist()))
    if hasattr(value, "reset_index") and hasattr(value, "columns"):
        add(lambda: value.reset_index().to_string(index=False))
        # As code builds a table: a list for each column.
        add(lambda: repr(value.to_dict("list")))
    return texts


def _items(value):
    """How many values a table, array or list holds (0 for a scalar)."""
    size = getattr(value, "size", None)
    if isinstance(size, int):
        return size
    try:
        return len(value)
    except Exception:  # no length
        return 0


def _holds_items(value):
    """Whether the value holds several items: a table, a series, an array
    of one dimension or more, a list, a tuple, a dict or a set."""
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        return len(shape) >= 1
    return isinstance(value, (list, tuple, dict, set, frozenset))


def pieces(request):
    """The request's pieces: runs of lines between blank lines and code
    markers (``<code>``, fences), each followed by the lists a sentence of
    it writes out (``for [0, 1, 1] I want [1]``): there the data and the
    result share a piece, and the result's numbers are a few of it."""
    text = re.sub(r"</?code>|```[a-z]*", "\n\n", request)
    found = []
    for chunk in re.split(r"\n\s*\n", text):
        chunk = chunk.strip("\n")
        if not chunk.strip() or len(chunk) > MAX_CHARS:
            continue
        for part in _cut_at_reassignments(chunk):
            found.append(part)
            if not is_code(part):
                found += [group for group in _lists_in_prose(part) if group != part.strip()]
    return found


# The longest assignment (in lines) read for the names its value reads.
MAX_ASSIGNMENT_LINES = 40
_ASSIGNMENT = re.compile(r"\s*([A-Za-z_]\w*)\s*=(?!=)")


def _assignments(lines):
    """(index, name, names read) for each of the lines that begins an
    assignment to a plain name whose value parses within a few lines."""
    for index, line in enumerate(lines):
        match = _ASSIGNMENT.match(line)
        if not match:
            continue
        for end in range(index + 1, min(len(lines), index + MAX_ASSIGNMENT_LINES) + 1):
            code = textwrap.dedent("\n".join(lines[index:end]))
            try:
                ast.parse(code)
            except (SyntaxError, ValueError):
                continue
            yield index, match.group(1), set(names_read(code))
            break


def _cut_at_reassignments(chunk):
    """The chunk cut before each line that assigns anew, to a name it
    assigned before, a value typed in (one that reads none of the names
    assigned before it): "I have a = ..., it should return a = ..." holds
    the data and the result written as code, two pieces."""
    lines = chunk.splitlines()
    cuts, assigned = [0], set()
    for index, name, read in _assignments(lines):
        if name in assigned and not read & assigned and index > cuts[-1]:
            cuts.append(index)
        assigned.add(name)
    cuts.append(len(lines))
    return ["\n".join(lines[start:end]) for start, end in zip(cuts, cuts[1:])]


def _assigned_anew(pieces):
    """The indices of the pieces that assign a value typed in to a name an
    earlier piece assigned: a result written as code under the name of the
    data it is made from."""
    found, assigned = set(), set()
    for index, piece in enumerate(pieces):
        made = list(_assignments(piece.splitlines()))
        if any(name in assigned and not read & assigned for _, name, read in made):
            found.add(index)
        assigned |= {name for _, name, _ in made}
    return found


def _lists_in_prose(chunk):
    """The bracketed lists of two numbers or more in the chunk's sentences:
    lines that, outside their brackets, hold three words or more and more
    words than numbers (not a table's rows, whose cells may be lists)."""
    found = []
    for line in chunk.splitlines():
        groups = bracketed(line)
        outside = line
        for group in groups:
            outside = outside.replace(group, " ")
        outside = tokens(outside)
        words = sum(token[0] == "w" for token in outside)
        if words < 3 or words <= len(outside) - words:
            continue
        found += [group for group in groups if len(numbers(tokens(group))) >= 2]
    return found


def bracketed(line):
    """The line's outermost balanced ``[...]`` groups, in order."""
    groups, depth, start = [], 0, 0
    for index, char in enumerate(line):
        if char == "[":
            if depth == 0:
                start = index
            depth += 1
        elif char == "]" and depth:
            depth -= 1
            if depth == 0:
                groups.append(line[start:index + 1])
    return groups


def shows(piece_tokens, value_texts, cover=COVER):
    """Whether the piece shows the value: one of its printouts, token for
    token, within the piece, holding a share `cover` of the piece's numbers
    (not a few rows of a longer table; a short printout, all of them)."""
    written = len(numbers(piece_tokens))
    for text in value_texts:
        printed = tokens(text)
        if len(printed) < MIN_TOKENS and not numbers(printed):
            continue
        needed = written if len(printed) < SHORT_TOKENS else cover * written
        if len(numbers(printed)) < needed:
            continue
        if contains(piece_tokens, printed):
            return True
        # A piece with a lead-in ("result:") or words after.
        kept = [t for t in piece_tokens if t[0] == "n" or any(same_token(t, p) for p in printed)]
        if kept and len(kept) == len(printed) and all(same_token(w, p) for w, p in zip(kept, printed)):
            return True
    return False


def _beside_another_result(piece, request, inputs_shown, showing):
    """Whether the piece is a list a sentence of the request writes out
    beside another list of two numbers or more that is neither an input's
    piece nor one that shows the value."""
    if "\n" in piece.strip() or not piece.strip().startswith("["):
        return False
    for line in request.splitlines():
        groups = bracketed(line)
        if piece.strip() not in groups:
            continue
        others = [
            group for group in groups
            if group != piece.strip() and len(numbers(tokens(group))) >= 2
            and group not in inputs_shown and group not in showing
        ]
        if others:
            return True
    return False


def _assigns(piece, name):
    return bool(name) and re.search(r"^\s*%s\s*=(?!=)" % re.escape(name), piece, re.M) is not None


def is_code(piece):
    return bool(re.search(r"^\s*(import |from \w+ import|[A-Za-z_][\w.\[\]'\"]*\s*=(?!=)|print\(|def )", piece, re.M))


def table_header(piece):
    """The column names of the first printed table in the piece (a line of
    names followed by a line with a number), lower-cased, in order, or []."""
    found = table_header_at(piece)
    return [] if found is None else [word.lower() for word in found[1][found[0]].replace("|", " ").split()]


def table_header_at(piece):
    """(where, lines): the piece's non-blank lines and the index among them
    of the header line `table_header` reads, or None."""
    lines = [line for line in piece.splitlines() if line.strip()]
    for index, (line, following) in enumerate(zip(lines, lines[1:])):
        # (Columns may be set apart by bars, as in a Markdown table.)
        words = line.replace("|", " ").split()
        if len(words) >= 2 and all(re.match(r"[#\w.\-]+$", word) for word in words) and re.search(r"\d", following):
            return index, lines
    return None


def _in_piece_order(value, piece):
    """The table with its columns in the order the piece prints them, when
    the piece prints the same columns in another order; else None."""
    if not hasattr(value, "columns"):
        return None
    header = table_header(piece)
    columns = {str(column).lower(): column for column in value.columns}
    if len(header) != len(columns) or set(header) != set(columns) or header == list(columns):
        return None
    try:
        return value[[columns[word] for word in header]]
    except Exception:  # columns that cannot be selected so
        return None


def _in_own_order(value, piece):
    """Whether the piece prints the table with its columns in its order."""
    return hasattr(value, "columns") and table_header(piece) == [str(column).lower() for column in value.columns]


def _input_order_kept(value, inputs):
    """Whether the table keeps the columns it shares with each input table
    (two or more) in that input's order: the notebook's order, where the
    request prints its data in another, is the one a right table keeps."""
    if not hasattr(value, "columns"):
        return True
    columns = list(value.columns)
    for item in inputs:
        if not hasattr(item, "columns"):
            continue
        shared = [column for column in item.columns if column in columns]
        if len(shared) >= 2 and shared != [column for column in columns if column in shared]:
            return False
    return True


def shows_value(piece, found, value, texts, cover=COVER):
    """Whether the piece shows the value (`texts`: its printouts), its
    columns taken in the piece's order; with a `cover`, as all of a table
    the piece prints (no row of it left out). With none, however much else
    the piece holds."""
    reordered = _in_piece_order(value, piece)
    if reordered is not None:
        texts = printouts(reordered)
    if not cover:
        return shows(found, texts, cover)
    whole = [
        text for text in texts
        if shows(found, [text], cover) and not _row_left_out(piece, text) and not _item_left_out(piece, text)
    ]
    return bool(whole) and not written_labels.labels_left_out(piece, value, texts)


def _row_left_out(piece, text):
    """Whether the printout `text` is found in the piece with a row of the
    same table beside it that it does not hold: the line just before or
    after where it is found, that starts like the rows it holds (a number
    or a word) and has as many tokens as one of them, give or take the
    spread among them (a missing value or a list in a cell changes a row's
    count), or numbered on from them. A table that stops a row short, or
    starts a row late, covers most of the piece's numbers; the numbers a
    piece holds outside its table (the prose's "7 of 22", an ``Out[16]:``)
    are not rows of it."""
    if "\n" not in text.strip():
        return False
    printed = tokens(text)
    lines = piece.splitlines()
    flat = [(number, token) for number, line in enumerate(lines) for token in tokens(line)]
    start = next(
        (
            start for start in range(len(flat) - len(printed) + 1)
            if all(same_token(token, want) for (_, token), want in zip(flat[start:start + len(printed)], printed))
        ),
        None,
    )
    if start is None or not printed:
        return False
    first, last = flat[start][0], flat[start + len(printed) - 1][0]
    # Rows: lines wholly inside the match that hold a number.
    rows = [
        _kinds(lines[number]) for number in range(first, last + 1)
        if first < number < last or _whole(flat, start, len(printed), number)
    ]
    rows = [kinds for kinds in rows if "n" in kinds]
    if not rows:
        return False
    starts = {kinds[0] for kinds in rows}
    shortest, longest = min(map(len, rows)), max(map(len, rows))
    index = _row_numbers(lines, first, last)
    for number, step in ((_nearest(lines, first, -1), -1), (_nearest(lines, last, 1), 1)):
        if number is None:
            continue
        kinds = _kinds(lines[number])
        if "n" in kinds and kinds[0] in starts and shortest <= len(kinds) <= longest:
            return True
        # A row whose own words make it longer or shorter, numbered on
        # from the rows found (``0 Hu Tao ...`` before ``1 Zhongli ...``).
        if index and _leading_integer(lines[number]) == (index[0] - 1 if step < 0 else index[-1] + 1):
            return True
    return False


def _leading_integer(line):
    found = re.match(r"\s*(\d+)\s", line)
    return int(found.group(1)) if found else None


def _row_numbers(lines, first, last):
    """The integers the lines `first` to `last` start with, when the lines
    that hold a number all start with one and they count up by one (a
    default index); else []."""
    numbered = [_leading_integer(line) for line in lines[first:last + 1] if re.search(r"\d", line)]
    rows = [number for number in numbered if number is not None]
    # (The first line may be the header, which starts with no integer.)
    if len(rows) < 2 or len(rows) < len(numbered) - 1 or None in numbered[1:]:
        return []
    return rows if all(b == a + 1 for a, b in zip(rows, rows[1:])) else []


def _item_left_out(piece, text):
    """Whether the printout `text` is found inside a bracketed list of the
    piece that holds more items than it (``[1.15]`` in ``[1.15, "and"]``;
    ``array([3, 4, 5])`` in ``[2, 3, 4, 5]``): a list an item short, which
    a printout of most of the list's numbers would otherwise match."""
    printed = tokens(text)
    # (The innermost lists, a row of a table written as lists, and the
    # outermost, which may run over several lines.)
    groups = set(re.findall(r"\[[^\[\]]*\]", piece)) | set(bracketed(piece))
    for group in groups:
        found = tokens(group)
        if len(found) > len(printed) and contains(found, printed):
            return True
    return False


def _kinds(line):
    return tuple(token[0] for token in tokens(line))


def _whole(flat, start, length, number):
    """Whether every token of line `number` lies in the match."""
    inside = [start <= index < start + length for index, (line, _) in enumerate(flat) if line == number]
    return bool(inside) and all(inside)


def _nearest(lines, number, step):
    """The nearest line from `number` in direction `step` that holds a
    token, or None."""
    number += step
    while 0 <= number < len(lines):
        if tokens(lines[number]):
            return number
        number += step
    return None


def _like_value(piece, found, value):
    """Whether the piece is printed as the value would be: a table with
    most of the value's columns, or a bracketed list or array of numbers for
    a list or array."""
    if hasattr(value, "columns"):
        columns = {str(column).lower() for column in value.columns}
        header = set(table_header(piece))
        return len(header) >= 2 and len(header & columns) * 2 >= max(len(header), len(columns))
    if isinstance(value, (list, tuple)) or (hasattr(value, "shape") and hasattr(value, "dtype") and not hasattr(value, "index")):
        return "[" in piece and len(numbers(found)) >= 2
    return False


# The fewest labels and numbers a printout's form must hold to be told
# from any other printout of as many numbers.
FORM_WORDS = 2
FORM_NUMBERS = 2


def _in_value_form(found, texts):
    """Whether the piece (its tokens `found`) holds one of the value's
    printouts `texts` with other numbers: the same labels (index labels, a
    header, a series' name) in the same places, the numbers between them
    as many, and no other number in the piece. A series written out for
    this data with its row labels and name, but another sum in one row, is
    the value's form; a few numbers alone say nothing of the form, nor a
    header over more columns than the value has (the numbers of a table
    line up with any run of as many)."""
    written = len(numbers(found))
    for text in texts:
        printed = tokens(text)
        words = sum(token[0] == "w" for token in printed)
        if words < FORM_WORDS or len(printed) - words < FORM_NUMBERS or len(printed) - words != written:
            continue
        for start in range(len(found) - len(printed) + 1):
            window = found[start:start + len(printed)]
            if all(w[0] == p[0] and (w[0] == "n" or w == p) for w, p in zip(window, printed)):
                return True
    return False


def _told_apart(value, found, texts):
    """The printouts of the value that can show the piece (its tokens
    `found`): for a series, array or list, not one number printed bare
    unless the piece holds that number alone. A sentence's own number
    ("bin every 3 rows") is no written series of one item."""
    if not _holds_items(value) or len(found) <= 1:
        return texts
    return [text for text in texts if len(tokens(text)) > 1]


def judge(request, value, inputs, name=None, given_in=()):
    """"matches", ("differs", piece) or None for the value made under the
    request (named `name` there), where `inputs` are the values the run's
    code read, as they were before the run: only when the request shows
    every one of them is its written result about this data. `given_in`:
    the pieces the inputs were built from, when they are the request's
    example (then they need not be shown as they are). Code in the request
    is a written result only where it assigns to `name`, or assigns a value
    typed in to a name an earlier piece assigned ("It will return a =
    ...")."""
    if not inputs:
        return None
    parts = [(piece, tokens(piece)) for piece in pieces(request)]
    shown = {index for index, (piece, _) in enumerate(parts) if piece in given_in}
    as_inputs, inputs_reordered = [], False
    for item in inputs:
        texts = printouts(item)
        as_inputs += [tokens(text) for text in texts]
        # (However much else the piece holds: code that makes the data, or
        # a result that begins with it.)
        where = {index for index, (piece, found) in enumerate(parts) if shows_value(piece, found, item, texts, cover=0)}
        if not where and not given_in:
            return None
        shown |= where
        # (Printed in its own order anywhere, the input is not reordered by
        # the request: a later piece in another order is what the user got.)
        inputs_reordered |= any(_in_piece_order(item, parts[index][0]) is not None for index in where) and not any(
            _in_own_order(item, parts[index][0]) for index in where)
    value_texts = printouts(value)
    # (A value that is an input as it was is not confirmed by the request
    # printing that input; in a piece that prints an input, the value must
    # be all of it, not the first rows of the input, nor the input's own
    # printout: the data reshaped so that it prints as it did.)
    unlike_inputs = shown and [
        text for text in value_texts if not any(contains(found, tokens(text)) for found in as_inputs)
    ]
    showing = [] if any(same_value(value, item) for item in inputs) else [
        piece for index, (piece, found) in enumerate(parts)
        if shows_value(piece, found, value, _told_apart(value, found, unlike_inputs if index in shown else value_texts),
                       cover=1.0 if index in shown else COVER)
    ]
    matching = [
        piece for piece in showing
        if not written_labels.differ(piece, value, inputs) and not written_labels.numbers_as_text(piece, value, inputs)
    ]
    # (A list a sentence writes out beside another that is no input and
    # not the value, "I get [3, 4, 6] but want [0, 3, 4]", may be what the
    # user got: it confirms nothing then.)
    # And a table that is the written one only with its columns put in
    # the written order is another table (often the one the request asks
    # for, but where it asks for an order, not: the review weighs it),
    # unless the request prints its data in another order than the
    # notebook holds it too.
    inputs_shown = [piece for index, (piece, _) in enumerate(parts) if index in shown]
    if any(
        not _beside_another_result(piece, request, inputs_shown, showing)
        and (inputs_reordered and _input_order_kept(value, inputs) or _in_piece_order(value, piece) is None)
        for piece in matching
    ):
        return "matches"
    if matching:
        return None
    # The numbers written out under other labels, or as text: not
    # confirmed, and not sent back either (a label read wrong from a
    # printout would send a right value back); the review weighs it.
    if showing:
        return None
    # A single value (a count, a name) is not sent back for a table or a
    # list the request writes out: that is most often the data in a state
    # the request passes through ("shuffle the rows ... then count"), and
    # whether the request wants one value or many is the form check's call.
    if not _holds_items(value):
        return None
    # The pieces printed as the value, or as a table the code read, would
    # be: with one, it is the result the request expects; with more, some
    # are other examples or outputs of what the user tried.
    # (A piece found inside another, a list a sentence writes out, may be
    # what the user got rather than what they want: it confirms, but sends
    # nothing back.)
    anew = _assigned_anew([piece for piece, _ in parts])
    written = [
        piece for index, (piece, found) in enumerate(parts)
        if index not in shown and (not is_code(piece) or _assigns(piece, name) or index in anew)
        and (any(_like_value(piece, found, item) for item in [value, *inputs])
             or _in_value_form(found, value_texts))
        and not any(piece != other and piece in other for other, _ in parts)
    ]
    if len(written) == 1:
        return ("differs", written[0])
    return None


def names_read(code):
    """The names the code reads (none when it does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    return loaded_names(tree)


# How much of a written result, and of the value beside it, the model is shown.
SHOWN_CHARS = 1500


def printed(value):
    """The value as the model is shown it beside the written result."""
    try:
        text = value.to_string() if hasattr(value, "to_string") else repr(value)
    except Exception as error:  # a value whose own methods fail
        text = "<%s: cannot be printed: %s>" % (type(value).__name__, type(error).__name__)
    return cut(text)


def cut(text):
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "\n..."
