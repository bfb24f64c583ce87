"""Completion, inspection, ``is_complete`` and history for the plain-Python
runtime (without IPython), by the standard library's means: rlcompleter,
inspect and pydoc, codeop. The IPython runtime has IPython's own.
"""

import codeop
import fnmatch
import inspect
import pydoc
import rlcompleter

from mahtab.runtime.completion import code_and_cursor, cursor_token, imported_module_attributes


class PlainIntrospection:
    """The plain runtime's requests about code. Needs the runtime's
    ``user_ns`` and ``history`` (``(line, input, output)`` of stored cells)."""

    def do_is_complete(self, content):
        """By IPython's rules: code that compiles is still incomplete while its
        last line is inside an indented block, until a blank line ends it."""
        code = content.get("code", "")
        try:
            compiled = codeop.compile_command(code, "<input>", "exec")
        except (SyntaxError, OverflowError, ValueError):
            return {"status": "invalid"}
        lines = code.split("\n")
        last = lines[-1] if lines[-1].strip() or len(lines) == 1 else None
        if compiled is not None and (last is None or not last[:1].isspace()):
            return {"status": "complete"}
        if last is None:
            last = next((line for line in reversed(lines) if line.strip()), "")
        indent = last[: len(last) - len(last.lstrip())]
        if last.rstrip().endswith(":"):
            indent += "    "
        return {"status": "incomplete", "indent": indent}

    def do_complete(self, content):
        code, cursor = code_and_cursor(content)
        start = cursor
        while start > 0 and (code[start - 1].isalnum() or code[start - 1] in "_."):
            start -= 1
        text = code[start:cursor]
        completer = rlcompleter.Completer(self.user_ns)
        matches, state = [], 0
        while len(matches) < 1000:
            match = completer.complete(text, state)
            if match is None:
                break
            matches.append(match.rstrip("("))
            state += 1
        if not matches:
            found = imported_module_attributes(code, cursor, self.user_ns)
            if found:
                return {"matches": found[1], "cursor_start": found[0], "cursor_end": cursor, "metadata": {}}
        return {
            "matches": list(dict.fromkeys(matches)),
            "cursor_start": start,
            "cursor_end": cursor,
            "metadata": {},
        }

    def do_inspect(self, content):
        code, cursor = code_and_cursor(content)
        name = cursor_token(code, cursor)
        try:
            obj = eval(name, self.user_ns) if name else None
        except Exception:
            obj = None
        if not name or (obj is None and name != "None"):
            return {"found": False, "data": {}, "metadata": {}}
        try:
            signature = name + str(inspect.signature(obj))
        except (TypeError, ValueError):
            signature = name
        text = signature + "\n\n" + (pydoc.getdoc(obj) or type(obj).__name__)
        return {"found": True, "data": {"text/plain": text}, "metadata": {}}

    def do_history(self, content):
        output = bool(content.get("output"))
        entries = [(0, line, (code, out) if output else code) for line, code, out in self.history]
        kind = content.get("hist_access_type")
        if kind == "tail":
            entries = entries[-int(content.get("n") or 10):]
        elif kind == "range":
            start, stop = int(content.get("start") or 0), content.get("stop")
            entries = [e for e in entries if e[1] >= start and (stop is None or e[1] < int(stop))]
        elif kind == "search":
            pattern = content.get("pattern") or "*"
            entries = [e for e in entries if fnmatch.fnmatch(_source(e), pattern)]
            if content.get("unique"):
                seen, unique = set(), []
                for entry in reversed(entries):
                    if _source(entry) not in seen:
                        seen.add(_source(entry))
                        unique.append(entry)
                entries = unique[::-1]
            if content.get("n"):
                entries = entries[-int(content["n"]):]
        else:
            entries = []
        return {"history": entries}


def _source(entry):
    """The code of a history entry (with or without its output)."""
    return entry[2][0] if isinstance(entry[2], tuple) else entry[2]
