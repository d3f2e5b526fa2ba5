"""The linear-elastic system of one load case, distributed with PETSc (SPEC sections 3-4).

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
The CSR structure of each rank's element contributions in *local* (ghosted)
DOF numbering is computed once; assembling a new modulus field is then one
``np.bincount`` and one ``MatSetValuesLocal``-style CSR call.  Dirichlet
conditions are imposed symmetrically: every contribution in a fixed row or
column is dropped and the fixed diagonal is 1, so the operator stays SPD and
CG/multigrid apply.  The residual of the modified system equals the residual
on the free DOFs of the original one.

Solver
------
``solver="direct"`` (default for small systems): ``preonly`` + LU (MUMPS on
several ranks).  ``solver="mg"``: CG + geometric multigrid on the DMDA
hierarchy.  Either way ``setFromOptions`` is called last, so any
``-<prefix>ksp_*``/``-<prefix>pc_*`` option on the command line wins.
"""

import numpy as np
from mpi4py import MPI

from .._petsc import petsc
from .. import discretisation as fe
from .multigrid import clear_default_options, configure_mg, set_default_options

RESIDUAL_TOLERANCE = 1e-6
# Above this many DOFs the default solver is CG + multigrid instead of LU.
DIRECT_SOLVER_MAX_DOFS = 200_000


class SolverError(RuntimeError):
    """An iterative solve that did not converge (never turned into a number)."""


def _csr_plan(rows, cols, n_rows):
    """CSR pattern of summed (row, col) pairs and the map from pairs to entries."""
    keys = rows.astype(np.int64) * n_rows + cols.astype(np.int64)
    unique, inverse = np.unique(keys, return_inverse=True)
    u_rows, u_cols = np.divmod(unique, n_rows)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(u_rows, minlength=n_rows), out=indptr[1:])
    return indptr, u_cols, inverse, unique.size


class ElasticitySystem:
    """K(E) u = f for one :class:`~sphyr_hpc.loadcase.LoadCase` on ``comm``."""

    def __init__(self, loadcase, comm=None, prefix="sphyr_", nu=fe.NU, solver=None, element_halo=1):
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
        da.setUp()
        da.setElementType(PETSc.DMDA.ElementType.Q1)
        da.setUniformCoordinates(0.0, float(nelx), 0.0, float(nely))
        self.da = da
        self._setup_elements(element_halo)
        self._setup_assembly()
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
            raise ValueError(f"grid {nely}x{nelx} is too small for {self.comm.getSize()} ranks")
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
        self.local_edofs = fe.nodes_to_dofs(nodes)  # ghosted local DOF numbers, (n_local_elem, 8)
        self.n_local_dofs = 2 * gxm * (gye - gys)

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
        lc = self.loadcase
        fixed_natural = lc.fixed_dofs()
        self.fixed_local = np.isin(self.local_natural_dofs, fixed_natural)
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
        self._elem_inverse = inverse[:n_elem_entries]
        keep = ~(self.fixed_local[rows] | self.fixed_local[cols])
        self._elem_keep = keep.reshape(-1, 64)
        self._diag = np.bincount(inverse[n_elem_entries:], minlength=nnz).astype(float)
        self.K = self.da.createMatrix()
        self.K.setOption(self.PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, True)
        self.n_fixed = fixed_natural.size
        self.n_free = lc.n_dofs - fixed_natural.size

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

    def _setup_ksp(self, solver):
        PETSc = self.PETSc
        if solver is None:
            solver = "direct" if self.loadcase.n_dofs <= DIRECT_SOLVER_MAX_DOFS else "mg"
        if solver not in ("direct", "mg"):
            raise ValueError(f"unknown solver {solver!r}: expected 'direct' or 'mg'")
        self.solver = solver
        ksp = PETSc.KSP().create(comm=self.comm)
        ksp.setOptionsPrefix(self.prefix)
        ksp.setOperators(self.K)
        pc = ksp.getPC()
        defaults = {}
        if solver == "direct":
            ksp.setType(PETSc.KSP.Type.PREONLY)
            pc.setType(PETSc.PC.Type.LU)
            if self.comm.getSize() > 1:
                pc.setFactorSolverType(PETSc.Mat.SolverType.MUMPS)
        else:
            defaults = configure_mg(ksp, self)
        # Defaults go into the options database so the command line can override
        # them; they are removed after the first set-up (multigrid reads its level
        # options only then) so that they never leak into another system.
        self._default_options = set_default_options(self.prefix, defaults)
        ksp.setFromOptions()
        self.ksp = ksp

    # -- element fields -------------------------------------------------------------------------
    def slab_of(self, natural):
        """This rank's slab (row-major, flattened) of a natural (nely, nelx) element array."""
        return np.ascontiguousarray(np.asarray(natural, dtype=float).reshape(self.loadcase.shape)[self.slab]).ravel()

    def gather(self, slab):
        """Natural (nely, nelx) array of an element field, on every rank."""
        pieces = self.comm.tompi4py().allgather((self.slab, np.asarray(slab).reshape(self.slab_shape)))
        out = np.empty(self.loadcase.shape, dtype=np.asarray(slab).dtype)
        for where, piece in pieces:
            out[where] = piece
        return out

    # -- solve ----------------------------------------------------------------------------------
    def assemble(self, moduli):
        """K for element moduli given as this rank's slab."""
        values = (np.asarray(moduli, dtype=float)[:, None] * self.ke.ravel()[None, :]) * self._elem_keep
        data = np.bincount(self._elem_inverse, weights=values.ravel(), minlength=self._nnz) + self._diag
        K = self.K
        K.zeroEntries()
        K.setValuesLocalCSR(self._indptr, self._indices, data, addv=self.PETSc.InsertMode.ADD_VALUES)
        K.assemble()

    def solve(self, moduli):
        """Assemble, solve, and return the compliance f.u (+inf per SPEC section 3).

        ``self.u`` holds the displacements afterwards (zero when inf for lack of
        a load or of free DOFs).
        """
        mpi = self.comm.tompi4py()
        if self.n_free == 0 or not self.has_load:
            self.u.set(0.0)
            return np.inf
        self.assemble(moduli)
        self.ksp.setOperators(self.K)
        try:
            if self._default_options is not None:
                self.ksp.setUp()
                clear_default_options(self.prefix, self._default_options)
                self._default_options = None
            self.ksp.solve(self.f, self.u)
        except self.PETSc.Error:
            # A factorisation that breaks down (zero pivot) is a singular design.
            self.u.set(0.0)
            return np.inf
        reason = self.ksp.getConvergedReason()
        if reason < 0:
            if self.solver == "direct":
                self.u.set(0.0)
                return np.inf
            raise SolverError(
                f"KSP did not converge (reason {reason}) after {self.ksp.getIterationNumber()} iterations"
            )
        if not mpi.allreduce(bool(np.all(np.isfinite(self.u.array_r))), op=MPI.LAND):
            self.u.set(0.0)
            return np.inf
        self.K.mult(self.u, self.r)
        self.r.axpy(-1.0, self.f)
        if self.r.norm() > RESIDUAL_TOLERANCE * max(self.f_norm, 1.0):
            self.u.set(0.0)
            return np.inf
        compliance = self.f.dot(self.u)
        if not np.isfinite(compliance) or compliance < 0.0:
            return np.inf
        return float(compliance)

    def local_displacements(self):
        """Ghosted local displacement array (for element-level quantities)."""
        self.da.globalToLocal(self.u, self._u_local)
        return self._u_local.array_r

    def unit_energies(self):
        """u_e^T K0 u_e of every element of this rank's slab."""
        ue = self.local_displacements()[self.local_edofs]
        return np.einsum("ij,jk,ik->i", ue, self.ke, ue)

    def max_displacement(self):
        """Largest nodal displacement magnitude (collective)."""
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
        for name in ("ksp", "K", "f", "u", "r", "_u_local", "da_elem", "da"):
            obj = getattr(self, name, None)
            if obj is not None:
                obj.destroy()
                setattr(self, name, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

