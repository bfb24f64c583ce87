"""Names close to a key that is not there, for the error line of a failed
block of agent code, as Python itself suggests a name for a NameError: a
``KeyError: 'wind_speed'`` on a table with a ``wind speed`` column reads
``KeyError: 'wind_speed'. Did you mean: 'wind speed' (a column of weather)?``,
and ``weather.wind_speed`` reads ``... has no attribute 'wind_speed'. Did
you mean the column ['wind speed']?``; a Series method reached through an
accessor (``s.str.isin``) reads ``... Did you mean the Series's own .isin,
without .str?``. A KeyError with no close key
names the columns of the tables on the failing line instead
(``KeyError: 'Count_d'. Columns of df: 'Date', 'Val'``): a small model
told only that a key is missing sends the same lookup again. pandas raises
many of its KeyErrors with the keys in a list (``dropna(subset=[...])``) or
in a message (``"['wind_speed'] not in index"``); the suggestion then says
which key it is for (``... Did you mean: 'wind speed' for 'wind_speed' (a
column of weather)?``).

The keys looked at are the columns of the tables, and the keys of the
dicts, that the failing code could see (its frames' variables, then the
namespace), so the suggestion names where the key is. The block's other
strings that spell a key of the same table otherwise follow it (``Also:
'Age' for 'age'.``), and a key that is a value of a Series on the failing
line, not a label, is said to be one. The default graph reads the
KeyError's line (``src/agent/parse/respell.rs``, and ``errors.rs`` the
words of the value line): keep its form. Loaded with the agent."""

import ast
import difflib
import re

# Keys of one container looked at (a dict of a million keys is data, not a
# place a name was mistyped).
MOST_KEYS = 2_000
# How close a key must be to be suggested (difflib's ratio).
CUTOFF = 0.75
# Tables, and columns of each, a KeyError's line lists.
LISTED_TABLES = 2
LISTED_COLUMNS = 20
# Other keys of the block a KeyError's line respells (a block that wrote one
# column in lower case most often wrote the next ones so too).
LISTED_RESPELLINGS = 5


def _folded(key):
    """A key without case, blanks or punctuation, its letters and digits:
    "Wind Speed", "wind_speed" and "wind-speed" are the same name spelled
    differently, as are "1" and "#1"."""
    return re.sub(r"[\W_]+", "", key.lower())


def _keys_of(value):
    """The string keys of a table's columns or a dict, with what they are
    ("a column", "a key"), or None for anything else."""
    if isinstance(value, dict):
        if len(value) > MOST_KEYS:
            return None
        return [k for k in value if isinstance(k, str)], "a key"
    if not type(value).__module__.startswith("pandas"):
        return None
    columns = getattr(value, "columns", None)
    if columns is None:
        return None
    try:
        if len(columns) > MOST_KEYS:
            return None
        return [c for c in columns if isinstance(c, str)], "a column"
    except Exception:  # a table-like value whose columns cannot be listed
        return None


def suggestion(missing, scopes):
    """The closest key to `missing` among the tables and dicts of `scopes`
    (mappings of names to values, innermost first): (key, "a column of
    weather"), or None."""
    found = _closest(missing, scopes)
    return None if found is None else found[:2]


def _closest(missing, scopes):
    """`suggestion`'s (key, where), with every key of the container it is
    one of. A whole number (`df[1]` for a column '#1') is close only to
    a key of its very digits."""
    numbered = isinstance(missing, int) and not isinstance(missing, bool)
    if numbered:
        missing = str(missing)
    if not isinstance(missing, str) or not missing:
        return None
    best = None
    seen = set()
    for scope in scopes:
        for name, value in list(scope.items()):
            if name.startswith("_") or id(value) in seen:
                continue
            seen.add(id(value))
            found = _keys_of(value)
            if not found:
                continue
            keys, kind = found
            if missing in keys:
                continue
            for key in keys:
                if _folded(key) == _folded(missing) != "":
                    score = 2.0
                elif numbered:
                    continue
                else:
                    score = difflib.SequenceMatcher(None, missing.lower(), key.lower()).ratio()
                if score >= CUTOFF and (best is None or score > best[0]):
                    best = (score, key, "%s of %s" % (kind, name), keys)
    return None if best is None else best[1:]


def other_respellings(code, keys, written):
    """The other quoted strings of `code` (besides `written`) that are no
    key of `keys` but spell one of them differently ("age" for "Age"): a
    list of (key, string), at most LISTED_RESPELLINGS."""
    try:
        tree = ast.parse(code or "")
    except (SyntaxError, ValueError):
        return []
    by_fold = {}
    for key in keys:
        by_fold.setdefault(_folded(key), []).append(key)
    strings = sorted(
        (node.lineno, node.col_offset, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )
    pairs = []
    for _, _, text in strings:
        if not text or text == written or text in keys or any(text == seen for _, seen in pairs):
            continue
        # A string two keys spell alike is ambiguous: left to the model.
        same = by_fold.get(_folded(text), []) if _folded(text) else []
        if len(same) == 1:
            pairs.append((same[0], text))
            if len(pairs) == LISTED_RESPELLINGS:
                break
    return pairs


# A list of quoted keys inside a pandas message: "['a', 'b'] not in index".
_QUOTED_LIST = re.compile(r"\[((?:'[^'\\]*'(?:, )?)+)\]")


def missing_keys(key):
    """The keys a KeyError raised with `key` says are missing: the key
    itself; the string keys of a list or pandas Index it was raised with;
    or those a pandas message lists ("['wind_speed'] not in index", "Label(s)
    ['x'] do not exist", "None of [Index(['x'], dtype='str')] are in the
    [columns]")."""
    if isinstance(key, str):
        listed = [k for group in _QUOTED_LIST.findall(key) for k in re.findall(r"'([^']*)'", group)]
        return listed or [key]
    if isinstance(key, list) or type(key).__name__ == "Index":
        try:
            return [k for k in list(key)[:MOST_KEYS] if isinstance(k, str)]
        except Exception:  # an index that cannot be listed
            return []
    return [key]


def _lookup(name, scopes):
    for scope in scopes:
        if name in scope:
            return scope[name]
    return None


def columns_on_line(missing, source, scopes):
    """"Columns of df: 'Date', 'Val'" for the tables `source` (the failing
    line) names that lack one of the keys `missing`, or None when it names
    none."""
    listed = []
    for name in dict.fromkeys(re.findall(r"[A-Za-z_]\w*", source or "")):
        value = _lookup(name, scopes)
        if name.startswith("_") or not type(value).__module__.startswith("pandas"):
            continue
        columns = getattr(value, "columns", None)
        try:
            if columns is None or all(key in columns for key in missing):
                continue
            shown = ", ".join(repr(c) for c in list(columns[:LISTED_COLUMNS]))
        except Exception:  # columns that cannot be compared or listed
            continue
        more = " (%d in all)" % len(columns) if len(columns) > LISTED_COLUMNS else ""
        listed.append("Columns of %s: %s%s" % (name, shown or "none", more))
        if len(listed) == LISTED_TABLES:
            break
    return "; ".join(listed) or None


def _holds_value(series, key):
    """Whether `key` is one of the values of the Series (a missing value
    for a NaN key)."""
    try:
        if isinstance(key, float) and key != key:
            return bool(series.isna().any())
        return bool((series == key).any())
    except Exception:  # values that cannot be compared with the key
        return False


def value_not_label(missing, source, scopes):
    """"nan is a value of row, not one of its labels ..." when the failing
    line `source` names a Series that holds the missing key among its
    values but not among its labels: the key most often came from
    iterating the Series (``for col in row: row[col]``), which gives its
    values."""
    for name in dict.fromkeys(re.findall(r"[A-Za-z_]\w*", source or "")):
        series = _lookup(name, scopes)
        if name.startswith("_") or type(series).__name__ != "Series" or not type(series).__module__.startswith("pandas"):
            continue
        for key in missing:
            try:
                labelled = key in series.index
            except Exception:  # a key the index cannot look up
                continue
            if not labelled and _holds_value(series, key):
                return ("%r is a value of %s, not one of its labels: `for x in %s` gives its values; "
                        "%s.index gives the labels, %s.items() both" % (key, name, name, name, name))
    return None


def error_line_with_suggestion(line, error, scopes, source=None, code=None):
    """`line` (the exception's last line) with a "Did you mean" for a
    KeyError whose key is close to one the code could see, or for an
    attribute of a table that is close to one of its columns (a column
    named with a blank is no attribute: ``weather['wind speed']``). A
    KeyError with no close key lists the columns of the tables named on
    `source`, the line that failed, or says that the key is a value of a
    Series named there, not a label. The other strings of `code` (the
    block) that spell a key of the same table otherwise follow the
    suggestion (``Also: 'Age' for 'age'.``), so that one fix mends them
    all."""
    if isinstance(error, KeyError) and len(error.args) == 1:
        missing = missing_keys(error.args[0])
        for written in missing:
            found = _closest(written, scopes)
            if found is None:
                continue
            key, where, keys = found
            if written is error.args[0]:
                told = "%s. Did you mean: %r (%s)?" % (line.rstrip("\n"), key, where)
            else:
                told = "%s. Did you mean: %r for %r (%s)?" % (line.rstrip("\n"), key, written, where)
            others = other_respellings(code, keys, written)
            if others:
                told += " Also: %s." % ", ".join("%r for %r" % pair for pair in others)
            return told + "\n"
        value = value_not_label(missing, source, scopes)
        if value is not None:
            return "%s. %s\n" % (line.rstrip("\n"), value)
        columns = columns_on_line(missing, source, scopes)
        if columns is not None:
            return "%s. %s\n" % (line.rstrip("\n"), columns)
    if isinstance(error, AttributeError) and "Did you mean" not in line:
        table = getattr(error, "obj", None)
        name = getattr(error, "name", None)
        found = suggestion(name, [{"table": table}])
        if found is not None:
            return "%s. Did you mean the column [%r]?\n" % (line.rstrip("\n"), found[0])
        owner = accessor_owner(table, name)
        if owner is not None:
            kind, accessor = owner
            return "%s. Did you mean the %s's own .%s, without .%s?\n" % (
                line.rstrip("\n"), kind, name, accessor)
    return line


# The accessors pandas puts on a Series or an Index (`.str`, `.dt`, ...).
ACCESSORS = ("str", "dt", "cat", "sparse", "list", "struct", "plot")


def accessor_owner(value, name):
    """For a pandas accessor `value` (`s.str`) without the attribute `name`
    that the Series or Index it belongs to has (`s.str.isin`, `s.dt.between`:
    a method of the Series reached through the accessor), what that is
    ("Series") and the accessor's name; else None."""
    if not isinstance(name, str) or not type(value).__module__.startswith("pandas"):
        return None
    parent = getattr(value, "_parent", None)
    if parent is None or not hasattr(parent, name):
        return None
    for accessor in ACCESSORS:
        try:
            if type(getattr(parent, accessor)) is type(value):
                return type(parent).__name__, accessor
        except Exception:  # an accessor that does not fit these values
            continue
    return None
