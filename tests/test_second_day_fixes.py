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
