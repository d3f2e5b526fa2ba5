"""What the three PETSc systems share: the grid on DMDAs, the vectors, the KSP and the solve.

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
* ``K`` (made by the subclass), ``ksp`` (options prefix ``prefix``), vectors
  ``f`` (forces, zero on fixed DOFs), ``u`` (displacements), ``r`` (residual).

Dirichlet conditions are symmetric in every subclass (fixed rows and columns
dropped, 1 on the fixed diagonal): K stays SPD, and the residual of the
modified system equals the residual on the free DOFs of the original one.

The subclasses are the three solvers: :class:`~.direct.DirectSystem`,
:class:`~.multigrid.MultigridSystem` and :class:`~.gamg.GAMGSystem`.  Each
builds its operator (:meth:`GridSystem._build_operator`), sets its KSP's
defaults in code (:meth:`GridSystem._configure`), and assembles K for new
moduli (:meth:`GridSystem.assemble`); ``setFromOptions`` is called last, so any
``-<prefix>ksp_*``/``-<prefix>pc_*`` option on the command line wins.  The
KSP is created once and reused: each :meth:`GridSystem.solve` sets the new
operator, sets the preconditioner up again (event ``sphyr_setup``) and, for the
iterative solvers, starts from the linear extrapolation of the last two
solutions.
"""

import numpy as np

from ..core import discretisation as fe
from ..runtime import events
from ..runtime.petsc import inserted_options, petsc, view_once
from .base import RESIDUAL_TOLERANCE, LinearSystem, SolverError, residual_acceptable
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
    """K(E) u = f for one :class:`~sphyr_hpc.core.loadcase.LoadCase` on ``comm`` (a solver's base)."""

    solver = None       # "direct", "mg" or "gamg": the subclass's name for itself
    iterative = True    # an iterative solve that fails raises SolverError; a direct one is a singular design

    def __init__(self, loadcase, comm=None, prefix="sphyr_", nu=fe.NU, element_halo=1, options=None):
        """``options``: more option defaults ({name: value} under ``prefix``) over the solver's own;
        the command line still wins."""
        PETSc = petsc()
        self.PETSc = PETSc
        self.loadcase = loadcase
        self.comm = comm if comm is not None else PETSc.COMM_WORLD
        self.prefix = prefix
        self.ke = fe.element_stiffness(nu, dim=fe.grid_dimension(loadcase.shape))
        self.hierarchy = None        # multigrid levels as logged after the first set-up
        self.multigrid = None        # the multigrid set-up (levels, interpolations), MultigridSystem only
        self.last_iterations = 0     # KSP iterations of the last solve
        self._values = None          # K's own CSR values when assembled in place (one rank)
        self._options = dict(options or {})  # the caller's option defaults: K's build reads them too
        self.da = node_dmda(PETSc, loadcase.shape, self.comm, prefix)
        layout = ElementLayout(PETSc, self.da, loadcase.shape, self.comm, element_halo)
        self.da_elem, self.slab, self.slab_shape = layout.da_elem, layout.slab, layout.slab_shape
        self.n_local_dofs, self.local_edofs = layout.n_local_dofs, layout.local_edofs
        self.local_natural_dofs, self.owned_local_dofs = layout.local_natural_dofs, layout.owned_local_dofs
        fixed_natural = loadcase.fixed_dofs()
        self.fixed_local = np.isin(self.local_natural_dofs, fixed_natural)
        self.n_fixed = fixed_natural.size
        self.n_free = loadcase.n_dofs - fixed_natural.size
        self.K = self._build_operator()
        self._setup_vectors()
        self.ksp = self._create_ksp(self._options)

    # -- what a solver provides ---------------------------------------------------------------
    def _build_operator(self):
        """K (and whatever assembles it), before the vectors and the KSP exist."""
        raise NotImplementedError

    def _configure(self, ksp):
        """Types and tolerances of ``ksp`` set in code; returns option defaults {name: value} that
        ``setFromOptions`` and the first set-up read (the command line wins over them)."""
        raise NotImplementedError

    def assemble(self, moduli):
        """K for element moduli given as this rank's slab."""
        raise NotImplementedError

    def _after_options(self, ksp, options):
        """After ``setFromOptions`` (``options``: the database under the prefix, defaults inserted)."""

    def _after_setup(self, first):
        """After every set-up of the KSP (``first``: the first, with the defaults still inserted)."""

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
        """The KSP: defaults in code (:meth:`_configure`), the caller's ``options`` over them, and
        ``setFromOptions`` last.  The defaults are in the options database while setFromOptions
        reads them and again for the first set-up, where multigrid reads its level options."""
        ksp = self.PETSc.KSP().create(comm=self.comm)
        ksp.setOptionsPrefix(self.prefix)
        ksp.setOperators(self.K, self.K)
        with inserted_options(self.prefix, options):
            defaults = self._configure(ksp)
        self._defaults = {**defaults, **options}
        with inserted_options(self.prefix, self._defaults) as opts:
            ksp.setFromOptions()
            self._after_options(ksp, opts)
        return ksp

    def _set_up(self):
        with events.timed(events.SETUP):
            if self._defaults is None:  # set up before: the options were read then
                self.ksp.setUp()
                self._after_setup(first=False)
                return
            with inserted_options(self.prefix, self._defaults):
                self.ksp.setUp()
                self._after_setup(first=True)
        self._defaults = None
        view_once(self.ksp)  # -<prefix>ksp_view: once per distinct solver, not per solve

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
        """u_e^T K0 u_e of every element of this rank's slab."""
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

    # -- life cycle -----------------------------------------------------------------------------
    def _owned_objects(self):
        """What the subclass owns besides the PETSc handles below (each with ``close``)."""
        return ()

    def close(self):
        for owned in self._owned_objects():
            if owned is not None and hasattr(owned, "close"):
                owned.close()
        for name in ("ksp", "K", "f", "u", "r", "_u_previous", "_u_saved", "_u_local", "da_elem", "da"):
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
