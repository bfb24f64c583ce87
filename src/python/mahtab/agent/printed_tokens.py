"""Text read as the values it holds: numbers (with the decimals they are
written to) and words, without the words a printout adds around them
(`dtype`, `array`, `Name`). A request's written result and a value's
printout are compared token by token, so that spacing, quotes and the
decimals pandas prints do not count.
"""

import math
import re

# (A minus may be typed as U+2212, as typeset text writes it. nan, inf and
# None are words: "info" is one word, not inf and "o".)
_TOKEN = re.compile(
    r"[-+\u2212]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+\u2212]?\d+)?|<NA>|[-+\u2212]inf\b|[A-Za-z_][A-Za-z0-9_]*"
    r"|'[^'\n]*'|\"[^\"\n]*\""
)
NUMBER = re.compile(r"[-+\u2212]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+\u2212]?\d+)?$")
_MISSING = frozenset(("nan", "NaN", "NaT", "None", "<NA>"))  # (<NA>: pandas's missing value of any dtype)
_INFINITE = frozenset(("inf", "+inf", "-inf"))
# Words a printout adds around the values.
_NOISE = frozenset(
    ("array", "dtype", "int64", "float64", "object", "bool", "name", "length", "int32", "float32", "dataframe",
     "series", "columns", "rows", "index", "list", "tuple", "np", "pd", "datetime64", "ns", "category",
     "categories")
)

# Words a request may write in another case than Python prints them.
_CASELESS = frozenset(("true", "false", "none"))


def tokens(text):
    """The text's values, as tokens: ("n", float, decimals) for a number and
    ("w", word) for a word or quoted string (without its quotes)."""
    found = []
    for token in _TOKEN.findall(text):
        token = token.replace("\u2212", "-")
        if NUMBER.match(token):
            decimals = len(token.split(".")[1].lower().split("e")[0]) if "." in token else 0
            if "e" in token.lower():
                decimals = 15
            found.append(("n", float(token), decimals))
        elif token in _MISSING:
            found.append(("n", math.nan, 15))
        elif token in _INFINITE:
            found.append(("n", -math.inf if token.startswith("-") else math.inf, 15))
        else:
            word = token.strip("'\"")
            # (Text keeps its case, as Python compares it: "John smith" is
            # not "John Smith"; a truth value may be written either way.)
            if word.lower() in _CASELESS:
                word = word.lower()
            if word.lower() not in _NOISE:
                found.append(("w", word))
    return found


def same_token(written, printed):
    """Whether a token the request writes is the printed one: the same
    word, or the printed number rounded to the decimals written."""
    if written[0] != printed[0]:
        return False
    if written[0] == "w":
        return written[1] == printed[1]
    a, b = written[1], printed[1]
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    # The request writes a number to some decimals: the printout's full
    # value rounds to it. A number written with none is a whole number
    # (how Python, numpy and pandas print one), not 2.33 rounded to 2: a
    # mean where the median was written.
    rounding = 0.5 * 10 ** -written[2] if written[2] else 0.0
    tolerance = rounding + 1e-9 + 1e-9 * abs(b)
    return abs(a - b) <= max(tolerance, 1e-6 * abs(b))


def contains(haystack, needle):
    """Whether `needle` occurs in `haystack`, token for token."""
    if not needle or len(needle) > len(haystack):
        return False
    for start in range(len(haystack) - len(needle) + 1):
        if all(same_token(w, p) for w, p in zip(haystack[start:start + len(needle)], needle)):
            return True
    return False


def numbers(found):
    return [token for token in found if token[0] == "n"]
