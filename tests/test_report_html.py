"""report.html and summary.json's failures on the bundled examples: counts by hand, a page that opens."""

import base64
import json
import time
from html.parser import HTMLParser

import pytest

from conftest import EXAMPLE_RESULTS
from sphyr_hpc.scoring import diagnosis as failures
from sphyr_hpc.reporting import html as html_report
from sphyr_hpc.io.records import find_result_files
from sphyr_hpc.report import main as report_main
from sphyr_hpc.score import main as score_main

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def scored(bundled_scored):
    """The bundled examples' score run (conftest.py): read, never written."""
    return bundled_scored


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.links, self.tags, self.tables = [], [], set(), 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        self.tables += tag == "table"
        if tag == "img":
            self.images.append(attrs["src"])
        if tag == "a":
            self.links.append(attrs["href"])


def _page(out):
    page = _Page()
    page.feed((out / "report.html").read_text(encoding="utf-8"))
    page.close()
    return page


def test_the_exact_match_table_equals_a_count_by_hand_on_the_bundled_examples(scored):
    by_hand = {}
    for path in find_result_files([EXAMPLE_RESULTS]):
        for record in json.loads(path.read_text()):  # the published records' own flags
            if record["valid_output_grid"]:
                for name in (path.parent.name, failures.OVERALL):
                    counts = by_hand.setdefault(name, {"valid_grids": 0, "exact_carrying": 0, "exact_severed": 0,
                                                       "inexact_carrying": 0, "inexact_severed": 0})
                    counts["valid_grids"] += 1
                    counts[("exact_" if record["exact_match"] else "inexact_")
                           + ("carrying" if record["load_carrying"] else "severed")] += 1
    summary = json.loads((scored / "summary.json").read_text())[failures.SUMMARY_KEY]
    tables = dict(summary["models"], **{failures.OVERALL: summary[failures.OVERALL]})
    assert set(tables) == {"baseline-empty", "baseline-random", failures.OVERALL}
    for name, table in tables.items():
        mine = table["exact_match_vs_load_carrying"]
        assert {k: v for k, v in mine.items() if k != "carrying_not_exact"} == by_hand[name]
        assert mine["carrying_not_exact"] == by_hand[name]["inexact_carrying"] / by_hand[name]["valid_grids"]


def test_every_scored_record_has_one_category_and_the_shares_add_up(scored):
    rows = [json.loads(line) for line in (scored / "results.jsonl").read_text().splitlines()]
    assert all(row["failure"] in failures.CATEGORIES and len(row["checks"]) == len(failures.CHECKS) for row in rows)
    summary = json.loads((scored / "summary.json").read_text())[failures.SUMMARY_KEY]
    for tally in list(summary["models"].values()) + [summary[failures.OVERALL]]:
        assert sum(tally["counts"].values()) == tally["records"]
        assert sum(tally["shares"].values()) == pytest.approx(1.0)
    # a completion the scorer calls sound passed every check
    assert all(set(row["checks"].values()) == {failures.PASS} for row in rows if row["failure"] == failures.SOUND)


def test_the_report_opens_and_every_picture_it_names_is_a_png(scored):
    page = _page(scored)
    assert "script" not in page.tags and page.tables >= 5
    pngs = [link for link in page.links if link.endswith(".png")]
    assert len(pngs) == len(page.images) == 2  # heat map, failure bars: the grids are on the model pages
    for src, link in zip(page.images, pngs):
        assert src.startswith("data:image/png;base64,")
        embedded = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert embedded.startswith(PNG)
        on_disk = (scored / link).read_bytes()
        assert on_disk == embedded  # the file beside the page is the picture in it
    assert {p.rsplit("/", 1)[-1] for p in pngs} == {"topology_heat_map.png", "failures.png"}
    pages = sorted({link for link in page.links if link.endswith(".html")})
    assert pages == ["report/baseline-empty.html", "report/baseline-random.html"]
    for link in pages:  # each model's page: its best and worst grids, embedded
        model_page = _Page()
        model_page.feed((scored / link).read_text(encoding="utf-8"))
        assert len(model_page.images) >= 16 and all(
            base64.b64decode(src.split(",", 1)[1], validate=True).startswith(PNG) for src in model_page.images)


def test_reporting_again_from_results_jsonl_alone_reproduces_the_pictures(scored, tmp_path):
    again = tmp_path / "again"
    again.mkdir()
    (again / "results.jsonl").write_bytes((scored / "results.jsonl").read_bytes())
    started = time.perf_counter()
    assert report_main([str(again)]) == 0
    assert time.perf_counter() - started < 10.0
    for picture in (scored / html_report.PICTURES).iterdir():
        mine = again / html_report.PICTURES / picture.name
        if picture.suffix == ".png":  # the same numbers drawn by the same code: exact
            assert mine.read_bytes() == picture.read_bytes()
        else:  # a model page: the same pictures (its title and time may differ)
            pages = [_Page(), _Page()]
            for page, path in zip(pages, (mine, picture)):
                page.feed(path.read_text(encoding="utf-8"))
            assert pages[0].images == pages[1].images
    assert _page(again).images == _page(scored).images


def test_score_without_report_writes_none(tmp_path):
    root = tmp_path / "results" / "baseline-empty"
    root.mkdir(parents=True)
    (root / "full_easy.json").write_text((EXAMPLE_RESULTS / "baseline-empty" / "full_easy.json").read_text())
    assert score_main([str(tmp_path / "results"), "--out", str(tmp_path / "out"), "--quiet", "--no-report"]) == 0
    assert (tmp_path / "out" / "results.jsonl").is_file() and not (tmp_path / "out" / "report.html").exists()


def test_a_folder_without_results_is_a_usage_error(tmp_path, capsys):
    assert report_main([str(tmp_path)]) == 2
    assert "no results.jsonl" in capsys.readouterr().err


@pytest.mark.skipif(html_report.browser() is None, reason="no chromium on PATH (bin/setup installs it)")
def test_the_report_renders_in_headless_chromium(scored, tmp_path):
    from matplotlib.image import imread

    shot = html_report.screenshot(scored / "report.html", tmp_path / "shot.png", width=1200, height=1600)
    pixels = imread(shot)
    assert pixels.shape[:2] == (1600, 1200)
    # the page drew tables and pictures, not a blank or an error page: many distinct colours
    colours = {tuple(p) for p in (pixels[::8, ::8, :3] * 255).astype(int).reshape(-1, 3)}
    assert len(colours) > 50


@pytest.mark.parametrize("lines", [[], ['{"model": "m", "subject": "s", "index": 0, "error": "broken"}', "not json",
                                        '{"model": 3, "subject": "s", "index": 2}',
                                        '{"model": "m", "subject": "s", "index": 1, "topology_score": 0.5}']])
def test_a_run_with_nothing_scored_or_broken_lines_still_gets_a_report(tmp_path, lines):
    (tmp_path / "results.jsonl").write_text("".join(line + "\n" for line in lines))
    assert report_main([str(tmp_path)]) == 0
    page = _page(tmp_path)
    assert len(page.images) >= 2 and all((tmp_path / link).read_bytes().startswith(PNG)
                                         for link in page.links if link.endswith(".png"))
    if lines:  # an unreadable line and a record without a category are counted, not fatal
        text = (tmp_path / "report.html").read_text()
        assert "2 lines of results.jsonl dropped" in text and "1 record without a known failure category" in text


def test_a_report_of_samples_larger_than_its_pictures_is_drawn(scored, tmp_path):
    # A 160x160 sample has more cells than a mosaic panel has pixels: drawn at one pixel per
    # panel pixel instead of failing the run after every record was scored.
    row = json.loads((scored / "results.jsonl").read_text().splitlines()[0])
    k = 16
    row["grids"] = {name: [" ".join(cell for cell in line.split() for _ in range(k)) for line in lines
                           for _ in range(k)]
                    for name, lines in row["grids"].items()}
    big = tmp_path / "big"
    big.mkdir()
    (big / "results.jsonl").write_text(json.dumps(row) + "\n")
    assert len(row["grids"]["ground_truth"]) == 160
    assert report_main([str(big)]) == 0
    model_page = _Page()
    model_page.feed((big / "report" / f"{row['model']}.html").read_text(encoding="utf-8"))
    assert len(model_page.images) == 1  # one record: best and worst are one picture
    for src in model_page.images:
        assert base64.b64decode(src.split(",", 1)[1], validate=True).startswith(PNG)


def test_score_says_where_the_report_and_leaderboard_are(tmp_path, capsys):
    root = tmp_path / "results" / "baseline-empty"
    root.mkdir(parents=True)
    (root / "full_easy.json").write_text((EXAMPLE_RESULTS / "baseline-empty" / "full_easy.json").read_text())
    out = tmp_path / "out"
    assert score_main([str(tmp_path / "results"), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"leaderboard: {out / 'leaderboard.png'}" in printed and f"report: {out / 'report.html'}" in printed
    run = json.loads((out / "run.json").read_text())["seconds"]
    assert run["report"] > 0 and sum(run["phases"].values()) == pytest.approx(run["process"], abs=0.01)


def test_summary_json_holds_the_intervals_the_report_shows(scored):
    from sphyr_hpc.reporting.collect import ReportData

    summary = json.loads((scored / "summary.json").read_text())
    again = ReportData.read(scored / "results.jsonl")[0].summary()
    assert summary["uncertainty"] == json.loads(json.dumps(again["uncertainty"]))
    assert set(summary["uncertainty"]["models"]) == {"baseline-empty", "baseline-random"}
    assert [p["above"] for p in summary["uncertainty"]["adjacent"]] == ["baseline-random"]


def test_report_counts_the_model_pages_and_the_pictures_it_wrote(scored, tmp_path, capsys):
    again = tmp_path / "again"
    again.mkdir()
    (again / "results.jsonl").write_bytes((scored / "results.jsonl").read_bytes())
    assert report_main([str(again)]) == 0
    printed = capsys.readouterr().out
    written = list((again / html_report.PICTURES).iterdir())
    pages = sum(p.suffix == ".html" for p in written)
    assert pages == 2  # the bundled examples' two models
    assert f"({pages} model pages and {len(written) - pages} pictures in {again / html_report.PICTURES})" in printed
