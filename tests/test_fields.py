"""Field files (sphyr_hpc.io.fields): what h5py, meshio and ParaView read back is what was computed.

The sample files come from ``tests/paraview/write_sample_fields.py``, run once
in this process (1 rank) and once under ``bin/mpirun -n 2`` (2 ranks), on a
non-square grid wide enough for PETSc to split its columns and on one tall
enough to split its rows.  ParaView's own readers are asked through
``xvfb-run -a -s -noreset pvpython tests/paraview/inspect_fields.py`` (Debian's
``paraview`` and ``xvfb``, installed by ``bin/setup``); those tests skip, with
the reason, only where pvpython or xvfb-run is missing.

The MPI test at the end (``-m mpi``, under ``mpirun -n 2``) writes on two
ranks and compares with a one-rank write on rank 0, then broadcasts the verdict
so every rank reaches every assertion.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "paraview"))

import write_sample_fields as sample  # noqa: E402

from sphyr_hpc.core import discretisation as fe  # noqa: E402
from sphyr_hpc.io import field_files, fields  # noqa: E402

PYTHON = sys.executable
INSPECT = ROOT / "tests" / "paraview" / "inspect_fields.py"
SHAPES = {"wide": (7, 11), "tall": (12, 5)}
CELL_ARRAYS = ("density", "strain_energy_density", "von_mises", "marker")


def _clean_env():
    """The environment without the MPI launcher's variables (a child must not join our job)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}


def _run(cmd, timeout=180, ok=(0,)):
    proc = subprocess.run(cmd, cwd=ROOT, env=_clean_env(), capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in ok:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _in_memory(out):
    """The problem written to ``out`` and its fields computed here from natural arrays."""
    saved = np.load(out / "problem.npz")
    nely, nelx = saved["rho"].shape
    lc, rho, masked = sample.sample_problem(nely, nelx)
    np.testing.assert_array_equal(saved["rho"], rho)
    f = fields.design_fields(lc, rho, saved["u"], masked=masked)
    return dict(lc=lc, rho=rho, masked=masked, u=saved["u"], compliance=float(saved["compliance"]),
                cells=f["cells"], nodes=f["nodes"], ranks=int(saved["ranks"]))


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """{(shape, ranks): folder} of sample files; 2 ranks through bin/mpirun, skipped without it."""
    base = tmp_path_factory.mktemp("fields")
    out = {}
    for shape, (nely, nelx) in SHAPES.items():
        one = base / f"{shape}_1"
        one.mkdir()
        sample.main([str(one), str(nely), str(nelx)])
        out[(shape, 1)] = one
        if shutil.which("mpirun"):
            two = base / f"{shape}_2"
            two.mkdir()
            _run([str(ROOT / "bin" / "mpirun"), "-n", "2", PYTHON, str(ROOT / "tests/paraview/write_sample_fields.py"),
                  str(two), str(nely), str(nelx)])
            out[(shape, 2)] = two
    dying = base / "dying"
    dying.mkdir()
    _run([PYTHON, str(ROOT / "tests/paraview/write_sample_fields.py"), str(dying), "7", "11", "--die-after", "2"],
         ok=(3,))
    out["dying"] = dying
    return out


@pytest.fixture(scope="module")
def paraview(written):
    """What ParaView's readers see in every sample index file: {path: summary}."""
    missing = [tool for tool in ("pvpython", "xvfb-run") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed (Debian packages paraview, xvfb; bin/setup installs them)")
    paths = [str(p) for folder in written.values()
             for p in sorted(folder.iterdir()) if p.suffix in (".xdmf", ".vtu", ".pvd")]
    proc = _run(["xvfb-run", "-a", "-s", "-noreset", "pvpython", str(INSPECT), "--values", *paths], timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("INSPECT ")]
    assert lines, f"pvpython printed no result:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1][len("INSPECT "):])


def _file_order(grid_array):
    """A grid-oriented array (row 0 at the top) in the files' y-up order, flattened."""
    a = np.asarray(grid_array)[::-1]
    return a.reshape((a.shape[0] * a.shape[1],) + a.shape[2:])


# -- the fields themselves ----------------------------------------------------------------------------
def test_strain_energy_density_sums_to_half_the_compliance(written):
    for shape in SHAPES:
        mem = _in_memory(written[(shape, 1)])
        assert mem["cells"]["strain_energy_density"].sum() == pytest.approx(mem["compliance"] / 2, rel=1e-9)


def test_von_mises_is_the_plane_stress_formula_at_the_element_centre(written):
    mem = _in_memory(written[("wide", 1)])
    lc, rho, u = mem["lc"], mem["rho"], mem["u"]
    d, b0 = fe.constitutive_matrix(), fe.centre_strain_displacement()
    nodes = fe.element_nodes(*lc.shape)
    for r, c in ((0, 0), (3, 5), (lc.nely - 1, lc.nelx - 1)):
        e = r * lc.nelx + c
        ue = u[fe.nodes_to_dofs(nodes[e:e + 1])[0]]
        modulus = fe.E0 * rho[r, c] ** 3 + fe.EMIN * (1 - rho[r, c] ** 3)
        sx, sy, txy = modulus * d @ b0 @ ue
        assert mem["cells"]["von_mises"][r, c] == pytest.approx(np.sqrt(sx**2 - sx * sy + sy**2 + 3 * txy**2), rel=1e-12)
        assert mem["cells"]["strain_energy_density"][r, c] == pytest.approx(
            0.5 * modulus * ue @ fe.element_stiffness() @ ue, rel=1e-12)


def test_uniaxial_stretch_gives_the_plane_stress_von_mises_and_a_rigid_motion_none():
    nely, nelx = 3, 4
    lc, _, _ = sample.sample_problem(nely, nelx)
    rows, cols = np.meshgrid(np.arange(nely + 1), np.arange(nelx + 1), indexing="ij")
    eps, nu = 1e-3, fe.NU
    stretch = np.zeros((nely + 1, nelx + 1, 2))
    stretch[..., 0] = eps * cols  # u_x = eps x: strain (eps, 0, 0)
    f = fields.design_fields(lc, np.ones(lc.shape), stretch.ravel())
    sx, sy = eps / (1 - nu**2), nu * eps / (1 - nu**2)
    np.testing.assert_allclose(f["cells"]["von_mises"], np.sqrt(sx**2 - sx * sy + sy**2), rtol=1e-12)
    # The solver's y points down the grid; the files' y points up.
    down = np.zeros((nely + 1, nelx + 1, 2))
    down[..., 1] = 0.25  # every node moves down by 0.25: a rigid translation
    g = fields.design_fields(lc, np.ones(lc.shape), down.ravel())
    np.testing.assert_allclose(g["nodes"]["displacement"][..., 1], -0.25)
    np.testing.assert_allclose(g["nodes"]["displacement"][..., [0, 2]], 0.0)
    assert np.abs(g["cells"]["von_mises"]).max() < 1e-15
    assert np.abs(g["cells"]["strain_energy_density"]).max() < 1e-15


def test_markers_say_load_support_and_masked(written):
    mem = _in_memory(written[("wide", 1)])
    marks, lc = mem["cells"]["marker"], mem["lc"]
    assert [tuple(x) for x in np.argwhere(marks == 1)] == list(lc.load_cells)
    assert [tuple(x) for x in np.argwhere(marks == 2)] == sorted(lc.support_cells)
    np.testing.assert_array_equal(marks == 3, mem["masked"])


# -- h5py ---------------------------------------------------------------------------------------------
def test_hdf5_holds_the_in_memory_fields_with_rows_reversed(written):
    import h5py

    for shape in SHAPES:
        mem = _in_memory(written[(shape, 1)])
        nely, nelx = mem["lc"].shape
        with h5py.File(written[(shape, 1)] / "design.h5", "r") as f:
            assert f["density"].shape == (nely, nelx)
            assert f["displacement"].shape == (nely + 1, nelx + 1, 3)
            for name in CELL_ARRAYS:
                np.testing.assert_allclose(f[name][()][::-1], mem["cells"][name], rtol=1e-12, atol=1e-300)
            np.testing.assert_array_equal(f["density"][()][::-1], mem["rho"])
            disp = f["displacement"][()][::-1]
            u = mem["u"].reshape(nely + 1, nelx + 1, 2)
            np.testing.assert_allclose(disp[..., 0], u[..., 0], rtol=1e-12)
            np.testing.assert_allclose(disp[..., 1], -u[..., 1], rtol=1e-12)
            assert not disp[..., 2].any()
            assert f["compliance"][0] == mem["compliance"] == f.attrs["compliance"]  # one value written twice
        with h5py.File(written[(shape, 1)] / "design_quad.h5", "r") as f:
            np.testing.assert_allclose(f["von_mises"][()], _file_order(mem["cells"]["von_mises"]), rtol=1e-12)
            assert f["mesh/points"].shape == ((nely + 1) * (nelx + 1), 3)
            assert f["mesh/cells"].shape == (nely * nelx, 4)


def test_files_written_on_two_ranks_equal_the_one_rank_files(written):
    import h5py

    if ("wide", 2) not in written:
        pytest.skip("mpirun not installed")
    for shape in SHAPES:
        one, two = written[(shape, 1)], written[(shape, 2)]
        assert _in_memory(two)["ranks"] == 2
        for name in ("design.h5", "design_quad.h5", "history.h5", "history_quad.h5"):
            with h5py.File(one / name, "r") as a, h5py.File(two / name, "r") as b:
                names_a, names_b = [], []
                a.visit(names_a.append)
                b.visit(names_b.append)
                assert names_a == names_b
                for key in names_a:
                    if isinstance(a[key], h5py.Dataset):
                        x, y = a[key][()], b[key][()]
                        assert x.shape == y.shape and x.dtype == y.dtype, (name, key)
                        # The 2-rank solve (K summed in another order) differs from the serial one in the last digits only.
                        np.testing.assert_allclose(y, x, rtol=1e-9, atol=1e-12 * max(1.0, np.abs(np.nan_to_num(x)).max()),
                                                   err_msg=f"{name}:{key}")
        # Exact: the index files hold names, sizes and step numbers, no value that a solve computes.
        for name in ("design.xdmf", "history.xdmf", "history.pvd"):
            assert (one / name).read_text() == (two / name).read_text()


# -- meshio -------------------------------------------------------------------------------------------
def test_meshio_reads_the_quad_xdmf_and_the_vtu(written):
    import meshio

    for shape in SHAPES:
        folder = written[(shape, 1)]
        mem = _in_memory(folder)
        nely, nelx = mem["lc"].shape
        for name in ("design_quad.xdmf", "design.vtu"):
            mesh = meshio.read(folder / name)
            assert mesh.points.shape == ((nely + 1) * (nelx + 1), 3)
            assert [(b.type, len(b.data)) for b in mesh.cells] == [("quad", nely * nelx)]
            assert sorted(mesh.cell_data) == sorted(CELL_ARRAYS)
            for array in CELL_ARRAYS:
                np.testing.assert_allclose(mesh.cell_data[array][0], _file_order(mem["cells"][array]), rtol=1e-12)
            np.testing.assert_allclose(mesh.point_data["displacement"], _file_order(mem["nodes"]["displacement"]),
                                       rtol=1e-12)
            # Cell k spans x in [i, i+1], y in [j, j+1] with k = j*nelx + i: the y-up order.
            corners = mesh.points[mesh.cells[0].data[nelx + 2]]
            np.testing.assert_array_equal(corners.min(axis=0), [2, 1, 0])
            np.testing.assert_array_equal(corners.max(axis=0), [3, 2, 0])


def test_meshio_reads_the_quad_history_as_a_time_series(written):
    import meshio

    folder = written[("tall", 1)]
    mem = _in_memory(folder)
    with meshio.xdmf.TimeSeriesReader(folder / "history_quad.xdmf") as reader:
        points, cells = reader.read_points_cells()
        assert reader.num_steps == 3 and len(points) == (mem["lc"].nely + 1) * (mem["lc"].nelx + 1)
        for k in range(3):
            t, point_data, cell_data = reader.read_data(k)
            assert t == k + 1
            np.testing.assert_allclose(cell_data["density"][0], _file_order(sample.history_densities(mem["rho"], k + 1)))


def test_meshio_cannot_read_structured_xdmf_which_is_why_there_is_a_quad_format(written):
    import meshio

    with pytest.raises((meshio.ReadError, KeyError)):
        meshio.xdmf.read(written[("wide", 1)] / "design.xdmf")


# -- ParaView -----------------------------------------------------------------------------------------
def _check_paraview_design(view, mem, reader, field_data=True):
    lc = mem["lc"]
    nely, nelx = lc.shape
    assert "error" not in view, view.get("error")
    assert view["reader"] == reader
    assert (view["cells"], view["points"]) == (nely * nelx, (nely + 1) * (nelx + 1))
    assert view["bounds"] == [0.0, nelx, 0.0, nely, 0.0, 0.0]  # square unit cells in the XY plane
    assert sorted(view["cell_data"]) == sorted(CELL_ARRAYS)
    assert list(view["point_data"]) == ["displacement"] and view["point_data"]["displacement"]["components"] == 3
    # Every cell's value, found by where ParaView puts the cell: row 0 of the grid is at the top.
    centres = np.array(view["cell_centres"])
    rows = nely - 1 - np.floor(centres[:, 1]).astype(int)
    cols = np.floor(centres[:, 0]).astype(int)
    for name in CELL_ARRAYS:
        got = np.array(view["cell_data"][name]["values"], dtype=float)
        want = mem["cells"][name][rows, cols]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-14, err_msg=name)
        assert view["cell_data"][name]["range"] == pytest.approx([want.min(), want.max()], rel=1e-9, abs=1e-14)
    # The load sits in the top row of the picture, the supports in the bottom row.
    load = np.array(view["cell_data"]["marker"]["values"]) == 1
    assert np.all(centres[load, 1] == nely - 0.5)
    assert np.all(centres[np.array(view["cell_data"]["marker"]["values"]) == 2, 1] == 0.5)
    points = np.rint(np.array(view["point_coordinates"])).astype(int)
    disp = np.array(view["point_data"]["displacement"]["values"])
    np.testing.assert_allclose(disp, mem["nodes"]["displacement"][nely - points[:, 1], points[:, 0]],
                               rtol=1e-9, atol=1e-12)
    assert disp[:, 1].min() < 0  # gravity down: the structure sags, downwards on the screen
    if field_data:
        assert view["field_data"]["compliance"]["values"] == pytest.approx([mem["compliance"]], rel=1e-9)


@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_paraview_draws_the_design_as_printed(written, paraview, shape, ranks):
    if (shape, ranks) not in written:
        pytest.skip("mpirun not installed")
    folder = written[(shape, ranks)]
    mem = _in_memory(folder)
    _check_paraview_design(paraview[str(folder / "design.xdmf")], mem, "Xdmf3ReaderS")
    _check_paraview_design(paraview[str(folder / "design_quad.xdmf")], mem, "Xdmf3ReaderS", field_data=False)
    _check_paraview_design(paraview[str(folder / "design.vtu")], mem, "XMLUnstructuredGridReader", field_data=False)


@pytest.mark.parametrize("ranks", [1, 2])
def test_paraview_reads_every_step_of_a_history(written, paraview, ranks):
    if ("wide", ranks) not in written:
        pytest.skip("mpirun not installed")
    folder = written[("wide", ranks)]
    mem = _in_memory(folder)
    last = sample.history_densities(mem["rho"], 3)
    for name, reader in (("history.xdmf", "Xdmf3ReaderS"), ("history_quad.xdmf", "Xdmf3ReaderS"),
                         ("history.pvd", "PVDReader")):
        view = paraview[str(folder / name)]
        assert "error" not in view, view.get("error")
        assert view["reader"] == reader and view["times"] == [1.0, 2.0, 3.0]
        assert view["bounds"] == [0.0, mem["lc"].nelx, 0.0, mem["lc"].nely, 0.0, 0.0]
        centres = np.array(view["cell_centres"])
        rows = mem["lc"].nely - 1 - np.floor(centres[:, 1]).astype(int)
        cols = np.floor(centres[:, 0]).astype(int)
        np.testing.assert_allclose(view["cell_data"]["density"]["values"], last[rows, cols], rtol=1e-12)
    fd = paraview[str(folder / "history.xdmf")]["field_data"]
    assert fd["iteration"]["values"] == [3.0]
    assert fd["compliance"]["values"] == pytest.approx([3 * mem["compliance"]], rel=1e-9)


def test_a_run_that_dies_leaves_a_history_paraview_opens(written, paraview):
    import h5py

    folder = written["dying"]
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # no temp files left
    with h5py.File(folder / "dying.h5", "r") as f:
        assert sorted(f) == ["step_000001", "step_000002"]
    view = paraview[str(folder / "dying.xdmf")]
    assert "error" not in view, view.get("error")
    assert view["times"] == [1.0, 2.0] and view["cells"] == 7 * 11


# -- the history writer and the record writer ---------------------------------------------------------
def _steps_in_index(path):
    root = ET.parse(path).getroot()
    return [float(t.get("Value")) for t in root.iter("Time")]


def test_history_index_is_rewritten_after_every_step_and_every_k_skips(tmp_path):
    from sphyr_hpc.runtime.petsc import petsc
    from sphyr_hpc.solvers.elasticity import elasticity_system

    lc, rho, masked = sample.sample_problem(5, 8)
    with elasticity_system(lc, comm=petsc().COMM_SELF, prefix="fields_hist_") as system:
        c = system.solve(system.slab_of(fe.simp_modulus(rho)))
        with fields.HistoryWriter(tmp_path / "run", system, every=2) as writer:
            assert writer.path == tmp_path / "run.xdmf"
            assert writer.write_step(1, system.slab_of(rho), c) is False
            assert not writer.path.exists()
            writer(2, c, system.slab_of(rho), 0.5, fe.PENAL)  # run_simp's callback signature
            assert _steps_in_index(writer.path) == [2.0]
            writer.write_step(3, rho, c)  # natural arrays are accepted too
            writer.write_step(4, rho * 0.5, c)
            assert _steps_in_index(writer.path) == [2.0, 4.0]
            writer.write_step(4, rho, c, force=True)  # replaces step 4, does not add one
            writer.write_step(5, rho, c, force=True)
            assert _steps_in_index(writer.path) == [2.0, 4.0, 5.0]
        import h5py

        with h5py.File(tmp_path / "run.h5", "r") as f:
            assert sorted(f) == ["step_000002", "step_000004", "step_000005"]
            np.testing.assert_array_equal(f["step_000004/density"][()][::-1], rho)
            assert f["step_000002/change"][0] == 0.5 and f["step_000002"].attrs["iteration"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.h5", "run.xdmf"]


def test_history_follows_a_simp_run(tmp_path):
    from sphyr_hpc.runtime.petsc import petsc
    from sphyr_hpc.optimiser import simp
    from sphyr_hpc.optimiser.filter import DensityFilter
    from sphyr_hpc.solvers.elasticity import elasticity_system

    lc, _, _ = sample.sample_problem(6, 12)
    free, pinned = simp.design_space(lc, np.ones(lc.shape, bool), np.zeros(lc.shape))
    with elasticity_system(lc, comm=petsc().COMM_SELF, prefix="fields_simp_") as system:
        flt = DensityFilter(system)
        with fields.HistoryWriter(tmp_path / "simp", system) as writer:
            result = simp.run_simp(system, flt, 0.4, free, pinned, simp.SimpSettings(max_iterations=5),
                                   callback=writer)
            writer.write_step(result.iterations, result.densities, result.compliance, force=True)
        flt.close()
    import h5py

    assert _steps_in_index(tmp_path / "simp.xdmf") == [1.0, 2.0, 3.0, 4.0, 5.0]
    with h5py.File(tmp_path / "simp.h5", "r") as f:
        last = f[f"step_{result.iterations:06d}"]
        np.testing.assert_allclose(last["density"][()][::-1], result.densities, rtol=1e-12)
        # The final step is the consistent state: its energy is half its compliance.
        assert last["strain_energy_density"][()].sum() == pytest.approx(result.compliance / 2, rel=1e-9)
        assert last["compliance"][0] == result.compliance  # the result's own value, written: a round trip


def test_record_fields_are_named_by_model_subject_index_and_design(tmp_path):
    from sphyr_hpc.runtime.petsc import petsc
    from sphyr_hpc.core.analysis import compliance_of
    from sphyr_hpc.solvers.elasticity import elasticity_system
    import h5py

    from sphyr_hpc.scoring import record_fields

    lc, rho, masked = sample.sample_problem(6, 9)
    designs = {"completion": np.where(masked, 0.0, rho), "ground_truth": rho, "optimum": np.full(lc.shape, 0.5)}
    paths = record_fields.write_record_fields(tmp_path / "f", "gpt/4 o", "full easy", 7, lc, designs, masked=masked)
    assert {k: p.name for k, p in paths.items()} == {
        d: f"gpt_4_o__full_easy__0007__{d}.xdmf" for d in ("completion", "ground_truth", "optimum")}
    with elasticity_system(lc, comm=petsc().COMM_SELF, prefix="fields_rec_") as system:
        for name, rho_d in designs.items():
            rho_d = rho_d.copy()
            rho_d[lc.structural_mask()] = 1.0  # L and S are always solid
            with h5py.File(paths[name].with_suffix(".h5"), "r") as f:
                np.testing.assert_array_equal(f["density"][()][::-1], rho_d)
                assert f["compliance"][0] == pytest.approx(compliance_of(system, rho_d), rel=1e-9)
                np.testing.assert_array_equal(f["marker"][()][::-1] == 3, masked)
    vtu = record_fields.write_record_fields(tmp_path / "v", "m", "s", 1, lc, {"optimum": rho}, fields_format="vtu")
    assert vtu["optimum"].name == "m__s__0001__optimum.vtu" and vtu["optimum"].exists()


def test_an_unknown_format_is_refused(tmp_path):
    lc, rho, _ = sample.sample_problem(3, 4)
    with pytest.raises(ValueError, match="unknown fields format"):
        fields.write_natural_fields(tmp_path / "x", lc, rho, np.zeros(lc.n_dofs), fields_format="vtk")


# -- MPI ----------------------------------------------------------------------------------------------
@pytest.mark.mpi
def test_two_rank_files_equal_a_one_rank_write(monkeypatch):
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    if world.size < 2:
        pytest.skip("needs 2 MPI ranks: bin/mpirun -n 2 python -m pytest -m mpi tests/test_fields.py")
    import h5py

    from sphyr_hpc.runtime.petsc import petsc
    from sphyr_hpc.solvers.elasticity import elasticity_system

    PETSc = petsc()
    folder = Path(world.bcast(tempfile.mkdtemp(prefix="sphyr_fields_mpi_") if world.rank == 0 else None, root=0))

    def write(lc, rho, masked, comm, out, prefix):
        with elasticity_system(lc, comm=comm, prefix=prefix, solver="direct") as system:
            c = system.solve(system.slab_of(fe.simp_modulus(rho)))
            split = int(np.prod(system.slab_shape)) < lc.n_elements
            for fmt, name in (("xdmf", "design"), ("xdmf-quad", "design_quad")):
                fields.write_fields(out / name, system, system.slab_of(rho), masked=masked, compliance=c,
                                    fields_format=fmt)
            with monkeypatch.context() as patch:
                # Without an MPI build of h5py the pieces are gathered to rank 0, which writes alone.
                patch.setattr(field_files, "_h5py_has_mpi", lambda: False)
                fields.write_fields(out / "design_gathered", system, system.slab_of(rho), masked=masked,
                                    compliance=c)
            with fields.HistoryWriter(out / "history", system, masked=masked) as writer:
                for step in (1, 2):
                    writer.write_step(step, system.slab_of(sample.history_densities(rho, step)), c * step)
        return split

    verdict = None
    try:
        problems = []
        for shape, (nely, nelx) in SHAPES.items():
            lc, rho, masked = sample.sample_problem(nely, nelx)
            split = write(lc, rho, masked, PETSc.COMM_WORLD, folder / f"{shape}_world", f"mpi_fields_{shape}_")
            if not world.allreduce(split, op=MPI.LAND):
                problems.append(f"{shape}: the grid was not split between the ranks")
            if world.rank == 0:
                write(lc, rho, masked, PETSc.COMM_SELF, folder / f"{shape}_self", f"self_fields_{shape}_")
                for name, ref in (("design.h5", "design.h5"), ("design_quad.h5", "design_quad.h5"),
                                  ("history.h5", "history.h5"), ("design_gathered.h5", "design.h5")):
                    with h5py.File(folder / f"{shape}_world" / name, "r") as a, \
                            h5py.File(folder / f"{shape}_self" / ref, "r") as b:
                        keys = []
                        b.visit(keys.append)
                        for key in keys:
                            if isinstance(b[key], h5py.Dataset):
                                x, y = a[key][()], b[key][()]
                                scale = max(1.0, float(np.abs(np.nan_to_num(y)).max()))
                                if x.shape != y.shape or not np.allclose(x, y, rtol=1e-9, atol=1e-12 * scale,
                                                                         equal_nan=True):
                                    problems.append(f"{shape}/{name}:{key} differs")
                for name in ("design.xdmf", "history.xdmf"):
                    if (folder / f"{shape}_world" / name).read_text() != (folder / f"{shape}_self" / name).read_text():
                        problems.append(f"{shape}/{name} differs")
        verdict = problems
    except Exception:  # noqa: BLE001 - reported on every rank below
        verdict = [f"rank {world.rank}: {traceback.format_exc()}"]
    verdicts = world.allgather(verdict)
    if world.rank == 0:
        shutil.rmtree(folder, ignore_errors=True)
    world.Barrier()
    assert verdicts == [[]] * world.size, verdicts
