"""What the agent is told of the user's namespace: a bounded summary of the
variables, a brief description of one, and what a block of code changed
(names it bound, rebound, changed in place or deleted).

Loaded with the agent, on its first run.
"""

import ast
import types

from mahtab.runtime.reprs import bounded_repr, clip_middle, short_repr


def _columns(frame, columns, dtypes, shown=20, samples=3):
    """A DataFrame's columns with their dtypes and first few values."""
    parts = []
    for column, dtype in list(zip(columns, dtypes))[:shown]:
        try:
            values = short_repr(frame[column].head(samples).tolist(), 60)
        except Exception:  # duplicate column names, odd frame types
            values = "?"
        parts.append("%s (%s) %s" % (column, dtype, values))
    if len(columns) > shown:
        parts.append("and %d more" % (len(columns) - shown))
    return "; ".join(parts)


# Past these sizes the summary tells the model to explore a value with the
# toolbox rather than print it.
LARGE_TEXT = 2000
LARGE_COLLECTION = 500


def namespace_summary(namespace, limit=4000):
    """One line per user variable: name, type, shape or length, a short value.

    DataFrames list their columns with dtypes and first values. Modules,
    functions, classes and private names are left out (a count says how
    many), and the whole summary is bounded.
    """
    lines, skipped = [], 0
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in ("In", "Out", "exit", "quit", "get_ipython", "display"):
            continue
        if isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType)):
            skipped += 1
            continue
        kind = type(value).__name__
        columns = getattr(value, "columns", None)
        dtypes = getattr(value, "dtypes", None)
        shape = getattr(value, "shape", None)
        if columns is not None and dtypes is not None and shape is not None:
            lines.append("%s: DataFrame %s; columns %s" % (name, tuple(shape), _columns(value, columns, dtypes)))
        elif shape is not None and not callable(shape):
            lines.append("%s: %s shape=%s dtype=%s" % (name, kind, tuple(shape), getattr(value, "dtype", "?")))
        elif isinstance(value, (list, tuple, dict, set, str, bytes)):
            large = len(value) > (LARGE_TEXT if isinstance(value, (str, bytes)) else LARGE_COLLECTION)
            hint = " (large: explore it with peek, grep, partition or rlm)" if large else ""
            lines.append("%s: %s len=%d = %s%s" % (name, kind, len(value), short_repr(value), hint))
        else:
            lines.append("%s: %s = %s" % (name, kind, short_repr(value)))
    if skipped:
        lines.append("(and %d functions, classes or modules)" % skipped)
    return clip_middle("\n".join(lines), limit)


# Said of a table, series or array whose every value is missing; the agent's
# check reads it in the changes (src/agent/graphs/check.rs).
EVERY_VALUE_MISSING = "every value missing"

# Past this many values a table is not read through for the words above.
_MISSING_SCAN_LIMIT = 100_000


def describe_briefly(value):
    """A value in a few words: its type with shape, length or columns, and a
    short value where one fits (``DataFrame 4x3, columns a, b, c``); a table
    or array whose every value is missing says so."""
    text = _describe_briefly(value)
    if _every_value_missing(value):
        text += ", " + EVERY_VALUE_MISSING
    return text


def _every_value_missing(value):
    """Whether a table, series or array holds values and none is there: each
    is None, NaN, NaT, NA, or a tuple or list of those (the placeholder a
    failing path returned)."""
    size, flat = getattr(value, "size", None), getattr(value, "ravel", None)
    if not isinstance(size, int) or not 0 < size <= _MISSING_SCAN_LIMIT:
        return False
    to_numpy = getattr(value, "to_numpy", None)
    try:
        cells = to_numpy().ravel() if callable(to_numpy) else flat() if callable(flat) else None
        return cells is not None and all(_missing(cell) for cell in cells)
    except Exception:
        return False


def _missing(cell):
    if cell is None or type(cell).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(cell, (tuple, list)):
        return len(cell) > 0 and all(_missing(part) for part in cell)
    if isinstance(cell, float) or type(cell).__module__ == "numpy":
        try:
            return bool(cell != cell)
        except Exception:
            return False
    return False


def _describe_briefly(value):
    kind = type(value).__name__
    if isinstance(value, types.ModuleType):
        return "module %s" % value.__name__
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return "function"
    if isinstance(value, type):
        return "class"
    columns, shape = getattr(value, "columns", None), getattr(value, "shape", None)
    if columns is not None and shape is not None and not callable(shape):
        names = [str(c) for c in list(columns)[:12]]
        more = ", ..." if len(columns) > 12 else ""
        return "%s %s, columns %s%s" % (kind, "x".join(str(n) for n in tuple(shape)), ", ".join(names), more)
    if shape is not None and not callable(shape):
        text = "%s shape %s dtype %s" % (kind, tuple(shape), getattr(value, "dtype", "?"))
        size = getattr(value, "size", None)
        return text + (" = " + short_repr(value, 60) if isinstance(size, int) and size <= 10 else "")
    if isinstance(value, (list, tuple, dict, set, str, bytes)):
        return "%s len %d = %s" % (kind, len(value), short_repr(value, 60))
    return "%s = %s" % (kind, short_repr(value, 60))


def is_user_variable(namespace, name):
    """Whether ``name`` is a variable of the user's worth describing (not a
    private name, module, function or class)."""
    if name.startswith("_") or name not in namespace or name in ("In", "Out", "exit", "quit", "get_ipython"):
        return False
    value = namespace[name]
    return not isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType))


def data_replaced_by_code(tree, namespace):
    """The first top-level ``def``, ``class`` or ``import`` of a block that
    would bind a name holding data (a user variable that is not callable) to
    code, as (statement, name): ``def shift(...)`` over the user's list
    ``shift`` loses the list, and what the request asked of it. None when
    there is none."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound = [("def %s(...)" % node.name, node.name)]
        elif isinstance(node, ast.ClassDef):
            bound = [("class %s" % node.name, node.name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = [(ast.unparse(node), (a.asname or a.name).split(".")[0]) for a in node.names if a.name != "*"]
        else:
            continue
        for statement, name in bound:
            if is_user_variable(namespace, name) and not callable(namespace[name]):
                return statement, name
    return None


def stored_names(tree):
    """The names a block binds, deletes or may change in place: assignment
    targets (the variable under an item or attribute assignment), augmented
    assignments, deletions, imports, definitions, loop and with targets."""
    names = set()

    def root(target):
        while isinstance(target, (ast.Attribute, ast.Subscript, ast.Starred)):
            target = target.value
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                root(element)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                root(target)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            root(node.target)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                root(target)
        elif isinstance(node, (ast.withitem,)) and node.optional_vars is not None:
            root(node.optional_vars)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            # df.drop(..., inplace=True), items.append(x): a method that may
            # change its object.
            if node.func.attr in _MUTATING_METHODS or any(k.arg == "inplace" for k in node.keywords):
                root(node.func.value)
    return names


_MUTATING_METHODS = {
    "append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse", "update", "add",
    "discard", "setdefault", "popitem", "rename_axis", "set_index", "reset_index", "fillna",
    "drop", "dropna", "rename", "replace", "sort_values", "drop_duplicates", "astype", "resize",
}

# At most this many names are reported for one block.
CHANGES_SHOWN = 20


def fingerprint(value):
    """A cheap summary of a value's contents, to tell whether code changed it
    in place: its type, shape or length, and a bounded repr (for a table, of
    its columns, missing values and first and last rows)."""
    try:
        columns, shape = getattr(value, "columns", None), getattr(value, "shape", None)
        if columns is not None and shape is not None and hasattr(value, "head"):
            sample = (value.head(20), value.tail(20))
            return (type(value), tuple(shape), tuple(columns), int(value.isna().sum().sum()),
                    bounded_repr(sample, 4000), str(getattr(value, "dtypes", "")))
        if shape is not None and not callable(shape):
            return (type(value), tuple(shape), bounded_repr(value, 4000))
        # An object's repr rarely shows its attributes; they are its contents.
        attributes = getattr(value, "__dict__", None)
        if isinstance(attributes, dict) and not isinstance(value, (types.ModuleType, type)):
            return (type(value), bounded_repr(value, 4000), bounded_repr(attributes, 4000))
        return (type(value), bounded_repr(value, 4000))
    except Exception:  # a value that cannot say: treat it as changed
        return object()


def fingerprints(tree, namespace):
    """Fingerprints of the variables a block may change in place, taken
    before it runs."""
    if tree is None:
        return {}
    return {name: fingerprint(namespace[name]) for name in stored_names(tree)
            if name in namespace and not name.startswith("_")}


def namespace_changes(before, namespace, tree, prints=None):
    """What a block did to ``namespace`` (``before`` is a copy of it from
    just before, ``prints`` the fingerprints of the names it may change in
    place): one line per name added, rebound, changed in place (a name the
    block stores into or calls a changing method on, whose contents now
    differ) or deleted. The kernel reads them back in one place
    (src/agent/parse/change_line.rs), which spells the same endings."""
    stored = stored_names(tree) if tree is not None else set()
    prints = prints or {}
    lines = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in ("In", "Out"):
            continue
        if name not in before:
            kind = "new"
        elif before[name] is not value:
            kind = "changed"
        elif (name in stored and not isinstance(value, (types.ModuleType, types.FunctionType, type))
              and (name not in prints or fingerprint(value) != prints[name])):
            kind = "changed in place"
        else:
            continue
        lines.append("%s: %s (%s)" % (name, describe_briefly(value), kind))
    lines.extend("%s (deleted)" % name for name in before if not name.startswith("_") and name not in namespace)
    if len(lines) > CHANGES_SHOWN:
        lines = lines[:CHANGES_SHOWN] + ["(and %d more)" % (len(lines) - CHANGES_SHOWN)]
    return lines
