"""Grids: the first step of the pipeline (docs/scoring.md, "Grids").

A grid is a list of rows of string cells, or text with one row per line and
cells separated by whitespace.  Tokens, whitespace stripped:

* ``L`` load cell, ``S`` support cell (structure by definition, density 1),
* ``V`` masked cell (the cells a model is asked to fill in),
* anything else is a density, parsed as a float and clipped to [0, 1].

Rows are ``nely`` (row 0 is the top of the printed grid), columns ``nelx``.
Nothing here raises on bad cells: an unparsable token is counted and read as
density 0, as the published scorer does.  Shape problems (empty, ragged) raise
:class:`GridError`, which callers turn into data.
"""

import functools
import math
import re
from itertools import chain

import numpy as np

LOAD = "L"
SUPPORT = "S"
MASK = "V"
STRUCTURAL = (LOAD, SUPPORT)
MARKERS = (LOAD, SUPPORT, MASK)

PROMPT_GRID_MARKER = "Below is the input grid with masked regions:"

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
# Tokens that are not cells but are read as a grid's cells where they stand, each an unparsable cell
# (docs/scoring.md, "Grids"): a spelling of a number that is not finite (nan, inf, infinity, any
# case, signed), and a token made only of digits, points and the letters L, S, V in either case (a
# lowercase marker, cells written without spaces).  A line of cell tokens and these is a grid row.
_CELL_LIKE = re.compile(r"^(?:[+-]?(?:nan|inf|infinity)|[0-9.LSVlsv]+)$", re.IGNORECASE)


class GridError(ValueError):
    """A grid that does not describe a rectangular array of cells."""


# A benchmark's grids hold a handful of distinct tokens ("0", "1", "L", "0.3", ...), so what a
# token is and what density it holds are looked up in a bounded table after the first time:
# reading a grid is then one dictionary lookup per cell, not one regular expression.
TOKEN_TABLE_SIZE = 4096


def is_cell_token(token):
    """True for ``L``, ``S``, ``V`` or a plain decimal number (:data:`cell_token` keeps the answers)."""
    return token in MARKERS or bool(_NUMBER.match(token))


def is_row_token(token):
    """True for a token a grid row may hold (:data:`row_token` keeps the answers): a cell token, or one
    read as an unparsable cell where it stands (``nan``, ``inf``, ``l``, ``s``, ``0101``: see ``_CELL_LIKE``)."""
    return is_cell_token(token) or bool(_CELL_LIKE.match(token))


@functools.lru_cache(maxsize=TOKEN_TABLE_SIZE)
def parse_density(token):
    """Density of a non-marker token, or None when it is not a finite number.

    ``nan``/``inf`` spellings are rejected: a cell must hold a finite amount of
    material.  Values outside [0, 1] are clipped, as docs/scoring.md, "Grids" says.
    """
    try:
        value = float(token)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value):
        return None
    return min(max(value, 0.0), 1.0)


def extract_grid_from_text(text):
    """The grid inside free text: the longest run of consecutive grid lines.

    A line is a grid line when every whitespace-separated token on it is a cell
    token or one read as an unparsable cell (:func:`is_row_token`), so that a row
    holding ``nan`` or a lowercase ``l`` keeps its place and its cells count as
    unparsable.  Ties go to the last run (a model's corrected second attempt).
    Returns a list of rows (lists of str); ``[]`` when the text holds no grid.
    One pass: each line is split once and its tokens looked up in the token table.
    """
    if text is None:
        return []
    best = []
    run = []
    for line in str(text).splitlines():
        tokens = line.split()
        if tokens and all(map(row_token.__getitem__, tokens)):
            run.append(tokens)
            continue
        if run and len(run) >= len(best):
            best = run
        run = []
    if run and len(run) >= len(best):
        best = run
    return best


# What the scorer reads, in the words of a reason (docs/scoring.md, "Grids"; the published scorer's rule).
READS = "the scorer reads rows of L, S, V or numbers separated by spaces, one row per line"


def unread_format(text):
    """Why text that holds no grid was not read, when it is a grid in a common other format; else None.

    Models often answer with JSON text of a list of rows (``[["L", "S"], ...]``)
    or with comma-separated rows (``L,S,V``).  Following the published scorer,
    neither is a grid (the completion scores as one with no grid); the reason
    says what was found and what is read, so the zero is not a mystery.
    """
    if not isinstance(text, str):
        return None
    stripped = text.strip()
    found = None
    if "[[" in stripped.replace(" ", "") and "]" in stripped:
        found = "JSON text of a list of rows ([[...], ...])"
    else:
        lines = [line for line in stripped.splitlines() if "," in line]
        cells = [cell.strip().strip("[]\"'") for line in lines for cell in line.split(",")]
        if lines and cells and sum(map(bool, cells)) and all(cell_token[c] for c in cells if c):
            found = f"{len(lines)} comma-separated row{'s' if len(lines) > 1 else ''}"
    return f"completion has no grid: found {found}; {READS}" if found else None


def prompt_input_grid(prompt):
    """The masked input grid quoted in a SPhyR prompt ([] if there is none)."""
    if not prompt or PROMPT_GRID_MARKER not in prompt:
        return []
    return extract_grid_from_text(prompt.split(PROMPT_GRID_MARKER, 1)[1])


def text_length(value):
    """Characters of a grid value as text, in one pass over it (what a length limit compares).

    Text counts its characters; a list of rows counts each row (a string, or its
    cells' ``str`` plus one separator each) plus a line break; anything else is 0
    (:func:`as_grid` refuses it).
    """
    if isinstance(value, str):
        return len(value)
    if not isinstance(value, (list, tuple)):
        return 0
    total = 0
    for row in value:
        if isinstance(row, (list, tuple)):
            total += sum(len(cell) if isinstance(cell, str) else len(str(cell)) for cell in row) + len(row)
        else:
            total += len(row) + 1 if isinstance(row, str) else len(str(row)) + 1
    return total


def as_grid(value):
    """A grid from text or from a list of rows; cells become stripped strings.

    Raises :class:`GridError` for a value that is neither.
    """
    if value is None:
        raise GridError("missing grid")
    if isinstance(value, str):
        return extract_grid_from_text(value)
    if not isinstance(value, (list, tuple)):
        raise GridError(f"grid must be text or a list of rows, not {type(value).__name__}")
    rows = []
    for row in value:
        if isinstance(row, str):
            row = row.split()
        if not isinstance(row, (list, tuple)):
            raise GridError(f"grid row must be a list of cells, not {type(row).__name__}")
        rows.append([str(cell).strip() for cell in row])
    return rows


def grid_shape(grid):
    """(nely, nelx) of a rectangular, non-empty grid; GridError otherwise."""
    if not grid or not grid[0]:
        raise GridError("empty grid")
    nelx = len(grid[0])
    for r, row in enumerate(grid):
        if len(row) != nelx:
            raise GridError(f"ragged grid: row {r} has {len(row)} cells, row 0 has {nelx}")
    return len(grid), nelx


def grid_to_text(grid):
    return "\n".join(" ".join(row) for row in grid)


def densities(grid, mask_density=0.0):
    """Density array of a rectangular grid plus its bookkeeping counts.

    ``L``/``S`` are 1; ``V`` and unparsable cells are ``mask_density`` and are
    counted as ``unfilled_cells`` and ``unparsable_cells``.
    """
    nely, nelx = grid_shape(grid)
    table = _CELL_DENSITY
    values = list(map(table.__getitem__, chain.from_iterable(grid)))  # one dictionary lookup a cell
    unfilled = unparsable = 0
    if None in values:  # V or unparsable cells: counted, and read as mask_density
        for i, value in enumerate(values):
            if value is None:
                if grid[i // nelx][i % nelx] == MASK:
                    unfilled += 1
                else:
                    unparsable += 1
                values[i] = mask_density
    rho = np.array(values, dtype=float).reshape(nely, nelx)
    return rho, {"unfilled_cells": unfilled, "unparsable_cells": unparsable}


class TokenTable(dict):
    """token -> ``decide(token)``, decided on first sight of a token and kept for up to ``size``
    tokens (the first ones seen): a grid is then read with one dictionary lookup a cell.  Any
    hashable value a run sees over and over can be a token."""

    def __init__(self, decide, size=TOKEN_TABLE_SIZE):
        super().__init__()
        self.decide = decide
        self.size = size

    def __missing__(self, token):
        value = self.decide(token)
        if len(self) < self.size:
            self[token] = value
        return value


cell_token = TokenTable(is_cell_token)  # is_cell_token as a table: a dictionary lookup a token
row_token = TokenTable(is_row_token)  # is_row_token as a table


def _cell_density(token):
    """A token's density for :func:`densities`: ``L``/``S`` 1, None for ``V`` and unparsable tokens."""
    return 1.0 if token in STRUCTURAL else None if token == MASK else parse_density(token)


_CELL_DENSITY = TokenTable(_cell_density)


def mask_of(grid, token):
    """Boolean array of the cells holding ``token``."""
    nely, nelx = grid_shape(grid)
    return np.array([[cell == token for cell in row] for row in grid], dtype=bool).reshape(nely, nelx)
