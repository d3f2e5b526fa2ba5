"""The same command on the same number of ranks gives the same bits, with every solver.

``python -m sphyr_hpc.optimize`` run twice (1 and 2 ranks; ``--solver direct``, ``mg``, ``gamg``):
the designs (``--save-density``) equal bit for bit and the records (``--json``: compliance, history)
equal too; a run stopped by SIGTERM and resumed with ``--resume`` ends bit-equal to the uninterrupted
one with the default solver (docs/optimize.md, "Checkpoints").  The runs start ``bin/mpirun``
themselves, so this file runs in the serial suite.
"""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

MPIRUN = str(ROOT / "bin" / "mpirun")
# Small enough to be quick; large enough that each solver is itself (the multigrid has levels,
# a parallel factorisation has fronts on both ranks).
SIZE = "120x40"
ITERATIONS = 10
# Records a run writes that are measurements of this run, not its result.
MEASURED = ("seconds", "load_average", "peak_memory", "setup_seconds", "arguments", "problem_spec", "first_iteration")


def _command(ranks, *args):
    python = [sys.executable, "-m", "sphyr_hpc.optimize"]
    return ([MPIRUN, "-n", str(ranks)] if ranks > 1 else []) + python + list(args)


def _optimize(ranks, out, *extra):
    command = _command(ranks, "--preset", "mbb", "--size", SIZE, "--iterations", str(ITERATIONS), "--tolerance", "0",
                       "--quiet", "--save-density", str(out.with_suffix(".npy")), "--json", str(out.with_suffix(".json")),
                       *extra)
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return np.load(out.with_suffix(".npy")), json.loads(out.with_suffix(".json").read_text())


def _result(record):
    """What a run computed, without what it measured (seconds, memory, load, its own paths)."""
    def keep(key):
        return not any(word in key for word in MEASURED)

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if keep(k)}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(record)


@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("solver", ["direct", "mg", "gamg"])
def test_the_same_run_twice_gives_the_same_bits(solver, ranks, tmp_path):
    first, first_record = _optimize(ranks, tmp_path / "first", "--solver", solver)
    second, second_record = _optimize(ranks, tmp_path / "second", "--solver", solver)
    assert first.shape == (40, 120)
    assert np.array_equal(first, second), f"largest difference {np.abs(first - second).max():.3g}"
    assert first_record["compliance"] == second_record["compliance"]
    assert _result(first_record) == _result(second_record)
    assert [h["iteration"] for h in first_record["history"]] == list(range(1, ITERATIONS + 1))


def test_a_run_stopped_by_sigterm_and_resumed_on_2_ranks_ends_with_the_same_bits(tmp_path):
    """The default solver (direct at this size) on 2 ranks: SIGTERM once a few iterations have ended,
    the checkpoint written at the end of the iteration in progress, then ``--resume``."""
    full, full_record = _optimize(2, tmp_path / "full")
    checkpoint = tmp_path / "checkpoint"
    stopped = tmp_path / "stopped"
    command = _command(2, "--preset", "mbb", "--size", SIZE, "--iterations", str(ITERATIONS), "--tolerance", "0",
                       "--checkpoint", str(checkpoint), "--checkpoint-every", "100",
                       "--save-density", str(stopped.with_suffix(".npy")), "--json", str(stopped.with_suffix(".json")))
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    for line in proc.stdout:
        if line.startswith("it    3/"):
            proc.send_signal(signal.SIGTERM)
            break
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, out[-2000:] + err[-3000:]
    assert err.count("python -m sphyr_hpc.optimize: interrupted (SIGTERM)") == 1, err[-3000:]
    saved = json.loads((checkpoint / "checkpoint.json").read_text())["iteration"]
    assert 3 <= saved < ITERATIONS
    # The design of the iteration it stopped at, where --save-density and --json asked for it.
    stopped_record = json.loads(stopped.with_suffix(".json").read_text())
    assert stopped_record["interrupted"] is True
    assert [h["iteration"] for h in stopped_record["history"]] == list(range(1, saved + 1))
    assert np.load(stopped.with_suffix(".npy")).shape == full.shape
    resumed, resumed_record = _optimize(2, tmp_path / "resumed", "--checkpoint", str(checkpoint), "--resume")
    assert np.array_equal(full, resumed), f"largest difference {np.abs(full - resumed).max():.3g}"
    assert resumed_record["compliance"] == full_record["compliance"]
    assert [h["compliance"] for h in resumed_record["history"]] == [h["compliance"] for h in full_record["history"]]
