"""The yardstick store (docs/store.md): records byte-identical with and without it, damaged and
foreign entries replaced, concurrent runs writing one store, and python -m sphyr_hpc.store.

The session's XDG_CACHE_HOME is a folder of its own (conftest.py): the default store here is never
the user's.  The two concurrent multi-rank runs start ``bin/mpirun`` themselves (so this file runs in
the serial pass of bin/test); the in-process multi-rank tests are in test_store_mpi.py.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import EXAMPLE_RESULTS, ROOT
from sphyr_hpc.io.yardstick_store import (DamagedEntry, YardstickStore, decode, default_location, encode,
                                          open_store)
from sphyr_hpc.optimiser.yardstick import YARDSTICK_ALGORITHM_VERSION, YardstickKey
from sphyr_hpc.score import main as score_main
from sphyr_hpc.store import main as store_main

SUBJECTS = ("full_easy", "10_random_cell_hard", "3_random_row_easy")
MPIRUN = str(ROOT / "bin" / "mpirun")
SAMPLES = 14  # distinct (ground truth, mask, gravity) of those records


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Two models' records of three subjects (the example results): 26 records, 14 samples."""
    root = tmp_path_factory.mktemp("store") / "results"
    for model in ("baseline-empty", "baseline-random"):
        (root / model).mkdir(parents=True)
        for subject in SUBJECTS:
            shutil.copy(EXAMPLE_RESULTS / model / f"{subject}.json", root / model / f"{subject}_results.json")
    return root


def _score(results, out, *extra):
    assert score_main([str(results), "--out", str(out), "--quiet", "--no-report", *extra]) == 0
    return (Path(out) / "results.jsonl").read_bytes(), json.loads((Path(out) / "run.json").read_text())


def _entries(store):
    return [f for f in YardstickStore(store).files() if f.digest]


def test_records_are_byte_identical_with_and_without_the_store_and_its_tables(results, tmp_path):
    store = tmp_path / "store"
    plain, plain_run = _score(results, tmp_path / "plain", "--no-store")
    cold, cold_run = _score(results, tmp_path / "cold", "--store", str(store))
    warm, warm_run = _score(results, tmp_path / "warm", "--store", str(store))
    assert plain == cold == warm
    samples = len(_entries(store))
    assert samples == SAMPLES
    assert plain_run["yardsticks"] == {"from_store": 0, "computed": samples, "replaced": 0, "store": None}
    assert cold_run["yardsticks"]["computed"] == samples and cold_run["yardsticks"]["from_store"] == 0
    assert warm_run["yardsticks"]["from_store"] == samples and warm_run["yardsticks"]["computed"] == 0
    assert warm_run["yardsticks"]["store"] == str(store)
    _every_distinct_completion_read_back(store, plain_run, cold_run, warm_run)


def test_the_default_store_is_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("SPHYR_HPC_STORE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_location() == tmp_path / "xdg" / "sphyr_hpc"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_location() == tmp_path / "home" / ".cache" / "sphyr_hpc"
    assert open_store(None) is None and open_store(False) is None
    assert open_store(True).root == tmp_path / "home" / ".cache" / "sphyr_hpc"
    monkeypatch.setenv("SPHYR_HPC_STORE", str(tmp_path / "shared"))
    assert open_store(True).root == tmp_path / "shared"
    monkeypatch.setenv("SPHYR_HPC_STORE", "none")
    assert open_store(True) is None


def test_the_test_session_never_writes_the_users_store():
    assert Path(os.environ["XDG_CACHE_HOME"]).name.startswith("sphyr_hpc-test-cache-")
    assert os.environ["SPHYR_HPC_STORE"] == "none"  # and a test uses a store only when it names one
    assert default_location().parent == Path(os.environ["XDG_CACHE_HOME"])


def _foreign(path):
    """The entry at ``path`` rewritten as another algorithm version wrote it (checksum valid)."""
    header, arrays = decode(path.read_bytes())
    header.pop("arrays")
    header["algorithm"] = YARDSTICK_ALGORITHM_VERSION + 1000
    path.write_bytes(encode(header, arrays))


def _rescored_replacing(results, out, store, capfd, reference, replaced):
    """Score ``results`` again on ``store`` (into ``out``): the records are ``reference``, ``replaced``
    entries were recomputed and replaced, and one warning line says so."""
    capfd.readouterr()
    records, run = _score(results, out, "--store", str(store))
    assert records == reference
    assert run["yardsticks"]["replaced"] == replaced and run["yardsticks"]["computed"] == replaced
    warnings = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "recomputed and replaced" in warnings[0]


def test_truncated_damaged_and_foreign_entries_are_recomputed_and_replaced(results, tmp_path, capfd):
    store = tmp_path / "store"
    reference, _ = _score(results, tmp_path / "cold", "--store", str(store))
    entries = _entries(store)
    truncated, foreign, flipped = entries[0].path, entries[1].path, entries[2].path
    truncated.write_bytes(truncated.read_bytes()[:len(truncated.read_bytes()) // 2])
    _foreign(foreign)
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    _rescored_replacing(results, tmp_path / "again", store, capfd, reference, 3)
    for path in (truncated, foreign, flipped):  # replaced by whole entries of this version
        header, _ = decode(path.read_bytes(), path.name[:-4], YARDSTICK_ALGORITHM_VERSION)
        assert header["algorithm"] == YARDSTICK_ALGORITHM_VERSION
    records, run = _score(results, tmp_path / "warm", "--store", str(store))
    assert records == reference and run["yardsticks"]["computed"] == 0


def test_every_cut_of_an_entry_and_every_flipped_byte_is_refused():
    data = encode({"key": "k", "algorithm": 1}, {"densities": np.linspace(0, 1, 12).reshape(3, 4),
                                                  "free": np.ones((3, 4), dtype=bool)})
    header, arrays = decode(data, "k", 1)
    assert header["algorithm"] == 1 and arrays["densities"][2, 3] == 1.0 and arrays["free"].all()
    arrays["densities"][0, 0] = 5.0  # the reader's own copy
    for cut in range(len(data)):
        with pytest.raises(DamagedEntry):
            decode(data[:cut])
    for i in range(0, len(data), 7):
        damaged = bytearray(data)
        damaged[i] ^= 0x01
        with pytest.raises(DamagedEntry):
            decode(bytes(damaged))
    with pytest.raises(DamagedEntry, match="foreign version"):
        decode(data, "k", 2)
    with pytest.raises(DamagedEntry, match="another key"):
        decode(data, "other", 1)


def test_the_key_changes_with_what_determines_the_yardstick():
    from sphyr_hpc.core.loadcase import LoadCase
    from sphyr_hpc.scoring.yardstick_store import yardstick_digest

    lc = LoadCase(2, 3, ((0, 2),), ((1, 0),))
    free = np.array([[True, True, False], [False, True, True]])
    pinned = np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])

    def digest(lc=lc, free=free, pinned=pinned, vf=0.5, penal=3.0, radius=1.2, mg=800, options=()):
        return yardstick_digest(YardstickKey.of(lc, free, pinned, vf, (pinned,), penal, radius), mg, options)

    base = digest()
    assert digest() == base and len(base) == 64
    changed = [digest(lc=LoadCase(2, 3, ((0, 2),), ((1, 0),), gravity=(0.0, 1.0))),
               digest(lc=LoadCase(2, 3, ((0, 1),), ((1, 0),))), digest(free=~free),
               digest(pinned=np.where(free, 0.5, pinned)), digest(vf=0.6), digest(penal=2.0),
               digest(radius=1.5), digest(mg=1), digest(options=[["sphyr_ksp_type", "cg"]])]
    assert len({base, *changed}) == len(changed) + 1


def test_the_api_reads_and_writes_the_store(tmp_path, monkeypatch):
    from sphyr_hpc.api import _stored_for, clear_reference_cache, get_structural_metrics

    gt = ["L 1 1", "0 1 0", "S 1 S"]
    masked = ["L V V", "V V V", "S V S"]
    store = tmp_path / "api-store"
    clear_reference_cache()
    first = get_structural_metrics(gt, gt, masked, store=str(store))
    assert len(_entries(store)) == 1 and _stored_for(str(store)).computed == 1
    clear_reference_cache()
    again = get_structural_metrics(gt, gt, masked, store=str(store))
    assert again == first and _stored_for(str(store)).from_store == 1
    clear_reference_cache()
    none = get_structural_metrics(gt, gt, masked, store=None)
    assert none == first and len(_entries(store)) == 1
    clear_reference_cache()
    monkeypatch.delenv("SPHYR_HPC_STORE")
    get_structural_metrics(gt, gt, masked)  # the default store: the session's own cache folder
    assert len(_entries(default_location())) >= 1
    clear_reference_cache()


def _mpirun_score(results, out, store):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    return subprocess.Popen([MPIRUN, "-n", "2", sys.executable, "-m", "sphyr_hpc.score", str(results), "--out",
                             str(out), "--quiet", "--no-report", "--store", str(store)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_concurrent_runs_on_two_ranks_each_write_one_store(results, tmp_path):
    reference, _ = _score(results, tmp_path / "plain", "--no-store")
    store = tmp_path / "shared"
    runs = [_mpirun_score(results, tmp_path / f"run{i}", store) for i in (1, 2)]
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
        assert "warning" not in err
    for i in (1, 2):
        assert (tmp_path / f"run{i}" / "results.jsonl").read_bytes() == reference
    assert len(_entries(store)) == SAMPLES
    assert not [f for f in YardstickStore(store).files() if not f.digest]  # no temporary file left
    records, run = _score(results, tmp_path / "warm", "--store", str(store))
    assert records == reference and run["yardsticks"]["from_store"] == SAMPLES
    for entry in _entries(store)[:4]:  # damaged entries met by both ranks: one warning line for the run
        entry.path.write_bytes(entry.path.read_bytes()[:100])
    damaged = _mpirun_score(results, tmp_path / "damaged", store)
    _, err = damaged.communicate(timeout=600)
    assert damaged.returncode == 0, err
    assert (tmp_path / "damaged" / "results.jsonl").read_bytes() == reference
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "(4 entries in all)" in warnings[0], err


def test_list_check_and_prune(results, tmp_path, capsys):
    store = tmp_path / "store"
    _score(results, tmp_path / "cold", "--store", str(store))
    capsys.readouterr()
    assert store_main(["list", "--store", str(store)]) == 0
    listed = capsys.readouterr().out
    assert "entries: 14 " in listed and "14 of this algorithm version" in listed
    assert "full_easy" in listed and "10x10 14" in listed
    assert store_main(["check", "--store", str(store), "--samples", "3"]) == 0
    assert "3 entries checked: 3 agree under the parity rule (3 bit for bit)" in capsys.readouterr().out

    entries = _entries(store)
    _foreign(entries[0].path)
    entries[1].path.write_bytes(b"not an entry")
    stale = entries[2].path.parent / ".stale.yst.tmp"
    stale.write_bytes(b"half")
    os.utime(stale, (0, 0))
    _as_format_1(entries[3].path)  # an older sphyr_hpc's entry: another format, not damaged
    assert store_main(["list", "--store", str(store)]) == 1  # damaged entries found
    listed = capsys.readouterr().out
    assert "2 of other versions or formats" in listed and "1 damaged" in listed and "temporary files: 1" in listed
    assert store_main(["prune", "--store", str(store), "--dry-run"]) == 0
    assert "would remove 4 files" in capsys.readouterr().out and stale.exists()
    assert store_main(["prune", "--store", str(store)]) == 0
    pruned = capsys.readouterr().out
    assert "removed 4 files" in pruned and "1 another format" in pruned
    assert len(_entries(store)) == SAMPLES - 3 and not stale.exists()
    assert store_main(["list", "--store", str(store)]) == 0
    assert "entries: 11 " in capsys.readouterr().out


def test_an_older_format_alone_is_not_called_damaged(results, tmp_path, capsys):
    store = tmp_path / "store"
    _score(results, tmp_path / "cold", "--store", str(store))
    _as_format_1(_entries(store)[0].path)
    capsys.readouterr()
    assert store_main(["list", "--store", str(store)]) == 0
    listed = capsys.readouterr().out
    assert "1 of other versions or formats" in listed and "0 damaged" in listed


# -- the reference analysis an entry keeps besides its yardstick (entry format 2) --------------------
@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """A model answering the ground truth itself (the only solve of a sample is then its ground
    truth's) and a random baseline, on SUBJECTS: 13 records each, 14 samples."""
    root = tmp_path_factory.mktemp("store_answers") / "results"
    for subject in SUBJECTS:
        records = json.loads((EXAMPLE_RESULTS / "baseline-random" / f"{subject}.json").read_text())
        for model, rows in (("truth", [dict(r, completion=r["ground_truth"]) for r in records]),
                            ("baseline-random", records)):
            (root / model).mkdir(parents=True, exist_ok=True)
            (root / model / f"{subject}_results.json").write_text(json.dumps(rows))
    return root


def _rewritten(path, change):
    """The entry at ``path`` rewritten with ``change(header)`` applied to its header (checksum valid)."""
    header, arrays = decode(path.read_bytes())
    header.pop("arrays")
    change(header)
    path.write_bytes(encode(header, arrays))


def _as_format_1(path):
    """The entry at ``path`` as an entry of format 1 (the yardstick alone) was written: checksum valid."""
    import struct

    from sphyr_hpc.io.yardstick_store import CHECKSUM_BYTES, checksum

    _rewritten(path, lambda header: header.pop("reference"))
    body = bytearray(path.read_bytes()[:-CHECKSUM_BYTES])
    struct.pack_into("<I", body, 8, 1)
    path.write_bytes(bytes(body) + checksum(bytes(body)))


def test_a_stored_reference_analysis_gives_the_records_a_computed_one_gives(answers, tmp_path, monkeypatch):
    from sphyr_hpc.scoring import scorer as scorers

    store = tmp_path / "store"
    plain, _ = _score(answers, tmp_path / "plain", "--no-store")
    cold, _ = _score(answers, tmp_path / "cold", "--store", str(store))
    warm, warm_run = _score(answers, tmp_path / "warm", "--store", str(store))
    assert plain == cold == warm and warm_run["yardsticks"]["from_store"] == SAMPLES
    rows = [json.loads(line) for line in warm.splitlines()]
    assert any(r["model"] == "truth" and r["ground_truth_compliance"] == r["compliance"] for r in rows)
    for entry in _entries(store):
        header, _ = decode(entry.path.read_bytes())
        assert set(header["reference"]) == {"fingerprint", "compliance", "volume_fraction", "max_displacement",
                                            "solid_compliance", "load_carrying"}

    def no_solver(*args):
        raise AssertionError("a warm run made a solver for completions equal to the ground truth")

    truth_only = tmp_path / "truth_only"
    shutil.copytree(answers / "truth", truth_only / "truth")
    expected, _ = _score(truth_only, tmp_path / "truth_plain", "--no-store")
    monkeypatch.setattr(scorers._Problem, "__init__", no_solver)
    records, run = _score(truth_only, tmp_path / "truth_warm", "--store", str(store))
    assert records == expected and run["yardsticks"]["from_store"] == SAMPLES


def test_old_format_truncated_and_bad_reference_entries_are_recomputed_and_replaced(answers, tmp_path, capfd):
    from sphyr_hpc.io.yardstick_store import FORMAT

    store = tmp_path / "store"
    reference, _ = _score(answers, tmp_path / "cold", "--store", str(store))
    entries = _entries(store)
    old, truncated, bad = entries[0].path, entries[1].path, entries[2].path
    _as_format_1(old)
    with pytest.raises(DamagedEntry, match="entry format 1"):
        decode(old.read_bytes())
    truncated.write_bytes(truncated.read_bytes()[:-30])
    _rewritten(bad, lambda header: header["reference"].update(compliance="not a float"))
    _rescored_replacing(answers, tmp_path / "again", store, capfd, reference, 3)
    for path in (old, truncated, bad):  # whole entries of this format, with their reference analysis
        data = path.read_bytes()
        header, _ = decode(data, path.name[:-4], YARDSTICK_ALGORITHM_VERSION)
        assert int.from_bytes(data[8:12], "little") == FORMAT and "reference" in header
    records, run = _score(answers, tmp_path / "warm", "--store", str(store))
    assert records == reference and run["yardsticks"]["from_store"] == SAMPLES


def test_an_entry_without_the_reference_analysis_serves_its_yardstick_and_gets_it(answers, tmp_path):
    store = tmp_path / "store"
    reference, _ = _score(answers, tmp_path / "cold", "--store", str(store))
    for entry in _entries(store):  # as validate, certify or the API's one-record scoring write them
        _rewritten(entry.path, lambda header: header.pop("reference"))
    _rewritten(_entries(store)[0].path, lambda header: header.update(reference={"fingerprint": "another"}))
    records, run = _score(answers, tmp_path / "warm", "--store", str(store))
    assert records == reference
    assert run["yardsticks"] == {"from_store": SAMPLES, "computed": 0, "replaced": 0, "store": str(store)}
    assert all("compliance" in decode(e.path.read_bytes())[0]["reference"] for e in _entries(store))
    records, run = _score(answers, tmp_path / "again", "--store", str(store))
    assert records == reference and run["yardsticks"]["from_store"] == SAMPLES


def test_the_reference_analysis_is_kept_exactly_and_only_for_its_own_ground_truth():
    from sphyr_hpc.core.analysis import Analysis
    from sphyr_hpc.scoring.yardstick_store import analysis_of, reference_fields, reference_fingerprint

    truth = np.array([[1.0, 0.0], [1.0, 1.0]])
    free = np.array([[False, True], [True, False]])
    fingerprint = reference_fingerprint(truth, free, "sphyr_")
    analysis = Analysis(0.1 + 0.2, 0.75, 1.0 / 3.0, False, float("inf"))
    header = {"reference": json.loads(json.dumps(reference_fields(fingerprint, analysis)))}
    assert analysis_of(header, fingerprint) == analysis  # every bit, inf included
    assert analysis_of({}, fingerprint) is None
    for other in (reference_fingerprint(truth + 1e-9, free, "sphyr_"), reference_fingerprint(truth, ~free, "sphyr_"),
                  reference_fingerprint(truth, free, "other_")):
        assert other != fingerprint and analysis_of(header, other) is None
    header["reference"]["load_carrying"] = "yes"
    with pytest.raises(DamagedEntry, match="reference analysis"):
        analysis_of(header, fingerprint)


# -- the scored completions' tables (scoring/scored_store.py) ------------------------------------
def _tables(store):
    return [f for f in YardstickStore(store).scored.files() if f.digest]


def _every_distinct_completion_read_back(store, plain_run, cold_run, warm_run):
    """The warm run read every distinct completion the cold run computed from the store's tables."""
    distinct = plain_run["completions"]["computed"]
    assert distinct > 0 and plain_run["completions"]["from_store"] == 0
    assert cold_run["completions"] == {"from_store": 0, "computed": distinct}
    assert warm_run["completions"] == {"from_store": distinct, "computed": 0}
    tables = _tables(store)
    assert len(tables) >= SAMPLES  # one a sample's text (full_easy's 1 and full_hard's 1.0: two)
    rows = sum(len(YardstickStore.header_of(t.path)["completions"]) for t in tables)
    assert rows == distinct


def test_damaged_and_foreign_tables_are_recomputed_and_replaced(results, tmp_path):
    from sphyr_hpc.scoring.scored_store import code_digest

    store = tmp_path / "store"
    reference, _ = _score(results, tmp_path / "cold", "--store", str(store))
    truncated, foreign = (t.path for t in _tables(store)[:2])
    lost = [len(YardstickStore.header_of(path)["completions"]) for path in (truncated, foreign)]
    truncated.write_bytes(truncated.read_bytes()[:100])
    header, arrays = decode(foreign.read_bytes())
    header.pop("arrays")
    header["algorithm"] = "another scorer's code"
    foreign.write_bytes(encode(header, arrays))
    records, run = _score(results, tmp_path / "again", "--store", str(store))
    assert records == reference
    assert run["completions"]["computed"] == sum(lost) and run["yardsticks"]["computed"] == 0
    for path in (truncated, foreign):  # whole tables of this code again
        assert YardstickStore.header_of(path)["algorithm"] == code_digest()
    records, run = _score(results, tmp_path / "warm", "--store", str(store))
    assert records == reference and run["completions"]["computed"] == 0


def test_a_row_keeps_exactly_what_reads_back_equal():
    from sphyr_hpc.io.atomic import json_safe
    from sphyr_hpc.io.results_log import encode_items
    from sphyr_hpc.scoring.scored_store import row_texts

    def texts(metrics):
        fields = json_safe(metrics)
        return row_texts(metrics, fields, encode_items(fields))

    plain = {"compliance": 0.1 + 0.2, "load_carrying": True, "failure": None, "checks": {"n": 3}}
    text, kept = texts(plain)
    assert kept is None and json.loads(text) == plain and json.loads(text)["compliance"] == 0.1 + 0.2
    infinite = {"compliance": float("inf"), "topology_score": 0.0}
    text, kept = texts(infinite)  # a record writes null; the metrics keep the infinity
    assert json.loads(text)["compliance"] is None and json.loads(kept)["compliance"] == float("inf")
    assert texts({"volume_fraction": np.float64(0.5)}) is None  # read back as a float, not a NumPy one
    assert texts({"cells": (1, 2)}) is None  # read back as a list


def test_completion_digests_never_confuse_two_completions():
    from sphyr_hpc.scoring.scored_store import completion_digest

    completions = [[], [[]], [[""]], [["", ""]], [[""], [""]], [["\x1f"]], [["a"], [""]], [["a\x1e"]],
                   [["1", "0"], ["L", "S"]], [["1", "0", "L", "S"]], [["10"], ["LS"]]]
    assert len({completion_digest(c) for c in completions}) == len(completions)
    assert completion_digest([["1", "0"]]) == completion_digest((("1", "0"),))


def test_list_and_prune_count_and_remove_the_tables_of_other_code(results, tmp_path, capsys):
    store = tmp_path / "store"
    _score(results, tmp_path / "cold", "--store", str(store))
    tables = _tables(store)
    header, arrays = decode(tables[0].path.read_bytes())
    header.pop("arrays")
    header["algorithm"] = "another scorer's code"
    tables[0].path.write_bytes(encode(header, arrays))
    capsys.readouterr()
    assert store_main(["list", "--store", str(store)]) == 0
    said = capsys.readouterr().out
    assert f"scored completions: {len(tables)} sample tables" in said
    assert f"{len(tables) - 1} of this scorer's code" in said and "1 of other code or formats" in said
    assert store_main(["prune", "--store", str(store)]) == 0
    assert "1 scored table of other code" in capsys.readouterr().out
    assert len(_tables(store)) == len(tables) - 1 and not tables[0].path.exists()


def test_fields_of_a_completion_read_from_the_store_are_the_ones_a_computed_one_writes(results, tmp_path):
    import h5py

    store = tmp_path / "store"
    written = {}
    for run in ("cold", "warm"):
        fields = tmp_path / f"fields-{run}"
        _, meta = _score(results, tmp_path / run, "--store", str(store), "--fields", str(fields))
        written[run] = {}
        for path in sorted(fields.glob("*.h5")):
            with h5py.File(path) as handle:
                written[run][path.name] = {name: handle[name][()] for name in handle if hasattr(handle[name], "shape")}
    assert meta["completions"]["computed"] == 0 and meta["completions"]["from_store"] > 0  # the warm run
    assert written["cold"] and list(written["cold"]) == list(written["warm"])
    for name, arrays in written["cold"].items():  # the same problems solved by the same code
        assert list(arrays) == list(written["warm"][name])
        for key, values in arrays.items():
            np.testing.assert_array_equal(values, written["warm"][name][key])
