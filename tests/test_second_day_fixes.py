"""The smaller things of a maintainer's second day, each as it should be."""

import re

import pytest

from conftest import ROOT
from sphyr_hpc.store import main as store_main


def test_the_fields_page_says_the_step_optimize_writes_by_default():
    from sphyr_hpc.optimize import build_parser

    every = build_parser().parse_args(["--preset", "mbb"]).fields_every
    text = " ".join((ROOT / "docs" / "fields.md").read_text().split())
    assert f"a step every {every} iterations" in text
    assert "one step per iteration" not in text


def test_a_blank_panel_of_a_model_page_says_what_it_lacks():
    from sphyr_hpc.reporting.model_page import _caption, blank_panels

    truth = ["0 L", "S S"]
    analysed = {"index": 0, "topology_score": 1.0, "failure": "sound",
                "grids": {"completion": truth, "ground_truth": truth, "optimum": ["1.000 1.000", "1.000 1.000"]}}
    invalid = {"index": 3, "topology_score": 0.0, "failure": "wrong_shape",
               "grids": {"completion": ["0 L 0"], "ground_truth": truth}}
    assert blank_panels(analysed) == []
    assert blank_panels(invalid) == ["yardstick optimum (not computed: the completion was not analysed)"]
    assert _caption("worst", invalid, 1).endswith("; blank: yardstick optimum (not computed: the completion was "
                                                  "not analysed)")
    assert _caption("best", analysed, 1) == "best: #0 topo 1.000 sound"


@pytest.mark.parametrize("where, message", [("typo", "no such store folder: "), ("file", "is a file; --store names")])
def test_store_list_of_a_store_that_is_not_there_is_a_usage_error(tmp_path, capsys, where, message):
    path = tmp_path / where
    if where == "file":
        path.write_text("x")
    assert store_main(["list", "--store", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_store_list_of_an_empty_store_folder_still_lists_it(tmp_path, capsys):
    assert store_main(["list", "--store", str(tmp_path)]) == 0
    assert re.search(r"entries: 0 ", capsys.readouterr().out)


def test_certify_png_keeps_its_largest_gap_whole_inside_the_axes():
    from sphyr_hpc.reporting.certified import figure

    rows = [{"subject": "full_easy", "yardstick_gap": gap, "status": status}
            for gap, status in ((0.0, "optimal"), (0.02, "bounded"), (0.116, "bounded"))]
    fig = figure(rows, {"full_easy": {"share_optimal": 1 / 3}})
    fig.canvas.draw()
    axes = fig.axes[1]
    radius = (12 ** 0.5) / 2 * fig.dpi / 72  # scatter s=12 points^2: the marker's radius in pixels
    for gap in (0.0, 11.6):
        x, _ = axes.transData.transform((gap, 0.0))
        left, right = axes.bbox.x0, axes.bbox.x1
        assert left + radius < x < right - radius, (gap, x, left, right)


def test_the_scaling_estimate_counts_the_start_up_every_run_pays():
    """Runs of 5 s start-up plus 0.1 s per unit of cost: after the first (cost 1) the time left is
    3 start-ups and 14 units of cost, 16.4 s, not the first run's time scaled by cost (71 s)."""
    from sphyr_hpc.jobs.scaling import _Eta

    costs = [1, 2, 4, 8]
    eta = _Eta(costs)

    def left(line):
        minutes, seconds = re.search(r"about (\d+):(\d\d) left", line).groups()
        return 60 * int(minutes) + int(seconds)

    for i, cost in enumerate(costs):
        line = eta.step(5.0 + 0.1 * cost, 0.1 * cost)
        assert abs(left(line) - sum(5.0 + 0.1 * c for c in costs[i + 1:])) <= 1, line
    assert left(line) == 0


def test_an_optimisation_s_picture_marks_its_loads_and_supports(tmp_path):
    import matplotlib.image

    from sphyr_hpc.optimiser.problems import preset
    from sphyr_hpc.reporting.density import problem_markers, save_png

    problem = preset("cantilever", 40, 20)
    loads, supports = problem_markers(problem)
    assert loads and supports
    density = problem.design()[1] * 0.0 + 0.5
    save_png(density, tmp_path / "marked.png", "cantilever", markers=(loads, supports))
    save_png(density, tmp_path / "plain.png", "cantilever")

    def coloured(path, channel):  # pixels where one channel dominates: red loads, blue supports
        rgb = matplotlib.image.imread(path)[..., :3]
        others = [c for c in range(3) if c != channel]
        return ((rgb[..., channel] > 0.6) & (rgb[..., others].max(axis=-1) < 0.5)).sum()

    assert coloured(tmp_path / "marked.png", 0) > 0 and coloured(tmp_path / "marked.png", 2) > 0
    assert coloured(tmp_path / "plain.png", 0) == 0 and coloured(tmp_path / "plain.png", 2) == 0


def test_one_iteration_is_said_so(tmp_path):
    from conftest import run_in_process
    from sphyr_hpc import optimize

    done = run_in_process(optimize.main, ["--preset", "cantilever", "--size", "24x12", "--iterations", "1",
                                          "--png", tmp_path / "d.png"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"after 1 iteration:", done.stdout), done.stdout
    assert (tmp_path / "d.png").stat().st_size > 0
