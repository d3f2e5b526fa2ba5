"""Physics invariants of the discretisation, load cases, solvers and density filter.

Every expected value here comes from the physics or from docs/scoring.md ("Grids" to "SIMP run")
(closed-form element matrix, rigid-body modes, scaling laws, symmetry,
equilibrium, the load/filter rules), never from the code's own output.

Everything runs serially on ``PETSc.COMM_SELF`` (the MPI variants live in
``tests/test_mpi.py``).
"""

import json
import math
import os
import sys
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from sphyr_hpc.core import analysis  # noqa: E402
from sphyr_hpc.core import discretisation as fe  # noqa: E402
from sphyr_hpc.core import grid as grids  # noqa: E402
from sphyr_hpc.core import loadcase as lcs  # noqa: E402
from sphyr_hpc.runtime.petsc import petsc  # noqa: E402
from conftest import ROOT, cantilever  # noqa: E402
from sphyr_hpc.optimiser.filter import DensityFilter  # noqa: E402
from sphyr_hpc.solvers.elasticity import elasticity_system  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "v1_sample.jsonl")


# -- helpers ------------------------------------------------------------------------------------
def _records():
    with open(DATA) as fh:
        return [json.loads(line) for line in fh if line.strip()]


RECORDS = _records()
RECORD_IDS = [f"full_easy[{r['index']}]" for r in RECORDS]


def _ground_truth(record):
    grid = grids.as_grid(record["ground_truth"])
    rho, _ = grids.densities(grid)
    return grid, lcs.from_grid(grid), rho


def _design_moduli(record, design):
    """Load case and SIMP moduli of a record's ``"ground_truth"`` or of the ``"solid"`` grid."""
    _, lc, rho = _ground_truth(record)
    return lc, fe.simp_modulus(np.ones(lc.shape) if design == "solid" else rho)


def _self_system(loadcase, **kwargs):
    return elasticity_system(loadcase, comm=petsc().COMM_SELF, **kwargs)


def _petsc_compliance(system, moduli_natural):
    return system.solve(system.slab_of(moduli_natural))


class DenseReference:
    """K u = f solved densely with NumPy on the free DOFs, K assembled from docs/scoring.md's element DOFs.

    An independent check of the PETSc systems, with their ``solve`` /
    ``max_displacement`` interface; natural arrays throughout.
    """

    def __init__(self, loadcase):
        self.loadcase = loadcase
        self.free = np.setdiff1d(np.arange(loadcase.n_dofs), loadcase.fixed_dofs())
        self.forces = loadcase.force_vector()
        self.u = np.zeros(loadcase.n_dofs)

    def slab_of(self, natural):
        return np.asarray(natural, dtype=float)

    def gather(self, slab):
        return np.asarray(slab).reshape(self.loadcase.shape)

    def solve(self, moduli):
        K = _dense_stiffness(self.loadcase.nely, self.loadcase.nelx, np.asarray(moduli).reshape(-1),
                             fe.element_stiffness())
        self.u = np.zeros(self.loadcase.n_dofs)
        self.u[self.free] = np.linalg.solve(K[np.ix_(self.free, self.free)], self.forces[self.free])
        return float(self.forces @ self.u)

    def natural_displacements(self):
        return self.u.copy()

    def unit_energies(self):
        ue = self.u[_spec_edofs(*self.loadcase.shape)]
        return np.einsum("ij,jk,ik->i", ue, fe.element_stiffness(), ue)

    def max_displacement(self):
        return float(np.max(np.hypot(self.u[0::2], self.u[1::2])))

    def close(self):
        pass


def _spec_edofs(nely, nelx):
    """Element DOFs written straight from docs/scoring.md, "Load case" (independent of the library)."""
    out = np.empty((nely * nelx, 8), dtype=np.int64)
    for r in range(nely):
        for c in range(nelx):
            nodes = (r * (nelx + 1) + c, r * (nelx + 1) + c + 1,
                     (r + 1) * (nelx + 1) + c + 1, (r + 1) * (nelx + 1) + c)
            out[r * nelx + c] = [d for n in nodes for d in (2 * n, 2 * n + 1)]
    return out


def _dense_stiffness(nely, nelx, moduli, ke):
    n = 2 * (nely + 1) * (nelx + 1)
    K = np.zeros((n, n))
    for e, dofs in enumerate(_spec_edofs(nely, nelx)):
        K[np.ix_(dofs, dofs)] += moduli.reshape(-1)[e] * ke
    return K


def _classic_88_line_ke(nu, e=1.0):
    """Closed-form KE of Andreassen et al. (2011) / Sigmund's 99-line code."""
    k = np.array([1 / 2 - nu / 6, 1 / 8 + nu / 8, -1 / 4 - nu / 12, -1 / 8 + 3 * nu / 8,
                  -1 / 4 + nu / 12, -1 / 8 - nu / 8, nu / 6, 1 / 8 - 3 * nu / 8])
    pattern = np.array([
        [1, 2, 3, 4, 5, 6, 7, 8],
        [2, 1, 8, 7, 6, 5, 4, 3],
        [3, 8, 1, 6, 7, 4, 5, 2],
        [4, 7, 6, 1, 8, 3, 2, 5],
        [5, 6, 7, 8, 1, 2, 3, 4],
        [6, 5, 4, 3, 2, 1, 8, 7],
        [7, 4, 5, 2, 3, 8, 1, 6],
        [8, 3, 2, 5, 4, 7, 6, 1],
    ]) - 1
    return e / (1 - nu**2) * k[pattern]


CORNERS = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])


def _rigid_body_modes():
    tx = np.tile([1.0, 0.0], 4)
    ty = np.tile([0.0, 1.0], 4)
    centred = CORNERS - 0.5
    rot = np.empty(8)
    rot[0::2] = -centred[:, 1]
    rot[1::2] = centred[:, 0]
    return np.stack([tx, ty, rot])


# -- 1. element matrix --------------------------------------------------------------------------
@pytest.mark.parametrize("nu", [0.0, 0.3, 0.45])
def test_element_matrix_is_symmetric_positive_semidefinite(nu):
    ke = fe.element_stiffness(nu)
    assert ke.shape == (8, 8)
    np.testing.assert_allclose(ke, ke.T, rtol=0, atol=1e-15)
    eig = np.linalg.eigvalsh(ke)
    assert eig.min() > -1e-13 * eig.max()


@pytest.mark.parametrize("nu", [0.0, 0.3, 0.45])
def test_element_matrix_is_symmetric_to_the_bit(nu):
    # Exact by construction (the lower triangle is the upper one's mirror): K's two triangles, and so
    # the SBAIJ copy the direct solver factorises, hold the same values under every BLAS kernel.
    ke = fe.element_stiffness(nu)
    np.testing.assert_array_equal(ke, ke.T)


def test_element_matrix_is_the_same_to_the_bit_under_a_kernel_with_and_without_fused_multiply_add():
    # Exact by construction: no BLAS call computes it (NumPy products, then sums), so OpenBLAS's
    # kernel, which rounds products with or without FMA, cannot change a bit of it.
    code = ("import sys, numpy as np; from sphyr_hpc.core import discretisation as fe; "
            "sys.stdout.write(fe.element_stiffness().tobytes().hex())")
    seen = {}
    for kernel in ("Prescott", "Haswell" if _cpu_has("avx2", "fma") else "Nehalem"):
        env = {**os.environ, "OPENBLAS_CORETYPE": kernel}
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True, cwd=ROOT)
        seen[kernel] = run.stdout
    assert len(set(seen.values())) == 1, sorted(seen)
    assert bytes.fromhex(seen["Prescott"]) == fe.element_stiffness().tobytes()


def _cpu_has(*flags):
    try:
        words = set(open("/proc/cpuinfo", encoding="ascii", errors="replace").read().split())
    except OSError:
        return False
    return all(flag in words for flag in flags)


@pytest.mark.parametrize("nu", [0.0, 0.3, 0.45])
def test_element_matrix_has_exactly_three_rigid_body_modes(nu):
    ke = fe.element_stiffness(nu)
    eig = np.linalg.eigvalsh(ke)
    scale = eig.max()
    zero = np.abs(eig) < 1e-12 * scale
    assert zero.sum() == 3, eig
    assert eig[~zero].min() > 1e-2 * scale  # the 5 deformation modes are genuinely stiff
    modes = _rigid_body_modes()
    assert np.linalg.matrix_rank(modes) == 3
    for mode in modes:
        assert np.linalg.norm(ke @ mode) < 1e-14 * scale * np.linalg.norm(mode)


def test_element_matrix_stores_the_exact_energy_of_a_uniform_stretch():
    # u_x = x is the uniform strain eps_xx = 1, which the Q4 element represents exactly:
    # u^T K u = eps^T D eps * area = 1 / (1 - nu^2) for the unit square and unit modulus.
    ke = fe.element_stiffness(0.3)
    stretch = np.zeros(8)
    stretch[0::2] = CORNERS[:, 0]
    energy = stretch @ ke @ stretch
    assert energy == pytest.approx(1.0 / (1.0 - 0.3**2), rel=1e-14)


@pytest.mark.parametrize("nu", [0.0, 0.25, 0.3, 0.45])
def test_element_matrix_equals_the_closed_form_88_line_matrix(nu):
    # The 88/99-line code numbers its element nodes lower-left first, counter-clockwise,
    # in a y-up frame: coordinates (0,0),(1,0),(1,1),(0,1) with DOFs [x0,y0,...].  The
    # sphyr element uses the same coordinates in the same order (only its y axis points
    # down the printed grid, which the integral does not see), so the permutation is the
    # identity.
    ke = fe.element_stiffness(nu)
    np.testing.assert_allclose(ke, _classic_88_line_ke(nu), rtol=0, atol=1e-14)
    np.testing.assert_allclose(np.diag(ke), np.full(8, (0.5 - nu / 6) / (1 - nu**2)), rtol=0, atol=1e-14)


def test_simp_modulus_follows_the_spec_law():
    rho = np.array([-0.5, 0.0, 0.25, 0.5, 1.0, 3.0])
    clipped = np.clip(rho, 0.0, 1.0)
    expected = 1e-9 + clipped**3 * (1.0 - 1e-9)
    np.testing.assert_allclose(fe.simp_modulus(rho), expected, rtol=1e-15, atol=0)


# -- 2. scaling ---------------------------------------------------------------------------------
@pytest.mark.parametrize("record", RECORDS, ids=RECORD_IDS)
def test_scaling_every_modulus_by_s_scales_compliance_by_one_over_s(record):
    _, lc, rho = _ground_truth(record)
    moduli = fe.simp_modulus(rho)
    ref = DenseReference(lc)
    with _self_system(lc) as system:
        base_petsc = _petsc_compliance(system, moduli)
        base_ref = ref.solve(moduli)
        assert np.isfinite(base_petsc) and base_petsc > 0
        assert np.isfinite(base_ref) and base_ref > 0
        for s in (1e-3, 7.0, 1e4):
            assert _petsc_compliance(system, s * moduli) == pytest.approx(base_petsc / s, rel=1e-10)
            assert ref.solve(s * moduli) == pytest.approx(base_ref / s, rel=1e-10)


# -- 3. solver agreement and equilibrium --------------------------------------------------------
@pytest.mark.parametrize("record", RECORDS, ids=RECORD_IDS)
@pytest.mark.parametrize("design", ["solid", "ground_truth"])
def test_petsc_direct_solve_equals_a_dense_numpy_solve(record, design):
    lc, moduli = _design_moduli(record, design)
    ref = DenseReference(lc)
    c_ref = ref.solve(moduli)
    with _self_system(lc) as system:
        c_petsc = _petsc_compliance(system, moduli)
        u_petsc = system.natural_displacements()
        energies_petsc = system.gather(system.unit_energies())
        max_disp = system.max_displacement()
    assert np.isfinite(c_ref)
    assert c_petsc == pytest.approx(c_ref, rel=1e-10)
    u_ref = ref.natural_displacements()
    assert np.linalg.norm(u_petsc - u_ref) <= 1e-8 * np.linalg.norm(u_ref)
    np.testing.assert_allclose(energies_petsc.ravel(), ref.unit_energies(), rtol=1e-7,
                               atol=1e-10 * ref.unit_energies().max())
    assert max_disp == pytest.approx(np.max(np.hypot(u_ref[0::2], u_ref[1::2])), rel=1e-8)


@pytest.mark.parametrize("record", RECORDS, ids=RECORD_IDS)
def test_a_reused_system_solves_each_design_as_a_fresh_one(record):
    """One rank assembles K in place; every new modulus field must still be factorised anew."""
    _, lc, rho = _ground_truth(record)
    rng = np.random.default_rng(5)
    designs = [rho, np.ones(lc.shape), rng.random(lc.shape), rho]
    with _self_system(lc) as reused:
        assert reused.in_place  # the in-place path is the one under test
        sequence = [_petsc_compliance(reused, fe.simp_modulus(d)) for d in designs]
        energies = reused.gather(reused.unit_energies())
    # Exact by construction: the same assembly (a CSR product summed in element order) and the same Cholesky of
    # the same values in this process; a reused system differing by a bit would be stale state, not rounding.
    for design, c in zip(designs, sequence):
        with _self_system(lc) as fresh:
            assert c == _petsc_compliance(fresh, fe.simp_modulus(design))
    with _self_system(lc) as fresh:
        _petsc_compliance(fresh, fe.simp_modulus(designs[-1]))
        np.testing.assert_array_equal(energies, fresh.gather(fresh.unit_energies()))
    assert len(set(sequence[:3])) == 3 and sequence[0] == sequence[3]


def test_the_default_direct_solve_holds_a_void_held_displacement_to_a_backward_stable_answer():
    """A random 20x20 completion whose largest displacement is on a solid island held by void (Emin) cells
    only: its value is decided by the 1e-9 stiffness of those cells, so it is as accurate as the factorisation is
    backward stable.  K's Cholesky (nested dissection) agrees with SuperLU's LU of the same matrix to 1e-5
    (the two agree with an extended-precision solve to about 1e-6); a block Cholesky that inverts its 2x2
    pivot blocks (PETSc's SBAIJ) is 4 % off here, which is why the direct solver factorises K itself."""
    import scipy.sparse
    import scipy.sparse.linalg

    record = json.loads((ROOT / "tests" / "data" / "void_held_displacement.json").read_text())
    truth = grids.as_grid(record["ground_truth"])
    lc = lcs.from_grid(truth)
    rho, _ = grids.densities(grids.as_grid(record["completion"]))
    rho[lc.structural_mask()] = 1.0
    with _self_system(lc, prefix="phys_void_") as system:
        c = _petsc_compliance(system, fe.simp_modulus(rho))
        u = system.natural_displacements()
        indptr, indices, values = system.K.getValuesCSR()
        K = scipy.sparse.csr_matrix((values, indices, indptr), shape=system.K.getSize())
        f = system.f.getArray().copy()
    reference = scipy.sparse.linalg.spsolve(K.tocsc(), f)  # one rank: PETSc's numbering is the natural one
    largest = np.hypot(u[0::2], u[1::2]).max()
    assert largest == pytest.approx(np.hypot(reference[0::2], reference[1::2]).max(), rel=1e-5)
    # The largest displacement really is held by void cells only: no element around its node belongs to
    # the solid cluster (cells sharing a node) that holds the load and support cells.
    from scipy import ndimage

    labels, _ = ndimage.label(rho > 0.5, structure=np.ones((3, 3)))
    (structure,) = set(labels[lc.structural_mask()].ravel())
    row, col = divmod(int(np.argmax(np.hypot(u[0::2], u[1::2]))), lc.shape[1] + 1)
    assert structure not in labels[max(row - 1, 0):row + 1, max(col - 1, 0):col + 1]
    assert c == pytest.approx(f @ reference, rel=1e-10)


@pytest.mark.parametrize("record", RECORDS, ids=RECORD_IDS)
@pytest.mark.parametrize("design", ["solid", "ground_truth"])
def test_petsc_solution_satisfies_equilibrium_and_compliance_is_strain_energy(record, design):
    lc, moduli = _design_moduli(record, design)
    with _self_system(lc) as system:
        c = _petsc_compliance(system, moduli)
        u = system.natural_displacements()
        energies = system.gather(system.unit_energies())
    ke = fe.element_stiffness()
    K = _dense_stiffness(lc.nely, lc.nelx, moduli, ke)
    f = lc.force_vector()
    fixed = lc.fixed_dofs()
    free = np.setdiff1d(np.arange(lc.n_dofs), fixed)
    assert np.all(u[fixed] == 0.0)  # exact: a fixed DOF's row and column hold only its diagonal 1, its load 0
    residual = K[np.ix_(free, free)] @ u[free] - f[free]
    assert np.linalg.norm(residual) <= 1e-9 * np.linalg.norm(f)
    assert c == pytest.approx(f @ u, rel=1e-12)
    assert c == pytest.approx(u @ K @ u, rel=1e-10)
    # The strain energy splits into element energies E_e * u_e^T K0 u_e.
    assert c == pytest.approx(float(np.sum(moduli * energies)), rel=1e-10)


@pytest.mark.parametrize("design", ["solid", "graded"])
def test_multigrid_cg_compliance_equals_the_direct_one_on_a_cantilever(design):
    lc = cantilever(16, 32)
    if design == "solid":
        rho = np.ones(lc.shape)
    else:
        rho = np.random.default_rng(7).uniform(0.3, 1.0, lc.shape)
    moduli = fe.simp_modulus(rho)
    with _self_system(lc, solver="direct", prefix="phys_direct_") as direct:
        c_direct = _petsc_compliance(direct, moduli)
    with _self_system(lc, solver="mg", prefix="phys_mg_") as mg:
        assert mg.solver == "mg"
        c_mg = _petsc_compliance(mg, moduli)
        iterations = mg.ksp.getIterationNumber()
    assert np.isfinite(c_direct) and c_direct > 0
    assert 0 < iterations < 2000
    assert c_mg == pytest.approx(c_direct, rel=1e-6)
    assert c_direct == pytest.approx(DenseReference(lc).solve(moduli), rel=1e-10)


def test_cantilever_deflects_down_the_printed_grid_at_the_load():
    lc = cantilever(16, 32)
    with _self_system(lc) as system:
        _petsc_compliance(system, np.ones(lc.shape))
        u = system.natural_displacements()
    r, c = lc.load_cells[0]
    load_nodes = [r * (lc.nelx + 1) + c, r * (lc.nelx + 1) + c + 1]
    # Gravity down = +y in the grid frame: the loaded tip moves to larger row numbers.
    assert all(u[2 * n + 1] > 0 for n in load_nodes)
    uy = u[1::2].reshape(lc.nely + 1, lc.nelx + 1)
    # Deflection grows along the span (monotonic on the loaded row).
    assert np.all(np.diff(uy[r]) >= -1e-12)


# -- 4. mirror symmetry -------------------------------------------------------------------------
def _mirror(grid):
    return [list(reversed(row)) for row in grid]


@pytest.mark.parametrize("record", RECORDS, ids=RECORD_IDS)
def test_left_right_mirrored_ground_truth_has_the_same_compliance(record):
    grid, lc, rho = _ground_truth(record)
    mirrored = _mirror(grid)
    lc_m = lcs.from_grid(mirrored)
    rho_m, _ = grids.densities(mirrored)
    np.testing.assert_array_equal(rho_m, rho[:, ::-1])  # parsed cells, not computed: exact
    moduli, moduli_m = fe.simp_modulus(rho), fe.simp_modulus(rho_m)
    with _self_system(lc) as a, _self_system(lc_m) as b:
        c, c_m = _petsc_compliance(a, moduli), _petsc_compliance(b, moduli_m)
    assert np.isfinite(c)
    assert c_m == pytest.approx(c, rel=1e-10)
    assert DenseReference(lc_m).solve(moduli_m) == pytest.approx(DenseReference(lc).solve(moduli), rel=1e-10)


def _symmetric_grids():
    g0 = grids.as_grid(RECORDS[0]["ground_truth"])
    union = [[a if a != "0" else b for a, b in zip(row, reversed(row))] for row in g0]
    bridge = [["1"] * 12 for _ in range(6)]
    bridge[0][5] = bridge[0][6] = "L"
    bridge[5][0] = bridge[5][11] = "S"
    bridge[3][3] = bridge[3][8] = "0"
    bridge[2][5] = bridge[2][6] = "0.4"
    return {"ground_truth_with_its_mirror": union, "bridge": bridge}


@pytest.mark.parametrize("name", ["ground_truth_with_its_mirror", "bridge"])
def test_symmetric_grid_has_antisymmetric_x_and_symmetric_y_displacement(name):
    grid = _symmetric_grids()[name]
    assert grid == _mirror(grid)
    lc = lcs.from_grid(grid)
    rho, _ = grids.densities(grid)
    with _self_system(lc) as system:
        c = _petsc_compliance(system, fe.simp_modulus(rho))
        u = system.natural_displacements()
    assert np.isfinite(c)
    ux = u[0::2].reshape(lc.nely + 1, lc.nelx + 1)
    uy = u[1::2].reshape(lc.nely + 1, lc.nelx + 1)
    scale = np.max(np.abs(u))
    assert scale > 0
    np.testing.assert_allclose(ux, -ux[:, ::-1], rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(uy, uy[:, ::-1], rtol=0, atol=1e-9 * scale)
    if lc.nelx % 2 == 0:  # the nodes on the axis of symmetry do not move sideways
        assert np.max(np.abs(ux[:, lc.nelx // 2])) <= 1e-9 * scale


# -- 5. load-case rules -------------------------------------------------------------------------
def _force_sums(lc):
    f = lc.force_vector()
    return f[0::2].sum(), f[1::2].sum()


@pytest.mark.parametrize("folder, expected", [
    ("baseline-random", (0.0, 1.0)),      # (sum fx, sum fy): down the printed grid
    ("x_1_rotations", (-1.0, 0.0)),       # gravity (0, -1): towards column 0
    ("x_2_rotations", (0.0, -1.0)),       # gravity (-1, 0): up
    ("x_3_rotations", (1.0, 0.0)),        # gravity (0, 1): towards the last column
])
def test_force_vector_sums_to_the_unit_gravity_of_the_result_folder(folder, expected):
    grid = grids.as_grid(RECORDS[1]["ground_truth"])
    lc = lcs.from_grid(grid, lcs.gravity_from_folder(folder))
    fx, fy = _force_sums(lc)
    assert fx == pytest.approx(expected[0], abs=1e-15)
    assert fy == pytest.approx(expected[1], abs=1e-15)


def test_gravity_is_normalised_and_split_into_x_from_dc_and_y_from_dr():
    lc = lcs.LoadCase(3, 4, ((1, 1),), ((2, 0),), gravity=(3.0, 4.0), total_load=2.0)
    f = lc.force_vector()
    n = lc.nelx + 1
    nodes = [1 * n + 1, 1 * n + 2, 2 * n + 2, 2 * n + 1]
    expected = np.zeros(lc.n_dofs)
    for node in nodes:
        expected[2 * node] = 2.0 / 4 * 0.8
        expected[2 * node + 1] = 2.0 / 4 * 0.6
    np.testing.assert_allclose(f, expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize("cells, doubled", [
    (((0, 1), (0, 2)), [(0, 2), (1, 2)]),     # edge neighbours share two nodes
    (((0, 0), (1, 1)), [(1, 1)]),             # diagonal neighbours share one node
    (((0, 0), (2, 3)), []),                   # apart: no shared node
])
def test_load_cells_sharing_a_node_give_it_two_shares(cells, doubled):
    nely, nelx = 3, 4
    lc = lcs.LoadCase(nely, nelx, cells, ((2, 0),) if (2, 0) not in cells else ((0, 3),))
    f = lc.force_vector()
    share = 1.0 / (4 * len(cells))
    fy = f[1::2].reshape(nely + 1, nelx + 1)
    assert np.all(f[0::2] == 0.0)
    expected = np.zeros((nely + 1, nelx + 1))
    for r, c in cells:
        for nr, nc in ((r, c), (r, c + 1), (r + 1, c + 1), (r + 1, c)):
            expected[nr, nc] += share
    for node in doubled:
        assert expected[node] == pytest.approx(2 * share)
        assert fy[node] == pytest.approx(2 * share, rel=1e-15)
    np.testing.assert_allclose(fy, expected, rtol=1e-15, atol=0)
    assert fy.sum() == pytest.approx(1.0, rel=1e-15)


def test_supports_fix_both_dofs_of_the_four_nodes_of_every_s_cell():
    grid, lc, _ = _ground_truth(RECORDS[0])
    nelx = lc.nelx
    expected = set()
    for r, row in enumerate(grid):
        for c, token in enumerate(row):
            if token == "S":
                for nr, nc in ((r, c), (r, c + 1), (r + 1, c + 1), (r + 1, c)):
                    node = nr * (nelx + 1) + nc
                    expected |= {2 * node, 2 * node + 1}
    assert list(lc.fixed_dofs()) == sorted(expected)


def test_ground_truth_without_load_or_support_is_not_a_problem():
    with pytest.raises(lcs.LoadCaseError):
        lcs.from_grid([["1", "S"], ["1", "1"]])
    with pytest.raises(lcs.LoadCaseError):
        lcs.from_grid([["L", "1"], ["1", "1"]])
    with pytest.raises(lcs.LoadCaseError):
        lcs.from_grid([["L", "1"], ["S"]])


def _severed_design():
    """10x10: L on the top row, S on the bottom row, a void row 4 cutting the load path."""
    grid = [["1"] * 10 for _ in range(10)]
    grid[0][3] = grid[0][4] = grid[0][5] = "L"
    grid[9][3] = grid[9][4] = grid[9][5] = "S"
    for c in range(10):
        grid[4][c] = "0"
    return grid


@pytest.mark.parametrize("backend", ["petsc", "dense"])
def test_design_with_load_severed_from_supports_is_not_load_carrying(backend):
    grid = _severed_design()
    lc = lcs.from_grid(grid)
    rho, _ = grids.densities(grid)
    system = _self_system(lc) if backend == "petsc" else DenseReference(lc)
    try:
        solid = analysis.solid_compliance(system)
        severed = analysis.analyse(system, rho, solid)
        intact = analysis.analyse(system, np.ones(lc.shape), solid)
    finally:
        system.close()
    assert np.isfinite(solid) and solid > 0
    assert intact.load_carrying and intact.compliance == pytest.approx(solid, rel=1e-12)
    assert severed.compliance > 1e3 * solid  # +inf also qualifies
    assert not severed.load_carrying
    assert severed.volume_fraction == pytest.approx(0.9)
    assert intact.volume_fraction == 1.0  # exact: the mean of ones


# -- 6. density filter --------------------------------------------------------------------------
def _spec_filter_matrix(nely, nelx, radius):
    reach = max(int(math.ceil(radius)) - 1, 0)
    n = nely * nelx
    H = np.zeros((n, n))
    for r in range(nely):
        for c in range(nelx):
            for dr in range(-reach, reach + 1):
                for dc in range(-reach, reach + 1):
                    rr, cc = r + dr, c + dc
                    w = radius - math.hypot(dr, dc)
                    if 0 <= rr < nely and 0 <= cc < nelx and w > 0:
                        H[r * nelx + c, rr * nelx + cc] = w
    return H


@pytest.fixture(scope="module")
def filtered_system():
    lc = lcs.LoadCase(5, 7, ((0, 3),), ((4, 0), (4, 6)))
    system = _self_system(lc, prefix="phys_filter_")
    dfilter = DensityFilter(system)
    yield system, dfilter
    dfilter.close()
    system.close()


def test_filter_row_sums_are_centre_weight_plus_point_two_per_edge_neighbour(filtered_system):
    system, dfilter = filtered_system
    nely, nelx = system.loadcase.shape
    expected = np.empty((nely, nelx))
    for r in range(nely):
        for c in range(nelx):
            inside = sum(0 <= r + dr < nely and 0 <= c + dc < nelx
                         for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)))
            expected[r, c] = 1.2 + 0.2 * inside
    np.testing.assert_allclose(system.gather(dfilter.Hs), expected, rtol=1e-14, atol=0)
    assert expected.min() == pytest.approx(1.6) and expected.max() == pytest.approx(2.0)


def test_filter_preserves_a_uniform_field(filtered_system):
    system, dfilter = filtered_system
    ones = system.slab_of(np.ones(system.loadcase.shape))
    np.testing.assert_allclose(dfilter.apply(ones), ones, rtol=1e-14, atol=0)
    half = 0.5 * ones
    np.testing.assert_allclose(dfilter.apply(half), half, rtol=1e-14, atol=0)


def test_filter_apply_matches_the_spec_weights(filtered_system):
    system, dfilter = filtered_system
    shape = system.loadcase.shape
    H = _spec_filter_matrix(*shape, 1.2)
    x = np.random.default_rng(3).uniform(size=shape)
    got = system.gather(dfilter.apply(system.slab_of(x)))
    np.testing.assert_allclose(got.ravel(), (H @ x.ravel()) / H.sum(axis=1), rtol=1e-13, atol=0)


def test_filter_chain_rule_is_the_transpose_of_apply(filtered_system):
    system, dfilter = filtered_system
    shape = system.loadcase.shape
    rng = np.random.default_rng(11)
    ones = system.slab_of(np.ones(shape))
    for _ in range(3):
        x = system.slab_of(rng.normal(size=shape))
        y = system.slab_of(rng.normal(size=shape))
        lhs = float(np.dot(dfilter.apply(x), y))
        rhs = float(np.dot(x, dfilter.chain(y, ones)))
        assert lhs == pytest.approx(rhs, rel=1e-12, abs=1e-13)


def test_filter_chain_ignores_sensitivities_of_pinned_cells(filtered_system):
    system, dfilter = filtered_system
    shape = system.loadcase.shape
    rng = np.random.default_rng(5)
    free = (rng.uniform(size=shape) > 0.4).astype(float)
    d = rng.normal(size=shape)
    got = dfilter.chain(system.slab_of(d), system.slab_of(free))
    H = _spec_filter_matrix(*shape, 1.2)
    expected = H.T @ (d.ravel() * free.ravel() / H.sum(axis=1))
    np.testing.assert_allclose(system.gather(got).ravel(), expected, rtol=1e-12, atol=1e-15)


def test_larger_filter_radius_uses_the_spec_weights_with_a_wider_halo():
    lc = lcs.LoadCase(6, 8, ((0, 4),), ((5, 0),))
    with _self_system(lc, prefix="phys_filter2_", element_halo=2) as system:
        dfilter = DensityFilter(system, radius=2.5)
        try:
            x = np.random.default_rng(9).uniform(size=lc.shape)
            got = system.gather(dfilter.apply(system.slab_of(x)))
            hs = system.gather(dfilter.Hs)
        finally:
            dfilter.close()
    H = _spec_filter_matrix(*lc.shape, 2.5)
    np.testing.assert_allclose(hs.ravel(), H.sum(axis=1), rtol=1e-14)
    np.testing.assert_allclose(got.ravel(), (H @ x.ravel()) / H.sum(axis=1), rtol=1e-13)
