"""Load cases: the boundary conditions a ground-truth grid encodes (docs/scoring.md, "Load case").

Conventions (shared by every later step of the pipeline):

* Nodes form a (nely+1) x (nelx+1) grid, row-major, row 0 at the top:
  ``node(r, c) = r * (nelx + 1) + c``.
* Two DOFs a node: ``2*node`` is x (along increasing column), ``2*node + 1``
  is y (along increasing row, i.e. *down* the printed grid).
* Supports: both DOFs of the 4 nodes of every ``S`` cell are fixed.  Problems
  that are not SPhyR grids (the presets of :mod:`sphyr_hpc.optimiser.problems`, e.g. the
  rollers of the MBB beam) add single fixed DOFs in ``extra_fixed_dofs``
  (natural DOF numbers); SPhyR load cases leave it empty.
* Nodal forces: ``nodal_forces`` adds point forces ``(dof, value)`` on natural DOF
  numbers to the load of the ``L`` cells (the 88-line code's half MBB beam has
  no load cell, only a force on its top-left node); SPhyR load cases leave it empty.
* Load: a unit resultant, ``1 / (4 * #L)`` onto each of the 4 nodes of every
  ``L`` cell, along the normalised gravity step ``(dr, dc)``; the x component
  gets ``share * dc`` and the y component ``share * dr``.  Default (1, 0) is
  down; folders named ``*1_rotations*``, ``*2_rotations*``, ``*3_rotations*``
  hold rotated samples whose gravity is (0, -1), (-1, 0), (0, 1).

A :class:`LoadCase` is frozen and hashable so that solvers, solid compliances
and yardsticks can be cached per problem.
"""

from dataclasses import dataclass, fields

import numpy as np

from . import grid as grids

DOWN = (1.0, 0.0)

_ROTATIONS = (("3_rotations", (0.0, 1.0)), ("2_rotations", (-1.0, 0.0)), ("1_rotations", (0.0, -1.0)))


class LoadCaseError(ValueError):
    """A ground truth that does not describe a structural problem."""


def parse_gravity(text):
    """A gravity step written ``"dr,dc"`` (e.g. ``"1,0"``, down); ValueError saying why otherwise."""
    try:
        dr, dc = (float(v) for v in str(text).split(","))
    except ValueError:
        raise ValueError(f"gravity must be 'dr,dc', e.g. 1,0 (down), not {text!r}") from None
    if dr == 0.0 and dc == 0.0:
        raise ValueError("gravity must be non-zero")
    return (dr, dc)


def gravity_from_folder(name):
    """Gravity step (dr, dc) of a result folder name (docs/scoring.md, "Load case")."""
    for marker, gravity in _ROTATIONS:
        if marker in name:
            return gravity
    return DOWN


@dataclass(frozen=True)
class LoadCase:
    """Loads and supports of one sample on an nely x nelx grid of unit cells."""

    nely: int
    nelx: int
    load_cells: tuple
    support_cells: tuple
    gravity: tuple = DOWN
    total_load: float = 1.0
    extra_fixed_dofs: tuple = ()  # natural DOF numbers fixed besides the S cells' (rollers)
    nodal_forces: tuple = ()      # ((natural DOF, force), ...) besides the L cells' load

    def __hash__(self):
        """The hash of the fields (as the dataclass's own), computed once: every cache of solvers,
        analyses and yardsticks is keyed by the load case, several lookups an analysis."""
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", value)
            return value

    def __getstate__(self):
        """Pickled (to other ranks) without the cached hash: a hash belongs to its process."""
        return {name: value for name, value in self.__dict__.items() if name != "_hash"}

    @property
    def n_elements(self):
        return self.nely * self.nelx

    @property
    def n_dofs(self):
        return 2 * (self.nely + 1) * (self.nelx + 1)

    @property
    def shape(self):
        return (self.nely, self.nelx)

    def _cell_nodes(self, cells):
        cells = np.asarray(cells, dtype=np.int64).reshape(-1, 2)
        top_left = cells[:, 0] * (self.nelx + 1) + cells[:, 1]
        return np.stack([top_left, top_left + 1, top_left + self.nelx + 2, top_left + self.nelx + 1], axis=1)

    def fixed_dofs(self):
        """Sorted, unique natural DOF numbers clamped by the supports (and ``extra_fixed_dofs``)."""
        nodes = self._cell_nodes(self.support_cells).ravel()
        extra = np.asarray(self.extra_fixed_dofs, dtype=np.int64).ravel()
        return np.unique(np.concatenate([2 * nodes, 2 * nodes + 1, extra]))

    def force_vector(self):
        """Natural-ordered nodal force vector (length ``n_dofs``)."""
        forces = np.zeros(self.n_dofs)
        for dof, value in self.nodal_forces:
            forces[int(dof)] += float(value)
        if not self.load_cells:
            return forces
        direction = np.asarray(self.gravity, dtype=float)
        norm = np.linalg.norm(direction)
        if norm == 0.0:
            raise LoadCaseError("gravity direction must be non-zero")
        direction = direction / norm
        share = self.total_load / (4.0 * len(self.load_cells))
        nodes = self._cell_nodes(self.load_cells).ravel()
        np.add.at(forces, 2 * nodes, share * direction[1])
        np.add.at(forces, 2 * nodes + 1, share * direction[0])
        return forces

    def structural_mask(self):
        """Cells that are structure by definition (L and S)."""
        mask = np.zeros(self.shape, dtype=bool)
        for r, c in self.load_cells + self.support_cells:
            mask[r, c] = True
        return mask

    def markers(self):
        """Cell markers as small integers: 1 load, 2 support, 0 otherwise."""
        marks = np.zeros(self.shape, dtype=np.int8)
        for r, c in self.load_cells:
            marks[r, c] = 1
        for r, c in self.support_cells:
            marks[r, c] = 2
        return marks


def from_grid(grid, gravity=DOWN, total_load=1.0):
    """The load case a (ground-truth) grid encodes.

    Raises :class:`LoadCaseError` for an empty or ragged grid or one without
    an ``L`` or an ``S`` cell.
    """
    try:
        nely, nelx = grids.grid_shape(grid)
    except grids.GridError as err:
        raise LoadCaseError(str(err)) from None
    loads = tuple((r, c) for r in range(nely) for c in range(nelx) if grid[r][c] == grids.LOAD)
    supports = tuple((r, c) for r in range(nely) for c in range(nelx) if grid[r][c] == grids.SUPPORT)
    if not loads:
        raise LoadCaseError("ground truth has no load ('L') cell")
    if not supports:
        raise LoadCaseError("ground truth has no support ('S') cell")
    return LoadCase(nely, nelx, loads, supports, (float(gravity[0]), float(gravity[1])), float(total_load))
