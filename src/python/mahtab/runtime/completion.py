"""Completion helpers both runtimes use: where the cursor is, the name
around it, and attributes of modules a cell imports but has not run yet.
"""

import re
import sys

_IMPORT_LINE = re.compile(r"^\s*import\s+([\w., ]+)", re.MULTILINE)
_DOTTED_BEFORE_CURSOR = re.compile(r"([A-Za-z_][\w.]*)\.(\w*)$")


def code_and_cursor(content):
    """The code of a complete or inspect request, and its cursor position
    (code points; the end of the code when none is given, clamped to it)."""
    code = content.get("code", "")
    cursor = content.get("cursor_pos")
    return code, len(code) if cursor is None else max(0, min(int(cursor), len(code)))


def imported_module_attributes(code, cursor, namespace):
    """Completes ``module.attr`` for a module the code imports but the
    namespace does not hold yet (``import os; os.pa``), from modules already
    loaded: nothing is imported or run to complete.

    Returns ``(start, matches)`` or None.
    """
    found = _DOTTED_BEFORE_CURSOR.search(code[:cursor])
    if not found:
        return None
    head, partial = found.groups()
    root = head.split(".")[0]
    if root in namespace:
        return None
    modules = {}
    for line in _IMPORT_LINE.findall(code):
        for item in line.split(","):
            words = item.split()
            if len(words) == 3 and words[1] == "as":
                modules[words[2]] = words[0]
            elif len(words) == 1:
                modules[words[0].split(".")[0]] = words[0].split(".")[0]
    if root not in modules:
        return None
    obj = sys.modules.get(modules[root])
    for part in head.split(".")[1:]:
        obj = getattr(obj, part, None)
    if obj is None:
        return None
    names = sorted(
        name
        for name in dir(obj)
        if name.startswith(partial) and (partial.startswith("_") or not name.startswith("_"))
    )
    return cursor - len(partial), names


def cursor_token(code, cursor):
    """The dotted name around ``cursor`` (e.g. ``os.path.join``)."""
    start = cursor
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] in "_."):
        start -= 1
    end = cursor
    while end < len(code) and (code[end].isalnum() or code[end] == "_"):
        end += 1
    return code[start:end].strip(".")
