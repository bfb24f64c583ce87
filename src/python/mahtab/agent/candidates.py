"""Other solutions of the same request, tried on copies: the agent samples a
few more answers to the prompt its code came from, runs each here on a
scratch copy of the namespace (nothing the user sees or keeps changes), and
then asks whether they computed the same values as the code that really ran.
Agreement between independent solutions is evidence a reviewer reading the
code cannot give; disagreement means the answer is not yet known.

A candidate is not tried when it could reach past its copy: code the guard
would ask about (shell, network, installs, deleting or overwriting files),
code that writes files, code that draws at random (two right solutions
would differ), or code touching a value too large to copy.
"""

import ast
import math
import numbers
import re
import sys
import traceback

from mahtab.agent import close_names, context, guard
from mahtab.agent.execution import agent_builtins
from mahtab.agent.namespace import describe_briefly
from mahtab.runtime.reprs import clip_middle
from mahtab.agent.undo import COPIED_BUILTINS, copy_value, is_data, size_of

# The most a candidate's copies of the namespace may take together.
COPY_BUDGET_BYTES = 256 * 1024 * 1024

# Calls whose name says they write a file (pandas' and NumPy's writers,
# matplotlib's savefig, pathlib's write_*), and open()'s writing modes.
# (Deleting files is the guard's.)
_WRITER_PREFIXES = ("to_", "save", "write", "dump", "mkdir", "makedirs")
_READERS_NAMED_TO = ("to_numpy", "to_list", "to_dict", "to_frame", "to_string", "to_records", "to_period",
                     "to_timestamp", "to_datetime", "to_numeric", "to_timedelta", "to_series", "to_flat_index",
                     "to_markdown", "to_html", "to_latex", "to_json", "to_csv")
_FILE_ARGUMENT_WRITERS = ("to_markdown", "to_html", "to_latex", "to_json", "to_csv")

# How a note on a candidate that was not run begins (one that raised
# begins with the exception's name).
NOT_TRIED = "not tried: "

# How many known fixes one candidate gets (each its own: an import, then a
# column's spelling).
MOST_REPAIRS = 3

# How much of a value's repr the model is shown beside its description.
SHOWN_REPR_CHARS = 400

# How near two numbers must be to count as the same value.
RELATIVE_TOLERANCE = 1e-6


def _call_name(node):
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _writes_files(tree):
    """Whether the code would write a file, as far as its syntax says: a
    writer called by name (``df.to_csv(path)``, ``plt.savefig``,
    ``np.save``), or ``open()`` in a writing mode."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        if name == "open":
            modes = [a for a in node.args[1:2]] + [k.value for k in node.keywords if k.arg == "mode"]
            if any(not isinstance(m, ast.Constant) or any(c in str(m.value) for c in "wax+") for m in modes):
                return True
            continue
        if name in _FILE_ARGUMENT_WRITERS:
            # These return text when given no file.
            if node.args or any(k.arg in ("path_or_buf", "buf", "path") for k in node.keywords):
                return True
            continue
        if name in _READERS_NAMED_TO:
            continue
        if name.startswith(_WRITER_PREFIXES):
            return True
    return False


# Calls whose results are drawn at random: two solutions that draw differ
# however right both are (and their seeds, if any, differ too).
_RANDOM_CALLS = {"sample", "shuffle", "permutation", "choice", "choices", "randint", "rand", "randn",
                 "random", "uniform", "normal", "train_test_split", "default_rng", "integers", "randrange"}


def _draws_at_random(tree):
    return any(isinstance(node, ast.Call) and _call_name(node) in _RANDOM_CALLS for node in ast.walk(tree))


def draws_at_random(runtime, code):
    """Whether ``code`` (a whole turn's, as written) draws at random."""
    try:
        return _draws_at_random(ast.parse(runtime._as_python(code)))
    except SyntaxError:
        return False


def _loaded_names(tree):
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


class _Discard:
    """Where a candidate's prints go."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass

    def writable(self):
        return True


def _scratch(namespace, tree):
    """A copy of ``namespace`` in which every value the code names that
    could change in place is a copy of its own; None when that would take
    more than the budget."""
    scratch = dict(namespace)
    spent = 0
    for name in _loaded_names(tree):
        value = scratch.get(name)
        if value is None or not (is_data(value) or isinstance(value, COPIED_BUILTINS)):
            continue
        spent += size_of(value, COPY_BUDGET_BYTES)
        if spent > COPY_BUDGET_BYTES:
            return None
        scratch[name] = copy_value(value)
    # Its own builtins, in which input() fails: no one is asked anything.
    scratch["__builtins__"] = dict(agent_builtins(namespace), input=_no_input)
    return scratch


def _no_input(prompt=""):
    raise RuntimeError("a solution tried on a copy cannot ask for input")


def _open_figures():
    pyplot = sys.modules.get("matplotlib.pyplot")
    return set(pyplot.get_fignums()) if pyplot is not None else set()


def _close_figures_since(before):
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in set(pyplot.get_fignums()) - before:
        pyplot.close(number)


def try_candidate(runtime, code, namespace):
    """Runs ``code`` on a scratch copy of ``namespace`` with its prints,
    displays and figures thrown away: (the scratch namespace after it ran,
    None) or (None, why it was not tried (beginning with ``NOT_TRIED``) or
    what it raised)."""
    scratch, why, _code = try_candidate_fixed(runtime, code, namespace, repairs=0)
    return scratch, why


def try_candidate_fixed(runtime, code, namespace, repairs=MOST_REPAIRS):
    """Like ``try_candidate``, but code that raised in a way a known fix
    mends (the run's own code gets them too: ``context.repair``) is tried
    again so fixed, ``repairs`` times at most; the code last tried comes
    last."""
    try:
        code = runtime._as_python(code)
        tree = compile(code, "<candidate>", "exec", flags=ast.PyCF_ONLY_AST)
    except SyntaxError as error:
        return None, "%sSyntaxError: %s" % (_where(error.lineno, _line(code, error.lineno)), error.msg), code
    if guard.inspect(code):
        return None, NOT_TRIED + "it would do what the user is asked about first", code
    if _writes_files(tree):
        return None, NOT_TRIED + "it writes files", code
    if _draws_at_random(tree):
        return None, NOT_TRIED + "it draws at random", code
    scratch = _scratch(namespace, tree)
    if scratch is None:
        return None, NOT_TRIED + "the values it uses are too large to copy", code
    saved = sys.stdout, sys.stderr, runtime.__dict__.get("publish")
    figures = _open_figures()
    sys.stdout = sys.stderr = _Discard()
    runtime.publish = lambda *args, **kwargs: None
    try:
        # A stop pressed before it started stops it, as it would the turn's.
        runtime.bridge.user_code_starting()
        exec(compile(tree, "<candidate>", "exec"), scratch)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - any failure is the candidate's
        raised = _raised(error, code, scratch)
    else:
        return scratch, None, code
    finally:
        sys.stdout, sys.stderr, publish = saved
        if publish is None:
            del runtime.publish
        else:
            runtime.publish = publish
        _close_figures_since(figures)
    # The tables it made itself are where a misspelt column is looked up.
    fixed = context.repair(code, raised.splitlines()[-1], scratch) if repairs else None
    if fixed is None:
        return None, raised, code
    return try_candidate_fixed(runtime, fixed["code"], namespace, repairs - 1)


def _raised(error, code, scratch):
    """What ``code`` raised, as its writer would need it to mend the code:
    the line it came from, then the error's line as the run's own failed
    code tells it (a close key suggested, or the columns of the tables on
    that line: the usual cause is a guessed column name)."""
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if frame.filename == "<candidate>"]
    line = _line(code, lines[-1] if lines else None)
    told = traceback.format_exception_only(type(error), error)[-1]
    told = close_names.error_line_with_suggestion(told, error, [scratch], line, code)
    return _where(lines[-1] if lines else None, line) + clip_middle(told.strip(), 600)


def _line(code, lineno):
    """Line ``lineno`` (from 1) of ``code``, if it has one."""
    lines = code.splitlines()
    return lines[lineno - 1] if lineno and 0 < lineno <= len(lines) else None


def _where(lineno, line):
    """``line 2: `x = y` `` and a line break, as a note on a failure begins
    (nothing where the line is not known)."""
    if line is None:
        return ""
    return "line %d: `%s`\n" % (lineno, clip_middle(line.strip(), 120))


def _is_bool(value):
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def _number(value):
    """``value`` as a float when it is a number (a numeric string included:
    "4.61" and 4.61 are the same answer), else None."""
    if _is_bool(value):
        return None
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    scalar = isinstance(value, numbers.Real) or (type(value).__module__ == "numpy" and getattr(value, "shape", None) == ())
    if not scalar:
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def same_value(a, b, depth=0):
    """Whether two solutions computed the same value: numbers within a
    relative tolerance, tables and arrays by their contents (not their
    dtypes), containers item by item."""
    if a is b:
        return True
    if depth > 6:
        return False
    if _is_bool(a) != _is_bool(b):
        return False  # True is an answer of another kind than 1.0
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return math.isclose(x, y, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-12)
    module_a, module_b = type(a).__module__.split(".")[0], type(b).__module__.split(".")[0]
    if "pandas" in (module_a, module_b):
        return _same_pandas(a, b)
    if "numpy" in (module_a, module_b):
        return _same_array(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            a, b = _by_key_name(a), _by_key_name(b)
            if a is None or b is None or a.keys() != b.keys():
                return False
        return all(same_value(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(p, q, depth + 1) for p, q in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return repr(a) == repr(b)


# A key's decoration around its name: a leading sigil, a bracketed
# placeholder or note after it ("@mean[mean_value]", "@mean", "mean" and
# "Mean" name one answer).
_KEY_DECORATION = re.compile(r"^[\s@$#:]+|\s*\[[^\]]*\]\s*$|\s+$")


def _by_key_name(mapping):
    """``mapping`` keyed by each text key's name without its decoration,
    or None where two keys would then be one: two solutions that wrote the
    same answers under keys decorated differently agree, their values are
    still compared one by one."""
    named = {}
    for key, value in mapping.items():
        name = _KEY_DECORATION.sub("", key).lower() if isinstance(key, str) else key
        if name in named:
            return None
        named[name] = value
    return named


def _same_pandas(a, b):
    import pandas as pd

    if type(a) is not type(b):
        return False
    try:
        if isinstance(a, pd.DataFrame):
            pd.testing.assert_frame_equal(a, b, check_dtype=False, check_exact=False, rtol=RELATIVE_TOLERANCE,
                                          check_index_type=False, check_column_type=False)
        elif isinstance(a, pd.Series):
            pd.testing.assert_series_equal(a, b, check_dtype=False, check_exact=False, rtol=RELATIVE_TOLERANCE,
                                           check_index_type=False, check_names=False)
        elif isinstance(a, pd.Index):
            pd.testing.assert_index_equal(a, b, exact=False, check_exact=False, rtol=RELATIVE_TOLERANCE)
        else:
            return bool(a == b)
    except AssertionError:
        return False
    except Exception:
        return repr(a) == repr(b)
    return True


def _same_array(a, b):
    import numpy as np

    try:
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape:
            return False
        if np.issubdtype(x.dtype, np.number) and np.issubdtype(y.dtype, np.number):
            return bool(np.allclose(x, y, rtol=RELATIVE_TOLERANCE, atol=1e-12, equal_nan=True))
        return bool(np.array_equal(x, y))
    except Exception:
        return repr(a) == repr(b)


_MISSING = object()


def shared_names(solutions, names):
    """Those of ``names`` the first solution (the turn's own) and every
    other that computed any of them all computed: a solution may name its
    steps otherwise, and only what they all have is compared."""
    own, others = solutions[0], [s for s in solutions[1:] if s is not None]
    if own is None:
        return []
    have = [s for s in others if any(name in s for name in names)]
    return [name for name in names if name in own and all(name in s for s in have)]


def groups(solutions, names):
    """The solutions (each a namespace, or None for one that failed) in
    groups that computed the same value under every name, largest first;
    a solution missing a name is in none."""
    found = []
    if not names:
        return found
    for index, namespace in enumerate(solutions):
        if namespace is None or any(namespace.get(name, _MISSING) is _MISSING for name in names):
            continue
        for group in found:
            first = solutions[group[0]]
            if all(same_value(namespace[name], first[name]) for name in names):
                group.append(index)
                break
        else:
            found.append([index])
    return sorted(found, key=lambda group: (-len(group), group[0]))


def brief(value):
    """A value as the model is shown it beside another solution's: its
    description and, for data and containers, the start of its repr."""
    text = describe_briefly(value)
    if is_data(value) or isinstance(value, (dict, list, tuple, set)):
        text += "\n" + clip_middle(repr(value), SHOWN_REPR_CHARS)
    return text
