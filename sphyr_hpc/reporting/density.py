"""A density as a picture (``optimize --png``)."""

from pathlib import Path

import numpy as np


def save_png(density, path, title=None):
    """The density as a grey image (black = material), row 0 at the top, square cells.

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
    width, height = nx * scale, ny * scale
    fig = plt.figure(figsize=(width / dpi, (height + title_px) / dpi), dpi=dpi)
    ax = fig.add_axes([0.0, 0.0, 1.0, height / (height + title_px)])
    ax.imshow(density, cmap="gray_r", vmin=0.0, vmax=1.0, interpolation="nearest", origin="upper", aspect="equal")
    ax.set_axis_off()
    if title:
        fig.text(0.5, 1.0 - 0.5 * title_px / (height + title_px), title, ha="center", va="center", fontsize=9)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
