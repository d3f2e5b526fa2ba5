"""The classic problems as published: the 88-line code's half MBB beam (``--preset mbb88``), its filters,
OC update and stopping rule, against an independent NumPy/SciPy implementation of the listing
(tests/top88_reference.py), on 1 rank and (``-m mpi``) on 2."""

import functools
import json

import numpy as np
import pytest
from mpi4py import MPI

from conftest import collective, two_ranks_marker
from sphyr_hpc import optimize
from sphyr_hpc.optimiser import problems
from sphyr_hpc.optimiser.problems import ProblemError
from sphyr_hpc.optimiser.simp import SettingError, SimpSettings
from top88_reference import element_matrix, top88

WORLD = MPI.COMM_WORLD
two_ranks = two_ranks_marker("tests/test_classic.py")
FILTERS = {"sensitivity": 1, "density": 2}
RELATIVE = 1e-6


@functools.lru_cache(maxsize=None)
def reference(nelx, nely, ft):
    return top88(nelx, nely, 0.5, 3.0, 1.5 * nelx / 60, ft)


def command(nelx, nely, filter_name, json_path):
    """The issue's command, at any size (radius 1.5 nelx / 60)."""
    return ["--preset", "mbb88", "--size", f"{nelx}x{nely}", "--volfrac", "0.5", "--penal", "3",
            "--radius", f"{1.5 * nelx / 60:g}", "--filter", filter_name, "--continuation", "none",
            "--json", str(json_path), "--quiet"]


# -- the problem --------------------------------------------------------------------------------------
def test_mbb88_has_the_listings_loads_and_supports():
    nelx, nely = 6, 3
    problem = problems.preset("mbb88", nelx, nely)
    lc = problem.loadcase()
    free, pinned = problem.design()
    assert free.all() and not pinned.any()  # no load or support cell: every cell designed, from the same start
    assert lc.load_cells == () and lc.support_cells == ()
    forces = lc.force_vector()
    # The listing's F(2) = -1 with y up: a unit force down (+y here, y is down) on the top-left node.
    assert np.flatnonzero(forces).tolist() == [1] and forces[1] == 1.0
    # fixeddofs = union(1:2:2*(nely+1), 2*(nelx+1)*(nely+1)): x of the left edge, y of the bottom-right node.
    left_x = [2 * (r * (nelx + 1)) for r in range(nely + 1)]
    bottom_right_y = 2 * ((nely + 1) * (nelx + 1) - 1) + 1
    assert lc.fixed_dofs().tolist() == sorted(left_x + [bottom_right_y])
    assert problem.volume_fraction == 0.5


def test_the_element_matrix_is_the_listings():
    """The package's Q4 matrix (nodes TL, TR, BR, BL with y down) is the listing's KE (BL, BR, TR, TL, y up)."""
    from sphyr_hpc.core import discretisation as fe

    ke = fe.element_stiffness()
    # Listing node k (BL, BR, TR, TL) is package node (3, 2, 1, 0); its y is the package's -y.
    order = np.array([6, 7, 4, 5, 2, 3, 0, 1])
    sign = np.tile([1.0, -1.0], 4)
    mapped = ke[np.ix_(order, order)] * np.outer(sign, sign)
    assert np.allclose(mapped, element_matrix(), rtol=0, atol=1e-14)


def test_nodal_forces_go_through_problem_files_and_upscaling(tmp_path):
    problem = problems.preset("mbb88", 30, 10, 0.45)
    path = problems.write_problem(problem, tmp_path / "mbb88.json")
    assert json.loads(path.read_text())["nodal_forces"] == [[0, 0, 1.0, 0.0]]
    assert problems.read_problem(path) == problem
    assert problem.upscaled(3).loadcase() == problems.preset("mbb88", 90, 30, 0.45).loadcase()
    # A force along the columns goes onto the node's x DOF.
    sideways = problems.Problem.from_dict({**problem.to_dict(), "nodal_forces": [[10, 30, 0.0, -2.0]]})
    forces = sideways.loadcase().force_vector()
    node = 10 * 31 + 30
    assert np.flatnonzero(forces).tolist() == [2 * node] and forces[2 * node] == -2.0


@pytest.mark.parametrize("change, message", [
    ({"nodal_forces": [[11, 0, 1.0, 0.0]]}, "outside"),
    ({"nodal_forces": [[0, 0, 0.0, 0.0]]}, "no load"),
    ({"nodal_forces": [[0, 0, "nan", 0.0]]}, "not finite"),
    ({"fixed_nodes": []}, "no support"),
])
def test_a_bad_nodal_problem_is_refused_with_the_reason(tmp_path, change, message):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**problems.preset("mbb88", 30, 10).to_dict(), **change}))
    with pytest.raises(ProblemError, match=message):
        problems.read_problem(bad)


def test_an_unknown_filter_is_a_usage_error(capsys):
    assert optimize.main(["--preset", "mbb88", "--size", "6x2", "--filter", "heaviside"]) == 2
    assert "--filter" in capsys.readouterr().err
    with pytest.raises(SettingError, match="filter heaviside"):
        SimpSettings(update="oc88", filter="heaviside")


# -- the algorithm -------------------------------------------------------------------------------------
@pytest.mark.parametrize("filter_name", FILTERS)
def test_optimize_follows_the_88_line_code_at_60x20(tmp_path, filter_name):
    """The issue's command: the listing's iteration count and final compliance (to 1e-6 relative)."""
    assert optimize.main(command(60, 20, filter_name, tmp_path / "out.json")) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    ref = reference(60, 20, FILTERS[filter_name])
    assert out["update"] == "oc88" and out["filter"] == filter_name and out["solver"] == "direct"
    assert out["converged"] and out["iterations"] == ref["iterations"]
    assert out["compliance"] == pytest.approx(ref["compliance"], rel=RELATIVE)
    # Every iteration on the same path, not just the last: the compliance history.
    ours = [row["compliance"] for row in out["history"]]
    assert np.allclose(ours, [c for _, c, _ in ref["history"]], rtol=RELATIVE, atol=0)
    assert out["volume_fraction"] == pytest.approx(0.5, abs=1e-3)


def test_the_sensitivity_filter_runs_on_a_problem_with_pinned_cells(tmp_path):
    """The cantilever's load cells are pinned solid: the design keeps them and meets the volume."""
    assert optimize.main(["--preset", "cantilever", "--size", "40x20", "--filter", "sensitivity", "--quiet",
                          "--save-density", str(tmp_path / "x.npy"), "--json", str(tmp_path / "out.json")]) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    density = np.load(tmp_path / "x.npy")
    load, _ = problems.preset("cantilever", 40, 20).markers()
    assert out["update"] == "oc88" and out["converged"]
    assert (density[load] == 1.0).all() and abs(density.mean() - 0.4) < 1e-3


def test_mbb88_with_continuation_runs_the_default_update(tmp_path):
    """Without ``--continuation none`` (and with the density filter) the package's own OC runs."""
    assert optimize.main(["--preset", "mbb88", "--size", "30x10", "--iterations", "5", "--quiet",
                          "--json", str(tmp_path / "out.json")]) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["update"] == "oc" and out["iterations"] == 5


@two_ranks
@pytest.mark.parametrize("filter_name", FILTERS)
def test_optimize_on_2_ranks_follows_the_88_line_code_at_60x20(tmp_path, filter_name):
    path = WORLD.bcast(str(tmp_path / "out.json"))
    assert collective(lambda: optimize.main(command(60, 20, filter_name, path))) == [0, 0]
    WORLD.Barrier()
    out = json.loads(open(path).read())
    ref = reference(60, 20, FILTERS[filter_name])
    assert out["ranks"] == 2 and out["solver"] == "direct"
    assert out["iterations"] == ref["iterations"]
    assert out["compliance"] == pytest.approx(ref["compliance"], rel=RELATIVE)
