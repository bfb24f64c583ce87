"""The figures agent code shows, as the model gets them: a description in
words (axes, titles, labels, what is drawn and the range of its data) for
every model, and the image itself, downscaled, for models that see images.

Figures are caught as matplotlib renders them (any backend that draws a PNG
for the notebook goes through ``FigureCanvasBase.print_figure``, wrapped once
matplotlib is imported), only while agent code runs.
"""

import base64
import io

from mahtab.runtime.import_hooks import patch_on_import

# Longest side of an image sent to a model, in pixels.
IMAGE_MAX_SIDE = 768

# Axes described per figure, and labels listed per axis.
AXES_DESCRIBED = 6
TICKS_LISTED = 8


# The figures rendered while agent code runs (a list), else None.
_watching = None


def _note_rendered(print_figure):
    """``FigureCanvasBase.print_figure`` that also notes the figure, while
    agent code runs."""

    def noting(canvas, *args, **kwargs):
        figure = getattr(canvas, "figure", None)
        if _watching is not None and figure is not None and all(figure is not f for f in _watching):
            _watching.append(figure)
        return print_figure(canvas, *args, **kwargs)

    noting.__wrapped__ = print_figure
    return noting


def _patch(backend_bases):
    canvas = backend_bases.FigureCanvasBase
    canvas.print_figure = _note_rendered(canvas.print_figure)


# When matplotlib is imported (now, or by the agent's own code later).
patch_on_import("matplotlib.backend_bases", _patch)


class FigureWatch:
    """The figures rendered while it is active (one block of agent code)."""

    def __init__(self):
        self.figures = []
        self._saved = None

    def __enter__(self):
        global _watching
        self._saved, _watching = _watching, self.figures
        return self

    def __exit__(self, *exc):
        global _watching
        _watching = self._saved
        return False

    def describe(self, index):
        """The description of the ``index``th figure rendered, or None."""
        if index >= len(self.figures):
            return None
        try:
            return describe_figure(self.figures[index])
        except Exception:  # a figure that cannot be read is still a figure
            return None


def describe_figure(figure):
    """A figure in words: each axes' title, labels, what is drawn on it and
    the range of that data."""
    axes = [ax for ax in figure.axes if ax.get_visible()]
    width, height = (int(round(v)) for v in figure.get_size_inches() * figure.dpi)
    suptitle = getattr(figure, "_suptitle", None)
    head = "figure %dx%d px, %d axes" % (width, height, len(axes))
    if suptitle is not None and suptitle.get_text():
        head += ", title %r" % suptitle.get_text()
    parts = [head]
    for number, ax in enumerate(axes[:AXES_DESCRIBED], 1):
        parts.append("axes %d: %s" % (number, _describe_axes(ax)))
    if len(axes) > AXES_DESCRIBED:
        parts.append("(and %d more axes)" % (len(axes) - AXES_DESCRIBED))
    return "; ".join(parts)


def _describe_axes(ax):
    said = []
    if ax.get_title():
        said.append("title %r" % ax.get_title())
    for name, label, ticks in (("x", ax.get_xlabel(), ax.get_xticklabels()),
                               ("y", ax.get_ylabel(), ax.get_yticklabels())):
        text = "%s %r" % (name, label) if label else "%s unlabelled" % name
        words = [t.get_text() for t in ticks if t.get_text()]
        if words and not all(_is_number(w) for w in words):
            text += " (ticks %s%s)" % (", ".join(words[:TICKS_LISTED]), ", ..." if len(words) > TICKS_LISTED else "")
        said.append(text)
    drawn = _drawn(ax)
    said.append(", ".join(drawn) if drawn else "nothing drawn")
    legend = ax.get_legend()
    if legend is not None:
        said.append("legend %s" % ", ".join(t.get_text() for t in legend.get_texts()))
    return "; ".join(said)


def _drawn(ax):
    """What is drawn on ``ax``: lines, bars, points, images, with the range
    of their values."""
    drawn = []
    lines = [line for line in ax.get_lines() if line.get_visible()]
    if lines:
        ys = [y for line in lines for y in _numbers(line.get_ydata())]
        xs = [x for line in lines for x in _numbers(line.get_xdata())]
        drawn.append("%d line%s%s%s" % (len(lines), "" if len(lines) == 1 else "s", _range(" x", xs), _range(" y", ys)))
    bars = [patch for container in getattr(ax, "containers", ()) for patch in getattr(container, "patches", ())]
    if bars:
        heights = [bar.get_height() for bar in bars]
        widths = [bar.get_width() for bar in bars]
        horizontal = all(h == heights[0] for h in heights) and len(set(widths)) > 1
        values = widths if horizontal else heights
        drawn.append("%d bars%s" % (len(bars), _range(" values", values)))
    elif ax.patches:
        drawn.append("%d patches" % len(ax.patches))
    points = 0
    offsets = []
    for collection in ax.collections:
        found = getattr(collection, "get_offsets", lambda: ())()
        points += len(found)
        offsets.extend(found)
    if points:
        drawn.append("%d points%s%s" % (points, _range(" x", [p[0] for p in offsets]), _range(" y", [p[1] for p in offsets])))
    if ax.images:
        shapes = ["%sx%s" % tuple(image.get_array().shape[:2]) for image in ax.images if image.get_array() is not None]
        drawn.append("%d image%s %s" % (len(ax.images), "" if len(ax.images) == 1 else "s", ", ".join(shapes)))
    return drawn


def _numbers(values):
    out = []
    for value in values:
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if number == number:  # NaN aside
            out.append(number)
    return out


def _range(name, values):
    values = _numbers(values)
    if not values:
        return ""
    return "%s %s..%s" % (name, _short(min(values)), _short(max(values)))


def _short(number):
    return ("%.4g" % number) if number != int(number) or abs(number) >= 1e6 else str(int(number))


def _is_number(text):
    try:
        float(text.replace("\u2212", "-"))
        return True
    except ValueError:
        return False


def downscaled_png(encoded):
    """A base64 PNG no larger than ``IMAGE_MAX_SIDE`` on its longest side
    (as it was, when it is small enough or Pillow is not there)."""
    try:
        from PIL import Image
    except ImportError:
        return encoded
    try:
        image = Image.open(io.BytesIO(base64.b64decode(encoded)))
        if max(image.size) <= IMAGE_MAX_SIDE:
            return encoded
        image.thumbnail((IMAGE_MAX_SIDE, IMAGE_MAX_SIDE))
        out = io.BytesIO()
        image.save(out, format="PNG", optimize=True)
        return base64.b64encode(out.getvalue()).decode("ascii")
    except Exception:  # not a PNG Pillow can read: sent as it is
        return encoded
