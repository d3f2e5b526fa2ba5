"""The report's pictures (matplotlib, drawn to PNG bytes) and the grids a record keeps for them.

Every scored record carries ``grids``: the completion as the scorer read it,
the ground truth, the input grid and the yardstick's optimum, each as SPhyR
text rows (cells separated by spaces; optimum densities to 3 decimals).  The
report draws from them alone, so ``results.jsonl`` can be reported again
without rescoring.

Colours of a drawn grid (row 0 at the top, as printed): given cells grey from
white (void) to black (solid); masked cells (the ones the model was asked to
fill, and the yardstick re-optimised) green from white to dark green; the
ground truth's load cells red, support cells blue; a ``V`` left in place or an
unparsable cell orange.

Figures are drawn with matplotlib's object API (``Figure`` + Agg canvas, no
pyplot state), one PNG each, returned as bytes: the caller writes them
atomically and embeds the same bytes in report.html.  The best/worst mosaic is
composed as one RGB array and placed with ``figimage`` (one image instead of
a hundred axes: 0.2 s instead of seconds per model).
"""

import io

import numpy as np

from ..core import grid as grids

DPI = 100
COLOURS = {
    "void": (1.0, 1.0, 1.0),
    "solid": (0.0, 0.0, 0.0),
    "masked_solid": (0.0, 0.42, 0.17),
    "load": (0.86, 0.11, 0.11),
    "support": (0.13, 0.33, 0.85),
    "unreadable": (1.0, 0.6, 0.0),
    "line": (0.82, 0.82, 0.82),
    "empty": (0.95, 0.95, 0.95),
}
CATEGORY_COLOURS = {
    "invalid_ground_truth": "#7f7f7f", "no_grid": "#3d3d3d", "wrong_shape": "#8c564b",
    "unfilled_or_unparsable": "#ff7f0e", "severed_load_path": "#d62728", "floating_material": "#e377c2",
    "overspent_material": "#9467bd", "weaker_than_yardstick": "#f2c744", "sound": "#2ca02c",
}


def _tokens(rows):
    return [row.split() for row in rows]


# -- one grid as coloured cells ------------------------------------------------------------------
def cell_colours(rows, truth_rows=(), input_rows=()):
    """(nely, nelx, 3) RGB of a grid's text rows; None for an empty or ragged grid.

    ``truth_rows`` marks the load and support cells, ``input_rows`` the masked
    cells, where their shape is the grid's.
    """
    cells = _tokens(rows)
    try:
        shape = grids.grid_shape(cells)
    except grids.GridError:
        return None
    truth, masked = _tokens(truth_rows), _tokens(input_rows)
    markers = truth if truth and _shape_or_none(truth) == shape else None
    mask = masked if masked and _shape_or_none(masked) == shape else None
    c = COLOURS
    out = np.empty(shape + (3,))
    for r, row in enumerate(cells):
        for col, token in enumerate(row):
            marker = markers[r][col] if markers else token
            if marker == grids.LOAD:
                out[r, col] = c["load"]
            elif marker == grids.SUPPORT:
                out[r, col] = c["support"]
            else:
                value = 1.0 if token in grids.STRUCTURAL else grids.parse_density(token)
                if value is None:  # V left in place, or not a number
                    out[r, col] = c["unreadable"]
                    continue
                full = c["masked_solid"] if mask and mask[r][col] == grids.MASK else c["solid"]
                out[r, col] = (1.0 - value) * np.asarray(c["void"]) + value * np.asarray(full)
    return out


def _shape_or_none(cells):
    try:
        return grids.grid_shape(cells)
    except grids.GridError:
        return None


def _panel(colours, box):
    """A box x box RGB panel: the cells scaled by a whole number of pixels, grid lines, centred."""
    panel = np.tile(np.asarray(COLOURS["empty"]), (box, box, 1))
    if colours is None:
        return panel
    nely, nelx = colours.shape[:2]
    if max(nely, nelx) > box:
        # More cells than pixels (a large sample): every pixel shows the cell at its centre.
        scale = box / max(nely, nelx)
        rows = (np.arange(max(1, round(nely * scale))) + 0.5) / scale
        cols = (np.arange(max(1, round(nelx * scale))) + 0.5) / scale
        colours = colours[np.minimum(rows.astype(int), nely - 1)][:, np.minimum(cols.astype(int), nelx - 1)]
    px = max(1, box // max(colours.shape[:2]))
    image = np.repeat(np.repeat(colours, px, axis=0), px, axis=1)
    if px >= 4:
        image[::px, :] = COLOURS["line"]
        image[:, ::px] = COLOURS["line"]
        image[-1, :] = COLOURS["line"]
        image[:, -1] = COLOURS["line"]
    top, left = (box - image.shape[0]) // 2, (box - image.shape[1]) // 2
    panel[top:top + image.shape[0], left:left + image.shape[1]] = image
    return panel


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
    fig = _figure(2.4 + 0.62 * len(subjects), 2.2 + 0.42 * len(models))
    ax = fig.subplots()
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for i in range(len(models)):
        for j in range(len(subjects)):
            v = matrix[i, j]
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if v < 0.6 else "black")
    ax.set_xticks(range(len(subjects)), subjects, rotation=55, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), models, fontsize=8)
    ax.set_title("mean topology_score per model and subject", fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01)
    fig.tight_layout()
    return _png(fig)


def failure_bars(names, shares, categories):
    """Stacked horizontal bars of failure-category shares per model (``shares[name][category]``); PNG bytes."""
    fig = _figure(8.0, 1.9 + 0.38 * len(names))
    ax = fig.subplots()
    y = np.arange(len(names))[::-1]
    left = np.zeros(len(names))
    for category in categories:
        widths = np.array([shares[n].get(category) or 0.0 for n in names])
        ax.barh(y, widths, left=left, color=CATEGORY_COLOURS.get(category, "#bbbbbb"), label=category,
                edgecolor="white", linewidth=0.5)
        for yi, l, w in zip(y, left, widths):
            if w >= 0.06:
                ax.text(l + w / 2, yi, f"{w:.0%}", ha="center", va="center", fontsize=7,
                        color="white" if category not in ("weaker_than_yardstick", "unfilled_or_unparsable") else "black")
        left += widths
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("share of scored completions (first failed check)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28 if len(names) < 4 else -0.12), ncol=3, fontsize=7,
              frameon=False)
    fig.tight_layout()
    return _png(fig)


PANELS = ("completion", "ground_truth", "optimum")
_BOX, _GAP, _TRIPLE_GAP, _LABEL, _CAPTION, _HEAD, _FOOT = 96, 6, 28, 190, 16, 58, 34


def completions_mosaic(model, picks):
    """Best and worst completion of each subject: completion | ground truth | yardstick optimum.

    ``picks`` is ``[(subject, best_row, worst_row)]``; a row's ``grids`` are
    drawn, its caption gives index, topology_score and failure.  PNG bytes.
    """
    triple = 3 * _BOX + 2 * _GAP
    width = _LABEL + 2 * triple + _TRIPLE_GAP + 10
    row_height = _BOX + _CAPTION + 8
    height = _HEAD + len(picks) * row_height + _FOOT
    mosaic = np.ones((height, width, 3))
    fig = _figure(width / DPI, height / DPI)
    text = []
    for i, (subject, best, worst) in enumerate(picks):
        top = _HEAD + i * row_height
        text.append((8, top + _BOX / 2, subject, dict(va="center", fontsize=8, fontweight="bold")))
        for j, row in enumerate((best, worst)):
            left0 = _LABEL + j * (triple + _TRIPLE_GAP)
            g = row.get("grids") or {}
            truth, masked = g.get("ground_truth", []), g.get("input", [])
            for k, name in enumerate(PANELS):
                left = left0 + k * (_BOX + _GAP)
                mosaic[top:top + _BOX, left:left + _BOX] = _panel(cell_colours(g.get(name, []), truth, masked), _BOX)
                if not g.get(name):
                    text.append((left + _BOX / 2, top + _BOX / 2, "no grid" if name == "completion" else "-",
                                 dict(ha="center", va="center", fontsize=7, color="#555555")))
            score = row.get("topology_score") or 0.0
            caption = f"#{row.get('index')}  topo {score:.3f}  {row.get('failure', '?')}"
            text.append((left0, top + _BOX + 3, caption, dict(va="top", fontsize=7)))
    heads = ("best", "worst")
    for j, head in enumerate(heads):
        left0 = _LABEL + j * (triple + _TRIPLE_GAP)
        text.append((left0, 14, f"{head} completion (topology_score)",
                     dict(va="top", fontsize=8, fontweight="bold")))
        for k, name in enumerate(("completion", "ground truth", "yardstick optimum")):
            text.append((left0 + k * (_BOX + _GAP) + _BOX / 2, _HEAD - 6, name,
                         dict(ha="center", va="bottom", fontsize=7)))
    text.append((8, 14, model, dict(va="top", fontsize=10, fontweight="bold")))
    legend = "L load (red)   S support (blue)   masked cells green, given cells grey   V left or unparsable orange"
    text.append((8, height - 12, legend, dict(va="center", fontsize=7, color="#333333")))
    fig.figimage((mosaic * 255.0 + 0.5).astype(np.uint8), 0, 0, origin="upper")  # bytes: no float resampling
    for x, y, s, kw in text:
        fig.text(x / width, 1.0 - y / height, s, **kw)
    return _png(fig)
