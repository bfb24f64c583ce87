"""The labels a request's written table or series prints (a header, a
series' `Name:` line, words that label rows), held against a value's own,
and the numbers it writes against text that prints as numbers. A value's
printout without its header or index holds the written numbers when only
its labels are wrong (a column renamed, an `index` column that
`reset_index()` added, a series where a table was written), and a table
prints the text `'7'` as it prints the number 7, so a match of the numbers
stands only where the labels and the kinds agree.
"""

import re
from collections import Counter

from mahtab.agent.printed_tokens import NUMBER, tokens

# A pandas series printout's last line ("Name: v, dtype: float64").
_SERIES_FOOTER = re.compile(r"^\s*(?:Name: (.*?),\s*)?(?:Length: \d+, )?dtype: \w+", re.M)


def differ(piece, value, inputs=()):
    """Whether the labels the piece prints are not the value's, though its
    numbers may be: a table whose columns (words) the piece does not hold,
    such as an `index` column `reset_index()` added, or whose header names
    its index as a column (`inputs`: the data the value was made from); a
    table where the piece prints a series; a series under another name than the piece's
    `Name:`; a series where the piece prints a one-column table under its
    name. Printouts without a header or a name are compared for their
    numbers, and a small model often gets those right with the labels
    wrong."""
    footer = _SERIES_FOOTER.search(piece)
    if hasattr(value, "columns"):
        # (A table written without its header is compared by its rows; a
        # header line that names the value's columns and its index's name
        # is another table: pandas prints an index's name below the header,
        # and a request that writes its data's index in the header, as
        # people do by hand, keeps that index.)
        header = _column_header(piece)
        kept = {name for item in inputs for name in _index_names(item)}
        return footer is not None or bool(header) and (
            any(not _holds_word(piece, label) for label in _word_labels(value.columns))
            or any(name.lower() in header for name in _word_labels(_index_names(value)) if name not in kept)
            and any(label.lower() in header for label in _word_labels(value.columns))
        )
    if not (hasattr(value, "index") and hasattr(value, "to_frame")):
        return False
    name = value.name if isinstance(value.name, str) and value.name.strip() else None
    if footer is not None:
        written = (footer.group(1) or "").strip()
        return bool(written) and (name or "").lower() != written.lower()
    return name is not None and any(line.strip().lower() == name.lower() for line in piece.splitlines())


def prints_series(piece):
    """Whether the piece holds a pandas series printout's last line."""
    return _SERIES_FOOTER.search(piece) is not None


def _index_names(value):
    """The names of the value's index levels (none for a table without
    an index, as polars' are)."""
    return getattr(getattr(value, "index", None), "names", None) or ()


def _column_header(piece):
    """The words of the piece's first line of names over a line with a
    number, lower-cased: a table's header, of one column or more (a line
    that starts with a number is a row of a table written without one)."""
    lines = [line for line in piece.splitlines() if line.strip()]
    for line, following in zip(lines, lines[1:]):
        words = line.replace("|", " ").split()
        if (words and not NUMBER.match(words[0]) and all(re.match(r"[#\w.\-]+$", word) for word in words)
                and re.search(r"\d", following)):
            return [word.lower() for word in words]
    return []


def _word_labels(labels):
    """The labels that are words (not numbers), each level of a tuple."""
    found = []
    for label in labels:
        for part in label if isinstance(label, tuple) else (label,):
            if isinstance(part, str) and part.strip() and not NUMBER.match(part.strip()):
                found.append(part.strip())
    return found


def _holds_word(text, word):
    return re.search(r"(?<![\w#])%s(?!\w)" % re.escape(word.lower()), text.lower()) is not None


def labels_left_out(piece, value, texts):
    """Whether the piece prints a table or series whose rows are labelled
    with words (two lines or more of words, then as many numbers: ``jane 1
    1``, ``Has Family 0.5``) and the value, a pandas one, holds none of
    those labels in its printouts `texts` (not in its index, its columns
    or its cells): the same numbers under a default index, which a
    printout without its index lines up with."""
    if not hasattr(value, "index") or not hasattr(value, "to_string"):
        return False
    labelled = []
    for line in piece.splitlines():
        found = tokens(line)
        words = next((i for i, token in enumerate(found) if token[0] == "n"), len(found))
        if 0 < words < len(found) and all(token[0] == "n" for token in found[words:]):
            labelled.append((found[:words], len(found) - words))
    # Rows hold as many numbers as each other; a header of intervals
    # (``views (1, 10] (10, 25]``) holds more, and its word is no label.
    counts = Counter(numbers for _, numbers in labelled)
    labels = [label for label, numbers in labelled if counts[numbers] >= 2]
    if len(labels) < 2:
        return False
    held = {token for text in texts for token in tokens(text) if token[0] == "w"}
    return not any(all(word in held for word in label) for label in labels)


# Text a table prints as it prints a date.
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?$")


def numbers_as_text(piece, value, inputs=()):
    """Whether the value holds text that reads as a number or a date
    (`'7'`, pandas prints it as 7) where the piece writes it unquoted, and
    the data it was made from (`inputs`) held no such text: numbers taken
    out of text, or dates formatted, and never converted back, which a
    small model often leaves."""
    given = {cell for item in inputs for cell in _cells(item) if isinstance(cell, str)}
    return any(
        isinstance(cell, str) and cell not in given and (NUMBER.match(cell.strip()) or _DATE.match(cell.strip()))
        and "'%s'" % cell not in piece and '"%s"' % cell not in piece
        for cell in _cells(value)
    )


# The most cells of a value looked at for text.
MAX_CELLS = 2000


def _cells(value):
    """The value's cells, index and column labels (a table's, a series',
    an array's or a list's items; a text its own cell), the first
    `MAX_CELLS`."""
    found = []
    try:
        if hasattr(value, "columns") and hasattr(value, "to_numpy"):
            found = list(value.columns) + list(value.index) + value.to_numpy().ravel().tolist()
        elif hasattr(value, "index") and hasattr(value, "tolist"):
            found = list(value.index) + value.tolist()
        elif hasattr(value, "ravel") and hasattr(value, "tolist"):
            found = value.ravel().tolist()
        elif isinstance(value, (list, tuple)):
            found = list(value)
        elif isinstance(value, str):
            found = [value]
    except Exception:  # a value whose own methods fail
        return []
    return found[:MAX_CELLS]
