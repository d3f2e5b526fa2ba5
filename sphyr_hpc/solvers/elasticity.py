"""The linear-elastic system of one load case, distributed with PETSc (docs/scoring.md, "Finite elements").

Who owns what
-------------
:class:`ElasticitySystem` owns every PETSc handle it creates and destroys them
in :meth:`close` (also a context manager):

* ``da``: nodal DMDA, dof 2, sizes (nelx+1, nely+1); its first axis is the
  grid column (x) and its second the grid row (y, *down*), so PETSc's natural
  ordering is exactly the natural DOF numbering of :mod:`sphyr_hpc.core.loadcase`.
* ``da_elem``: element DMDA, sizes (nelx, nely), whose ownership matches the
  elements ``DMDAGetElements`` hands each rank.  Element fields (densities,
  moduli, energies, sensitivities) live on it; locally each rank holds its box
  of elements row-major, called its *slab* below.
* ``K`` (from the DMDA: SBAIJ with geometric multigrid, ``-<prefix>mat_type``
  to choose; AIJ otherwise), ``ksp`` (options prefix ``prefix``), vectors
  ``f`` (forces, zero on fixed DOFs), ``u`` (displacements), ``r`` (residual).

Assembly
--------
:mod:`sphyr_hpc.solvers.assembly` builds K from element moduli:
``assembly="elements"`` (the default with the direct solver) as one sparse
product into CSR values that, on one rank, are K's own
(``MatCreateSeqAIJWithArrays``: assembled in place); ``assembly="stencil"``
(the default with GAMG; ``-<prefix>mat_assembly stencil`` with geometric
multigrid) node row by node row, without an index map; with geometric
multigrid and SBAIJ by default node row by node row straight into K's storage
(:class:`~sphyr_hpc.solvers.assembly.StorageAssembly`, ``storage``), or
element by element in 2x2 node blocks
(:class:`~sphyr_hpc.solvers.assembly.ElementBlockAssembly`,
``-<prefix>mat_assembly blocks``, the default with other storage), and the
coarse operators with it (:mod:`sphyr_hpc.solvers.grid_galerkin`).  Dirichlet conditions are symmetric either way; the residual of the
modified system equals the residual on the free DOFs of the original one.

Solver
------
``solver="direct"`` (default up to ``DIRECT_SOLVER_MAX_DOFS``): ``preonly`` +
Cholesky of K with nested dissection on one rank, LU with MUMPS on several.
With ``-<prefix>block_cholesky`` (one rank, up to ``BLOCK_CHOLESKY_MAX_DOFS``)
the factorised matrix is ``P`` instead, a copy of K's upper triangle in 2x2
node blocks (SBAIJ, natural order; its values gathered from K's after every
assembly): PETSc's block Cholesky kernels factorise it in about half the time
(``benchmarks/results/factorisation.md``), but they invert each 2x2 pivot
block explicitly, which is not backward stable on SPhyR's designs: void cells
(Emin = 1e-9) beside solid ones leave ill-conditioned pivot blocks, the
residual grows from 1e-13 to 1e-9 and the displacement of a node held by void
cells only moves by up to 4 % (``max_displacement``; the compliance by
3e-9).  An ordering, factor package or PC type given under the prefix always
factorises K itself.
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

import sys

import numpy as np

from ..runtime.petsc import inserted_options, petsc, seqsbaij_values, view_once
from ..core import discretisation as fe
from ..runtime import events as timing
from ..runtime import huge_pages
from ..runtime.native import NativeUnavailable
from . import multigrid
from .assembly import ElementAssembly, ElementBlockAssembly, StencilAssembly, StorageAssembly
from .direct import BlockCopy, configure_direct, factor_solve
from . import matfree
from .layout import ElementLayout, PartitionError, SlabFields, node_dmda  # noqa: F401  (PartitionError: re-exported)
from .base import RESIDUAL_TOLERANCE, LinearSystem, residual_acceptable
from .multigrid import configure_gamg, configure_mg

# Above this many DOFs the default solver is CG + multigrid instead of LU.
DIRECT_SOLVER_MAX_DOFS = 200_000
# With -<prefix>block_cholesky, up to this many DOFs a one-rank direct solve factorises the SBAIJ copy P
# of K (natural order) instead of K (AIJ, nested dissection): numeric factorisation 0.26-0.5x the time
# at 10x10, 0.53x at 20x20, 0.91x at 40x40 (3362 DOFs), but 1.37x at 60x60, where the natural order's
# band fill has outgrown nested dissection's (benchmarks/results/factorisation.md).  Off by default:
# less accurate on designs with void cells (module docstring, "Solver").
BLOCK_CHOLESKY_MAX_DOFS = 4000
BLOCK_CHOLESKY_OPTION = "block_cholesky"
# Options under the prefix that ask for a factorisation of K itself (SBAIJ allows no reordering).
_FACTOR_OPTIONS = ("pc_type", "pc_factor_mat_ordering_type", "pc_factor_mat_solver_type")
SOLVERS = ("direct", "mg", "gamg")
# Element energies are computed this many elements at a time (two 4 MB temporaries, not two of
# 64 bytes an element: 130 MB at 2048x1024 elements a rank).
ENERGY_BLOCK = 65536
ASSEMBLIES = ("elements", "stencil")
# ``-<prefix>mat_type shell`` (the default with geometric multigrid): the finest level applied from
# the element moduli, no stored K (sphyr_hpc.solvers.matfree).
MATRIX_FREE = "shell"
_FALLBACK_SAID = []  # the no-compiler warning is printed once a process


class SolverError(RuntimeError):
    """An iterative solve that did not converge (never turned into a number)."""


def _reason_name(PETSc, reason):
    for name in dir(PETSc.KSP.ConvergedReason):
        if not name.startswith("_") and getattr(PETSc.KSP.ConvergedReason, name) == reason:
            return f"{name} ({reason})"
    return str(reason)


class ElasticitySystem(SlabFields, LinearSystem):
    """K(E) u = f for one :class:`~sphyr_hpc.core.loadcase.LoadCase` on ``comm``."""

    def __init__(self, loadcase, comm=None, prefix="sphyr_", nu=fe.NU, solver=None, element_halo=1,
                 assembly=None, options=None):
        """``options``: more option defaults ({name: value} under ``prefix``) over the solver's own;
        the command line still wins."""
        PETSc = petsc()
        self.PETSc = PETSc
        self.loadcase = loadcase
        self.comm = comm if comm is not None else PETSc.COMM_WORLD
        self.prefix = prefix
        nely, nelx = loadcase.shape
        self.ke = fe.element_stiffness(nu)

        self.da = node_dmda(PETSc, loadcase.shape, self.comm, prefix)
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
        self.multigrid = None        # the multigrid set-up (levels, interpolations) with solver="mg"
        self.last_iterations = 0     # KSP iterations of the last solve
        self._values = None          # K's own CSR values when assembled in place (one rank)
        self.blocks = None           # the SBAIJ copy of K that is factorised (one rank, small, direct) ...
        self.P = None                # ... and its matrix
        self.attachments = {}        # what lives and dies with this system (closed in close() if closable)
        self._setup_elements(element_halo)
        self._fixed_and_sizes()
        if assembly == "elements":
            self._setup_assembly()
        else:
            self._assembly, self.K = _grid_operator(self, options)
            self._nnz = self._assembly.nnz
        self._setup_vectors()
        self.ksp = _create_ksp(self, solver, options or {})

    # -- set-up ---------------------------------------------------------------------------------
    def _setup_elements(self, halo):
        layout = ElementLayout(self.PETSc, self.da, self.loadcase.shape, self.comm, halo)
        self.da_elem, self.slab, self.slab_shape = layout.da_elem, layout.slab, layout.slab_shape
        self.n_local_dofs, self.local_edofs = layout.n_local_dofs, layout.local_edofs
        self.local_natural_dofs, self.owned_local_dofs = layout.local_natural_dofs, layout.owned_local_dofs

    def _setup_assembly(self):
        fixed_owned = self.owned_local_dofs[self.fixed_local[self.owned_local_dofs]]
        self._assembly = ElementAssembly(self.local_edofs, self.fixed_local, fixed_owned, self.ke,
                                         self.n_local_dofs, index_type=self.PETSc.IntType)
        self._nnz = self._assembly.nnz
        if self.comm.getSize() == 1 and np.array_equal(self.local_natural_dofs, np.arange(self.n_local_dofs)):
            # One rank: local numbering is PETSc's, so K is built on our own CSR arrays
            # (MatCreateSeqAIJWithArrays) and assembling writes its values in place.
            # One more value, always 0, after K's: what P's block entries outside K's pattern read.
            values = np.append(self._assembly.diagonal, 0.0)
            self._values = values[:-1]
            self.K = self.PETSc.Mat().createAIJWithArrays(
                (self.n_local_dofs, self.n_local_dofs),
                (self._assembly.indptr, self._assembly.indices, self._values), comm=self.comm)
            if self.solver == "direct" and self._block_cholesky():
                # seqsbaij_values looked up here, in this module, at each set-up (tests replace it).
                self.blocks = BlockCopy(self.PETSc, self._assembly, values, self.comm, seqsbaij_values)
                self.P = self.blocks.P
        else:
            self.K = self.da.createMatrix()
            self.K.setOption(self.PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, True)

    def _block_cholesky(self):
        """Whether to factorise the SBAIJ copy P (see the module docstring)."""
        options = self.PETSc.Options(self.prefix)
        return (options.getBool(BLOCK_CHOLESKY_OPTION, False)
                and self.n_local_dofs <= BLOCK_CHOLESKY_MAX_DOFS
                and not any(options.hasName(name) for name in _FACTOR_OPTIONS))

    @property
    def preconditioner_matrix(self):
        """What the PC factorises (PETSc's Pmat): the SBAIJ copy P where there is one, else K."""
        return self.P if self.P is not None else self.K

    def _fixed_and_sizes(self):
        fixed_natural = self.loadcase.fixed_dofs()
        self.fixed_local = np.isin(self.local_natural_dofs, fixed_natural)
        self.n_fixed = fixed_natural.size
        self.n_free = self.loadcase.n_dofs - fixed_natural.size

    def _setup_vectors(self):
        self.f = self.da.createGlobalVec()
        self.u = self.f.duplicate()
        self.r = self.f.duplicate()
        # Iterative solves start from the linear extrapolation of the last two solutions
        # (u_k + (u_k - u_{k-1})): along a SIMP run the designs change smoothly, and at 80x80
        # this saved a fifth to a third of the CG iterations over a plain warm start.
        self._u_previous = self.f.duplicate() if self.solver != "direct" else None
        self._u_saved = self.f.duplicate() if self.solver != "direct" else None
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

    # -- solve ----------------------------------------------------------------------------------
    def assemble(self, moduli):
        """K for element moduli given as this rank's slab."""
        with timing.timed(timing.ASSEMBLY):
            if self.assembly == "stencil":
                self._assembly.assemble(self.K, moduli)
                self._update_coarse(moduli)
            elif self._values is not None:
                self._assembly.values(moduli, out=self._values)  # K's own values, in place
                self.K.assemble()  # a new state (refactorise) and stale cached data dropped (SOR's diagonal)
                if self.blocks is not None:
                    self.blocks.refill()
                self._update_coarse(moduli)
            else:
                K = self.K
                K.zeroEntries()
                K.setValuesLocalCSR(self._assembly.indptr, self._assembly.indices, self._assembly.values(moduli),
                                    addv=self.PETSc.InsertMode.ADD_VALUES)
                K.assemble()

    def _update_coarse(self, moduli):
        """The coarse operators from the moduli (multigrid), their smoothers to be set up anew."""
        if self.multigrid is not None and self.multigrid.coarse is not None:
            self.multigrid.coarse.update(moduli)
            multigrid.renew_coarse_smoothers(self.ksp)

    # -- what a condensation needs (one rank, assembled in place) --------------------------------
    @property
    def in_place(self):
        """Whether K is assembled in place on one rank, natural DOF order (see :meth:`stiffness_values`)."""
        return self._values is not None

    def stiffness_pattern(self):
        """(indptr, indices) of K's CSR structure in natural DOF order (one rank, :attr:`in_place`)."""
        self._require_in_place()
        return self._assembly.indptr, self._assembly.indices

    def stiffness_values(self, moduli):
        """K's CSR values for element moduli, a new array in :meth:`stiffness_pattern`'s order."""
        self._require_in_place()
        return self._assembly.values(moduli)

    def factor_solve(self, rhs):
        """K^{-1} rhs (natural order, columns) with the factorisation of the last solve (direct, one rank)."""
        self._require_in_place()
        if self.solver != "direct":
            raise RuntimeError("factor_solve needs the direct solver")
        return factor_solve(self.PETSc, self.ksp, rhs)

    def _require_in_place(self):
        if self._values is None:
            raise RuntimeError("only a one-rank system assembled in place (assembly='elements') offers this")

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
        self.ksp.setOperators(self.K, self.preconditioner_matrix)
        if self._u_previous is not None:
            self._initial_guess()
        try:
            if self._defaults is None:  # set up before: the options were read then
                with timing.timed(timing.SETUP):
                    self.ksp.setUp()
                    multigrid.set_up_fused_smoothers(self.ksp)
            else:
                _first_setup(self)
            with timing.timed(timing.SOLVE):
                self.ksp.solve(self.f, self.u)
        except self.PETSc.Error as err:
            if self.solver != "direct":
                self.reset()
                raise SolverError(f"KSP ({self.ksp.getType()}/{self.ksp.getPC().getType()}) failed in PETSc "
                                  f"(error {err.ierr}); a coarse factorisation breaking down means a "
                                  f"singular design (severed load path)") from err
            # A factorisation that breaks down (zero pivot) is a singular design.
            self.reset()
            return np.inf
        reason = self.ksp.getConvergedReason()
        self.last_iterations = self.ksp.getIterationNumber()
        if reason < 0:
            if self.solver == "direct":
                self.reset()
                return np.inf
            self.reset()  # never warm-start from a diverged iterate
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

    def local_displacements(self):
        """Ghosted local displacement array (for element-level quantities)."""
        if self._values is not None:
            return self._u_view  # one rank: the local numbering is the global one
        self.da.globalToLocal(self.u, self._u_local)
        return self._u_local.array_r

    def unit_energies(self):
        """u_e^T K0 u_e of every element of this rank's slab (K applied from the moduli: in C)."""
        fine = matfree.operator_of(self.K)
        u = self.local_displacements()
        return fine.energies(u) if fine is not None else unit_energies(u, self.local_edofs, self.ke)

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
    def close(self):
        for attachment in getattr(self, "attachments", {}).values():
            if hasattr(attachment, "close"):
                attachment.close()
        self.attachments = {}
        for owned in (getattr(self, "multigrid", None), getattr(self, "_assembly", None)):
            if owned is not None and hasattr(owned, "close"):
                owned.close()
        self.multigrid = None
        if getattr(self, "blocks", None) is not None:
            self.blocks.close()  # may hold P's own memory: before P goes
        for name in ("ksp", "K", "P", "_near_null", "f", "u", "r", "_u_previous", "_u_saved", "_u_local",
                     "da_elem", "da"):
            obj = getattr(self, name, None)
            if obj is not None:
                obj.destroy()
                setattr(self, name, None)


def _first_setup(system):
    """The first set-up of ``system``'s KSP, its default options inserted (read then, once): then the
    multigrid levels' kernels, the hierarchy logged, and the solver's large vectors on huge pages
    (``-<prefix>huge_pages``, default on where a vector is at least :data:`huge_pages.MIN_BYTES`)."""
    with timing.timed(timing.SETUP), inserted_options(system.prefix, system._defaults):
        system.ksp.setUp()
        multigrid.set_up_fused_smoothers(system.ksp)
        large = system.solver != "direct" and 8 * system.n_local_dofs >= huge_pages.MIN_BYTES
        if system.PETSc.Options(system.prefix).getBool("huge_pages", large):
            huge_pages.advise()
    system._defaults = None  # read: the first set-up is done
    if system.solver != "direct":
        multigrid.plain_csr_kernels(system.ksp)
        system.hierarchy = multigrid.hierarchy_info(system.ksp)
    view_once(system.ksp)  # -<prefix>ksp_view: once per distinct solver, not per solve


def _create_ksp(system, solver, options):
    """The KSP of ``system`` (an ElasticitySystem being set up): defaults in code, ``setFromOptions`` last."""
    PETSc = system.PETSc
    # -<prefix>pc_type mg|gamg on the command line picks the multigrid flavour itself.
    requested = PETSc.Options(system.prefix).getString("pc_type", "")
    if solver != "direct" and requested in ("mg", "gamg"):
        solver = system.solver = "mg" if requested == "mg" else "gamg"
    ksp = PETSc.KSP().create(comm=system.comm)
    ksp.setOptionsPrefix(system.prefix)
    ksp.setOperators(system.K, system.preconditioner_matrix)
    defaults = {}
    if solver == "direct":
        configure_direct(PETSc, ksp, system.comm.getSize(), blocks=system.P is not None)
    else:
        # The rigid-body modes serve GAMG (also when chosen from the command line).
        if solver == "gamg":
            system._near_null = multigrid.rigid_body_modes(system)
            system.K.setNearNullSpace(system._near_null)
        # The hierarchy's own options (-<prefix>mg_coarse_max_dofs, pc_mg_levels) are read here.
        with inserted_options(system.prefix, options):
            system.multigrid = configure_mg(ksp, system) if solver == "mg" else configure_gamg(ksp, system)
        defaults = system.multigrid.defaults
        ksp.setInitialGuessNonzero(True)  # warm start from the previous displacement
    # Defaults are in the options database (so the command line overrides them) while
    # setFromOptions reads them and again for the first set-up, where multigrid reads
    # its level options (see solve).
    defaults = {**defaults, **options}
    system._defaults = defaults
    with inserted_options(system.prefix, defaults) as opts:
        # The multigrid cycle in force: for reports.
        system.mg_cycle = opts.getString("pc_mg_cycle_type", "v").lower()
        ksp.setFromOptions()
        system.mg_finest_cycle = multigrid.set_finest_cycle(PETSc, ksp, system.prefix) or system.mg_cycle
    return ksp


def _grid_operator(system, options):
    """(assembly, K) of a DMDA system: K applied from the moduli (:mod:`.matfree`, its own assembly)
    or stored in the DMDA's matrix type with a stencil assembly (_grid_assembly).  ``options``: the
    code's option defaults of the system (a smoother that reads K's entries needs it stored)."""
    kind = _mat_type(system.PETSc, system.prefix, system.solver, options)
    fine = _fine_operator(system) if kind == MATRIX_FREE else None
    if fine is not None:
        return fine, fine.mat
    system.da.setMatType(multigrid.MAT_TYPE if kind == MATRIX_FREE else kind)
    system.K = system.da.createMatrix()
    system.K.setOption(system.PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, True)
    multigrid.tune_operator(system.K)
    return _grid_assembly(system), system.K


def _grid_assembly(system):
    """The stencil assembly of a DMDA system (K created): into K's SBAIJ storage, as element blocks
    or as node rows (_assembly_kind)."""
    PETSc, loadcase = system.PETSc, system.loadcase
    kind, requested = _assembly_kind(PETSc, system.prefix, system.solver, system.K)
    if kind == "storage":
        try:
            return StorageAssembly(PETSc, system.K, system.da, system.da_elem, loadcase.shape, system.fixed_local,
                                   system.ke, seqsbaij_values)
        except RuntimeError:
            if requested:
                raise
            kind = "blocks"  # the storage cannot be reached (another build or storage): as before
    if kind == "blocks":
        (exs, exe), (eys, eye) = system.da_elem.getRanges()
        return ElementBlockAssembly(PETSc, loadcase, system.local_edofs[:, 0::2] // 2, ((eys, eye), (exs, exe)),
                                    loadcase.fixed_dofs(), system.ke)
    return StencilAssembly(PETSc, system.da, system.da_elem, loadcase.shape, system.fixed_local, system.ke)


def _assembly_kind(PETSc, prefix, solver, K):
    """``-<prefix>mat_assembly``: ``storage`` (the default with geometric multigrid and SBAIJ: values
    written into K's storage), ``blocks`` (element 2x2 blocks; the default with other storage, what
    ran before) or ``stencil`` (node rows, MatSetValuesLocal).  Returns (kind, whether it was asked for)."""
    options = PETSc.Options(prefix)
    default = "stencil"
    if solver == "mg":
        default = "storage" if K.getType().endswith("sbaij") else "blocks"
    kind = options.getString("mat_assembly", default)
    if kind not in ("storage", "blocks", "stencil"):
        raise ValueError(f"-{prefix}mat_assembly {kind}: expected storage, blocks or stencil")
    return kind, options.hasName("mat_assembly")


def _mat_type(PETSc, prefix, solver, defaults=None):
    """K's storage with stencil assembly: ``-<prefix>mat_type``, else none for geometric multigrid
    with its coarse operators from the moduli and Jacobi smoothing (``shell``: applied from the
    moduli, :mod:`.matfree`), AIJ otherwise: SOR smoothing reads K's entries (PETSc 3.18's SOR on
    SBAIJ with 2x2 blocks crashes), GAMG and PCMG's own P^T A P products need them.  ``defaults``:
    the code's option defaults."""
    options = PETSc.Options(prefix)
    defaults = defaults or {}
    default = "aij"
    if solver == "mg" and not options.hasName("pc_mg_galerkin") and options.getString("pc_type", "mg") == "mg":
        smoothers = {options.getString(name, str(defaults.get(name, "jacobi")))
                     for name in ("mg_levels_pc_type", "mg_levels_up_pc_type")}
        default = MATRIX_FREE if smoothers <= {"jacobi", "none"} else "aij"
    return options.getString("mat_type", default)


def _fine_operator(system):
    """The finest level applied from the moduli (:class:`.matfree.FineOperator`), or None where K
    must be stored: a hierarchy of one level is factorised, and without a C compiler (one warning
    line) the finest level is stored as the coarser ones are (``multigrid.MAT_TYPE``)."""
    if len(multigrid.plan_levels(system)) < 2:
        return None
    try:
        matfree.kernel()
        reason = None
    except NativeUnavailable as err:
        reason = str(err)
    # Every rank the same operator (its set-up is collective), also where one rank's compiler failed.
    reason = next((r for r in system.comm.tompi4py().allgather(reason) if r), None)
    if reason is not None:
        if not _FALLBACK_SAID and system.comm.getRank() == 0:
            print(f"sphyr_hpc: warning: {reason}; the finest multigrid level is stored as {multigrid.MAT_TYPE} "
                  f"(-{system.prefix}mat_type {multigrid.MAT_TYPE} does so without trying)", file=sys.stderr)
        _FALLBACK_SAID.append(True)
        return None
    storage = system.PETSc.Options(system.prefix).getString("mg_levels_mat_type", multigrid.LEVELS_MAT_TYPE)
    return matfree.FineOperator(system.PETSc, system.da, system.da_elem, system.loadcase.shape,
                                system.fixed_local, system.ke, system.comm, storage)


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
