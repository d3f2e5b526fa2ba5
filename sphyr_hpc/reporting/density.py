"""A density as a picture (``optimize --png``), with the problem's loads and supports marked."""

from pathlib import Path

import numpy as np

from .grids import COLOURS


def problem_markers(problem):
    """``(loads, supports)`` of an optimisation problem as points ``(x, y)`` of the picture, in cells
    (x the column, y the row, a cell's centre at whole numbers): its L and S cells' centres, and the
    nodes its nodal forces and fixed node rectangles act on (a node at its cells' corner)."""
    load, support = problem.markers()
    loads = [(c, r) for r, c in zip(*np.nonzero(load))]
    supports = [(c, r) for r, c in zip(*np.nonzero(support))]
    loads += [(c - 0.5, r - 0.5) for r, c, f_row, f_col in problem.nodal_forces if f_row or f_col]
    for r0, r1, c0, c1, _ in problem.fixed_nodes:
        supports += [(c - 0.5, r - 0.5) for r in range(r0, r1) for c in range(c0, c1)]
    return loads, supports


def save_png(density, path, title=None, markers=None):
    """The density as a grey image (black = material), row 0 at the top, square cells; ``markers``
    (:func:`problem_markers`): the loads drawn as red triangles, the supports as blue squares.

    Every cell is the same whole number of pixels (at least 800 pixels across
    for small grids, one pixel a cell from 800 columns on).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    density = np.asarray(density, dtype=float)
    ny, nx = density.shape
    scale = max(1, -(-800 // nx))  # pixels a cell
    dpi = 100.0
    title_px = 30 if title else 0
    pad = 8 if markers else 0  # room for the markers on the edges (the supports and loads often are)
    width, height = nx * scale, ny * scale
    fig_w, fig_h = width + 2 * pad, height + title_px + 2 * pad
    fig = plt.figure(figsize=(fig_w / dpi, fig_h / dpi), dpi=dpi)
    ax = fig.add_axes([pad / fig_w, pad / fig_h, width / fig_w, height / fig_h])
    ax.imshow(density, cmap="gray_r", vmin=0.0, vmax=1.0, interpolation="nearest", origin="upper", aspect="equal")
    ax.set_axis_off()
    for points, shape, colour, label, above in zip(markers or (), ("v", "s"), (COLOURS["load"], COLOURS["support"]),
                                                   ("load", "support"), (4, 3)):  # a load over a support
        if points:
            x, y = np.asarray(points, dtype=float).T
            ax.scatter(x, y, s=36.0, marker=shape, color=colour, label=label, edgecolors="none", clip_on=False,
                       zorder=above)
    if markers and any(markers):
        ax.legend(loc="upper right", fontsize=8, framealpha=0.8, markerscale=1.0)
    ax.set_xlim(-0.5, nx - 0.5)
    ax.set_ylim(ny - 0.5, -0.5)
    if title:
        fig.text(0.5, 1.0 - (pad + 0.5 * title_px) / fig_h, title, ha="center", va="center", fontsize=9)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
