"""Field output for ParaView: designs, displacements, strain energy, stresses, histories.

One design on the structured grid becomes ``<stem>.h5`` (heavy data) beside
``<stem>.xdmf`` (an XDMF 3 index naming the ``.h5`` by a relative path), or a
``<stem>.vtu``; an optimisation history becomes one temporal collection whose
index is rewritten after every step.  The file layouts are described in
:mod:`sphyr_hpc.io.field_files`.

Conventions
-----------
* Frame: ParaView's, x to the right, y *up*, z out of the screen.  The grid is
  drawn the way it prints: cell (r, c) of the printed grid (row 0 at the top)
  is the unit square x in [c, c+1], y in [nely-1-r, nely-r]; node (r, c) is at
  (c, nely-r).  The bottom-left corner is the origin; cells are unit squares.
  A gravity-down sample therefore shows its load on top.
* Storage order: arrays are stored in that y-up order, i.e. the rows of the
  printed grid *reversed* with the origin at 0 (rather than an origin at
  y = nely with a negative spacing, which not every reader accepts).  With
  h5py, ``f["density"][()][::-1]`` is the printed grid again.
* The solver's y axis points *down* the grid (:mod:`sphyr_hpc.core.loadcase`), so
  the y component of ``displacement`` is the solver's with its sign flipped;
  ``displacement`` has 3 components with z = 0 (ParaView's Warp By Vector).

Arrays
------
Cell data:

* ``density``: the design (SIMP densities in [0, 1]).
* ``strain_energy_density``: ``0.5 * E_e * u_e^T K0 u_e`` per unit area (the
  cells are unit squares), with ``E_e = Emin + rho^p (E0 - Emin)``; it sums to
  half the compliance f.u.  (The optimiser's "unit energy" ``u_e^T K0 u_e``
  carries no 1/2; the stored elastic energy does.)
* ``von_mises``: plane-stress von Mises stress at the element centre, from
  ``sigma = E_e * D * B(0,0) u_e`` (:func:`discretisation.constitutive_matrix`,
  :func:`discretisation.centre_strain_displacement`); invariant under the
  y flip.
* ``marker``: 0 plain cell, 1 load (``L``), 2 support (``S``), 3 masked (a
  ``V`` cell of the input grid, the cells a model had to fill).

Node data: ``displacement`` (3 components, y up, z = 0).  Scalars (ParaView
field data in the ``"xdmf"`` format, HDF5 attributes and 1-element datasets
always): ``compliance`` (NaN if not given), and in a history ``iteration`` and
``change``.

Parallel
--------
Every function taking an :class:`~sphyr_hpc.solvers.system.GridSystem`
is collective on its communicator: each rank computes the fields of its element
slab (``system.slab``) and of the nodes it owns (``system.da.getRanges()``)
and writes them itself (see :mod:`sphyr_hpc.io.field_files`), so the files do
not depend on the number of ranks.  Paths are decided on rank 0 and broadcast.
:func:`write_natural_fields` takes plain natural numpy arrays and needs no
PETSc and no MPI.
"""

import re
from pathlib import Path

import numpy as np

from ..core import discretisation as fe
from . import field_files as ff
from .field_files import FORMATS  # noqa: F401  (re-exported)

MARKER_LOAD, MARKER_SUPPORT, MARKER_MASKED = 1, 2, 3


# -- fields -----------------------------------------------------------------------------------------
def _element_fields(rho, ue, penal, ke, d, b0):
    """density, strain energy density and von Mises of elements (rows of ``ue``, solver frame)."""
    rho = np.clip(np.asarray(rho, dtype=float), 0.0, 1.0)
    modulus = fe.simp_modulus(rho, penal)
    energy = 0.5 * modulus * np.einsum("ij,ij->i", ue @ ke, ue)
    stress = modulus[:, None] * (ue @ (d @ b0).T)
    sx, sy, txy = stress[:, 0], stress[:, 1], stress[:, 2]
    von_mises = np.sqrt(np.maximum(sx * sx - sx * sy + sy * sy + 3.0 * txy * txy, 0.0))
    return {"density": rho, "strain_energy_density": energy, "von_mises": von_mises}


def markers(loadcase, masked=None):
    """Natural (nely, nelx) int8 markers: 1 load, 2 support, 3 masked, 0 otherwise."""
    marks = loadcase.markers().astype(np.int8)
    if masked is not None:
        masked = np.asarray(masked, dtype=bool).reshape(loadcase.shape)
        marks[masked & (marks == 0)] = MARKER_MASKED
    return marks


def _displacement_3d(u2):
    """(..., 2) solver-frame displacements as (..., 3) y-up ones."""
    out = np.zeros(u2.shape[:-1] + (3,))
    out[..., 0] = u2[..., 0]
    out[..., 1] = -u2[..., 1]
    return out


def design_fields(loadcase, densities, displacements, masked=None, penal=fe.PENAL, nu=fe.NU):
    """Every array of one design from natural numpy arrays, in grid orientation.

    ``densities``: natural (nely, nelx); ``displacements``: natural DOF vector
    (``loadcase.n_dofs``, solver frame).  Returns ``{"cells": {...}, "nodes":
    {...}}`` with (nely, nelx) cell arrays and a (nely+1, nelx+1, 3) y-up
    ``displacement``, rows top to bottom like the printed grid.
    """
    nely, nelx = loadcase.shape
    u = np.asarray(displacements, dtype=float).reshape(-1)
    if u.size != loadcase.n_dofs:
        raise ValueError(f"displacements have {u.size} entries, the load case {loadcase.n_dofs} DOFs")
    edofs = fe.nodes_to_dofs(fe.element_nodes(nely, nelx))
    cells = _element_fields(np.asarray(densities, dtype=float).reshape(-1), u[edofs], penal,
                            fe.element_stiffness(nu), fe.constitutive_matrix(nu), fe.centre_strain_displacement())
    cells = {k: v.reshape(nely, nelx) for k, v in cells.items()}
    cells["marker"] = markers(loadcase, masked)
    nodes = {"displacement": _displacement_3d(u.reshape(nely + 1, nelx + 1, 2))}
    return {"cells": cells, "nodes": nodes}


def _natural_piece(loadcase, densities, displacements, masked, penal, nu, scalars):
    f = design_fields(loadcase, densities, displacements, masked, penal, nu)
    nely, nelx = loadcase.shape
    return ff.Piece(loadcase.shape, (0, nely, 0, nelx), (0, nely + 1, 0, nelx + 1), f["cells"], f["nodes"], scalars)


class _SystemFields:
    """Per-rank field computation on a GridSystem (its slab and owned nodes)."""

    def __init__(self, system, masked, penal, nu):
        if not np.allclose(system.ke, fe.element_stiffness(nu), rtol=1e-12, atol=0.0):
            raise ValueError(f"the system's element matrix is not the one of nu={nu}: pass its nu")
        self.system = system
        self.penal = penal
        self.d = fe.constitutive_matrix(nu)
        self.b0 = fe.centre_strain_displacement()
        self.markers = np.ascontiguousarray(markers(system.loadcase, masked)[system.slab])
        (ys, ye), (xs, xe) = ((s.start, s.stop) for s in system.slab)
        self.cell_box = (ys, ye, xs, xe)
        (nxs, nxe), (nys, nye) = system.da.getRanges()
        self.node_box = (nys, nye, nxs, nxe)
        self.node_shape = (nye - nys, nxe - nxs)

    def slab(self, densities):
        system = self.system
        rho = np.asarray(densities, dtype=float)
        if rho.ndim == 2 and rho.shape == system.loadcase.shape:
            rho = system.slab_of(rho)
        rho = rho.reshape(-1)
        if rho.size != int(np.prod(system.slab_shape)):
            raise ValueError(f"densities: expected this rank's slab of {system.slab_shape} or a natural "
                             f"{system.loadcase.shape} array, got {rho.size} values")
        return rho

    def piece(self, densities, scalars, penal=None):
        """This rank's piece for its slab densities and the system's current ``u`` (the moduli at
        ``penal``, default the writer's)."""
        system = self.system
        ue = system.local_displacements()[system.local_edofs]
        cells = _element_fields(self.slab(densities), ue, self.penal if penal is None else penal, system.ke,
                                self.d, self.b0)
        cells = {k: v.reshape(system.slab_shape) for k, v in cells.items()}
        cells["marker"] = self.markers
        u2 = system.u.array_r.reshape(self.node_shape + (2,))
        nodes = {"displacement": _displacement_3d(u2)}
        return ff.Piece(system.loadcase.shape, self.cell_box, self.node_box, cells, nodes, scalars)


# -- paths ------------------------------------------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text):
    """A file-name-safe version of ``text``: runs of other characters become '_'."""
    name = _UNSAFE.sub("_", str(text)).strip("._")
    return name or "_"


def _with(stem, suffix):
    """``stem`` + ``suffix`` (``Path.with_suffix`` would cut a stem at its last dot)."""
    return stem.parent / (stem.name + suffix)


def _stem(path_stem):
    """``path_stem`` without a known suffix, its parent created."""
    path = Path(path_stem)
    if path.suffix in (".xdmf", ".h5", ".vtu", ".pvd"):
        path = path.with_suffix("")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _decide_stem(path_stem, comm):
    """The stem on rank 0, broadcast (and its folder made there)."""
    if comm is None or comm.size == 1:
        return _stem(path_stem)
    stem, error = None, None
    if comm.rank == 0:
        try:
            stem = _stem(path_stem)
        except OSError as err:
            error = err
    stem, error = comm.bcast((stem, error), root=0)
    if error is not None:
        raise error
    return stem


# -- one design -------------------------------------------------------------------------------------
def _write_piece(stem, piece, comm, fields_format):
    """Write one design's piece(s) as ``stem`` + suffixes; returns the index path (collective)."""
    rank = comm.rank if comm is not None else 0
    index = _with(stem, ff.index_suffix(fields_format))
    if fields_format == "vtu":
        pieces = comm.gather(piece, root=0) if comm is not None and comm.size > 1 else [piece]
        error = None
        if rank == 0:
            try:
                ff.write_vtu(index, ff._assemble(pieces))
            except Exception as err:  # reported on every rank below
                error = err
        if comm is not None and comm.size > 1:
            error = comm.bcast(error, root=0)
        if error is not None:
            raise error
        return index
    flat = fields_format == "xdmf-quad"
    h5_path = _with(stem, ".h5")
    sink = ff.H5Sink(h5_path, comm, piece.shape, flat, attrs={"frame": "x right, y up; rows of the printed grid reversed"})
    try:
        sink.write("", piece)
    finally:
        sink.close()
    if rank == 0:
        spec = ff.FieldSpec.of(piece)
        ff.write_xdmf_index(index, [ff.xdmf_grid(stem.name, piece.shape, spec, h5_path.name, "", flat, level=2)])
    if comm is not None and comm.size > 1:
        comm.Barrier()
    return index


def write_fields(path_stem, system, densities, masked=None, penal=fe.PENAL, compliance=None,
                 fields_format="xdmf", nu=fe.NU):
    """Write one design solved on ``system`` (collective on ``system.comm``).

    ``densities``: this rank's slab (as ``system.slab_of`` gives it) or a
    natural (nely, nelx) array; displacements are ``system.u`` as it stands
    (solve first).  ``masked``: natural bool array of the masked cells.
    Returns the path of the index file (``.xdmf`` or ``.vtu``).
    """
    ff.check_format(fields_format)
    comm = system.comm.tompi4py()
    stem = _decide_stem(path_stem, comm)
    piece = _SystemFields(system, masked, penal, nu).piece(densities, {"compliance": compliance})
    return _write_piece(stem, piece, comm, fields_format)


def write_natural_fields(path_stem, loadcase, densities, displacements, masked=None, penal=fe.PENAL,
                         compliance=None, fields_format="xdmf", nu=fe.NU):
    """Write one design from natural numpy arrays, alone (no communicator).

    ``densities``: natural (nely, nelx); ``displacements``: natural DOF vector
    (solver frame, y down), e.g. ``system.natural_displacements()``.
    Returns the path of the index file.
    """
    ff.check_format(fields_format)
    stem = _stem(path_stem)
    piece = _natural_piece(loadcase, densities, displacements, masked, penal, nu, {"compliance": compliance})
    return _write_piece(stem, piece, None, fields_format)


# -- histories --------------------------------------------------------------------------------------
class HistoryWriter:
    """A temporal collection of an optimisation run, one step per ``every`` iterations.

    ``HistoryWriter(path_stem, system, every=1)`` writes ``<stem>.h5`` +
    ``<stem>.xdmf`` (or ``<stem>_<iteration>.vtu`` files + ``<stem>.pvd``);
    the index is rewritten atomically after every step, once the step's heavy
    data is flushed, so a run that dies leaves a file ParaView opens with the
    steps written so far.  Collective on ``system.comm``.

    :meth:`write_step` takes the iteration's densities (this rank's slab or a
    natural array) and computes displacement, strain energy and stress from
    ``system.u`` as it stands.  As a ``run_simp`` callback (the writer is
    callable with its signature ``(iteration, compliance, physical, change, penal)``)
    the densities are the design *after* the iteration's update and ``u``,
    ``compliance`` come from the solve the iteration started with: the two
    differ by one optimality-criteria step.  After ``run_simp`` returns, its
    final solve matches its result, and ``write_step(result.iterations,
    result.densities, result.compliance, force=True)`` replaces the last step
    with that consistent state (or adds it when ``every`` skipped it).

    ``steps`` (a resumed run, :mod:`sphyr_hpc.io.checkpoint`): the :attr:`steps` of the run's
    checkpoint; the existing collection keeps exactly those (a step written after the
    checkpoint, by a run killed later, is dropped) and the run adds its own after them.
    """

    def __init__(self, path_stem, system, every=1, masked=None, penal=fe.PENAL, fields_format="xdmf", nu=fe.NU,
                 steps=None):
        if int(every) < 1:
            raise ValueError("every must be a positive number of iterations")
        self.system = system
        self.every = int(every)
        self.fields_format = ff.check_format(fields_format)
        self.comm = system.comm.tompi4py()
        self.stem = _decide_stem(path_stem, self.comm)
        self.path = _with(self.stem, ff.index_suffix(fields_format, history=True))
        self._fields = _SystemFields(system, masked, penal, nu)
        self._flat = fields_format == "xdmf-quad"
        # iteration -> serialised XDMF grid, or VTU file name
        self._steps = {int(it): entry for it, entry in (steps or {}).items()}
        self._spec = None
        self._sink = None
        if fields_format != "vtu":
            self.h5_path = _with(self.stem, ".h5")
            keep = None if steps is None else [f"step_{it:06d}" for it in self._steps]
            self._sink = ff.H5Sink(self.h5_path, self.comm, system.loadcase.shape, self._flat,
                                   attrs={"frame": "x right, y up; rows of the printed grid reversed"}, keep=keep)

    @property
    def steps(self):
        """``{iteration: index entry}`` of the steps written so far (what a checkpoint keeps)."""
        return dict(self._steps)

    @property
    def iterations(self):
        """Iterations written so far, in order."""
        return sorted(self._steps)

    def write_step(self, iteration, densities_slab, compliance=None, change=None, force=False, penal=None):
        """Add (or replace) the step of ``iteration``; skipped unless ``iteration % every == 0``
        or ``force``; the moduli at ``penal`` (default the writer's).  Returns whether it was written.
        Collective."""
        iteration = int(iteration)
        if not force and iteration % self.every:
            return False
        if self.system is None:
            raise ValueError("HistoryWriter is closed")
        scalars = {"compliance": compliance, "iteration": float(iteration), "change": change}
        piece = self._fields.piece(densities_slab, scalars, penal)
        if self.fields_format == "vtu":
            name = f"{self.stem.name}_{iteration:06d}.vtu"
            _write_piece(self.stem.parent / name[:-len(".vtu")], piece, self.comm, "vtu")
            self._steps[iteration] = name
            if self.comm.rank == 0:
                ff.write_pvd_index(self.path, [(it, self._steps[it]) for it in self.iterations])
        else:
            group = f"step_{iteration:06d}"
            self._sink.write(group, piece)
            self._sink.flush()
            self._spec = self._spec or ff.FieldSpec.of(piece)
            self._steps[iteration] = ff.xdmf_grid(group, self.system.loadcase.shape, self._spec, self.h5_path.name,
                                                  group, self._flat, time=iteration, level=3)
            if self.comm.rank == 0:
                ff.write_xdmf_index(self.path, [self._steps[it] for it in self.iterations], self.stem.name)
        if self.comm.size > 1:
            self.comm.Barrier()
        return True

    def __call__(self, iteration, compliance, physical, change, penal):
        """``run_simp``'s callback signature: the step at the iteration's penalty (its solve's)."""
        self.write_step(iteration, physical, compliance=compliance, change=change, penal=penal)

    def close(self):
        if self._sink is not None:
            self._sink.close()
            self._sink = None
        self.system = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
