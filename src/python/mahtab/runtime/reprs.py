"""Text of values bounded in size: a repr made without building the whole
text of a big value, and long text cut in the middle. What the model, the
variable explorer and the namespace summary see of a value comes from here.
"""


def clip_middle(text, limit):
    """``text`` itself, or its head and tail with a marker, if it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return "%s\n... [%d characters cut] ...\n%s" % (text[:half], len(text) - 2 * half, text[-half:])


_CONTAINERS = {list: "[]", tuple: "()", set: "{}", frozenset: "{}", dict: "{}"}


def bounded_repr(value, limit=500, depth=3):
    """``repr(value)`` cut to ``limit`` characters, made without building the
    whole text of a big or deep built-in container or string (as debugpy's
    SafeRepr does): a ten-million-element list costs its first items, and
    nesting past ``depth`` shows as ``...``. Other objects' own ``repr`` is
    called (and cut); one that fails shows as ``<unrepresentable>``."""
    out = []
    _repr_into(value, out, [limit + 1], depth)
    text = "".join(out)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _repr_into(value, out, budget, depth):
    """Appends value's repr to ``out`` while ``budget[0]`` (characters left)
    lasts."""
    if budget[0] <= 0:
        return
    kind = type(value)
    if kind in (str, bytes, bytearray):
        piece = repr(value[: budget[0]])
    elif kind in _CONTAINERS:
        brackets = _CONTAINERS[kind]
        if depth <= 0:
            piece = brackets[0] + "..." + brackets[1]
        elif not value and kind in (set, frozenset):
            piece = kind.__name__ + "()"
        else:
            _put(out, budget, brackets[0])
            items = value.items() if kind is dict else value
            for i, item in enumerate(items):
                if budget[0] <= 0:
                    break
                if i:
                    _put(out, budget, ", ")
                if kind is dict:
                    _repr_into(item[0], out, budget, depth - 1)
                    _put(out, budget, ": ")
                    item = item[1]
                _repr_into(item, out, budget, depth - 1)
            if kind is tuple and len(value) == 1:
                _put(out, budget, ",")
            _put(out, budget, brackets[1])
            return
    else:
        try:
            piece = repr(value)
        except TimeoutError:
            raise  # the kernel's time limit, not the object's failure
        except Exception:
            piece = "<unrepresentable>"
    _put(out, budget, piece)


def _put(out, budget, text):
    out.append(text[: max(budget[0], 0)])
    budget[0] -= len(text)


def short_repr(value, limit=80):
    """A bounded repr on one line (runs of whitespace become one space)."""
    text = " ".join(bounded_repr(value, limit * 2).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
