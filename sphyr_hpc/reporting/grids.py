"""Drawn grids: a record's ``grids`` as RGB panels and small PNGs, with numpy alone.

Every scored record carries ``grids``: the completion as the scorer read it,
the ground truth, the input grid and the yardstick's optimum, each as SPhyR
text rows (cells separated by spaces; optimum densities to 3 decimals).  The
report draws from them alone, so ``results.jsonl`` can be reported again
without rescoring.

Colours (row 0 at the top, as printed):

* one scale for every density, given or masked: white (0, void) to black
  (1, solid); a grey is an intermediate density and nothing else;
* the mask, in every panel: the cells the model was asked to fill (``V`` in
  the input) are outlined in teal (tinted teal where a cell is smaller than 4
  pixels); a given cell has no outline, only the thin grey grid line;
* the ground truth's load cells red, support cells blue; a ``V`` left in
  place or an unparsable cell orange.

A panel is a ``box x box`` RGB array (cells scaled by a whole number of
pixels, centred); :func:`png` encodes an RGB array as PNG bytes (zlib, no
matplotlib: 3,600 best/worst triples of a 60-model run are drawn in about a
second).  The colouring of a grid is cached by its text: a sample's ground
truth and optimum are drawn once for every model that answered it.
"""

import struct
import zlib
from functools import lru_cache

import numpy as np

from ..core import grid as grids

COLOURS = {
    "void": (1.0, 1.0, 1.0),
    "solid": (0.0, 0.0, 0.0),
    "load": (0.86, 0.11, 0.11),
    "support": (0.13, 0.33, 0.85),
    "unreadable": (1.0, 0.6, 0.0),
    "mask": (0.0, 0.65, 0.65),
    "line": (0.82, 0.82, 0.82),
    "empty": (0.95, 0.95, 0.95),
}
LEGEND = ("density: white 0 (void) to black 1 (solid), one scale for every cell; masked cells (the ones the "
          "model filled) outlined teal, given cells not; L load red, S support blue; "
          "a V left in place or an unparsable cell orange")
BOX, GAP = 96, 6
_LOAD, _SUPPORT, _BAD = -1.0, -2.0, -3.0  # codes of a cell that is not a density


def _density(token):
    if token in grids.STRUCTURAL:
        return 1.0
    value = grids.parse_density(token)
    return _BAD if value is None else value


# Cache sizes: a panel is 27.6 kB (96 x 96 x 3 bytes); 512 of them (14 MB) hold a subject's ground
# truths and optima while the models' pages are drawn one after the other (4096 took 113 MB).
@lru_cache(maxsize=1024)
def _cells(rows):
    """The grid of text ``rows`` as an array of densities and codes, or None (empty or ragged)."""
    tokens = [row.split() for row in rows]
    if not tokens or not tokens[0] or any(len(t) != len(tokens[0]) for t in tokens):
        return None
    cells = np.array(tokens)
    unique, inverse = np.unique(cells, return_inverse=True)  # a handful of distinct tokens per grid
    values = np.array([_density(t) for t in unique])[inverse].reshape(cells.shape)
    markers = np.zeros(cells.shape)
    markers[cells == grids.LOAD] = _LOAD
    markers[cells == grids.SUPPORT] = _SUPPORT
    masked = cells == grids.MASK
    for array in (values, markers, masked):
        array.setflags(write=False)
    return values, markers, masked


@lru_cache(maxsize=1024)
def cell_colours(rows, truth_rows=(), input_rows=()):
    """((nely, nelx, 3) RGB, (nely, nelx) mask) of a grid's text rows; None for an empty or ragged grid.

    ``truth_rows`` marks the load and support cells, ``input_rows`` the masked
    cells, where their shape is the grid's.  Arguments are tuples (cached).
    """
    grid = _cells(tuple(rows))
    if grid is None:
        return None
    values, markers, _ = grid
    truth = _cells(tuple(truth_rows)) if truth_rows else None
    if truth is not None and truth[0].shape == values.shape:
        markers = truth[1]
    given = _cells(tuple(input_rows)) if input_rows else None
    mask = given[2] if given is not None and given[0].shape == values.shape else np.zeros(values.shape, bool)
    c = {k: np.asarray(v) for k, v in COLOURS.items()}
    density = np.clip(values, 0.0, 1.0)[..., None]
    out = (1.0 - density) * c["void"] + density * c["solid"]
    out[values == _BAD] = c["unreadable"]
    out[markers == _LOAD] = c["load"]
    out[markers == _SUPPORT] = c["support"]
    out = _bytes(out)
    out.setflags(write=False)
    return out, mask


def _bytes(rgb):
    return (np.clip(rgb, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


_RGB = {name: _bytes(np.asarray(value)) for name, value in COLOURS.items()}


@lru_cache(maxsize=512)
def grid_panel(rows, truth_rows=(), input_rows=(), box=BOX):
    """:func:`panel` of :func:`cell_colours` (tuples; cached: a sample's ground truth and optimum panels
    are the same for every model)."""
    result = panel(cell_colours(rows, truth_rows, input_rows) if rows else None, box)
    result.setflags(write=False)
    return result


@lru_cache(maxsize=64)
def _pixels(nely, nelx, px):
    """A grid's pixels, flat (row by row): the cell of each, whether it is a grid line, whether it is
    in a cell's outline (``width`` pixels inside its border); the same for every grid of that shape."""
    ys, xs = np.arange(nely * px) // px, np.arange(nelx * px) // px
    y, x = np.arange(nely * px) % px, np.arange(nelx * px) % px
    lines = (y == 0)[:, None] | (x == 0)[None, :]
    lines[-1, :] = lines[:, -1] = True
    width = 1 if px < 10 else 2
    edge = ((y < width) | (y >= px - width))[:, None] | ((x < width) | (x >= px - width))[None, :]
    cell = (ys[:, None] * nelx + xs[None, :]).ravel()
    flat = (cell, lines.ravel(), edge.ravel())
    for array in flat:
        array.setflags(write=False)
    return flat


def panel(drawn, box=BOX):
    """A box x box RGB panel (uint8) of ``cell_colours``' result: cells scaled, grid lines, the mask outlined.

    Every pixel is an index into a palette (the cells' colours, then the line and mask colours) and
    the panel one ``take``: a tenth of a millisecond for a 10x10 grid, where a gather by row and
    column index arrays and boolean-mask stores took half a millisecond.
    """
    out = np.empty((box, box, 3), np.uint8)
    out[...] = _RGB["empty"]
    if drawn is None:
        return out
    colours, mask = drawn
    nely, nelx = colours.shape[:2]
    if max(nely, nelx) > box:
        # More cells than pixels (a large sample): every pixel shows the cell at its centre.
        scale = box / max(nely, nelx)
        rows = np.minimum(((np.arange(max(1, round(nely * scale))) + 0.5) / scale).astype(int), nely - 1)
        cols = np.minimum(((np.arange(max(1, round(nelx * scale))) + 0.5) / scale).astype(int), nelx - 1)
        colours, mask = colours[rows][:, cols], mask[rows][:, cols]
    height, width = colours.shape[:2]
    px = max(1, box // max(height, width))
    cell, lines, edge = _pixels(height, width, px)
    n = height * width
    flat = colours.reshape(n, 3)
    if px >= 4:
        palette = np.concatenate([flat, _RGB["line"][None], _RGB["mask"][None]])
        index = np.where(lines, n, cell)
        index[edge & mask.ravel()[cell]] = n + 1
    else:  # too small to outline: masked cells tinted
        tinted = (0.6 * flat + 0.4 * _RGB["mask"] + 0.5).astype(np.uint8)
        palette, index = np.where(mask.reshape(n, 1), tinted, flat), cell
    image = palette.take(index, axis=0).reshape(height * px, width * px, 3)
    top, left = (box - image.shape[0]) // 2, (box - image.shape[1]) // 2
    out[top:top + image.shape[0], left:left + image.shape[1]] = image
    return out


PANELS = ("completion", "ground_truth", "optimum")


def drawable(rows):
    """True when text ``rows`` make a picture (a non-empty rectangular grid); else its panel is blank."""
    return bool(rows) and _cells(tuple(rows)) is not None


def triple(row, box=BOX, gap=GAP):
    """completion | ground truth | yardstick optimum of one record, side by side: an RGB array."""
    g = row.get("grids") or {}
    truth, masked = tuple(g.get("ground_truth", ())), tuple(g.get("input", ()))
    out = np.full((box, 3 * box + 2 * gap, 3), 255, np.uint8)
    for k, name in enumerate(PANELS):
        out[:, k * (box + gap):k * (box + gap) + box] = grid_panel(tuple(g.get(name, ())), truth, masked, box)
    return out


def png(rgb, level=6):
    """PNG bytes of an RGB array (floats in [0, 1] or uint8)."""
    if rgb.dtype != np.uint8:
        rgb = _bytes(rgb)
    height, width = rgb.shape[:2]
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rgb.reshape(height, 3 * width)], axis=1)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), level)) + chunk(b"IEND", b""))
