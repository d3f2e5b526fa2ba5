"""Problems at any size: SPhyR samples upscaled by an integer factor, and classic presets.

A :class:`Problem` is everything an optimisation needs besides solver
settings: the grid size, the load case (:class:`~sphyr_hpc.core.loadcase.LoadCase`),
the design space (free cells, pinned densities) and the volume fraction.  It
comes in two kinds, which are also the two kinds of *grid file*:

``"grid"``: a SPhyR grid (ground truth, or an input grid with ``V`` cells)
    upscaled by an integer factor ``k``: every cell becomes k x k elements
    carrying its token, so ``L`` and ``S`` blocks become k x k blocks (the unit
    load is spread over all upscaled ``L`` cells, docs/scoring.md, "Load case", and every
    node of an upscaled ``S`` block is clamped), densities are carried over and
    ``V`` cells stay free.  Design space: the ``V`` cells of ``input_grid``
    when there is one, else every non-``L``/``S`` cell; the pinned densities
    are the grid's; the volume fraction defaults to the grid's mean density
    (the ground truth's, docs/scoring.md, "Yardstick").  The grid's own densities are the
    ground truth a result can be scored against (``ground_truth()``).

``"preset"``: rectangles of load and support cells, single fixed DOFs
    (rollers) on node rectangles and point forces on nodes, at any nelx x
    nely; every non-L/S cell is free and starts empty (pinned 0).  Presets
    (gravity down, unit-square cells; node (r, c) is row r from the top,
    column c):

    * ``cantilever``: every node of the left edge clamped; load on the middle
      of the right edge (the 1 or 2 right-edge cells at mid-height).
    * ``mbb``: the classic half MBB beam (the 88-line code's example):
      symmetry rollers on the left edge (x fixed), a roller at the bottom-right
      node (y fixed), the load on the top-left cell.
    * ``mbb88``: the 88-line code's half MBB beam exactly as published: the
      same rollers, a unit point force down on the top-left node and no load
      or support cell (every cell is designed).
    * ``bridge``: pins (both DOFs) at the two bottom corners, a uniform load on
      the whole top row (the deck).

Grid file formats (read by :func:`read_problem`, written by
:func:`write_problem`; ``python -m sphyr_hpc.generate`` writes them):

* JSON (``*.json``), compact at any size::

    {"format": "sphyr_hpc.problem", "version": 1, "kind": "preset",
     "name": "mbb", "nelx": 300, "nely": 100, "volume_fraction": 0.5,
     "gravity": [1.0, 0.0],
     "load_cells": [[r0, r1, c0, c1], ...],       # half-open cell rectangles
     "support_cells": [[r0, r1, c0, c1], ...],
     "fixed_nodes": [[r0, r1, c0, c1, "x"], ...],  # node rectangles; "x", "y" or "xy"
     "nodal_forces": [[r, c, f_row, f_col], ...]}  # optional: a force on node (r, c)

  A nodal force's components are along increasing rows (down the grid) and
  columns (to the right), the order of ``gravity``'s (dr, dc).  A preset
  problem needs a load cell or a non-zero nodal force, and a support cell or
  a fixed node.

    {"format": "sphyr_hpc.problem", "version": 1, "kind": "grid",
     "name": "...", "grid": ["L 1 0 ...", ...], "input_grid": null | [...],
     "upscale": 16, "gravity": [1.0, 0.0], "volume_fraction": null | 0.42}

  ``nelx``/``nely`` of a grid problem are derived (grid size times upscale).
* SPhyR text grid (any other file): one row per line, tokens separated by
  whitespace, read as a ``"grid"`` problem (upscale and gravity from the
  caller).  Written only for grid problems and up to
  :data:`TEXT_MAX_CELLS` cells (the text of an upscaled grid grows as k^2).

Errors (bad sizes, unknown presets, unreadable files, grids without ``L`` or
``S``) raise :class:`ProblemError` with a message meant for the command line.
"""

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..core import grid as grids
from ..io.atomic import write_text_atomic
from ..io.jsonl import read_jsonl
from ..core.loadcase import DOWN, LoadCase
from ..core.loadcase import parse_gravity as loadcase_parse_gravity
from ..runtime.messages import no_such

FORMAT = "sphyr_hpc.problem"
VERSION = 1
PRESETS = ("cantilever", "mbb", "bridge", "mbb88")
DEFAULT_VOLUME_FRACTION = {"cantilever": 0.4, "mbb": 0.5, "bridge": 0.3, "mbb88": 0.5}
TEXT_MAX_CELLS = 4_000_000
_SIZE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")
_DOFS = {"x": (0,), "y": (1,), "xy": (0, 1)}


class ProblemError(ValueError):
    """A problem description that cannot be used (message for the command line)."""


def parse_size(text):
    """'300x100' -> (nelx, nely) = (300, 100); both must be >= 1."""
    match = _SIZE.match(str(text))
    if not match:
        raise ProblemError(f"size {text!r} is not NELXxNELY (e.g. 300x100)")
    nelx, nely = int(match.group(1)), int(match.group(2))
    if nelx < 1 or nely < 1:
        raise ProblemError(f"size {text!r}: both element counts must be at least 1")
    return nelx, nely


def _check_volume_fraction(value):
    if value is None:
        return None
    value = float(value)
    if not 0.0 < value <= 1.0:
        raise ProblemError(f"volume fraction {value} is not in (0, 1]")
    return value


def _check_gravity(gravity):
    g = tuple(float(v) for v in gravity)
    if len(g) != 2 or not all(np.isfinite(g)) or g == (0.0, 0.0):
        raise ProblemError(f"gravity {gravity!r} must be a non-zero (dr, dc) pair")
    return g


@dataclass(frozen=True)
class Problem:
    """A load case, its design space and volume fraction; see the module docstring."""

    kind: str                      # "preset" or "grid"
    name: str
    nelx: int
    nely: int
    volume_fraction: float = None  # None: the grid's mean density (grid problems only)
    gravity: tuple = DOWN
    load_cells: tuple = ()         # preset: (r0, r1, c0, c1) cell rectangles
    support_cells: tuple = ()
    fixed_nodes: tuple = ()        # preset: (r0, r1, c0, c1, "x" | "y" | "xy") node rectangles
    grid: tuple = None             # grid: rows of tokens before upscaling
    input_grid: tuple = None
    upscale: int = 1
    nodal_forces: tuple = ()       # preset: (r, c, f_row, f_col) forces on nodes

    @property
    def shape(self):
        return (self.nely, self.nelx)

    @property
    def n_dofs(self):
        return 2 * (self.nelx + 1) * (self.nely + 1)

    # -- cells --------------------------------------------------------------------------------
    def _up(self, small):
        k = self.upscale
        return np.repeat(np.repeat(np.asarray(small), k, axis=0), k, axis=1)

    def _rect_mask(self, rects):
        mask = np.zeros(self.shape, dtype=bool)
        for r0, r1, c0, c1 in rects:
            mask[r0:r1, c0:c1] = True
        return mask

    def markers(self):
        """(load mask, support mask) of the elements."""
        if self.kind == "preset":
            return self._rect_mask(self.load_cells), self._rect_mask(self.support_cells)
        return self._up(grids.mask_of(self.grid, grids.LOAD)), self._up(grids.mask_of(self.grid, grids.SUPPORT))

    def loadcase(self):
        """The :class:`LoadCase` (L/S cells in row-major order, as ``loadcase.from_grid`` lists them)."""
        load, support = self.markers()
        forces = []
        for r, c, f_row, f_col in self.nodal_forces:
            node = r * (self.nelx + 1) + c
            forces += [(2 * node, float(f_col)), (2 * node + 1, float(f_row))]
        forces = tuple((dof, value) for dof, value in forces if value != 0.0)
        if not load.any() and not forces:
            raise ProblemError(f"problem {self.name!r} has no load (no load cell, no non-zero nodal force)")
        extra = []
        for r0, r1, c0, c1, dofs in self.fixed_nodes:
            rows, cols = np.meshgrid(np.arange(r0, r1), np.arange(c0, c1), indexing="ij")
            nodes = (rows * (self.nelx + 1) + cols).ravel()
            extra += [2 * nodes + d for d in _DOFS[dofs]]
        extra = np.unique(np.concatenate(extra)) if extra else np.zeros(0, dtype=np.int64)
        if not support.any() and extra.size == 0:
            raise ProblemError(f"problem {self.name!r} has no support")
        return LoadCase(
            self.nely, self.nelx,
            tuple(map(tuple, np.argwhere(load).tolist())),
            tuple(map(tuple, np.argwhere(support).tolist())),
            _check_gravity(self.gravity), 1.0, tuple(int(d) for d in extra), forces,
        )

    def grid_densities(self):
        """Upscaled densities of the grid (L/S 1, V and unparsable 0) and whether it had V cells."""
        rho, counts = grids.densities(self.grid)
        return self._up(rho), counts["unfilled_cells"] > 0

    def design(self):
        """(free, pinned) natural arrays: the design variables and every other cell's density."""
        load, support = self.markers()
        structural = load | support
        if self.kind == "preset":
            return ~structural, np.where(structural, 1.0, 0.0)
        pinned, _ = self.grid_densities()
        if self.input_grid is not None:
            free = self._up(grids.mask_of(self.input_grid, grids.MASK))
        else:
            free = self._up(grids.mask_of(self.grid, grids.MASK)) if self._has_masks() else np.ones(self.shape, bool)
        return free & ~structural, np.where(structural, 1.0, pinned)

    def _has_masks(self):
        return any(cell == grids.MASK for row in self.grid for cell in row)

    def ground_truth(self):
        """Natural ground-truth densities (a grid without V cells), else None."""
        if self.kind != "grid":
            return None
        rho, masked = self.grid_densities()
        return None if masked else rho

    def target_volume_fraction(self):
        """The volume fraction to optimise for."""
        if self.volume_fraction is not None:
            return float(self.volume_fraction)
        truth = self.ground_truth()
        if truth is None:
            raise ProblemError(f"problem {self.name!r}: give a volume fraction (its grid has V cells)")
        return float(truth.mean())

    # -- transformations ----------------------------------------------------------------------
    def upscaled(self, k):
        """The same problem with every cell split into k x k elements."""
        k = int(k)
        if k < 1:
            raise ProblemError(f"upscale factor {k} must be a positive integer")
        if k == 1:
            return self
        if self.kind == "grid":
            return replace(self, nelx=self.nelx * k, nely=self.nely * k, upscale=self.upscale * k)

        def cells(rects):
            return tuple((r0 * k, r1 * k, c0 * k, c1 * k) for r0, r1, c0, c1 in rects)

        # A node line at index r is the line r * k; a half-open node range [r0, r1) keeps its
        # first and last line: [r0 * k, (r1 - 1) * k + 1).
        nodes = tuple((r0 * k, (r1 - 1) * k + 1, c0 * k, (c1 - 1) * k + 1, d) for r0, r1, c0, c1, d in self.fixed_nodes)
        forces = tuple((r * k, c * k, f_row, f_col) for r, c, f_row, f_col in self.nodal_forces)
        return replace(self, nelx=self.nelx * k, nely=self.nely * k, load_cells=cells(self.load_cells),
                        support_cells=cells(self.support_cells), fixed_nodes=nodes, nodal_forces=forces)

    def with_volume_fraction(self, value):
        return self if value is None else replace(self, volume_fraction=_check_volume_fraction(value))

    # -- files --------------------------------------------------------------------------------
    def to_dict(self):
        out = {"format": FORMAT, "version": VERSION, "kind": self.kind, "name": self.name}
        if self.kind == "preset":
            out.update(nelx=self.nelx, nely=self.nely, volume_fraction=self.volume_fraction,
                       gravity=list(self.gravity), load_cells=[list(r) for r in self.load_cells],
                       support_cells=[list(r) for r in self.support_cells],
                       fixed_nodes=[list(r) for r in self.fixed_nodes])
            if self.nodal_forces:
                out["nodal_forces"] = [list(f) for f in self.nodal_forces]
        else:
            out.update(grid=[" ".join(row) for row in self.grid],
                       input_grid=None if self.input_grid is None else [" ".join(r) for r in self.input_grid],
                       upscale=self.upscale, gravity=list(self.gravity), volume_fraction=self.volume_fraction,
                       nelx=self.nelx, nely=self.nely)
        return out

    @classmethod
    def from_dict(cls, data, source="problem"):
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ProblemError(f"{source}: not a {FORMAT} file (no \"format\": \"{FORMAT}\")")
        if data.get("version") != VERSION:
            raise ProblemError(f"{source}: unsupported version {data.get('version')!r} (expected {VERSION})")
        kind = data.get("kind")
        try:
            if kind == "preset":
                problem = cls("preset", str(data.get("name", "preset")), int(data["nelx"]), int(data["nely"]),
                              _check_volume_fraction(data.get("volume_fraction")),
                              _check_gravity(data.get("gravity", DOWN)),
                              tuple(tuple(int(v) for v in r) for r in data.get("load_cells", ())),
                              tuple(tuple(int(v) for v in r) for r in data.get("support_cells", ())),
                              tuple((int(a), int(b), int(c), int(d), str(e)) for a, b, c, d, e in
                                    data.get("fixed_nodes", ())),
                              nodal_forces=tuple((int(r), int(c), float(f_row), float(f_col))
                                                 for r, c, f_row, f_col in data.get("nodal_forces", ())))
                _check_preset_geometry(problem, source)
                return problem
            if kind == "grid":
                rows = from_rows(data["grid"], source)
                inp = None if data.get("input_grid") is None else from_rows(data["input_grid"], source)
                return grid_problem(rows, upscale=int(data.get("upscale", 1)), gravity=data.get("gravity", DOWN),
                                    volume_fraction=data.get("volume_fraction"), input_grid=inp,
                                    name=str(data.get("name", "grid")))
        except (KeyError, TypeError, ValueError) as err:
            if isinstance(err, ProblemError):
                raise
            raise ProblemError(f"{source}: malformed problem file ({type(err).__name__}: {err})") from None
        raise ProblemError(f"{source}: unknown problem kind {kind!r} (expected 'preset' or 'grid')")


def _check_preset_geometry(problem, source):
    if problem.nelx < 1 or problem.nely < 1:
        raise ProblemError(f"{source}: grid size {problem.nelx}x{problem.nely} must be at least 1x1")
    for r0, r1, c0, c1 in problem.load_cells + problem.support_cells:
        if not (0 <= r0 < r1 <= problem.nely and 0 <= c0 < c1 <= problem.nelx):
            raise ProblemError(f"{source}: cell rectangle {[r0, r1, c0, c1]} is outside the "
                               f"{problem.nelx}x{problem.nely} grid or empty")
    for r0, r1, c0, c1, dofs in problem.fixed_nodes:
        if dofs not in _DOFS:
            raise ProblemError(f"{source}: fixed DOFs {dofs!r} must be 'x', 'y' or 'xy'")
        if not (0 <= r0 < r1 <= problem.nely + 1 and 0 <= c0 < c1 <= problem.nelx + 1):
            raise ProblemError(f"{source}: node rectangle {[r0, r1, c0, c1]} is outside the "
                               f"{problem.nely + 1}x{problem.nelx + 1} nodes or empty")
    for r, c, f_row, f_col in problem.nodal_forces:
        if not (0 <= r <= problem.nely and 0 <= c <= problem.nelx):
            raise ProblemError(f"{source}: nodal force on node {[r, c]} is outside the "
                               f"{problem.nely + 1}x{problem.nelx + 1} nodes")
        if not (np.isfinite(f_row) and np.isfinite(f_col)):
            raise ProblemError(f"{source}: nodal force {[r, c, f_row, f_col]} is not finite")
    if not problem.load_cells and not any(f_row or f_col for _, _, f_row, f_col in problem.nodal_forces):
        raise ProblemError(f"{source}: no load: give a load cell or a non-zero nodal force")
    if not problem.support_cells and not problem.fixed_nodes:
        raise ProblemError(f"{source}: no support: give a support cell or a fixed node")


# -- constructors ---------------------------------------------------------------------------------
def preset(name, nelx, nely, volume_fraction=None):
    """A preset problem (see the module docstring) at nelx x nely elements."""
    if name not in PRESETS:
        raise ProblemError(f"unknown preset {name!r}: choose one of {', '.join(PRESETS)}")
    nelx, nely = int(nelx), int(nely)
    if nelx < 1 or nely < 1:
        raise ProblemError(f"size {nelx}x{nely}: both element counts must be at least 1")
    vf = _check_volume_fraction(volume_fraction if volume_fraction is not None else DEFAULT_VOLUME_FRACTION[name])
    if name == "cantilever":
        if nelx < 2:
            raise ProblemError("the cantilever needs at least 2 columns")
        mid = nely // 2
        rows = (mid - 1, mid + 1) if nely % 2 == 0 else (mid, mid + 1)
        loads = ((rows[0], rows[1], nelx - 1, nelx),)
        fixed = ((0, nely + 1, 0, 1, "xy"),)
    elif name in ("mbb", "mbb88"):
        if nelx < 2:
            raise ProblemError("the MBB beam needs at least 2 columns")
        fixed = ((0, nely + 1, 0, 1, "x"), (nely, nely + 1, nelx, nelx + 1, "y"))
        if name == "mbb88":  # the 88-line code's F(2,1) = -1 (its y is up): a unit force down on node (0, 0)
            return Problem("preset", name, nelx, nely, vf, DOWN, (), (), fixed, nodal_forces=((0, 0, 1.0, 0.0),))
        loads = ((0, 1, 0, 1),)
    else:  # bridge
        if nely < 2:
            raise ProblemError("the bridge needs at least 2 rows")
        loads = ((0, 1, 0, nelx),)
        fixed = ((nely, nely + 1, 0, 1, "xy"), (nely, nely + 1, nelx, nelx + 1, "xy"))
    return Problem("preset", name, nelx, nely, vf, DOWN, loads, (), fixed)


def from_rows(rows, source="grid"):
    """A rectangular token grid (tuple of tuples) from text rows or a list of rows."""
    try:
        grid = grids.as_grid(rows)
        grids.grid_shape(grid)
    except grids.GridError as err:
        raise ProblemError(f"{source}: {err}") from None
    return tuple(tuple(row) for row in grid)


def grid_problem(grid, upscale=1, gravity=DOWN, volume_fraction=None, input_grid=None, name="grid"):
    """A SPhyR grid (ground truth, or one with V cells) upscaled by ``upscale``."""
    grid = from_rows(grid, name)
    nely, nelx = grids.grid_shape(grid)
    if not any(c == grids.LOAD for row in grid for c in row):
        raise ProblemError(f"{name}: the grid has no load ('L') cell")
    if not any(c == grids.SUPPORT for row in grid for c in row):
        raise ProblemError(f"{name}: the grid has no support ('S') cell")
    if input_grid is not None:
        input_grid = from_rows(input_grid, name)
        if grids.grid_shape(input_grid) != (nely, nelx):
            raise ProblemError(f"{name}: input grid shape {grids.grid_shape(input_grid)} differs from the grid's")
    k = int(upscale)
    if k < 1:
        raise ProblemError(f"upscale factor {upscale} must be a positive integer")
    problem = Problem("grid", name, nelx * k, nely * k, _check_volume_fraction(volume_fraction),
                      _check_gravity(gravity), grid=grid, input_grid=input_grid, upscale=k)
    problem.target_volume_fraction()  # a grid with V cells needs an explicit volume fraction
    return problem


def dataset_problem(path, index, upscale=1, gravity=None, volume_fraction=None, masked=False):
    """Record ``index`` of a SPhyR dataset file (JSON lines with ground_truth, input_grid).

    The whole grid is designed (every non-L/S cell free) unless ``masked``:
    then only the record's ``V`` cells are, the rest pinned to the ground truth.
    Gravity defaults to the one of the file's folder name (docs/scoring.md, "Load case").
    """
    path = Path(path)
    records = []
    try:
        for number, record, problem in read_jsonl(path)[0]:
            if problem:
                raise ProblemError(f"{path}:{number}: {problem}")
            records.append(record)
    except FileNotFoundError:
        raise ProblemError(no_such([path])) from None
    except OSError as err:
        raise ProblemError(f"{path}: cannot read ({err.strerror or err})") from None
    chosen = [r for r in records if isinstance(r, dict) and r.get("index") == index]
    if not chosen:
        raise ProblemError(f"{path}: no record with index {index}")
    record = chosen[0]
    if gravity is None:
        from ..core.loadcase import gravity_from_folder

        gravity = gravity_from_folder(str(path.parent))
    try:
        return grid_problem(record["ground_truth"], upscale, gravity, volume_fraction,
                            input_grid=record.get("input_grid") if masked else None, name=f"{path.stem}[{index}]")
    except KeyError:
        raise ProblemError(f"{path}: record {index} has no ground_truth") from None


def read_problem(path, upscale=1, gravity=None, volume_fraction=None):
    """A problem from a grid file: JSON (``*.json``) or a SPhyR text grid."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemError(no_such([path])) from None
    except OSError as err:
        raise ProblemError(f"{path}: cannot read ({err.strerror or err})") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ProblemError(f"{path}: not JSON ({err})") from None
        problem = Problem.from_dict(data, str(path))
        if gravity is not None:
            problem = replace(problem, gravity=_check_gravity(gravity))
    else:
        grid = grids.extract_grid_from_text(text)
        if not grid:
            raise ProblemError(f"{path}: no grid of L/S/V/number tokens found")
        problem = grid_problem(grid, 1, DOWN if gravity is None else gravity, None, name=path.stem)
    return problem.upscaled(upscale).with_volume_fraction(volume_fraction)


def write_problem(problem, path):
    """Write a grid file: JSON for ``*.json``, else the (upscaled) SPhyR text grid."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        text = json.dumps(problem.to_dict(), indent=1) + "\n"
    else:
        if problem.kind != "grid":
            raise ProblemError(f"{path}: a {problem.kind} problem (rollers, rectangles) has no SPhyR text "
                               "form; write a .json grid file")
        if problem.nelx * problem.nely > TEXT_MAX_CELLS:
            raise ProblemError(f"{path}: {problem.nelx}x{problem.nely} cells is too large for a text grid "
                               f"(at most {TEXT_MAX_CELLS}); write a .json grid file")
        if tuple(problem.gravity) != DOWN:
            raise ProblemError(f"{path}: a text grid cannot carry gravity {problem.gravity}; write a .json file")
        tokens = np.asarray(problem.grid, dtype=object)
        up = np.repeat(np.repeat(tokens, problem.upscale, axis=0), problem.upscale, axis=1)
        text = "\n".join(" ".join(row) for row in up.tolist()) + "\n"
    write_text_atomic(path, text)
    return path


def resize_nearest(field, shape):
    """A natural element field resampled (nearest cell centre) onto another grid shape."""
    field = np.asarray(field, dtype=float)
    ny, nx = shape
    rows = np.minimum(((np.arange(ny) + 0.5) * field.shape[0] / ny).astype(np.int64), field.shape[0] - 1)
    cols = np.minimum(((np.arange(nx) + 0.5) * field.shape[1] / nx).astype(np.int64), field.shape[1] - 1)
    return field[np.ix_(rows, cols)]


def parse_gravity(text):
    """A gravity step "dr,dc" (:func:`sphyr_hpc.core.loadcase.parse_gravity`; None stays None: the problem's own)."""
    if text is None:
        return None
    try:
        return loadcase_parse_gravity(text)
    except ValueError as err:
        raise ProblemError(f"--gravity: {err}") from None


def resolve(path=None, preset_name=None, size=None, dataset=None, index=0, masked=False, upscale=1, gravity=None,
            volfrac=None, path_option="PROBLEM (a grid file)"):
    """The problem a command line describes: exactly one of a grid file, a preset or a dataset record.

    Shared by ``generate`` and ``optimize``; ``gravity`` is the "dr,dc" text.
    """
    sources = [given for given in (path, preset_name, dataset) if given]
    if len(sources) != 1:
        raise ProblemError(f"give exactly one of {path_option}, --preset NAME --size NXxNY, "
                           "or --dataset FILE --index I")
    gravity = parse_gravity(gravity)
    if preset_name:
        if not size:
            raise ProblemError("--preset needs --size NELXxNELY (e.g. 300x100)")
        problem = preset(preset_name, *parse_size(size), volfrac)
        if gravity is not None:
            from dataclasses import replace

            problem = replace(problem, gravity=gravity)
        return problem.upscaled(upscale)
    if size:
        raise ProblemError("--size applies to --preset only (use --upscale for grids and samples)")
    if dataset:
        return dataset_problem(dataset, index, upscale, gravity, volfrac, masked)
    return read_problem(path, upscale, gravity, volfrac)
