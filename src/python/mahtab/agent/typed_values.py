"""What code typed in rather than computed: names bound to values built
from no data (`pd.DataFrame({...})` copied from a request), and lists of
constants that hold a result's items (`df.assign(top=[3, 5, 3])`). A value
so made equals the result a request writes out without being a sign that
the code computes it, so it is never confirmed by that result.
"""

import ast
import numbers

from mahtab.agent.candidates import same_value
from mahtab.agent.namespace import is_user_variable


def loaded_names(tree):
    """The names an AST node reads, in order."""
    return [node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)]


def typed_in(codes, name, namespace):
    """Whether the codes bind `name` to a value typed in, built from no
    variable that holds data (`pd.DataFrame({...})`): not computed."""
    return name in typed_names(codes, namespace)


def typed_names(codes, namespace):
    """The names the codes leave bound to values typed in: each assignment,
    in order, whose value reads only modules, functions and names the codes
    typed in before (`data = {...}` then `df = pd.DataFrame(data)`).
    `namespace` is where the codes ran, for what the names they read hold."""
    typed = set()
    for code in codes:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        for node in _module_assignments(tree):
            read = loaded_names(node.value)
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                read.append(node.target.id)  # `total += x` reads `total` too
            anew = all(other in typed or not (other in namespace and _holds_data(namespace[other])) for other in read)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    (typed.add if anew else typed.discard)(target.id)
    return typed


def typed_items(codes, value, inputs):
    """Whether the codes write out, as a list of constants, all the items
    of the value or of one of its columns that no input holds: a result
    copied from the request into code that reads the data only for the
    rest (``out = df.assign(top=[3, 5, 3])``), not computed."""
    written = [literal for code in codes for literal in _constant_lists(code)]
    if not written:
        return False
    held = [items for item in inputs for items in _item_lists(item)]
    return any(
        same_value(literal, items) and not any(same_value(items, other) for other in held)
        for items in _item_lists(value) for literal in written if len(literal) == len(items)
    )


def typed_over_unread(codes, namespace):
    """Whether the codes write out a list of constants of the kind a list,
    array or series of the notebook holds that they never name: the
    request's example values typed in where the notebook's own input was
    meant (``df['product'].isin([1069104, 1069105])`` beside an unread
    ``products``). Right on the example the values come from, a guess on
    the notebook's data."""
    kinds = {_kind(literal) for code in codes for literal in _constant_lists(code)} - {None}
    if not kinds:
        return False
    named = set()
    for code in codes:
        try:
            named.update(node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name))
        except (SyntaxError, ValueError):
            continue
    return any(
        _kind(items) in kinds
        for name, value in list(namespace.items())
        if name not in named and is_user_variable(namespace, name) and not hasattr(value, "columns")
        for items in _item_lists(value)
    )


def _kind(items):
    """"number" or "text" when every item of a flat list is one (and there
    is one), else None."""
    if not items or any(isinstance(item, (list, tuple, bool)) for item in items):
        return None
    if all(isinstance(item, str) for item in items):
        return "text"
    if all(isinstance(item, numbers.Real) for item in items):
        return "number"
    return None


# The fewest items a list written into code must hold to be a result typed in.
TYPED_ITEMS = 2


def _constant_lists(code):
    """The lists and tuples of constants written in the code (nested ones
    as lists of lists), each as a list, with at least `TYPED_ITEMS` items."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) >= TYPED_ITEMS:
            try:
                items = ast.literal_eval(node)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if all(isinstance(item, (int, float, str, list, tuple)) and not isinstance(item, bool) for item in items):
                found.append(list(items) if not any(isinstance(item, (list, tuple)) for item in items)
                             else [list(item) if isinstance(item, (list, tuple)) else item for item in items])
    return found


def _item_lists(value):
    """The value's items as lists: each column of a table, a series's
    values, an array's (nested for more dimensions), a list's."""
    try:
        if hasattr(value, "columns") and hasattr(value, "items"):
            return [column.tolist() for _, column in value.items()]
        if hasattr(value, "tolist") and getattr(value, "ndim", 0) >= 1:
            return [value.tolist()]
        if isinstance(value, (list, tuple)):
            return [list(value)]
    except Exception:  # a value whose own methods fail
        return []
    return []


def _module_assignments(tree):
    """The assignments with a value (`=`, `+=`) at the module's level (in
    its loops and branches, not in a function's own scope), in the order
    written."""
    found = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and child.value is not None:
                found.append(child)
            visit(child)

    visit(tree)
    return found


def _holds_data(value):
    return not (callable(value) or type(value).__name__ == "module")
