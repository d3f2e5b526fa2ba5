"""The linear-elastic system of one load case, distributed with PETSc (docs/scoring.md, "Finite elements").

Who owns what
-------------
:class:`ElasticitySystem` owns every PETSc handle it creates and destroys them
in :meth:`close` (also a context manager):

* ``da``: nodal DMDA, dof 2, sizes (nelx+1, nely+1); its first axis is the
  grid column (x) and its second the grid row (y, *down*), so PETSc's natural
  ordering is exactly the natural DOF numbering of :mod:`sphyr_hpc.loadcase`.
* ``da_elem``: element DMDA, sizes (nelx, nely), whose ownership matches the
  elements ``DMDAGetElements`` hands each rank.  Element fields (densities,
  moduli, energies, sensitivities) live on it; locally each rank holds its box
  of elements row-major, called its *slab* below.
* ``K`` (AIJ from the DMDA), ``ksp`` (options prefix ``prefix``), vectors
  ``f`` (forces, zero on fixed DOFs), ``u`` (displacements), ``r`` (residual).

Assembly
--------
Two ways, the same matrix up to the order of the sums:

* ``assembly="elements"`` (with the direct solver; the scorer's small grids):
  the CSR structure of each rank's element contributions in *local* (ghosted)
  DOF numbering is computed once, with the sparse map A from element moduli
  to matrix entries; assembling a new modulus field is then one product
  ``A @ moduli`` (every entry summed in element order, as the published
  scorer sums it) and, on several ranks, one ``MatSetValuesLocal``-style CSR
  call.  On one rank K is created on these very CSR arrays
  (``MatCreateSeqAIJWithArrays``) and the product is written into its values
  in place.  A holds 64 (value, index) pairs per element (200 MB at 1M DOFs).
* ``assembly="stencil"`` (with CG + multigrid/GAMG; large grids): every
  owned node's row is its 3x3-node stencil, 2 x 18 entries, and the entry
  coupling node n with neighbour n + o is ``sum_a E(element at n - pos(a)) *
  K0[a, a + o]`` over the (up to 4) elements around n.  So the values of a
  block of node rows are one (nodes x 4) @ (4 x 36) product of the 4 shifted
  element-moduli arrays with a constant table (:func:`stencil_table`), in the
  CSR order of the DMDA matrix, set with one ``MatSetValuesLocal`` call per
  block of ``ASSEMBLY_BLOCK_NODES`` nodes.  Only owned rows are computed (the
  element halo comes from the element DMDA), so nothing is sent between
  ranks.  Column indices are a constant offset pattern; only the nodes on the
  grid's edge store theirs (neighbours outside the grid point at the row's
  own diagonal with a zero value, ``ADD_VALUES``).  At 1M DOFs this path needs
  no index map of its own and 2.4 MB of values at a time.

Dirichlet conditions are imposed symmetrically either way: every
contribution in a fixed row or column is dropped and the fixed diagonal is 1,
so the operator stays SPD and CG/multigrid apply.  The residual of the
modified system equals the residual on the free DOFs of the original one.

Solver
------
``solver="direct"`` (default up to ``DIRECT_SOLVER_MAX_DOFS``): ``preonly`` +
Cholesky with nested dissection on one rank, LU with MUMPS on several.
``solver="mg"`` (default above): CG + geometric multigrid on the grid
hierarchy of :mod:`sphyr_hpc.solvers.multigrid`;
``solver="gamg"``: CG + smoothed aggregation with the rigid-body near-null
space.  Either way ``setFromOptions`` is called last, so any
``-<prefix>ksp_*``/``-<prefix>pc_*`` option on the command line wins.  The
KSP is created once and reused: each :meth:`ElasticitySystem.solve` sets the
new operator, sets the preconditioner up again (event ``sphyr_setup``) and,
for the iterative solvers, starts from the previous displacement (warm start).
A CG solve that does not converge raises :class:`SolverError`.
"""

import numpy as np
import scipy.sparse as sp

from .._petsc import petsc, view_once
from .. import discretisation as fe
from .. import timing
from . import csr, multigrid
from .multigrid import clear_default_options, configure_gamg, configure_mg, set_default_options

RESIDUAL_TOLERANCE = 1e-6
# Above this many DOFs the default solver is CG + multigrid instead of LU.
DIRECT_SOLVER_MAX_DOFS = 200_000
SOLVERS = ("direct", "mg", "gamg")
# Stencil assembly computes the values of about this many nodes at a time (2.4 MB a block).
ASSEMBLY_BLOCK_NODES = 8192
ASSEMBLIES = ("elements", "stencil")

# Local node a of an element sits at (row, column) offset _POS[a] from its top-left node.
_POS = ((0, 0), (0, 1), (1, 1), (1, 0))
# Neighbour offsets (drow, dcol) of a node's stencil, in increasing local DOF order.
_OFFSETS = tuple((dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1))


def stencil_table(ke):
    """(4, 36) table: column (d, o, d2) of row a is K0[2a+d, 2b+d2], b the node at offset o of a.

    The value of row (node n, DOF d), neighbour o, DOF d2 is the sum over a of
    E(element having n as its local node a) * table[a, (d, o, d2)].
    """
    table = np.zeros((4, 2, len(_OFFSETS), 2))
    for a, (ar, ac) in enumerate(_POS):
        for o, (dr, dc) in enumerate(_OFFSETS):
            target = (ar + dr, ac + dc)
            if target in _POS:
                b = _POS.index(target)
                table[a, :, o, :] = ke[2 * a:2 * a + 2, 2 * b:2 * b + 2]
    return table.reshape(4, -1)


class SolverError(RuntimeError):
    """An iterative solve that did not converge (never turned into a number)."""


class PartitionError(ValueError):
    """A grid too small to give every rank a part of it."""


def _csr_plan(rows, cols, n_rows):
    """CSR pattern of summed (row, col) pairs and the map from pairs to entries."""
    keys = rows.astype(np.int64) * n_rows + cols.astype(np.int64)
    unique, inverse = np.unique(keys, return_inverse=True)
    u_rows, u_cols = np.divmod(unique, n_rows)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(u_rows, minlength=n_rows), out=indptr[1:])
    return indptr, u_cols, inverse, unique.size


def _reason_name(PETSc, reason):
    for name in dir(PETSc.KSP.ConvergedReason):
        if not name.startswith("_") and getattr(PETSc.KSP.ConvergedReason, name) == reason:
            return f"{name} ({reason})"
    return str(reason)


class ElasticitySystem:
    """K(E) u = f for one :class:`~sphyr_hpc.loadcase.LoadCase` on ``comm``."""

    def __init__(self, loadcase, comm=None, prefix="sphyr_", nu=fe.NU, solver=None, element_halo=1,
                 assembly=None):
        PETSc = petsc()
        self.PETSc = PETSc
        self.loadcase = loadcase
        self.comm = comm if comm is not None else PETSc.COMM_WORLD
        self.prefix = prefix
        nely, nelx = loadcase.shape
        self.ke = fe.element_stiffness(nu)

        da = PETSc.DMDA().create(
            dim=2, dof=2, sizes=(nelx + 1, nely + 1), stencil_width=1,
            stencil_type=PETSc.DMDA.StencilType.BOX, comm=self.comm, setup=False,
        )
        da.setOptionsPrefix(prefix)
        da.setFromOptions()
        try:
            da.setUp()
        except PETSc.Error:
            da.destroy()
            raise PartitionError(f"grid {nely}x{nelx} ({nely + 1}x{nelx + 1} nodes) is too small for "
                                 f"{self.comm.getSize()} ranks") from None
        da.setElementType(PETSc.DMDA.ElementType.Q1)
        da.setUniformCoordinates(0.0, float(nelx), 0.0, float(nely))
        self.da = da
        if solver is None:
            solver = "direct" if loadcase.n_dofs <= DIRECT_SOLVER_MAX_DOFS else "mg"
        if solver not in SOLVERS:
            raise ValueError(f"unknown solver {solver!r}: expected one of {', '.join(SOLVERS)}")
        if assembly is None:
            assembly = "elements" if solver == "direct" else "stencil"
        if assembly not in ASSEMBLIES:
            raise ValueError(f"unknown assembly {assembly!r}: expected one of {', '.join(ASSEMBLIES)}")
        self.solver = solver
        self.assembly = assembly
        self.hierarchy = None        # multigrid levels as logged after the first set-up
        self.last_iterations = 0     # KSP iterations of the last solve
        self._values = None          # K's own CSR values when assembled in place (one rank)
        self.attachments = {}        # objects that live and die with this system (closed in close())
        self._setup_elements(element_halo)
        if assembly == "elements":
            self._setup_assembly()
        else:
            self._setup_stencil_assembly()
        self._setup_vectors()
        self._setup_ksp(solver)

    # -- set-up ---------------------------------------------------------------------------------
    def _setup_elements(self, halo):
        PETSc = self.PETSc
        nely, nelx = self.loadcase.shape
        lx, ly = (list(r) for r in self.da.getOwnershipRanges())
        # DMDAGetElements gives element i to the rank owning node i+1 along each axis,
        # so the first rank of each direction holds one element fewer than nodes.
        lx[0] -= 1
        ly[0] -= 1
        if min(lx) < 1 or min(ly) < 1:
            raise PartitionError(f"grid {nely}x{nelx} is too small for {self.comm.getSize()} ranks: "
                                 f"a rank would own no element")
        self.da_elem = PETSc.DMDA().create(
            dim=2, dof=1, sizes=(nelx, nely), proc_sizes=self.da.getProcSizes(),
            ownership_ranges=(lx, ly), stencil_width=max(1, halo),
            stencil_type=PETSc.DMDA.StencilType.BOX, comm=self.comm,
        )
        (xs, xe), (ys, ye) = self.da_elem.getRanges()
        self.slab = (slice(ys, ye), slice(xs, xe))
        self.slab_shape = (ye - ys, xe - xs)

        nodes = np.asarray(self.da.getElements(), dtype=np.int64).reshape(-1, 4)
        (gxs, gxe), (gys, gye) = self.da.getGhostRanges()
        gxm = gxe - gxs
        rows = gys + nodes[:, 0] // gxm
        cols = gxs + nodes[:, 0] % gxm
        want_r, want_c = np.meshgrid(np.arange(ys, ye), np.arange(xs, xe), indexing="ij")
        if rows.size != want_r.size or np.any(rows != want_r.ravel()) or np.any(cols != want_c.ravel()):
            raise RuntimeError("DMDAGetElements does not match the element DMDA ownership")
        self.n_local_dofs = 2 * gxm * (gye - gys)
        # Ghosted local DOF numbers, (n_local_elem, 8); int32 halves the largest index array.
        index_type = np.int32 if self.n_local_dofs < 2**31 else np.int64
        self.local_edofs = fe.nodes_to_dofs(nodes).astype(index_type)

        # Natural DOF number of every ghosted local DOF.
        gr, gc = np.meshgrid(np.arange(gys, gye), np.arange(gxs, gxe), indexing="ij")
        local_nodes = (gr * (nelx + 1) + gc).ravel()
        self.local_natural_dofs = np.empty(self.n_local_dofs, dtype=np.int64)
        self.local_natural_dofs[0::2] = 2 * local_nodes
        self.local_natural_dofs[1::2] = 2 * local_nodes + 1
        (oxs, oxe), (oys, oye) = self.da.getRanges()
        owned = (gr >= oys) & (gr < oye) & (gc >= oxs) & (gc < oxe)
        self.owned_local_dofs = np.repeat(np.flatnonzero(owned.ravel()) * 2, 2) + np.tile([0, 1], int(owned.sum()))

    def _setup_assembly(self):
        self._fixed_and_sizes()
        edofs = self.local_edofs
        rows = np.repeat(edofs, 8, axis=1).ravel()
        cols = np.tile(edofs, (1, 8)).ravel()
        fixed_owned = self.owned_local_dofs[self.fixed_local[self.owned_local_dofs]]
        all_rows = np.concatenate([rows, fixed_owned])
        all_cols = np.concatenate([cols, fixed_owned])
        indptr, indices, inverse, nnz = _csr_plan(all_rows, all_cols, self.n_local_dofs)
        n_elem_entries = rows.size
        self._indptr = indptr.astype(self.PETSc.IntType)
        self._indices = indices.astype(self.PETSc.IntType)
        self._nnz = nnz
        keep = ~(self.fixed_local[rows] | self.fixed_local[cols])
        # The values are linear in the moduli: data = A @ moduli, A[entry, element] = K0 entry
        # (0 in Dirichlet rows and columns).  CSR rows list their elements in increasing
        # order, so every entry is summed in element order, as the published scorer sums it.
        n_elem = edofs.shape[0]
        self._assembly_map = sp.csr_matrix(
            (np.tile(self.ke.ravel(), n_elem)[keep], (inverse[:n_elem_entries][keep],
                                                      np.repeat(np.arange(n_elem), 64)[keep])),
            shape=(nnz, n_elem))
        self._diag = np.bincount(inverse[n_elem_entries:], minlength=nnz).astype(float)
        if self.comm.getSize() == 1 and np.array_equal(self.local_natural_dofs, np.arange(self.n_local_dofs)):
            # One rank: local numbering is PETSc's, so K is built on our own CSR arrays
            # (MatCreateSeqAIJWithArrays) and assembling writes its values in place.
            self._values = self._diag.copy()
            self.K = self.PETSc.Mat().createAIJWithArrays(
                (self.n_local_dofs, self.n_local_dofs), (self._indptr, self._indices, self._values),
                comm=self.comm)
        else:
            self.K = self.da.createMatrix()
            self.K.setOption(self.PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, True)

    def _fixed_and_sizes(self):
        fixed_natural = self.loadcase.fixed_dofs()
        self.fixed_local = np.isin(self.local_natural_dofs, fixed_natural)
        self.n_fixed = fixed_natural.size
        self.n_free = self.loadcase.n_dofs - fixed_natural.size

    def _setup_stencil_assembly(self):
        PETSc = self.PETSc
        nely, nelx = self.loadcase.shape
        self._fixed_and_sizes()
        (oxs, oxe), (oys, oye) = self.da.getRanges()
        (gxs, gxe), (gys, gye) = self.da.getGhostRanges()
        gxm = gxe - gxs
        ny, nx = oye - oys, oxe - oxs
        n_nodes = ny * nx
        n_cols = 2 * len(_OFFSETS)
        jj, ii = np.meshgrid(np.arange(oys, oye, dtype=np.int32), np.arange(oxs, oxe, dtype=np.int32),
                             indexing="ij")
        jj, ii = jj.ravel(), ii.ravel()
        own = 2 * ((jj - gys) * gxm + (ii - gxs))  # local x DOF of every owned node, row-major
        # Columns of row (node, d): neighbour o's DOF d2, i.e. own + 2 * (dr * gxm + dc) + d2,
        # or the row itself where the neighbour is outside the grid (its value is 0 there).
        # Only the exceptions (nodes on the grid's edge) are stored; see _stencil_columns.
        pattern = np.array([[2 * (dr * gxm + dc) + d2 for (dr, dc) in _OFFSETS for d2 in (0, 1)]] * 2,
                           dtype=PETSc.IntType).reshape(-1)
        edge = np.flatnonzero((jj == 0) | (jj == nely) | (ii == 0) | (ii == nelx))
        edge_cols = np.empty((edge.size, 2, len(_OFFSETS), 2), dtype=PETSc.IntType)
        fixed = self.fixed_local
        zero = np.zeros((n_nodes, 2, len(_OFFSETS), 2), dtype=bool)
        for o, (dr, dc) in enumerate(_OFFSETS):
            nj, ni = jj + dr, ii + dc
            inside = (nj >= 0) & (nj <= nely) & (ni >= 0) & (ni <= nelx)
            neighbour = np.where(inside, 2 * ((nj - gys) * gxm + (ni - gxs)), own)
            for d2 in (0, 1):
                zero[:, :, o, d2] = (inside & fixed[neighbour + d2])[:, None]
                edge_cols[:, 0, o, d2] = np.where(inside, neighbour + d2, own)[edge]
                edge_cols[:, 1, o, d2] = np.where(inside, neighbour + d2, own + 1)[edge]
            del nj, ni, inside, neighbour
        # Dirichlet: zero fixed rows and fixed (in-grid) columns, 1 on the fixed diagonals.
        row_fixed = np.stack([fixed[own], fixed[own + 1]], axis=1)  # (nodes, d)
        zero |= row_fixed[:, :, None, None]
        centre = _OFFSETS.index((0, 0))
        self._zero_entries = np.flatnonzero(zero.ravel())
        del zero
        unit = np.flatnonzero(row_fixed.ravel())  # fixed rows, numbered node * 2 + d
        self._unit_entries = unit * (len(_OFFSETS) * 2) + centre * 2 + unit % 2
        self._own = own.astype(PETSc.IntType)
        self._pattern = pattern
        self._edge = edge
        self._edge_cols = edge_cols.reshape(edge.size, -1)
        self._rows = np.stack([own, own + 1], axis=1).reshape(-1).astype(PETSc.IntType)  # local row of each row
        self._stencil = stencil_table(self.ke)
        self._n_cols = n_cols
        self._node_box = (ny, nx)
        # Assembly runs over blocks of node rows, so only a block of values is ever held.
        self._block_rows = max(1, ASSEMBLY_BLOCK_NODES // max(nx, 1))
        self._moduli_box = np.zeros((ny + 1, nx + 1))  # elements (oys-1 .. oye-1) x (oxs-1 .. oxe-1)
        # Where the element halo lands in the moduli box (elements outside the grid stay 0).
        (exs, exe), (eys, eye) = self.da_elem.getGhostRanges()
        r0, r1 = max(oys - 1, 0), min(oye, nely)
        c0, c1 = max(oxs - 1, 0), min(oxe, nelx)
        if r0 < eys or r1 > eye or c0 < exs or c1 > exe:
            raise RuntimeError("element halo does not cover the elements around the owned nodes")
        self._box_dst = (slice(r0 - (oys - 1), r1 - (oys - 1)), slice(c0 - (oxs - 1), c1 - (oxs - 1)))
        self._box_src = (slice(r0 - eys, r1 - eys), slice(c0 - exs, c1 - exs))
        self._elem_global = self.da_elem.createGlobalVec()
        self._elem_local = self.da_elem.createLocalVec()
        self._elem_ghost_shape = (eye - eys, exe - exs)
        self._nnz = n_nodes * 2 * n_cols
        self.K = self.da.createMatrix()
        self.K.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, True)
        self.K.setOption(PETSc.Mat.Option.USE_INODES, multigrid.USE_INODES)

    def _setup_vectors(self):
        self.f = self.da.createGlobalVec()
        self.u = self.f.duplicate()
        self.r = self.f.duplicate()
        self._u_local = self.da.createLocalVec()
        forces = self.loadcase.force_vector()
        self.has_load = bool(np.any(forces))
        forces[self.loadcase.fixed_dofs()] = 0.0
        # Owned DOFs of the global vector, in the DMDA's local (x fastest, dof interleaved) order.
        self.f.array[:] = forces[self.local_natural_dofs[self.owned_local_dofs]]
        self.f_norm = self.f.norm()
        self.u.set(0.0)
        # A view of u's own memory (a sequential Vec never moves it), read without a call.
        self._u_view = self.u.array_r if self._values is not None else None

    def _setup_ksp(self, solver):
        PETSc = self.PETSc
        # -<prefix>pc_type mg|gamg on the command line picks the multigrid flavour itself.
        requested = PETSc.Options(self.prefix).getString("pc_type", "")
        if solver != "direct" and requested in ("mg", "gamg"):
            solver = self.solver = "mg" if requested == "mg" else "gamg"
        ksp = PETSc.KSP().create(comm=self.comm)
        ksp.setOptionsPrefix(self.prefix)
        ksp.setOperators(self.K)
        pc = ksp.getPC()
        defaults = {}
        if solver == "direct":
            ksp.setType(PETSc.KSP.Type.PREONLY)
            if self.comm.getSize() > 1:
                pc.setType(PETSc.PC.Type.LU)
                pc.setFactorSolverType(PETSc.Mat.SolverType.MUMPS)
            else:
                # K is SPD (symmetric Dirichlet rows): PETSc's Cholesky with nested dissection is
                # its fastest factorisation at 882 DOFs, 15% ahead of LU (benchmarks/factorisation.py).
                pc.setType(PETSc.PC.Type.CHOLESKY)
                pc.setFactorOrdering(PETSc.Mat.OrderingType.ND)
        else:
            # The rigid-body modes serve GAMG (also when chosen from the command line).
            if solver == "gamg":
                self._near_null = multigrid.rigid_body_modes(self)
                self.K.setNearNullSpace(self._near_null)
            defaults = configure_mg(ksp, self) if solver == "mg" else configure_gamg(ksp, self)
            ksp.setInitialGuessNonzero(True)  # warm start from the previous displacement
        # Defaults go into the options database so the command line can override
        # them; they are removed after the first set-up (multigrid reads its level
        # options only then) so that they never leak into another system.
        self._default_options = set_default_options(self.prefix, defaults)
        # The multigrid cycle in force (read before the defaults are cleared): for reports.
        self.mg_cycle = PETSc.Options(self.prefix).getString("pc_mg_cycle_type", "v").lower()
        ksp.setFromOptions()
        self.ksp = ksp

    # -- element fields -------------------------------------------------------------------------
    def slab_of(self, natural):
        """This rank's slab (row-major, flattened) of a natural (nely, nelx) element array."""
        return np.ascontiguousarray(np.asarray(natural, dtype=float).reshape(self.loadcase.shape)[self.slab]).ravel()

    def gather(self, slab, root=None):
        """Natural (nely, nelx) array of an element field, on every rank (or only on ``root``: None elsewhere)."""
        if self.comm.getSize() == 1:  # the slab is the whole grid
            return np.array(slab).reshape(self.loadcase.shape)
        mpi = self.comm.tompi4py()
        piece = (self.slab, np.asarray(slab).reshape(self.slab_shape))
        pieces = mpi.allgather(piece) if root is None else mpi.gather(piece, root=root)
        if pieces is None:
            return None
        out = np.empty(self.loadcase.shape, dtype=np.asarray(slab).dtype)
        for where, piece in pieces:
            out[where] = piece
        return out

    # -- solve ----------------------------------------------------------------------------------
    def assemble(self, moduli):
        """K for element moduli given as this rank's slab."""
        with timing.timed(timing.ASSEMBLY):
            if self.assembly == "elements":
                self._assemble_elements(moduli)
            else:
                self._assemble_stencil(moduli)

    def _assemble_stencil(self, moduli):
        self._elem_global.array[:] = moduli
        self.da_elem.globalToLocal(self._elem_global, self._elem_local)
        ghosted = self._elem_local.array_r.reshape(self._elem_ghost_shape)
        box = self._moduli_box
        box[self._box_dst] = ghosted[self._box_src]
        ny, nx = self._node_box
        n_cols = self._n_cols
        per_row = 2 * n_cols  # values of one node: 2 rows of 18
        insert = self.PETSc.InsertMode.ADD_VALUES
        K = self.K
        K.zeroEntries()
        shifted = np.empty((min(self._block_rows, ny), nx, 4))
        for j0 in range(0, ny, self._block_rows):
            j1 = min(j0 + self._block_rows, ny)
            block = shifted[:j1 - j0]
            # Node (j, i) is local node a of the element at (j, i) - _POS[a]; box row = element row + 1.
            for a, (ar, ac) in enumerate(_POS):
                block[:, :, a] = box[j0 + 1 - ar:j1 + 1 - ar, 1 - ac:nx + 1 - ac]
            values = (block.reshape(-1, 4) @ self._stencil).reshape(-1)
            first, last = j0 * nx * per_row, j1 * nx * per_row
            lo = np.searchsorted(self._zero_entries, first)
            hi = np.searchsorted(self._zero_entries, last)
            values[self._zero_entries[lo:hi] - first] = 0.0
            lo = np.searchsorted(self._unit_entries, first)
            hi = np.searchsorted(self._unit_entries, last)
            values[self._unit_entries[lo:hi] - first] = 1.0
            rows = self._rows[2 * j0 * nx:2 * j1 * nx]
            indptr = np.arange(0, rows.size * n_cols + 1, n_cols, dtype=self.PETSc.IntType)
            cols = self._stencil_columns(j0 * nx, j1 * nx)
            K.setValuesLocalIJV(indptr, cols, values, addv=insert, rowmap=rows)
        K.assemble()

    def _stencil_columns(self, n0, n1):
        """Local column indices of the rows of owned nodes n0..n1-1 (row-major, 36 a node)."""
        cols = self._own[n0:n1, None] + self._pattern[None, :]
        lo, hi = np.searchsorted(self._edge, (n0, n1))
        cols[self._edge[lo:hi] - n0] = self._edge_cols[lo:hi]
        return cols.reshape(-1)

    def _assemble_elements(self, moduli):
        moduli = np.ascontiguousarray(moduli, dtype=float)
        if self._values is not None:
            # The Dirichlet diagonal and the element sums never share an entry, so starting
            # from it and adding the product is the product plus it, to the bit.
            np.copyto(self._values, self._diag)
            csr.matvec(self._assembly_map, moduli, out=self._values)
            self.K.stateIncrease()  # the factorisation is redone only for a new state
            return
        data = self._assembly_map @ moduli
        data += self._diag
        K = self.K
        K.zeroEntries()
        K.setValuesLocalCSR(self._indptr, self._indices, data, addv=self.PETSc.InsertMode.ADD_VALUES)
        K.assemble()

    def solve(self, moduli):
        """Assemble, solve, and return the compliance f.u (+inf per docs/scoring.md, "Finite elements").

        ``self.u`` holds the displacements afterwards (zero when inf for lack of
        a load or of free DOFs).
        """
        if self.n_free == 0 or not self.has_load:
            self.u.set(0.0)
            return np.inf
        self.assemble(moduli)
        # A new operator for the KSP (also when assembled in place, where K's new state is what
        # makes the PC refactorise): the factorisation then happens in setUp, in sphyr_setup.
        self.ksp.setOperators(self.K)
        try:
            with timing.timed(timing.SETUP):
                self.ksp.setUp()
            if self._default_options is not None:
                clear_default_options(self.prefix, self._default_options)
                self._default_options = None
                if self.solver != "direct":
                    multigrid.plain_csr_kernels(self.ksp)
                    self.hierarchy = multigrid.hierarchy_info(self.ksp)
                view_once(self.ksp)  # -<prefix>ksp_view: once per distinct solver, not per solve
            with timing.timed(timing.SOLVE):
                self.ksp.solve(self.f, self.u)
        except self.PETSc.Error as err:
            if self.solver != "direct":
                self.u.set(0.0)
                raise SolverError(f"KSP ({self.ksp.getType()}/{self.ksp.getPC().getType()}) failed in PETSc "
                                  f"(error {err.ierr}); a coarse factorisation breaking down means a "
                                  f"singular design (severed load path)") from err
            # A factorisation that breaks down (zero pivot) is a singular design.
            self.u.set(0.0)
            return np.inf
        reason = self.ksp.getConvergedReason()
        self.last_iterations = self.ksp.getIterationNumber()
        if reason < 0:
            if self.solver == "direct":
                self.u.set(0.0)
                return np.inf
            self.u.set(0.0)  # never warm-start from a diverged iterate
            raise SolverError(
                f"KSP ({self.ksp.getType()}/{self.ksp.getPC().getType()}) did not converge: "
                f"{_reason_name(self.PETSc, reason)} after {self.last_iterations} iterations "
                f"(rtol {self.ksp.getTolerances()[0]:g}, max_it {self.ksp.getTolerances()[3]}); "
                f"a severed load path makes K singular, otherwise try -{self.prefix}ksp_max_it or "
                f"stronger smoothing (-{self.prefix}mg_levels_ksp_max_it)"
            )
        # A non-finite displacement makes the residual inf or NaN, which fails this test too.
        self.K.mult(self.u, self.r)
        self.r.axpy(-1.0, self.f)
        residual = self.r.norm()
        if not residual <= RESIDUAL_TOLERANCE * max(self.f_norm, 1.0):
            self.u.set(0.0)
            if not np.isfinite(residual):
                return np.inf
            if self.solver != "direct":
                # CG said converged, the true residual disagrees: an accuracy problem, not a design's.
                raise SolverError(f"KSP converged but ||K u - f|| = {residual:.3e} exceeds "
                                  f"{RESIDUAL_TOLERANCE:g} * max(||f||, 1); tighten -{self.prefix}ksp_rtol")
            return np.inf
        compliance = self.f.dot(self.u)
        if not np.isfinite(compliance) or compliance < 0.0:
            return np.inf
        return float(compliance)

    def local_displacements(self):
        """Ghosted local displacement array (for element-level quantities)."""
        if self._values is not None:
            return self._u_view  # one rank: the local numbering is the global one
        self.da.globalToLocal(self.u, self._u_local)
        return self._u_local.array_r

    def unit_energies(self):
        """u_e^T K0 u_e of every element of this rank's slab."""
        ue = self.local_displacements()[self.local_edofs]
        return np.einsum("ij,ij->i", ue @ self.ke, ue)  # 4x faster than one three-operand einsum

    def max_displacement(self):
        """Largest nodal displacement magnitude (collective)."""
        from mpi4py import MPI  # imported by petsc() already; not at the top, so --help needs no MPI

        nodal = self.u.array_r.reshape(-1, 2)
        local = float(np.max(np.hypot(nodal[:, 0], nodal[:, 1]))) if nodal.size else 0.0
        return self.comm.tompi4py().allreduce(local, op=MPI.MAX)

    def natural_displacements(self):
        """Natural-ordered displacement array (n_dofs,), on every rank."""
        mpi = self.comm.tompi4py()
        owned = self.local_natural_dofs[self.owned_local_dofs]
        pieces = mpi.allgather((owned, self.u.array_r.copy()))
        out = np.zeros(self.loadcase.n_dofs)
        for idx, vals in pieces:
            out[idx] = vals
        return out

    # -- life cycle -----------------------------------------------------------------------------
    def close(self):
        for attachment in getattr(self, "attachments", {}).values():
            attachment.close()
        self.attachments = {}
        for P in getattr(self, "_interpolations", None) or ():
            P.destroy()
        self._interpolations = None
        for name in ("ksp", "K", "_near_null", "f", "u", "r", "_u_local", "_elem_global", "_elem_local",
                     "da_elem", "da"):
            obj = getattr(self, name, None)
            if obj is not None:
                obj.destroy()
                setattr(self, name, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

