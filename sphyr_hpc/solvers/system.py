"""What every PETSc system shares: the grid on DMDAs, the vectors, the KSP and the solve.

Who owns what
-------------
A :class:`GridSystem` owns every PETSc handle it creates and destroys them in
:meth:`~GridSystem.close` (also a context manager):

* ``da``: nodal DMDA, dof 2, sizes (nelx+1, nely+1); its first axis is the
  grid column (x) and its second the grid row (y, *down*), so PETSc's natural
  ordering is exactly the natural DOF numbering of :mod:`sphyr_hpc.core.loadcase`.
* ``da_elem``: element DMDA, sizes (nelx, nely), whose ownership matches the
  elements ``DMDAGetElements`` hands each rank.  Element fields (densities,
  moduli, energies, sensitivities) live on it; locally each rank holds its box
  of elements row-major, called its *slab*.
* ``method``: the solver's part (below), which owns K and every other operator;
  ``ksp`` (options prefix ``prefix``), vectors ``f`` (forces, zero on fixed
  DOFs), ``u`` (displacements), ``r`` (residual).

Dirichlet conditions are symmetric in every method (fixed rows and columns
dropped, 1 on the fixed diagonal): K stays SPD, and the residual of the
modified system equals the residual on the free DOFs of the original one.

The solver's part
-----------------
What differs between the solvers is one object, ``method``, made for the
system by the factory the system is given: :class:`~.direct.DirectMethod`,
:class:`~.multigrid.MultigridMethod` or :class:`~.gamg.GAMGMethod`
(:func:`~.elasticity.elasticity_system` picks one).  Each offers the same few
things, and :class:`GridSystem` calls them in this order, all of it visible in
``__init__``, ``_set_up`` and ``solve`` below:

1. made (``method(system)``), it builds its operators: ``fine``, the finest
   level (``mat`` is K, ``assemble(moduli)``, ``nbytes``, ``close()``;
   ``values``: K's own CSR values when assembled in place on one rank, else
   None), and whatever else it needs (a multigrid's coarser levels and
   transfers);
2. ``configure(ksp)``: the KSP's and PC's types set in code; returns option
   defaults {name: value} that ``setFromOptions`` and the first set-up read
   (the command line wins over them);
3. ``options_read(ksp, options)``: after ``setFromOptions`` (``options``: the
   database under the prefix, defaults inserted): checks of what was given;
4. ``set_up(ksp, first)``: after every set-up of the KSP;
5. ``assemble(moduli, ksp)``: every operator for new element moduli (this
   rank's slab), and ``ksp`` told which of its operators changed;
6. ``close()``: every handle it owns.

``name`` (``"direct"``, ``"mg"``, ``"gamg"``) and ``iterative`` (an iterative
solve that fails raises SolverError; a direct one is a singular design) say
what it is.  The KSP is created once and reused: each :meth:`GridSystem.solve`
assembles, sets the new operator, sets the preconditioner up again (event
``sphyr_setup``) and, for the iterative solvers, starts from the linear
extrapolation of the last two solutions.
"""

import numpy as np

from ..core import discretisation as fe
from ..runtime import events
from ..runtime.petsc import inserted_options, petsc, view_once
from .base import RESIDUAL_TOLERANCE, LinearSystem, SolverError, residual_acceptable
from .fused import operator_of
from .layout import ElementLayout, SlabFields, node_dmda

# Element energies are computed this many elements at a time (two 4 MB temporaries, not two of
# 64 bytes an element: 130 MB at 2048x1024 elements a rank).
ENERGY_BLOCK = 65536


def _reason_name(PETSc, reason):
    for name in dir(PETSc.KSP.ConvergedReason):
        if not name.startswith("_") and getattr(PETSc.KSP.ConvergedReason, name) == reason:
            return f"{name} ({reason})"
    return str(reason)


class GridSystem(SlabFields, LinearSystem):
    """K(E) u = f for one :class:`~sphyr_hpc.core.loadcase.LoadCase` on ``comm``, solved by ``method``."""

    def __init__(self, loadcase, method, comm=None, prefix="sphyr_", nu=fe.NU, element_halo=1, options=None):
        """``method``: makes the solver's part for this system (see the module docstring);
        ``options``: more option defaults ({name: value} under ``prefix``) over the method's own; the
        command line still wins."""
        PETSc = petsc()
        self.PETSc = PETSc
        self.loadcase = loadcase
        self.comm = comm if comm is not None else PETSc.COMM_WORLD
        self.prefix = prefix
        self.ke = fe.element_stiffness(nu, dim=fe.grid_dimension(loadcase.shape))
        self.hierarchy = None        # multigrid levels as logged after the first set-up
        self.last_iterations = 0     # KSP iterations of the last solve
        self.method = self.ksp = None
        self.da = node_dmda(PETSc, loadcase.shape, self.comm, prefix)
        layout = ElementLayout(PETSc, self.da, loadcase.shape, self.comm, element_halo)
        self.da_elem, self.slab, self.slab_shape = layout.da_elem, layout.slab, layout.slab_shape
        self.n_local_dofs, self.local_edofs = layout.n_local_dofs, layout.local_edofs
        self.local_natural_dofs, self.owned_local_dofs = layout.local_natural_dofs, layout.owned_local_dofs
        fixed_natural = loadcase.fixed_dofs()
        self.fixed_local = np.isin(self.local_natural_dofs, fixed_natural)
        self.n_fixed = fixed_natural.size
        self.n_free = loadcase.n_dofs - fixed_natural.size
        try:
            # 1. The operators, K the finest level's.
            self.method = method(self)
        except BaseException:
            self.close()
            raise
        self.solver, self.iterative = self.method.name, self.method.iterative
        self.K = self.method.fine.mat
        self._values = self.method.fine.values  # K's own CSR values when assembled in place (one rank)
        self._setup_vectors()
        # 2.-3. The KSP: the method's defaults, the caller's over them, setFromOptions last.
        self.ksp = self._create_ksp(dict(options or {}))

    # -- set-up ---------------------------------------------------------------------------------
    def _setup_vectors(self):
        self.f = self.da.createGlobalVec()
        self.u = self.f.duplicate()
        self.r = self.f.duplicate()
        # Iterative solves start from the linear extrapolation of the last two solutions
        # (u_k + (u_k - u_{k-1})): along a SIMP run the designs change smoothly, and at 80x80
        # this saved a fifth to a third of the CG iterations over a plain warm start.
        self._u_previous = self.f.duplicate() if self.iterative else None
        self._u_saved = self.f.duplicate() if self.iterative else None
        self._warm_solves = 0  # solutions since the last reset that the next guess may use
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

    def _create_ksp(self, options):
        """The KSP: defaults in code (``method.configure``), the caller's ``options`` over them, and
        ``setFromOptions`` last.  The defaults are in the options database while setFromOptions
        reads them and again for the first set-up, where multigrid reads its level options."""
        ksp = self.PETSc.KSP().create(comm=self.comm)
        ksp.setOptionsPrefix(self.prefix)
        ksp.setOperators(self.K, self.K)
        with inserted_options(self.prefix, options):
            defaults = self.method.configure(ksp)
        self._defaults = {**defaults, **options}
        with inserted_options(self.prefix, self._defaults) as opts:
            ksp.setFromOptions()
            self.method.options_read(ksp, opts)
        return ksp

    def _set_up(self):
        """4. The KSP set up for the current K (the first time with the defaults inserted)."""
        with events.timed(events.SETUP):
            if self._defaults is None:  # set up before: the options were read then
                self.ksp.setUp()
                self.method.set_up(self.ksp, first=False)
                return
            with inserted_options(self.prefix, self._defaults):
                self.ksp.setUp()
                self.method.set_up(self.ksp, first=True)
                self.hierarchy = hierarchy_info(self.ksp)
        self._defaults = None
        view_once(self.ksp)  # -<prefix>ksp_view: once per distinct solver, not per solve

    def assemble(self, moduli):
        """5. K (and every operator of the method) for element moduli given as this rank's slab."""
        with events.timed(events.ASSEMBLY):
            self.method.assemble(moduli, self.ksp)

    # -- solve ----------------------------------------------------------------------------------
    def solve(self, moduli):
        """Assemble, solve, and return the compliance f.u (+inf per docs/scoring.md, "Finite elements").

        ``self.u`` holds the displacements afterwards (zero when inf for lack of
        a load or of free DOFs).
        """
        if self.n_free == 0 or not self.has_load:
            self.reset()
            return np.inf
        self.assemble(moduli)
        # A new operator for the KSP (also when assembled in place, where K's new state is what
        # makes the PC refactorise): the factorisation then happens in setUp, in sphyr_setup.
        self.ksp.setOperators(self.K, self.K)
        if self.iterative:
            self._initial_guess()
        try:
            self._set_up()
            with events.timed(events.SOLVE):
                self.ksp.solve(self.f, self.u)
        except self.PETSc.Error as err:
            self.reset()
            if not self.iterative:
                return np.inf  # a factorisation that breaks down (zero pivot) is a singular design
            raise SolverError(f"KSP ({self.ksp.getType()}/{self.ksp.getPC().getType()}) failed in PETSc "
                              f"(error {err.ierr}); a coarse factorisation breaking down means a "
                              f"singular design (severed load path)") from err
        reason = self.ksp.getConvergedReason()
        self.last_iterations = self.ksp.getIterationNumber()
        if reason < 0:
            self.reset()  # never warm-start from a diverged iterate
            if not self.iterative:
                return np.inf
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
        if not residual_acceptable(residual, self.f_norm):
            self.reset()
            if self.iterative and np.isfinite(residual):
                # CG said converged, the true residual disagrees: an accuracy problem, not a design's.
                raise SolverError(f"KSP converged but ||K u - f|| = {residual:.3e} exceeds "
                                  f"{RESIDUAL_TOLERANCE:g} * max(||f||, 1); tighten -{self.prefix}ksp_rtol")
            return np.inf
        compliance = self.f.dot(self.u)
        if not np.isfinite(compliance) or compliance < 0.0:
            return np.inf
        return float(compliance)

    def _initial_guess(self):
        """u_k + (u_k - u_{k-1}) in ``u`` once two solutions are known (u_k alone after one)."""
        self.u.copy(self._u_saved)
        if self._warm_solves >= 2:
            self.u.axpby(-1.0, 2.0, self._u_previous)
        self._u_previous, self._u_saved = self._u_saved, self._u_previous
        self._warm_solves += 1

    def reset(self):
        """Forget the last solutions: the next iterative solve starts from zero, not warm."""
        self.u.set(0.0)
        self._warm_solves = 0

    def warm_state(self):
        """What the next solve starts from: ``(solutions, {name: Vec})``, the number of solutions its
        initial guess may use and the last two of them (a checkpoint saves both; a direct solve
        has none).  :meth:`load_warm_state` puts them back, so that a resumed run's next solve
        takes the same initial guess."""
        vectors = {"solver_u": self.u}
        if self._u_previous is not None:
            vectors["solver_u_previous"] = self._u_previous
        return self._warm_solves, vectors

    def load_warm_state(self, solutions):
        """After the vectors of :meth:`warm_state` were read back in place: their count."""
        self._warm_solves = int(solutions) if self._u_previous is not None else 0

    # -- what the solution gives ----------------------------------------------------------------
    @property
    def in_place(self):
        """Whether K is assembled in place on one rank, natural DOF order (what a condensation needs)."""
        return self._values is not None

    def local_displacements(self):
        """Ghosted local displacement array (for element-level quantities)."""
        if self._values is not None:
            return self._u_view  # one rank: the local numbering is the global one
        self.da.globalToLocal(self.u, self._u_local)
        return self._u_local.array_r

    def unit_energies(self):
        """u_e^T K0 u_e of every element of this rank's slab (from the element modes in C where the
        finest level is applied from the moduli: it offers ``energies``)."""
        if hasattr(self.method.fine, "energies"):
            return self.method.fine.energies(self.local_displacements())
        return unit_energies(self.local_displacements(), self.local_edofs, self.ke)

    def max_displacement(self):
        """Largest nodal displacement magnitude (collective)."""
        from mpi4py import MPI  # imported by petsc() already; not at the top, so --help needs no MPI

        nodal = (self.u.array_r if self._u_view is None else self._u_view).reshape(-1, 2)
        local = float(np.hypot(nodal[:, 0], nodal[:, 1]).max()) if nodal.size else 0.0  # no np.max dispatch
        if self.comm.getSize() == 1:
            return local  # no peers: the pickled allreduce would cost as much as the rest
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

    # -- what a condensation and the swap polish need (one rank, assembled in place) ---------------
    def stiffness_pattern(self):
        """(indptr, indices) of K's CSR structure in natural DOF order (one rank, :attr:`in_place`)."""
        self._require_in_place()
        return self.method.fine.assembly.indptr, self.method.fine.assembly.indices

    def stiffness_values(self, moduli):
        """K's CSR values for element moduli, a new array in :meth:`stiffness_pattern`'s order."""
        self._require_in_place()
        return self.method.fine.assembly.values(moduli)

    def factor_solve(self, rhs):
        """K^{-1} rhs (natural order, columns) with the factorisation of the last solve (one rank,
        a factorising preconditioner: the direct solver's).

        One ``MatMatSolve`` for all the columns (PETSc's dense matrices are
        column-major: the numpy array goes in Fortran order, no copy of PETSc's).
        """
        self._require_in_place()
        PETSc = self.PETSc
        factor = self.ksp.getPC().getFactorMatrix()
        n, m = rhs.shape
        B = PETSc.Mat().createDense((n, m), array=np.asfortranarray(rhs, dtype=float), comm=PETSc.COMM_SELF)
        X = PETSc.Mat().createDense((n, m), comm=PETSc.COMM_SELF)
        X.setUp()
        factor.matSolve(B, X)
        out = X.getDenseArray().copy()
        B.destroy()
        X.destroy()
        return out

    def _require_in_place(self):
        if self._values is None:
            raise RuntimeError("only a one-rank system assembled in place offers this")

    # -- life cycle -----------------------------------------------------------------------------
    def close(self):
        """6. The method's operators, then the KSP, the vectors and the DMDAs."""
        if self.method is not None:
            self.method.close()
            self.K = None
        for name in ("ksp", "f", "u", "r", "_u_previous", "_u_saved", "_u_local", "da_elem", "da"):
            obj = getattr(self, name, None)
            if obj is not None:
                obj.destroy()
                setattr(self, name, None)


def unit_energies(u, edofs, ke):
    """u_e^T K0 u_e of every element (local displacements ``u``, element DOFs ``edofs``)."""
    n = edofs.shape[0]
    if n <= ENERGY_BLOCK:
        ue = u[edofs]
        return np.einsum("ij,ij->i", ue @ ke, ue)  # one matrix product, then row dots
    out = np.empty(n)
    for a in range(0, n, ENERGY_BLOCK):  # a block at a time: no (n, 8) temporaries
        ue = u[edofs[a:a + ENERGY_BLOCK]]
        out[a:a + ENERGY_BLOCK] = np.einsum("ij,ij->i", ue @ ke, ue)
    return out


def hierarchy_info(ksp):
    """Levels of a PCMG/PCGAMG preconditioner after set-up, finest first.

    Returns a list of dicts (``level``, ``rows``, ``nonzeros``) and the operator
    complexity (sum of nonzeros over the fine level's), or None for another
    preconditioner.  Collective.
    """
    pc = ksp.getPC()
    if pc.getType() not in ("mg", "gamg"):
        return None
    n = pc.getMGLevels()
    rows = []
    for level in range(n - 1, -1, -1):
        smoother = pc.getMGCoarseSolve() if level == 0 else pc.getMGSmoother(level)
        A = smoother.getOperators()[0]
        fine = operator_of(A)  # applied from the moduli: the nonzeros it stands for
        nonzeros = fine.nnz if fine is not None else int(A.getInfo(A.InfoType.GLOBAL_SUM)["nz_used"])
        rows.append({"level": level, "rows": A.getSize()[0], "nonzeros": nonzeros})
    complexity = sum(r["nonzeros"] for r in rows) / rows[0]["nonzeros"] if rows and rows[0]["nonzeros"] else None
    return rows, complexity
