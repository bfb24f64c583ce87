"""Figures in words, with real matplotlib (Agg): what a text-only model is
told of a figure agent code shows, and the images a seeing model gets."""

import base64
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402

from mahtab.runtime.figures import IMAGE_MAX_SIDE, FigureWatch, describe_figure, downscaled_png  # noqa: E402


def render(figure):
    out = io.BytesIO()
    figure.canvas.print_figure(out, format="png")
    return base64.b64encode(out.getvalue()).decode("ascii")


def test_axes_titles_labels_artists_and_data_ranges_are_described():
    figure, (bars, lines) = plt.subplots(1, 2)
    figure.suptitle("Sales")
    bars.bar(["apple", "fig", "pear"], [1.5, 10, 2.4])
    bars.set_title("Revenue")
    bars.set_ylabel("revenue")
    lines.plot([1, 2, 3], [4, 5, 9], label="trend")
    lines.scatter([0, 1], [2, 3])
    lines.legend()
    lines.set_xlabel("t")
    assert describe_figure(figure) == (
        "figure 640x480 px, 2 axes, title 'Sales'; "
        "axes 1: title 'Revenue'; x unlabelled (ticks apple, fig, pear); y 'revenue'; 3 bars values 1.5..10; "
        "axes 2: x 't'; y unlabelled; 1 line x 1..3 y 4..9, 2 points x 0..1 y 2..3; legend trend"
    )
    plt.close(figure)


def test_only_figures_rendered_while_watching_are_noted():
    before = plt.figure()
    render(before)
    with FigureWatch() as watch:
        shown = plt.figure()
        render(shown)
        render(shown)  # rendered twice, noted once
    after = plt.figure()
    render(after)
    assert watch.figures == [shown]
    assert watch.describe(1) is None
    plt.close("all")


def test_large_images_are_downscaled_and_small_ones_kept():
    big = plt.figure(figsize=(16, 9), dpi=100)
    encoded = render(big)
    small = downscaled_png(encoded)
    assert max(Image.open(io.BytesIO(base64.b64decode(small))).size) == IMAGE_MAX_SIDE
    little = render(plt.figure(figsize=(3, 2), dpi=100))
    assert downscaled_png(little) == little
    assert downscaled_png("not a png") == "not a png"
    plt.close("all")
