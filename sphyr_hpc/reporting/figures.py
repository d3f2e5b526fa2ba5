"""The report's charts (matplotlib, drawn to PNG bytes): the heat map and the failure bars.

Figures are drawn with matplotlib's object API (``Figure`` + Agg canvas, no
pyplot state), one PNG each, returned as bytes: the caller writes them
atomically and embeds the same bytes in report.html.  Grids (best and worst
completions) are drawn without matplotlib, by :mod:`sphyr_hpc.reporting.grids`.
"""

import io

import numpy as np

from .leaderboard import drawable

DPI = 100
LABELLED_CELLS = 600  # a heat map with more cells than this shows colours only (the tables hold the numbers)
CATEGORY_COLOURS = {
    "unanswered": "#c7c7c7",
    "invalid_ground_truth": "#7f7f7f", "no_grid": "#3d3d3d", "wrong_shape": "#8c564b",
    "unfilled_or_unparsable": "#ff7f0e", "severed_load_path": "#d62728", "floating_material": "#e377c2",
    "overspent_material": "#9467bd", "weaker_than_yardstick": "#f2c744", "sound": "#2ca02c",
}


def _png(fig):
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _figure(width, height):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # not pyplot: no GUI machinery

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


# -- the figures ---------------------------------------------------------------------------------
def _nothing(message):
    fig = _figure(6.0, 1.0)
    fig.text(0.5, 0.5, message, ha="center", va="center", fontsize=10, color="#555555")
    return _png(fig)


def heat_map(models, subjects, values):
    """Models x subjects heat map of mean topology_score (``values[m][s]`` or None); PNG bytes."""
    if not models or not subjects:
        return _nothing("no records to map")
    matrix = np.array([[np.nan if values[m].get(s) is None else values[m][s] for s in subjects] for m in models])
    # At least 6 inches wide: with one subject the title must still fit.
    fig = _figure(max(6.0, 2.4 + 0.62 * len(subjects)), 2.2 + (0.42 if matrix.size <= LABELLED_CELLS else 0.2) * len(models))
    ax = fig.subplots()
    # pcolormesh (a quad per cell), not imshow: imshow resamples the image to the figure's pixels in
    # float arrays, ~60 MB at 60 models x 16 subjects; the quads cost ~15 MB.
    image = ax.pcolormesh(np.ma.masked_invalid(matrix), cmap="viridis", vmin=0.0, vmax=1.0)
    ax.invert_yaxis()  # the first model at the top, as in the tables
    if matrix.size <= LABELLED_CELLS:
        for i in range(len(models)):
            for j in range(len(subjects)):
                v = matrix[i, j]
                if np.isfinite(v):
                    ax.text(j + 0.5, i + 0.5, f"{v:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if v < 0.6 else "black")
    ax.set_xticks(np.arange(len(subjects)) + 0.5, subjects, rotation=55, ha="right", fontsize=8)
    ax.set_yticks(np.arange(len(models)) + 0.5, [drawable(m) for m in models], fontsize=8)
    ax.set_title("mean topology_score per model and subject", fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01)
    fig.tight_layout()
    return _png(fig)


LABELLED_BARS = 20  # more bars than this: shares in the tables only


def failure_bars(names, shares, categories):
    """Stacked horizontal bars of category shares per model (``shares[name][category]``); PNG bytes.

    One collection of rectangles per category (``PolyCollection``), not an
    artist per segment (61 names x 10 categories took seconds as bars) nor an
    image (``imshow`` resamples it to the figure's pixels in float arrays:
    ~60 MB at 61 names).
    """
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    fig = _figure(10.0, 1.2 + (0.38 if len(names) <= LABELLED_BARS else 0.16) * len(names))
    ax = fig.subplots()
    left = np.zeros(len(names))
    for category in categories:
        widths = np.array([shares[name].get(category) or 0.0 for name in names])
        colour = CATEGORY_COLOURS.get(category, "#bbbbbb")
        rows = np.flatnonzero(widths > 0.0)
        x0, x1, y = left[rows], left[rows] + widths[rows], rows.astype(float)
        corners = np.stack([np.stack([x0, y - 0.5], 1), np.stack([x1, y - 0.5], 1),
                            np.stack([x1, y + 0.5], 1), np.stack([x0, y + 0.5], 1)], 1)
        ax.add_collection(PolyCollection(corners, facecolors=colour, linewidths=0))
        if len(names) <= LABELLED_BARS:
            for i in np.flatnonzero(widths >= 0.06):
                ax.text(left[i] + widths[i] / 2, i, f"{widths[i]:.0%}", ha="center", va="center", fontsize=7,
                        color="black" if category in ("weaker_than_yardstick", "unfilled_or_unparsable",
                                                      "unanswered") else "white")
        left += widths
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_yticks(range(len(names)), [drawable(n) for n in names], fontsize=8 if len(names) <= LABELLED_BARS else 6)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("share of records (unanswered, else the first failed check)")
    handles = [Patch(color=CATEGORY_COLOURS.get(c, "#bbbbbb"), label=c) for c in categories]
    # Beside the bars, not under them: below, it met the axis label whatever the number of bars.
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), ncol=1, fontsize=7, frameon=False)
    fig.tight_layout()
    return _png(fig)
