"""The finest multigrid level applied from the element moduli (sphyr_hpc.solvers.matfree) and the C
kernels behind it (sphyr_hpc.runtime.native).

Serial tests run under plain ``pytest``; tests marked ``mpi`` need 2 ranks
(``mpirun -n 2 python -m pytest -m mpi tests/test_matfree.py``) and gather what
every rank got before asserting.
"""

import contextlib
import hashlib
import importlib.machinery
import json

import numpy as np
import pytest
from mpi4py import MPI

from conftest import ROOT, collective, two_ranks_marker
from sphyr_hpc.core import discretisation as fe
from sphyr_hpc.optimiser import problems
from sphyr_hpc.runtime import native
from sphyr_hpc.runtime.petsc import OptionsError, petsc
from sphyr_hpc.solvers import elasticity, hierarchy, matfree, multigrid
from sphyr_hpc.solvers.elasticity import elasticity_system
from sphyr_hpc.solvers.system import unit_energies

WORLD = MPI.COMM_WORLD
ONE_RANK = pytest.mark.skipif(WORLD.size > 1, reason="serial test")
two_ranks = two_ranks_marker("tests/test_matfree.py")


# Small grids keep more than one multigrid level (the shell serves only the smoothed finest level):
# the ``coarse_max_dofs`` of the multigrid systems made here.
COARSE = 300


@contextlib.contextmanager
def _coarse_max_dofs(n):
    """The multigrid systems made inside (by a command, say) coarsen to at most ``n`` DOFs."""
    saved = hierarchy.COARSE_MAX_DOFS
    hierarchy.COARSE_MAX_DOFS = n
    try:
        yield
    finally:
        hierarchy.COARSE_MAX_DOFS = saved


def _finest(nelx, nely, coarse_max_dofs=COARSE):
    """PCMG's number of the finest level of a nelx x nely grid's hierarchy (one rank's levels)."""
    return hierarchy.mg_levels((nely, nelx), coarse_max_dofs=coarse_max_dofs) - 1


def _kernel_sources():
    """What setup.py digests into the extension's SOURCE_DIGEST: its KERNELS and HEADER, in that order
    (read, not imported)."""
    import ast

    names = {}
    for node in ast.parse((ROOT / "setup.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("KERNELS", "HEADER"):
                names[node.targets[0].id] = ast.literal_eval(node.value)
    return (*names["KERNELS"], names["HEADER"])


KERNEL_SOURCES = _kernel_sources()


def _with_options(prefix, values):
    opts = petsc().Options(prefix)
    for key, value in values.items():
        opts.setValue(key, value)
    return lambda: [opts.delValue(key) for key in values]


def _design(shape, seed):
    """Densities with voids (modulus contrast 1e-9) and solid cells side by side."""
    rho = np.random.default_rng(seed).uniform(0.0, 1.0, shape)
    rho[rho < 0.35] = 0.0
    rho[rho > 0.9] = 1.0
    return fe.simp_modulus(rho)


def _shell_against_stored(preset, nelx, nely, seed=0, layout=None):
    """Largest relative differences of (K x, diag K, compliance) between the shell and stored SBAIJ K
    (a ``matrix_free=False`` system of the same hierarchy).

    ``layout``: DMDA options of both systems (the ranks along x and y)."""
    lc = problems.preset(preset, nelx, nely).loadcase()
    moduli = _design(lc.shape, seed)
    clear = _with_options("mf_shell_", layout or {})
    clear_stored = _with_options("mf_stored_", layout or {})
    try:
        with elasticity_system(lc, prefix="mf_shell_", solver="mg", coarse_max_dofs=COARSE) as shell, \
                elasticity_system(lc, prefix="mf_stored_", solver="mg", coarse_max_dofs=COARSE,
                                  matrix_free=False) as stored:
            assert shell.method.matrix_free and not stored.method.matrix_free
            assert [lv.n_dofs for lv in shell.method.levels] == [lv.n_dofs for lv in stored.method.levels]
            kinds = (shell.K.getType(), stored.K.getType())
            worst_mult = worst_diag = 0.0
            for m in (moduli, np.ones(lc.shape), moduli[::-1, ::-1].copy()):
                shell.assemble(shell.slab_of(m))
                stored.assemble(stored.slab_of(m))
                x = stored.f.duplicate()
                x.setRandom()
                y_shell, y_stored = x.duplicate(), x.duplicate()
                before = x.getArray().copy()
                shell.K.mult(x, y_shell)
                # The shell zeroes x's fixed DOFs for the sum and puts them back: x is as it was.
                assert np.array_equal(x.getArray(), before)
                stored.K.mult(x, y_stored)
                y_shell.axpy(-1.0, y_stored)
                worst_mult = max(worst_mult, y_shell.norm() / y_stored.norm())
                d_shell, d_stored = shell.K.getDiagonal(), stored.K.getDiagonal()
                d_shell.axpy(-1.0, d_stored)
                worst_diag = max(worst_diag, d_shell.norm() / d_stored.norm())
            # A solve on a design CG converges on (random voids leave islands of solid cells).
            grey = fe.simp_modulus(np.random.default_rng(seed).uniform(0.3, 1.0, lc.shape))
            c_shell = shell.solve(shell.slab_of(grey))
            c_stored = stored.solve(stored.slab_of(grey))
            complexity = (shell.hierarchy[1], stored.hierarchy[1])
    finally:
        clear()
        clear_stored()
    return kinds, worst_mult, worst_diag, abs(c_shell - c_stored) / c_stored, complexity


@ONE_RANK
@pytest.mark.parametrize("preset, nelx, nely", [("mbb", 96, 32), ("cantilever", 61, 27), ("bridge", 80, 41)])
def test_the_shell_applies_the_stored_stiffness(preset, nelx, nely):
    kinds, mult, diag, compliance, (complexity_shell, complexity_stored) = _shell_against_stored(preset, nelx, nely)
    assert kinds == ("python", "seqsbaij")
    # The same sums in another order: rounding only.  Dirichlet rows and columns included.
    assert mult <= 1e-13 and diag <= 1e-14
    assert compliance <= 1e-9  # both CG solves stop at a relative residual of 1e-6
    # The shell counts the nonzeros the stored finest level had: the same operator complexity.
    assert complexity_shell == pytest.approx(complexity_stored, rel=1e-12)


@two_ranks
def test_the_shell_applies_the_stored_stiffness_on_2_ranks():
    # Ghost nodes come from the other rank (its node column beside the owned box, or its node row
    # above or below); its edge elements' moduli from the element halo.
    for preset, nelx, nely, ranks_x, ranks_y in (("mbb", 97, 33, 2, 1), ("bridge", 80, 41, 2, 1),
                                                 ("mbb", 97, 33, 1, 2), ("cantilever", 61, 27, 1, 2)):
        layout = {"da_processors_x": ranks_x, "da_processors_y": ranks_y}
        for kinds, mult, diag, compliance, _ in collective(
                lambda: _shell_against_stored(preset, nelx, nely, 1, layout)):
            assert kinds == ("python", "mpisbaij")
            assert mult <= 1e-13 and diag <= 1e-14 and compliance <= 1e-9
    WORLD.Barrier()


def _energies_against_numpy(layout=None):
    """(the kernel's, the numpy product's) largest difference from u_e^T K0 u_e in extended precision,
    relative to the scale of the terms, max |u_e|^2 ||K0||.

    An energy is the sum of terms of that scale cancelling down to it (the rigid-body parts of u_e),
    so in double precision either way is off by a few ulps of the terms, not of the energy: on a rank
    whose energies are small beside its displacements that is ~1e-12 of its largest energy."""
    lc = problems.preset("bridge", 80, 41).loadcase()
    clear = _with_options("mf_energies_", layout or {})
    try:
        with elasticity_system(lc, prefix="mf_energies_", solver="mg", coarse_max_dofs=COARSE) as mg:
            assert mg.method.matrix_free  # the energies from the modes in C, not the numpy product
            mg.solve(mg.slab_of(fe.simp_modulus(np.random.default_rng(3).uniform(0.3, 1.0, lc.shape))))
            ours = mg.unit_energies()
            u = mg.local_displacements()
            stock = unit_energies(u, mg.local_edofs, mg.ke)  # the numpy product
            ue = np.asarray(u, dtype=np.longdouble)[mg.local_edofs]
            exact = np.einsum("ij,ij->i", ue @ np.asarray(mg.ke, dtype=np.longdouble), ue)
            assert ours.shape == exact.shape
            scale = float((ue.astype(float) ** 2).sum(axis=1).max()) * float(np.linalg.norm(mg.ke, 2))
            return float(np.abs(ours - exact).max()) / scale, float(np.abs(stock - exact).max()) / scale
    finally:
        clear()


@ONE_RANK
def test_the_element_energies_come_from_the_modes():
    # u_e^T K0 u_e from the element's modes (c11, c12, c33 and the hourglass stiffnesses) in C.
    ours, stock = _energies_against_numpy()
    assert ours <= 1e-15 and ours <= 2 * stock + 1e-16  # a few ulps of the terms, as the product


@two_ranks
def test_the_element_energies_come_from_the_modes_on_2_ranks():
    for ranks_x, ranks_y in ((2, 1), (1, 2)):
        layout = {"da_processors_x": ranks_x, "da_processors_y": ranks_y}
        for ours, stock in collective(lambda: _energies_against_numpy(layout)):
            assert ours <= 1e-15 and ours <= 2 * stock + 1e-16
    WORLD.Barrier()


def test_the_modes_are_refused_for_another_element_matrix():
    assert matfree.modal_constants(fe.element_stiffness()) == pytest.approx(
        [1 / 0.91, 0.3 / 0.91, 0.35 / 0.91, 1.978021978, 1.978021978], rel=1e-9)
    with pytest.raises(ValueError, match="not a square plane-stress Q4 element's"):
        matfree.modal_constants(np.eye(8))


@ONE_RANK
def test_stencil_nonzeros_count_what_petsc_stores():
    # The DMDA's matrices: AIJ (K of PCGAMG; a grid of one multigrid level) and SBAIJ (K of the stored
    # multigrid operators; 41x39 is two levels, 13x7 one).
    PETSc = petsc()
    for storage, shape, arguments in (("aij", (13, 7), {"solver": "gamg"}),
                                      ("aij", (13, 7), {"solver": "mg", "matrix_free": False}),
                                      ("sbaij", (41, 39), {"solver": "mg", "matrix_free": False})):
        lc = problems.preset("mbb", *shape).loadcase()
        with elasticity_system(lc, prefix="mf_count_", comm=PETSc.COMM_SELF, **arguments) as mg:
            mg.assemble(mg.slab_of(np.ones(lc.shape)))
            assert mg.K.getType() == "seq" + storage
            stored = mg.K.getInfo()["nz_used"]
            if arguments["solver"] == "mg":
                assert mg.method.plan.finest.storage == storage and len(mg.method.plan.levels) == (2 if storage == "sbaij" else 1)
        assert matfree.stencil_nonzeros(lc.shape, storage) == stored


# An extension module of this name is never built: the kernels as a build without a C compiler leaves them.
MISSING = "sphyr_hpc.runtime._kernels_never_built"


def _grey_compliances(lc, prefix, times):
    """The compliance of one grey design on the system of ``lc`` under ``prefix`` (with COARSE), built
    ``times`` times over, and the finest level's storage."""
    clear = _with_options(prefix, {})
    try:
        compliances = []
        for _ in range(times):
            with elasticity_system(lc, prefix=prefix, solver="mg", coarse_max_dofs=COARSE) as system:
                grey = fe.simp_modulus(np.random.default_rng(2).uniform(0.3, 1.0, lc.shape))
                compliances.append(system.solve(system.slab_of(grey)))
                kind = system.K.getType()
    finally:
        clear()
    return kind, compliances


@ONE_RANK
def test_the_installed_kernels_are_loaded_and_built_from_these_sources():
    # bin/setup builds the extension (pip install -e .) and again whenever a C source is newer.
    assert native.library() is not None
    digest = hashlib.sha256()
    for path in KERNEL_SOURCES:
        digest.update(path.encode("utf-8") + b"\0" + (ROOT / path).read_bytes())
    assert native.source_digest() == digest.hexdigest(), "the compiled kernels are stale: run bin/setup"


@ONE_RANK
def test_without_the_extension_every_kernel_is_unavailable_with_a_one_line_reason(monkeypatch):
    monkeypatch.setattr(native, "EXTENSION", MISSING)
    for attempt in (native.library, lambda: native.native_function("q4_apply"), matfree.kernel):
        with pytest.raises(native.NativeUnavailable) as caught:
            attempt()
        reason = str(caught.value)
        assert "\n" not in reason and f"compiled kernels ({MISSING}) are not installed" in reason
    assert native.source_digest() is None


@ONE_RANK
def test_a_kernel_missing_from_the_library_is_unavailable_not_an_attribute_error():
    with pytest.raises(native.NativeUnavailable, match="the compiled kernels have no no_such_kernel: "):
        native.native_function("no_such_kernel")


@ONE_RANK
def test_an_extension_that_does_not_load_is_unavailable_with_the_loader_s_reason(tmp_path, monkeypatch):
    (tmp_path / f"broken_kernels{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_text("not a library\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(native, "EXTENSION", "broken_kernels")
    with pytest.raises(native.NativeUnavailable, match=r"\(broken_kernels\) cannot be imported: .*broken_kernels"):
        native.library()


@ONE_RANK
def test_without_the_extension_the_finest_level_is_stored_said_once_with_the_same_compliance(monkeypatch,
                                                                                              capsys):
    lc = problems.preset("mbb", 96, 32).loadcase()
    kind, (compiled,) = _grey_compliances(lc, "mf_kernels_", 1)
    assert kind == "python"
    monkeypatch.setattr(native, "EXTENSION", MISSING)
    monkeypatch.setattr(multigrid, "_FALLBACK_SAID", [])
    capsys.readouterr()
    kind, compliances = _grey_compliances(lc, "mf_nokernels_", 2)
    err = capsys.readouterr().err
    assert kind == "seqsbaij"
    assert err.count("\n") == 1 and f"compiled kernels ({MISSING}) are not installed" in err
    assert "the multigrid operators are stored as PETSc matrices" in err
    assert compliances[0] == compliances[1]
    assert compliances[0] == pytest.approx(compiled, rel=1e-9)  # both CG solves stop at a relative residual of 1e-6


def _sor_system_solves():
    """The yardsticks' SIMP system (SOR smoothing: sizing.py): the storage of K and of the smoothed
    coarser levels, the number of levels and a compliance."""
    from sphyr_hpc.solvers import sizing

    lc = problems.preset("cantilever", 40, 30).loadcase()
    arguments = dict(sizing.simp_system_arguments(), prefix="mf_sor_")
    with elasticity_system(lc, **arguments) as mg:
        compliance = mg.solve(mg.slab_of(np.full(lc.shape, 0.5) ** 3))
        pc = mg.ksp.getPC()
        levels = pc.getMGLevels() if pc.getType() == "mg" else 0
        kinds = {pc.getMGSmoother(level).getOperators()[0].getType() for level in range(1, levels - 1)}
        return mg.K.getType(), kinds, levels, compliance


@ONE_RANK
def test_a_smoother_that_reads_the_entries_keeps_k_stored():
    # SOR on SBAIJ (2x2 blocks) ended the process with a segmentation fault in PETSc 3.18.
    kind, kinds, levels, compliance = _sor_system_solves()
    assert kind == "seqaij" and levels >= 3 and kinds == {"seqaij"} and np.isfinite(compliance)


def test_level_visits_follow_the_cycles():
    from sphyr_hpc.solvers.hierarchy import level_visits

    assert [level_visits(d, "w") for d in range(4)] == [1, 2, 4, 8]
    assert [level_visits(d, "w", "v") for d in range(4)] == [1, 1, 2, 4]
    assert [level_visits(d, "v") for d in range(4)] == [1, 1, 1, 1]
    assert [level_visits(d, "v", "w") for d in range(4)] == [1, 2, 2, 2]


@ONE_RANK
def test_the_finest_level_runs_a_v_cycle_below_w_cycles():
    """By default a V on the finest level over W-cycles below it; PETSc's -<prefix>pc_mg_cycle_type v
    makes every level's a V: the same solution, a different number of MG-CG iterations."""
    lc = problems.preset("mbb", 128, 64).loadcase()
    moduli = fe.simp_modulus(np.random.default_rng(3).uniform(0.3, 1.0, lc.shape))
    results = {}
    for cycle, options in (("default", {}), ("v", {"pc_mg_cycle_type": "v"})):
        clear = _with_options(f"mf_cycle_{cycle}_", options)
        try:
            with elasticity_system(lc, prefix=f"mf_cycle_{cycle}_", solver="mg", coarse_max_dofs=COARSE) as mg:
                assert mg.ksp.getPC().getMGLevels() >= 4  # levels visited twice and four times a W-cycle
                results[cycle] = (mg.method.mg_finest_cycle, mg.method.mg_cycle, mg.solve(mg.slab_of(moduli)), mg.last_iterations)
        finally:
            clear()
    assert results["default"][:2] == ("v", "w") and results["v"][:2] == ("v", "v")
    assert results["default"][2] == pytest.approx(results["v"][2], rel=1e-9)  # both CG solves stop at 1e-6
    assert results["default"][3] != results["v"][3]


@ONE_RANK
def test_the_command_line_cycle_reaches_the_finest_level(monkeypatch):
    """-<prefix>pc_mg_cycle_type sets every level's cycle, the finest's too (nothing forces a V on it
    after setFromOptions): counted by the fused smoother's visits of each level in one solve."""
    from sphyr_hpc.solvers.fused import ChebyshevSmoother

    lc = problems.preset("mbb", 128, 64).loadcase()
    moduli = fe.simp_modulus(np.full(lc.shape, 0.5))
    visits = {}
    solve = ChebyshevSmoother.solve

    def counted(self, ksp, b, x):
        level = ksp.getOptionsPrefix()
        visits[level] = visits.get(level, 0) + 1
        return solve(self, ksp, b, x)

    monkeypatch.setattr(ChebyshevSmoother, "solve", counted)
    per_cycle = {}
    for cycle, options in (("default", {}), ("w", {"pc_mg_cycle_type": "w"}), ("v", {"pc_mg_cycle_type": "v"})):
        prefix = f"mf_cycle_cl_{cycle}_"
        clear = _with_options(prefix, options)
        try:
            with elasticity_system(lc, prefix=prefix, solver="mg", coarse_max_dofs=COARSE) as mg:
                n = mg.ksp.getPC().getMGLevels()
                assert n >= 4 and mg.method.plan.levels[1].smoother == "fused-chebyshev"
                visits.clear()
                mg.solve(mg.slab_of(moduli))
                # Visits of the second finest level a visit of the finest (one a cycle).
                ratio = visits[f"{prefix}mg_levels_{n - 2}_"] / visits[f"{prefix}mg_levels_{n - 1}_"]
                per_cycle[cycle] = (ratio, mg.method.mg_finest_cycle)
        finally:
            clear()
    assert per_cycle == {"default": (1.0, "v"), "w": (2.0, "w"), "v": (1.0, "v")}


@ONE_RANK
def test_the_bytes_model_counts_the_shell_and_the_cycles():
    from sphyr_hpc.optimiser import measure

    lc = problems.preset("mbb", 128, 64).loadcase()
    moduli = fe.simp_modulus(np.full(lc.shape, 0.5))
    phases = {}
    # The default cycles (a V on the finest level, W below) and V everywhere (PETSc's option).
    for cycle, options in (("default", {}), ("v", {"pc_mg_cycle_type": "v"})):
        clear = _with_options(f"mf_bytes_{cycle}_", options)
        try:
            with elasticity_system(lc, prefix=f"mf_bytes_{cycle}_", solver="mg", coarse_max_dofs=COARSE) as mg:
                assert mg.ksp.getPC().getMGLevels() >= 4  # a level visited more often by W-cycles than by Vs
                mg.solve(mg.slab_of(moduli))
                phases[cycle] = measure.phase_bytes(mg, ksp_iterations=7, n_free=lc.n_elements)
                K = mg.K
                n = K.getSize()[0]
                # The shell reads the moduli box (8 bytes an element: (65 + 1) x (129 + 1) around the
                # owned nodes, with a zero border) and x in place, and writes y.
                assert measure.matmult_bytes(K) == 8.0 * 66 * 130 + 8.0 * 2 * n
                if cycle == "default":
                    # The model counts the cycles the system says it runs: told V everywhere, the same
                    # system costs what the V-cycle system does (checked below).
                    mg.method.mg_cycle = "v"
                    phases["default told v"] = measure.phase_bytes(mg, ksp_iterations=7, n_free=lc.n_elements)
        finally:
            clear()
    default, v = phases["default"], phases["v"]
    assert default["solve"] == 7 * default["mg_cg_iteration"] and v["solve"] == 7 * v["mg_cg_iteration"]
    assert v["assembly"] == default["assembly"] and v["setup"] == default["setup"]
    # W-cycles below the finest level visit the levels under the second finest twice and four times.
    assert default["mg_cg_iteration"] > v["mg_cg_iteration"]
    assert phases["default told v"]["mg_cg_iteration"] == pytest.approx(v["mg_cg_iteration"], rel=1e-12)
    # The fused smoother's step moves the moduli and 6 vectors; KSPCHEBYSHEV's a product (the moduli,
    # x and y) and 7 vectors: 3 vectors a step more, 2 steps each way.  PETSc's KSPCHEBYSHEV on the
    # finest level by its level option (PCMG's numbers: the finest is the last).
    finest = _finest(128, 64)
    clear = _with_options("mf_bytes_petsc_", {f"mg_levels_{finest}_ksp_type": "chebyshev"})
    try:
        with elasticity_system(lc, prefix="mf_bytes_petsc_", solver="mg", coarse_max_dofs=COARSE) as mg:
            mg.solve(mg.slab_of(moduli))
            assert mg.ksp.getPC().getMGSmoother(finest).getType() == "chebyshev"
            stock = measure.phase_bytes(mg, ksp_iterations=7, n_free=lc.n_elements)
            n = mg.K.getSize()[0]
            diagonal_read = measure.matrix_bytes(mg.K)
    finally:
        clear()
    assert stock["mg_cg_iteration"] - default["mg_cg_iteration"] == pytest.approx(2 * 2 * 3 * 8.0 * n, rel=1e-12)
    # Its estimate: 10 CG steps of 8 vector passes instead of KSPCG's 10, and no read of the diagonal.
    assert stock["setup"] - default["setup"] == pytest.approx(10 * 2 * 8.0 * n + diagonal_read, rel=1e-12)


@ONE_RANK
def test_optimize_prints_the_bound_of_every_phase(tmp_path, capsys):
    from sphyr_hpc import optimize

    with _coarse_max_dofs(COARSE):
        status = optimize.main(["--preset", "mbb", "--size", "128x64", "--iterations", "3", "--tolerance", "0",
                                "--solver", "mg", "--bandwidth", "--quiet", "--json", str(tmp_path / "run.json")])
    out = capsys.readouterr().out
    assert status == 0
    for phase in ("assembly", "setup", "solve", "update", "iteration"):
        assert f"  {phase} " in out and "measured/bound" in out
    run = json.loads((tmp_path / "run.json").read_text())
    # The update's bytes: the bisection passes the run made over the free cells (a volume bound decides
    # most steps with none), not every step.
    from sphyr_hpc.optimiser import measure

    passes = run["summary"]["bisection_passes_mean"]
    assert 0 < passes < measure.bisection_steps()
    n_elements = 128 * 64
    update = run["bandwidth"]["phases"]["update"]["bytes"]
    assert update == pytest.approx(8.0 * measure.UPDATE_ARRAYS * n_elements
                                   + 8.0 * measure.BISECTION_ARRAYS * passes * run["free_cells"], rel=1e-12)
    # The copy bandwidth the bounds divide by: the median of 9 measurements over a few seconds.
    bandwidth = run["bandwidth"]
    samples = bandwidth["copy_samples_bytes_per_second"]
    assert len(samples) == 9 and bandwidth["copy_bytes_per_second"] == np.median(samples) > 0
    assert "(median of 9, " in out


@two_ranks
def test_kernels_missing_on_one_rank_store_k_on_every_rank(monkeypatch):
    # The shell's set-up is collective: a rank without the kernels must not leave the others waiting.
    lc = problems.preset("mbb", 96, 32).loadcase()
    if WORLD.rank == 1:
        monkeypatch.setattr(native, "EXTENSION", MISSING)
    monkeypatch.setattr(multigrid, "_FALLBACK_SAID", [])
    clear = _with_options("mf_onecc_", {})

    def build():
        with elasticity_system(lc, prefix="mf_onecc_", solver="mg", coarse_max_dofs=COARSE) as system:
            grey = fe.simp_modulus(np.random.default_rng(4).uniform(0.3, 1.0, lc.shape))
            return system.K.getType(), system.solve(system.slab_of(grey))

    try:
        results = collective(build)
    finally:
        clear()
    assert [kind for kind, _ in results] == ["mpisbaij", "mpisbaij"]
    assert np.isfinite(results[0][1]) and results[0][1] == results[1][1]
    WORLD.Barrier()


def _petsc_chebyshev(K, b, x, steps, bounds, zero_guess):
    """PETSc's KSPCHEBYSHEV with PCJACOBI, ``steps`` steps on the interval ``bounds``, into x."""
    PETSc = petsc()
    ksp = PETSc.KSP().create(comm=K.getComm())
    ksp.setOptionsPrefix("mf_reference_cheb_")
    opts = PETSc.Options("mf_reference_cheb_")
    opts.setValue("ksp_chebyshev_eigenvalues", "%r,%r" % bounds)
    try:
        ksp.setType(PETSc.KSP.Type.CHEBYSHEV)
        ksp.setOperators(K)
        ksp.getPC().setType(PETSc.PC.Type.JACOBI)
        ksp.setTolerances(max_it=steps)
        ksp.setNormType(PETSc.KSP.NormType.NONE)
        ksp.setInitialGuessNonzero(not zero_guess)
        ksp.setFromOptions()
        ksp.solve(b, x)
    finally:
        opts.delValue("ksp_chebyshev_eigenvalues")
        ksp.destroy()


def _fused_against_petsc_step(preset, nelx, nely, seed, layout=None):
    """Largest relative difference between one fused smoothing and KSPCHEBYSHEV's, from a nonzero
    and from a zero initial guess, and the fused smoother's interval (``layout``: DMDA options)."""
    lc = problems.preset(preset, nelx, nely).loadcase()
    moduli = fe.simp_modulus(np.random.default_rng(seed).uniform(0.3, 1.0, lc.shape))
    clear = _with_options("mf_fused_step_", layout or {})
    worst = 0.0
    try:
        with elasticity_system(lc, prefix="mf_fused_step_", solver="mg", coarse_max_dofs=COARSE) as system:
            system.solve(system.slab_of(moduli))
            [(smoother, context)] = multigrid.fused_smoothers(system.ksp)  # the finest level's alone
            b = system.f.duplicate()
            b.setRandom()
            for zero_guess in (False, True):
                x_fused = b.duplicate()
                x_fused.setRandom()
                if zero_guess:
                    x_fused.set(0.0)
                x_petsc = x_fused.copy()
                smoother.setInitialGuessNonzero(not zero_guess)
                context.solve(smoother, b, x_fused)
                _petsc_chebyshev(system.K, b, x_petsc, smoother.getTolerances()[3], context.bounds, zero_guess)
                x_fused.axpy(-1.0, x_petsc)
                worst = max(worst, x_fused.norm() / x_petsc.norm())
            smoother.setInitialGuessNonzero(True)
            bounds = context.bounds
    finally:
        clear()
    return worst, bounds


@ONE_RANK
@pytest.mark.parametrize("preset, nelx, nely", [("mbb", 96, 32), ("cantilever", 61, 27)])
def test_the_fused_smoother_takes_petscs_chebyshev_steps(preset, nelx, nely):
    # The same Chebyshev iteration (two steps, Dirichlet rows included) as KSPCHEBYSHEV + PCJACOBI on
    # the same interval: rounding only.
    worst, (emin, emax) = _fused_against_petsc_step(preset, nelx, nely, 5)
    assert worst <= 1e-12
    # PETSc's targets 0.1 and 1.1 times the largest estimated eigenvalue of D^-1 K (in (1, 4) for Q4).
    assert emin == pytest.approx(emax / 11.0, rel=1e-12) and 1.0 < emax / 1.1 < 4.0


@two_ranks
def test_the_fused_smoother_takes_petscs_chebyshev_steps_on_2_ranks():
    # The halo before each step holds the neighbours' values from before it; the noisy right-hand
    # side of the estimate depends on the natural numbering only.
    for ranks_x, ranks_y in ((2, 1), (1, 2)):
        layout = {"da_processors_x": ranks_x, "da_processors_y": ranks_y}
        results = collective(lambda: _fused_against_petsc_step("mbb", 97, 33, 5, layout))
        for worst, _ in results:
            assert worst <= 1e-12
        assert results[0][1] == results[1][1]
    WORLD.Barrier()


def _solve_with_smoother(lc, moduli_list, prefix, options):
    clear = _with_options(prefix, options)
    try:
        with elasticity_system(lc, prefix=prefix, solver="mg", coarse_max_dofs=COARSE) as system:
            pc = system.ksp.getPC()
            out = []
            for moduli in moduli_list:
                compliance = system.solve(system.slab_of(moduli))
                finest = pc.getMGSmoother(pc.getMGLevels() - 1)
                bounds = finest.getPythonContext().bounds if finest.getType() == "python" else None
                out.append((finest.getType(), compliance, system.last_iterations, bounds))
            return out
    finally:
        clear()


@ONE_RANK
def test_the_finest_smoother_is_fused_by_default_and_petscs_by_its_level_options():
    lc = problems.preset("mbb", 128, 64).loadcase()
    finest = _finest(128, 64)
    designs = [fe.simp_modulus(np.random.default_rng(s).uniform(0.3, 1.0, lc.shape)) for s in (6, 7)]
    fused = _solve_with_smoother(lc, designs, "mf_smooth_fused_", {})
    # PETSc's KSPCHEBYSHEV (with the level's PCJACOBI, set by the plan) on the finest level, by its level option.
    stock = _solve_with_smoother(lc, designs, "mf_smooth_petsc_", {f"mg_levels_{finest}_ksp_type": "chebyshev"})
    assert [kind for kind, *_ in fused] == ["python", "python"]
    assert [kind for kind, *_ in stock] == ["chebyshev", "chebyshev"]
    for (_, c_fused, its_fused, _), (_, c_stock, its_stock, _) in zip(fused, stock):
        assert c_fused == pytest.approx(c_stock, rel=1e-9)  # both CG solves stop at 1e-6
        assert abs(its_fused - its_stock) <= 1
    # A new K is a new estimate (made in the set-up, before the solve).
    assert fused[0][3] != fused[1][3]
    # No option is read to choose the smoother: the level's Jacobi named again keeps the fused one ...
    jacobi = _solve_with_smoother(lc, designs[:1], "mf_smooth_jacobi_", {f"mg_levels_{finest}_pc_type": "jacobi"})
    assert jacobi[0][0] == "python" and jacobi[0][1] == pytest.approx(fused[0][1], rel=1e-9)
    # ... and another preconditioner under it alone is an error naming the option to add, not ignored.
    with pytest.raises(OptionsError, match="mf_smooth_nopc_mg_levels_3_pc_type none give "
                                           "-mf_smooth_nopc_mg_levels_3_ksp_type too"):
        _solve_with_smoother(lc, designs[:1], "mf_smooth_nopc_", {"mg_levels_pc_type": "none"})
    # Another Krylov method on every level with it: PETSc's there.
    other = _solve_with_smoother(lc, designs[:1], "mf_smooth_other_", {"mg_levels_pc_type": "none",
                                                                         "mg_levels_ksp_type": "chebyshev"})
    assert other[0][0] == "chebyshev" and other[0][1] == pytest.approx(fused[0][1], rel=1e-9)


def _estimate_against_petsc_cg(preset, nelx, nely, seed, steps=10):
    """(fused (min, max), PETSc KSPCG's (min, max)) Lanczos values of D^-1 K from the same noise."""
    PETSc = petsc()
    lc = problems.preset(preset, nelx, nely).loadcase()
    moduli = fe.simp_modulus(np.random.default_rng(seed).uniform(0.3, 1.0, lc.shape))
    with elasticity_system(lc, prefix="mf_esteig_", solver="mg", coarse_max_dofs=COARSE) as system:
        system.assemble(system.slab_of(moduli))
        fine = matfree.operator_of(system.K)
        fused = fine.extreme_eigenvalues(steps, system.comm)
        cg = PETSc.KSP().create(comm=system.comm)
        try:
            cg.setType(PETSc.KSP.Type.CG)
            cg.setOperators(system.K)
            cg.getPC().setType(PETSc.PC.Type.JACOBI)
            cg.setTolerances(rtol=1e-30, atol=0.0, max_it=steps)
            cg.setNormType(PETSc.KSP.NormType.NONE)
            cg.setComputeEigenvalues(True)
            b, x = system.K.createVecs()
            fine.noise(b)
            cg.solve(b, x)
            values = cg.computeEigenvalues().real
            b.destroy()
            x.destroy()
        finally:
            cg.destroy()
    return fused, (float(values.min()), float(values.max()))


@ONE_RANK
@pytest.mark.parametrize("preset, nelx, nely", [("mbb", 96, 32), ("bridge", 80, 41)])
def test_the_fused_estimate_is_petscs_cg_estimate(preset, nelx, nely):
    # The same CG steps (fused passes, Dirichlet rows included) and the same tridiagonal.
    fused, stock = _estimate_against_petsc_cg(preset, nelx, nely, 8)
    assert fused == pytest.approx(stock, rel=1e-9)
    assert 0.0 < fused[0] < 1.0 < fused[1] < 4.0  # D^-1 K of Q4 elasticity: largest in (1, 4)


@two_ranks
def test_the_fused_estimate_is_petscs_cg_estimate_on_2_ranks():
    results = collective(lambda: _estimate_against_petsc_cg("mbb", 97, 33, 8))
    for fused, stock in results:
        assert fused == pytest.approx(stock, rel=1e-9)
    assert results[0][0] == results[1][0]
    WORLD.Barrier()
