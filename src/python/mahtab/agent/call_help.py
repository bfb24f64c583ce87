"""What a library function expects, for the model's copy of a failed
block's error: when the failing line of agent code called a public
function of an installed package (``pd.pivot_table``, a DataFrame's
``groupby().agg``) and the error came from that call, the model reads the
function's signature and the documentation of the arguments the call gave
it (the one the error names first), as a person would open its help:

    pivot_table(data, values=None, index=None, columns=None, aggfunc='mean', ...)
      aggfunc: function, list of functions, dict, default "mean". If a dict is
      passed, the key is column to aggregate and the value is function ...

A keyword the function does not have, taken by its ``**kwargs`` and
passed on to fail elsewhere (``rows=`` for ``index=``), is named as such.
A small model told only ``custom_agg() missing 1 required positional
argument`` writes the same call again; the parameter's own words say what
it takes. Only for a TypeError or a ValueError (a wrong kind of argument):
a key or a file that is not there is the data's doing, not the call's
(``close_names`` names the keys there are). Only the model reads it (the user's panel shows the error as
Python printed it), and it comes before the traceback, so the error stays
the last line (``src/agent/parse/errors.rs`` reads it there).
Loaded with the agent."""

import ast
import inspect
import re

# Documented arguments shown, and the length of each one's note.
NOTED_ARGUMENTS = 2
NOTE_CHARACTERS = 400
# A signature longer than this is cut (a function of forty options).
SIGNATURE_CHARACTERS = 300
# Wrappers (a decorator's inner function) stepped through to the function.
WRAPPER_DEPTH = 4


def help_for_failure(tb, filename, scopes, code, error):
    """The help text for a failed block (its traceback `tb`, the agent
    code's `filename` and `code`, the variables it could see), or None
    when the error did not come from a library function the line called."""
    # A wrong kind of argument, not a key or a file that is not there
    # (``close_names`` helps with those: the data is the cause, not the call).
    if not isinstance(error, (TypeError, ValueError)):
        return None
    try:
        found = _called_function(tb, filename, scopes, code, error)
        if found is None:
            return None
        function, statement = found
        return _help_text(function, statement, error)
    except Exception:  # help that cannot be made says nothing of the error
        return None


def _called_function(tb, filename, scopes, code, error):
    """(function, the agent's statement that called it) for the call the
    error came from."""
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    agent = [i for i, t in enumerate(frames) if t.tb_frame.f_code.co_filename == filename]
    if not agent:
        return None
    last = agent[-1]
    statement = _statement_at(code, frames[last].tb_lineno)
    if statement is None:
        return None
    entered = frames[last + 1:]
    if entered:
        # The first frames past the agent's line are the function it called
        # (or a decorator's wrapper around it).
        for t in entered[:WRAPPER_DEPTH]:
            function = _function_of(t.tb_frame)
            if function is not None:
                return (function, statement) if _is_public_library(function) else None
        return None
    # Nothing entered: the call itself was refused (an unknown keyword, an
    # argument missing) or a compiled function raised; the line says which.
    # Python's own refusals name the function ("concat() takes 1 positional
    # argument"); an error the line's operators raised names none.
    called = [f for f in _callees(statement, scopes) if _is_public_library(f)]
    named = [f for f in called if re.search(r"\b%s\(\)" % re.escape(f.__name__), str(error))]
    return (named[0], statement) if len(named) == 1 else None


def _function_of(frame):
    """The function whose code `frame` runs, found by its qualified name
    in its module (None for a nested function such as a wrapper)."""
    code = frame.f_code
    qualname = getattr(code, "co_qualname", code.co_name)
    if "<" in qualname:
        return None
    value = frame.f_globals
    for part in qualname.split("."):
        value = value.get(part) if isinstance(value, dict) else inspect.getattr_static(value, part, None)
        if value is None:
            return None
    value = getattr(value, "__func__", value)
    return value if getattr(inspect.unwrap(value), "__code__", None) is code else None


def _is_public_library(function):
    """Whether `function` is a documented public function of a package: not
    the agent's or the user's own, not a dunder or private helper."""
    module = getattr(function, "__module__", None) or ""
    name = getattr(function, "__name__", "") or ""
    return bool(module) and module not in ("__main__", "builtins") and not name.startswith("_") \
        and bool(getattr(function, "__doc__", None)) and callable(function)


def _statement_at(code, line):
    """The innermost simple statement of `code` that spans `line`."""
    compound = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While,
                ast.If, ast.With, ast.AsyncWith, ast.Try)
    statements = [
        node for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.stmt) and not isinstance(node, compound)
        and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    return statements[-1] if statements else None


def _callees(statement, scopes):
    """The functions `statement` calls whose callee is a plain name or a
    chain of attributes of one (``pd.melt``, ``np.linalg.solve``),
    resolved in `scopes` without running anything."""
    found = []
    for node in ast.walk(statement):
        if isinstance(node, ast.Call):
            function = _resolved(node.func, scopes)
            if function is not None and function not in found:
                found.append(function)
    return found


def _keywords(statement, called=None):
    """The keyword arguments the calls of `statement` give (only those
    that call a function named `called`, if given): (name, the name of the
    variable passed, if one is)."""
    def callee_name(call):
        return getattr(call.func, "attr", None) or getattr(call.func, "id", None)

    return [
        (keyword.arg, keyword.value.id if isinstance(keyword.value, ast.Name) else None)
        for node in ast.walk(statement) if isinstance(node, ast.Call)
        if called is None or callee_name(node) == called
        for keyword in node.keywords if keyword.arg
    ]


def _resolved(expression, scopes):
    parts = []
    while isinstance(expression, ast.Attribute):
        parts.insert(0, expression.attr)
        expression = expression.value
    if not isinstance(expression, ast.Name):
        return None
    value = next((scope[expression.id] for scope in scopes if expression.id in scope), None)
    for part in parts:
        if value is None:
            return None
        # Static lookups: a property is not run to find a function.
        value = inspect.getattr_static(value, part, None)
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
    return value if callable(value) else None


def _help_text(function, statement, error):
    signature = _signature(function)
    if signature is None:
        return None
    lines = ["%s%s" % (function.__name__, signature)]
    keywords = _keywords(statement)
    # A keyword a function with **kwargs does not know raises nothing
    # itself: it is passed on, and fails far from where it was written.
    for name in _unknown_keywords(function, _keywords(statement, function.__name__)):
        lines.append("  %s: not a parameter of %s (taken by **kwargs and passed on)" % (name, function.__name__))
    for name in _arguments_to_note(function, keywords, error)[:NOTED_ARGUMENTS]:
        note = parameter_note(function.__doc__, name)
        if note:
            lines.append("  %s: %s" % (name, note))
    return "What %s takes (from its documentation):\n%s\n" % (function.__name__, "\n".join(lines))


def _unknown_keywords(function, keywords):
    """The keywords of `keywords` that `function` has no parameter of, when
    it takes any (``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    if not any(p.kind is p.VAR_KEYWORD for p in parameters):
        return []
    named = {p.name for p in parameters}
    return list(dict.fromkeys(name for name, _ in keywords if name not in named))


def _signature(function):
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    # Annotations are left out: they are long, and a default says enough.
    plain = signature.replace(
        parameters=[p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()],
        return_annotation=inspect.Signature.empty,
    )
    text = str(plain)
    return text if len(text) <= SIGNATURE_CHARACTERS else text[:SIGNATURE_CHARACTERS - 5] + ", ...)"


def _arguments_to_note(function, keywords, error):
    """The parameters the call named (`keywords`), the ones the error
    names first: by name (``'ascending'``) or by the name of the variable
    passed (``custom_agg()`` for ``aggfunc=custom_agg``); then any other
    parameter the error quotes."""
    message = str(error)
    try:
        parameters = set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []

    def said(word):
        return word is not None and re.search(r"\b%s\b" % re.escape(word), message) is not None

    given = list(dict.fromkeys(name for name, _ in keywords if name in parameters))
    named = [name for name, variable in keywords if name in parameters and (said(name) or said(variable))]
    quoted = sorted(p for p in parameters if re.search(r"[\'\"]%s[\'\"]" % re.escape(p), message))
    return list(dict.fromkeys(named + quoted + given))


def parameter_note(doc, name):
    """The documentation of parameter `name` in a numpydoc or Google-style
    docstring, on one line and cut to ``NOTE_CHARACTERS``, or None."""
    if not doc:
        return None
    lines = inspect.cleandoc(doc).splitlines()
    # numpydoc: "aggfunc : function, list ..." then indented lines;
    # Google: "    aggfunc (str): ..." then more indented lines.
    heading = re.compile(r"^(\s*)(?:\*{0,2})%s(?:\s*:|\s*\(|\s*,\s*\w+\s*:|\s*$)" % re.escape(name))
    for i, line in enumerate(lines):
        match = heading.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        first = line.strip()[len(name):]
        kind = first.lstrip(" *:").strip()
        # numpydoc's type line ends a sentence of its own: "dict, default None. If ..."
        typed = first.lstrip().startswith(":") and kind and kind[-1] not in ".:,"
        words = [kind + "." if typed else kind]
        for following in lines[i + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            words.append(following.strip())
        note = re.sub(r"\s+", " ", " ".join(w for w in words if w)).strip()
        if not note:
            continue
        return note if len(note) <= NOTE_CHARACTERS else note[:NOTE_CHARACTERS - 3].rstrip() + "..."
    return None
