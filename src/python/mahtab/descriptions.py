"""describe(): what a value is, in a few lines the model can read: its type,
size, a table's columns with their dtypes and missing values, first rows.
A toolbox function (``mahtab.tools.describe``), kept here beside its helpers.
"""

# How much of a value describe() shows: columns listed, rows, characters.
DESCRIBE_COLUMNS = 30
DESCRIBE_ROWS = 5
DESCRIBE_CHARS = 3000


def describe(value, name=None):
    """What ``value`` is, in detail: its type and size; for a table its
    columns with dtypes and missing values and its first rows; for an array
    its dtype, missing values and range; for a collection its first items.
    Duck-typed, so pandas and numpy need not be imported."""
    label = "%s: " % name if name else ""
    kind = type(value).__name__
    try:
        if _is_table(value):
            text = _describe_table(value, kind)
        elif hasattr(value, "shape") and hasattr(value, "dtype") and tuple(value.shape) != ():
            text = _describe_array(value, kind)
        elif isinstance(value, (str, bytes)):
            lines = value.count("\n" if isinstance(value, str) else b"\n") + 1
            shown = value if isinstance(value, str) else value.decode("utf-8", "replace")
            text = "%s, %d characters, %d lines; it begins:\n%s" % (kind, len(value), lines, first_characters(shown, 500))
        elif isinstance(value, dict):
            keys = ", ".join(_brief(key, 40) for key in list(value)[:10])
            more = " ..." if len(value) > 10 else ""
            text = "dict, %d keys: %s%s\n%s" % (len(value), keys, more, _brief(value, 500))
        elif isinstance(value, (list, tuple, set, frozenset)):
            types = sorted({type(item).__name__ for item in list(value)[:1000]})
            text = "%s, %d items of %s\n%s" % (kind, len(value), ", ".join(types) or "nothing", _brief(value, 500))
        else:
            text = "%s: %s" % (kind, _brief(value, 500))
    except Exception as error:  # a value whose own methods fail
        text = "%s (could not be described: %s: %s)" % (kind, type(error).__name__, error)
    text = label + text
    if len(text) > DESCRIBE_CHARS:
        text = text[:DESCRIBE_CHARS] + "\n... [cut]"
    return text


def _brief(value, limit):
    try:
        text = repr(value)
    except Exception:
        text = "<unrepresentable>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_table(value):
    return all(hasattr(value, attribute) for attribute in ("columns", "dtypes", "shape", "isna", "head"))


def _describe_table(frame, kind):
    rows, columns = frame.shape
    missing = frame.isna().sum()
    lines = ["%s, %d rows x %d columns" % (kind, rows, columns)]
    try:
        lines[0] += ", %s in memory" % size_text(int(frame.memory_usage(deep=True).sum()))
    except Exception:
        pass
    width = max((len(str(column)) for column in list(frame.columns)[:DESCRIBE_COLUMNS]), default=0)
    for column, dtype in list(zip(frame.columns, frame.dtypes))[:DESCRIBE_COLUMNS]:
        count = int(missing[column]) if column in missing.index else 0
        note = "  %d missing" % count if count else ""
        lines.append("  %s  %s%s" % (str(column).ljust(width), dtype, note))
    if columns > DESCRIBE_COLUMNS:
        lines.append("  ... and %d more columns" % (columns - DESCRIBE_COLUMNS))
    lines.append("first rows:")
    lines.append(frame.head(DESCRIBE_ROWS).to_string(max_cols=12, max_colwidth=30))
    return "\n".join(lines)


def _describe_array(array, kind):
    shape = tuple(array.shape)
    text = "%s, shape %s, dtype %s" % (kind, shape, array.dtype)
    if hasattr(array, "isna"):  # a pandas Series
        missing = int(array.isna().sum())
    elif getattr(array.dtype, "kind", "") in "fc":
        import numpy

        missing = int(numpy.isnan(numpy.asarray(array)).sum())
    else:
        missing = 0
    if missing:
        text += ", %d missing" % missing
    if getattr(array.dtype, "kind", "") in "iufb" and array.size > missing:
        try:
            if missing and not hasattr(array, "isna"):  # numpy's min is NaN then
                import numpy

                low, high = numpy.nanmin(array), numpy.nanmax(array)
            else:
                low, high = array.min(), array.max()
            text += ", min %s, max %s" % (low, high)
        except Exception:
            pass
    head = array.head(DESCRIBE_ROWS) if hasattr(array, "head") else array[:DESCRIBE_ROWS]
    return "%s\nfirst items:\n%s" % (text, _brief(head, 800) if not hasattr(head, "to_string") else head.to_string())


def first_characters(text, n):
    """The first ``n`` characters of ``text``, and how much more there is."""
    if len(text) <= n:
        return text
    return "%s\n... [%d more characters of %d]" % (text[:n], len(text) - n, len(text))


def size_text(count):
    """A byte count in the unit that reads best (``"1.5 KB"``)."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return "%d %s" % (count, unit) if unit == "bytes" else "%.1f %s" % (count, unit)
        count /= 1024
