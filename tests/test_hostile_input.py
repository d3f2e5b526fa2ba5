"""Hostile input at any size: one bad file costs only itself, and no input buys unbounded work."""

import json
import os
import time

import pytest

from sphyr_hpc.core import grid as grids
from sphyr_hpc.io import jsonl, records
from sphyr_hpc.io.limits import InputLimits
from sphyr_hpc.score import main
from test_score_cli import GT, PROMPT, _record


def _folder(tmp_path, files):
    root = tmp_path / "results" / "model-a"
    root.mkdir(parents=True)
    for name, content in files.items():
        path = root / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if isinstance(content, str) else json.dumps(content))
    return tmp_path / "results"


def _score(tmp_path, *args):
    out = tmp_path / "out"
    # --overwrite: a test scores into out again; --no-report: these claims are the rows, stderr and
    # leaderboard.png (drawn without the report), and the report of hostile records is drawn by
    # test_hostile_files_beside_the_bundled_examples... below and tests/test_fuzz.py.
    status = main([*map(str, args), "--out", str(out), "--quiet", "--overwrite", "--no-report"])
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return status, {(r["subject"], r["index"]): r for r in rows}


def _solid(nely, nelx):
    """A ground truth of nely x nelx: loads on the top row, supports on the bottom one, solid between."""
    rows = [" ".join(["L"] * nelx)] + [" ".join(["1"] * nelx)] * (nely - 2) + [" ".join(["S"] * nelx)]
    return "\n".join(rows)


@pytest.mark.parametrize("name, content, reason", [
    ("nested_results.json", "[" * 100_000, "not readable JSON: nested too deeply to decode"),
    ("latin1_results.json", json.dumps([_record()]).replace("Below", "B\u00e9low").encode("latin-1"),
     "not UTF-8: 'utf-8' codec can't decode byte 0xe9"),
    ("utf16_results.json", json.dumps([_record()]).encode("utf-16"), "not UTF-8"),
    ("cut_results.json", json.dumps([_record()])[:-3], "not valid JSON: "),
    ("empty_results.json", "", "not valid JSON: Expecting value"),
    ("number_results.json", "42", "expected a JSON array of records, found a int"),
    ("digits_results.json", "[" + "1" * 5000 + "]", "not valid JSON: Exceeds the limit (4300 digits)"),
])
def test_a_file_that_cannot_be_decoded_is_named_with_its_reason_and_the_others_are_scored(
        tmp_path, capsys, name, content, reason):
    folder = _folder(tmp_path, {name: content, "good_results.json": [_record()]})
    status, rows = _score(tmp_path, folder)
    err = capsys.readouterr().err
    assert status == 1
    assert f"{name}: {reason}" in err
    assert list(rows) == [("good", 0)] and "error" not in rows[("good", 0)]
    assert "Traceback" not in err


def test_a_fifo_or_a_dangling_link_named_like_a_result_file_is_named_instead_of_blocking_or_vanishing(
        tmp_path, capsys):
    folder = _folder(tmp_path, {"good_results.json": [_record()]})
    fifo, inside, dangling = tmp_path / "pipe_results.json", folder / "model-a" / "pipe_results.json", \
        folder / "model-a" / "gone_results.json"
    os.mkfifo(fifo)
    os.mkfifo(inside)
    dangling.symlink_to(tmp_path / "nowhere.json")
    status, rows = _score(tmp_path, folder, fifo)
    err = capsys.readouterr().err
    assert status == 1
    assert f"{fifo}: not a regular file" in err and f"{inside}: not a regular file" in err
    assert f"{dangling}: cannot read: [Errno 2] No such file or directory" in err
    assert list(rows) == [("good", 0)]


def test_running_out_of_memory_while_decoding_one_file_costs_only_that_file(tmp_path, monkeypatch):
    real = jsonl.json.loads

    def loads(text, *args, **kwargs):
        if "greedy" in text:
            raise MemoryError
        return real(text, *args, **kwargs)

    monkeypatch.setattr(jsonl.json, "loads", loads)
    folder = _folder(tmp_path, {"greedy_results.json": [_record(), "greedy"], "good_results.json": [_record()]})
    problem = records.read_result_file(folder / "model-a" / "greedy_results.json")
    assert problem.reason == "not readable JSON: too large to decode in memory"
    assert len(records.read_result_file(folder / "model-a" / "good_results.json")) == 1


def test_a_file_over_the_size_limit_is_refused_from_its_size_without_being_read(tmp_path, monkeypatch):
    folder = _folder(tmp_path, {"good_results.json": [_record()]})
    huge = folder / "model-a" / "huge_results.json"
    with open(huge, "wb") as handle:  # sparse: 300 MB of zeros that take no disk
        handle.truncate(300 * 2**20)
    problem = records.read_result_file(huge)
    assert problem.reason == ("file is 314,572,800 bytes, over the limit of 268,435,456 "
                              "(raise it with --max-file-bytes)")
    size = (folder / "model-a" / "good_results.json").stat().st_size
    small = InputLimits(max_file_bytes=size - 1)
    assert "raise it with --max-file-bytes" in records.read_result_file(folder / "model-a" / "good_results.json",
                                                                        limits=small).reason
    assert len(records.read_result_file(folder / "model-a" / "good_results.json",
                                        limits=InputLimits(max_file_bytes=size))) == 1


@pytest.mark.parametrize("completion, length", [
    ("0 1 0 1 0\n" * 2_000_000, 20_000_000),       # 2,000,000 lines, 20 MB
    ("0 " * 5_000_000, 10_000_000),                 # one 10 MB line
    ([["0"] * 1000] * 1000, 2_000_000),              # a million cells as a list of rows
])
def test_a_completion_over_the_text_limit_is_invalid_naming_the_limit_without_being_parsed(
        tmp_path, completion, length):
    folder = _folder(tmp_path, {"long_results.json": [_record(completion=completion), _record()]})
    started = time.perf_counter()
    status, rows = _score(tmp_path, folder)
    seconds = time.perf_counter() - started
    row = rows[("long", 0)]
    assert status == 0
    assert row["invalid_reason"] == (f"completion is {length:,} characters, over the limit of 1,000,000 on a "
                                     "grid's text (raise it with --max-text-chars)")
    assert row["physically_valid"] is False and row["topology_score"] == 0.0 and row["exact_match"] is False
    assert "error" not in rows[("long", 1)] and rows[("long", 1)]["topology_score"] > 0.0
    assert seconds < 10.0  # was ~25 s per such completion when it was parsed


def test_the_text_limit_is_inclusive_and_configurable(tmp_path):
    text = "\n".join(GT) + "\n\n" + "Explanation: " * 20  # longer than the prompt, which the limit also bounds
    folder = _folder(tmp_path, {"toy_results.json": [_record(completion=text)]})
    status, rows = _score(tmp_path, folder, "--max-text-chars", len(text))
    assert rows[("toy", 0)]["exact_match"] is True and "invalid_reason" not in rows[("toy", 0)]
    status, rows = _score(tmp_path, folder, "--max-text-chars", len(text) - 1, "--resume")
    assert rows[("toy", 0)]["exact_match"] is True  # --resume keeps the row already written
    (tmp_path / "out" / "results.jsonl").unlink()
    status, rows = _score(tmp_path, folder, "--max-text-chars", len(text) - 1)
    reason = rows[("toy", 0)]["invalid_reason"]
    assert f"completion is {len(text)} characters, over the limit of {len(text) - 1}" in reason


def test_text_length_of_a_list_of_rows_is_the_length_of_the_text_it_prints_as():
    rows = [["0", "L", "1.0"], ["S", "0.25", "V"]]
    assert grids.text_length(rows) == len(grids.grid_to_text(rows)) + 1  # + the last line break
    assert grids.text_length(["0 L 1.0", "S 0.25 V"]) == len("0 L 1.0\nS 0.25 V\n")
    assert grids.text_length("0 L\nS 0") == 7 and grids.text_length(3.5) == 0


def test_a_ground_truth_over_max_cells_is_refused_per_record_saying_how_to_raise_it(tmp_path, capsys):
    big = _solid(300, 300)
    folder = _folder(tmp_path, {"big_results.json": [_record(ground_truth=big, completion=big), _record()]})
    started = time.perf_counter()
    status, rows = _score(tmp_path, folder)
    assert time.perf_counter() - started < 10.0
    assert status == 1
    message = "ground truth is 300x300 = 90,000 cells, over the limit of 65,536 (raise it with --max-cells)"
    assert rows[("big", 0)]["error"] == f"{folder / 'model-a' / 'big_results.json'} record 0: {message}"
    assert message in capsys.readouterr().err
    assert "error" not in rows[("big", 1)]


def test_max_cells_is_inclusive_and_configurable(tmp_path):
    folder = _folder(tmp_path, {"toy_results.json": [_record()]})
    status, rows = _score(tmp_path, folder, "--max-cells", 15)
    assert status == 1 and "4x4 = 16 cells, over the limit of 15" in rows[("toy", 0)]["error"]
    status, rows = _score(tmp_path, folder, "--max-cells", 16)
    assert status == 0 and rows[("toy", 0)]["topology_score"] > 0.0


def test_a_1000x1000_ground_truth_is_refused_at_once(tmp_path):
    big = _solid(1000, 1000)
    folder = _folder(tmp_path, {"big_results.json": [_record(ground_truth=big, completion=big)]})
    started = time.perf_counter()
    status, rows = _score(tmp_path, folder)
    assert time.perf_counter() - started < 10.0
    assert status == 1
    assert rows[("big", 0)]["error"].endswith(
        "ground_truth is 1,999,999 characters, over the limit of 1,000,000 on a grid's text "
        "(raise it with --max-text-chars)")
    status, rows = _score(tmp_path, folder, "--max-text-chars", 2_000_000)
    assert rows[("big", 0)]["error"].endswith(
        "ground truth is 1000x1000 = 1,000,000 cells, over the limit of 65,536 (raise it with --max-cells)")


def test_a_jsonl_line_that_cannot_be_read_costs_only_that_line(tmp_path, capsys):
    truth = [row.split() for row in GT]
    masked = [truth[0], ["V"] * 4, ["V"] * 4, truth[3]]
    good = {"input_grid": masked, "ground_truth": truth}
    dataset = tmp_path / "toy.jsonl"
    dataset.write_bytes(b"\n".join([
        json.dumps({"index": 0, **good}).encode(),
        b"[" * 100_000,                                        # line 2: nested too deeply
        json.dumps({"index": 2, **good}).encode().replace(b"L", b"\xff", 1),  # line 3: not UTF-8
        b"[1, 2]",                                             # line 4: not an object
        json.dumps({"index": 4, **good}).encode(),
        json.dumps({"index": 5, **good, "ground_truth": _solid(300, 300)}).encode(),
    ]))
    completions = tmp_path / "model-b.jsonl"
    completions.write_text("\n".join(json.dumps(r) for r in [
        {"index": 0, "completion": "\n".join(GT)},
        {"index": 4, "completion": "0 1\n" * 300_000},
        {"index": 5, "completion": "0"},
    ]))
    status, rows = _score(tmp_path, "--dataset", dataset, "--completions", completions)
    err = capsys.readouterr().err
    assert status == 1
    assert f"{dataset}:2: not readable JSON: nested too deeply to decode" in err
    assert f"{dataset}:3: not UTF-8" in err
    assert f"{dataset}:4: a record must be a JSON object, not list" in err
    assert rows[("toy", 0)]["exact_match"] is True
    assert "over the limit of 1,000,000" in rows[("toy", 4)]["invalid_reason"]
    assert rows[("toy", 5)]["error"].startswith(f"{dataset}:6: index 5: ground truth is 300x300 = 90,000 cells")
    assert sorted(rows) == [("toy", 0), ("toy", 4), ("toy", 5)]


@pytest.mark.filterwarnings("error")  # any library warning fails the test
def test_a_run_with_nothing_scored_says_there_is_nothing_to_rank_and_nothing_else(tmp_path, capsys):
    # A broken sample (no ground truth) is left out for every model; a missing completion would
    # count 0 for its model (docs/scoring.md, "Means"), which is a score, so it is not used here.
    folder = _folder(tmp_path, {"nested_results.json": "[" * 100_000,
                                "broken_results.json": [_record(ground_truth=None)]})
    status, rows = _score(tmp_path, folder)
    captured = capsys.readouterr()
    assert status == 1
    assert "nothing to rank: no record was scored" in captured.out.splitlines()
    assert all(line.startswith(("python -m sphyr_hpc.score: error: ", "python -m sphyr_hpc.score: not scored: "))
               for line in captured.err.splitlines())
    assert "nested_results.json: not readable JSON" in captured.err and "ground_truth" in captured.err
    assert (tmp_path / "out" / "leaderboard.png").stat().st_size > 0


@pytest.mark.filterwarnings("error")
def test_a_model_folder_named_with_glyphs_the_font_lacks_draws_without_warnings(tmp_path):
    from sphyr_hpc.reporting.leaderboard import plot_leaderboard

    board = [{"model": "m\U0001F600\udce9\u4e2d", "topology_score": 0.5}, {"model": "plain", "topology_score": None}]
    plot_leaderboard(board, tmp_path / "board.png")
    assert (tmp_path / "board.png").stat().st_size > 0


@pytest.mark.filterwarnings("error")
def test_the_report_charts_draw_a_model_named_with_a_byte_that_is_not_utf8():
    from sphyr_hpc.reporting.figures import failure_bars, heat_map
    from sphyr_hpc.reporting.leaderboard import drawable

    name = "m\udce9"  # a folder name with the byte 0xe9, as Python decodes it
    assert drawable(name) == "m\\udce9" and drawable("plain \u4e2d") == "plain \u4e2d"
    png = b"\x89PNG"
    assert heat_map([name, "plain"], ["beam"], {name: {"beam": 0.5}, "plain": {"beam": None}}).startswith(png)
    assert failure_bars([name], {name: {"sound": 1.0}}, ["sound"]).startswith(png)


def hostile_files(folder):
    """One hostile result file of each kind under ``folder``; returns {file name: start of its message}."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "nested_results.json": ("[" * 100_000, "not readable JSON: nested too deeply"),
        "latin1_results.json": ('[{"prompt": "caf\u00e9"}]'.encode("latin-1"), "not UTF-8"),
        "cut_results.json": (json.dumps([_record()])[:-7], "not valid JSON"),
        "object_results.json": (json.dumps({"prompt": PROMPT}), "expected a JSON array"),
        "lines_results.json": ([_record(completion="0 1 0 1 0\n" * 2_000_000)], "completion is 20,000,000 characters"),
        "line_results.json": ([_record(completion="0 " * 5_000_000)], "completion is 10,000,000 characters"),
        "cells_results.json": ([_record(ground_truth=_solid(300, 300))], "ground truth is 300x300 = 90,000 cells"),
        "text_results.json": ([_record(ground_truth=_solid(1000, 1000))], "ground_truth is 1,999,999 characters"),
        "huge_results.json": (None, "file is 314,572,800 bytes"),
    }
    for name, (content, _) in files.items():
        path = folder / name
        if content is None:
            with open(path, "wb") as handle:
                handle.truncate(300 * 2**20)  # sparse
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if isinstance(content, str) else json.dumps(content))
    return {name: message for name, (_, message) in files.items()}


def test_hostile_files_beside_the_bundled_examples_leave_their_144_records_exactly_as_alone(tmp_path, capsys,
                                                                                          bundled_scored):
    import shutil

    from conftest import EXAMPLE_RESULTS

    shutil.copytree(EXAMPLE_RESULTS, tmp_path / "results")
    messages = hostile_files(tmp_path / "results" / "hostile")
    capsys.readouterr()
    started = time.perf_counter()
    status = main([str(tmp_path / "results"), "--out", str(tmp_path / "mixed"), "--quiet"])
    seconds = time.perf_counter() - started
    err = capsys.readouterr().err
    read = {p: [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
            for p, folder in (("alone", bundled_scored), ("mixed", tmp_path / "mixed"))}
    examples = [r for r in read["mixed"] if r["model"] != "hostile"]
    assert status == 1  # the bundled examples alone: 0 (conftest.bundled_scored asserts it)
    assert len(examples) == 144 and examples == read["alone"]
    hostile = {f"{r['subject']}_results.json": r.get("error") or r.get("invalid_reason")
               for r in read["mixed"] if r["model"] == "hostile"}
    for name, message in messages.items():  # a record's error or invalid_reason, or the file named on stderr
        assert message in hostile[name] if name in hostile else f"hostile/{name}: {message}" in err
    assert "Traceback" not in err
    assert seconds < 120.0


def test_an_empty_folder_on_two_ranks_is_one_usage_error_not_a_hang(tmp_path):
    import subprocess
    import sys

    from conftest import ROOT

    (tmp_path / "empty").mkdir()
    done = subprocess.run([str(ROOT / "bin" / "mpirun"), "-n", "2", sys.executable, "-m", "sphyr_hpc.score",
                           str(tmp_path / "empty"), "--out", str(tmp_path / "out"), "--quiet"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 2
    assert done.stderr.count(f"error: no result files under {tmp_path / 'empty'}") == 1


def test_a_ragged_completion_of_many_widths_gets_a_reason_of_bounded_length():
    from sphyr_hpc.scoring.scorer import Scorer

    text = "\n".join(" ".join(["0"] * k) for k in range(1, 1000))  # 999 rows of 999 widths, 1 MB
    reason = Scorer().score(grids.as_grid(text), grids.as_grid("\n".join(GT)))["invalid_reason"]
    assert reason == "completion has 999 rows of 1 to 999 cells, ground truth is 4x4"
    assert Scorer().score(grids.as_grid("0 1\n0 1 1\n0"), grids.as_grid("\n".join(GT)))["invalid_reason"] == \
        "completion has 3 rows of 1/2/3 cells, ground truth is 4x4"


def test_validate_reads_each_dataset_line_on_its_own(tmp_path, capsys):
    from conftest import DATA
    from sphyr_hpc.jobs.validate import read_dataset as read_records

    good = (DATA / "full_easy_first20.jsonl").read_bytes().splitlines()[:2]
    dataset = tmp_path / "toy.jsonl"
    dataset.write_bytes(b"\n".join([good[0], b"[" * 100_000, b'{"index": \xff}', b"9" * 5000, good[1]]))
    read = list(read_records(dataset))
    err = capsys.readouterr().err
    assert [position for position, _ in read] == [0, 4]  # the broken lines keep their positions (rng seeds)
    assert f"{dataset}:2: skipped, not readable JSON: nested too deeply to decode" in err
    assert f"{dataset}:3: skipped, not UTF-8" in err
    assert f"{dataset}:4: skipped, not valid JSON: Exceeds the limit (4300 digits)" in err


def test_resume_drops_hostile_lines_of_results_jsonl_and_keeps_the_rest(tmp_path):
    folder = _folder(tmp_path, {"toy_results.json": [_record(), _record()]})
    status, rows = _score(tmp_path, folder)
    log = tmp_path / "out" / "results.jsonl"
    kept = log.read_bytes().splitlines()[0]
    log.write_bytes(b"\n".join([kept, b"[" * 100_000, b'{"model": "\xff"}', b"9" * 5000]) + b"\n")
    status, rows = _score(tmp_path, folder, "--resume")
    assert status == 0 and sorted(rows) == [("toy", 0), ("toy", 1)]
    assert json.loads(kept) == rows[("toy", 0)]  # kept, not scored again


def test_a_completion_parsed_by_its_rank_gives_the_grid_or_error_of_one_parsed_on_reading(tmp_path):
    """score keeps completions as read (defer_completion) and parses each where it is scored: same outcome."""
    deep = json.loads("[" * 900 + "]" * 900)
    rows = [_record(), _record(completion=42), _record(completion=None), _record(completion=["L 1", 7]),
            _record(completion=[deep]), _record(completion="no grid here"), {"prompt": PROMPT, "ground_truth": GT}]
    folder = _folder(tmp_path, {"mix_results.json": rows})
    path = folder / "model-a" / "mix_results.json"
    eager = records.read_result_file(path)
    lazy = records.read_result_file(path, defer_completion=True)
    deferred = [True, True, False, True, True, True, False]  # not the records without a completion
    assert [s.deferred is not None for s in lazy] == deferred
    assert all(s.completion is None and s.error is None for s, d in zip(lazy, deferred) if d)  # nothing parsed yet
    for before, after in zip(eager, (s.parsed() for s in lazy)):
        assert (after.completion, after.error, after.completion_status) == \
               (before.completion, before.error, before.completion_status)
    assert lazy[1].parsed().error.endswith("completion: grid must be text or a list of rows, not int")


def test_densities_read_markers_numbers_and_junk_cell_by_cell_and_count_what_they_could_not_read():
    grid = [["L", "V", "0.5", "7"], ["nan", "-2", "S", "0x1"], ["1", "V", "", "1e-1"]]
    rho, counts = grids.densities(grid, mask_density=0.25)
    expected = [[1.0, 0.25, 0.5, 1.0], [0.25, 0.0, 1.0, 0.25], [1.0, 0.25, 0.25, 0.1]]
    assert rho.tolist() == expected  # clipped to [0, 1]; V and junk read as mask_density
    assert counts == {"unfilled_cells": 2, "unparsable_cells": 3}
    again, _ = grids.densities(grid)  # the token table remembers tokens, not the mask density
    assert again[0, 1] == 0.0 and again[1, 0] == 0.0


def test_json_safe_writes_non_finite_numbers_as_null_and_numpy_scalars_as_python_ones_at_any_depth():
    import math

    import numpy as np

    from sphyr_hpc.io.atomic import json_safe

    value = {"c": math.inf, "n": np.float64("nan"), "k": np.int64(3), "b": np.bool_(True), "s": "x", "z": None,
             "nested": {"list": [1.0, -math.inf, (np.float32(0.5), {"deep": math.nan})]}, "ok": 2.5}
    safe = json_safe(value)
    assert safe == {"c": None, "n": None, "k": 3, "b": True, "s": "x", "z": None,
                    "nested": {"list": [1.0, None, [0.5, {"deep": None}]]}, "ok": 2.5}
    assert type(safe["k"]) is int and type(safe["b"]) is bool
    json.dumps(safe, allow_nan=False)  # nothing JSON refuses is left


@pytest.mark.parametrize("cell, valid", [("L", True), ("S", True), ("0", True), ("1", True), ("0.5", True),
                                         ("1e-1", True), ("1.5", False), ("-0.1", False), ("nan", False),
                                         ("inf", False), ("V", False), ("abc", False), ("0x1", False)])
def test_valid_output_grid_takes_l_s_and_densities_in_the_unit_interval_only(cell, valid):
    from sphyr_hpc.core.metrics import valid_output_grid

    truth = [["L", "0"], ["1", "S"]]
    for _ in range(2):  # decided once, then read from the table: the same answer
        assert valid_output_grid([["L", cell], ["1", "S"]], truth) is valid
    assert valid_output_grid([["L", "0", "1"], ["1", "S", "0"]], truth) is False  # shape
