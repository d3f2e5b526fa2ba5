"""Checkpoints and ``--resume`` of ``optimize`` (docs/optimize.md, "Checkpoints").

A run stopped by SIGTERM (its checkpoint written at the end of the iteration) or dying without a
word (the last periodic checkpoint), then resumed, takes the very same steps as the uninterrupted
run: the same final design bit for bit on the same ranks, one history without gaps or
duplicates, the fields file holding each step once.  Resumed on another number of ranks, it
agrees to rounding.  The multigrid solver is used on purpose: its warm start (the last two
solutions) is part of what a checkpoint must carry.

    python -m pytest -q tests/test_checkpoint.py
    bin/mpirun -n 2 .venv/bin/python -m pytest -q -m mpi tests/test_checkpoint.py
"""

import json
import os
import signal

import numpy as np
import pytest
from mpi4py import MPI

from conftest import collective, two_ranks_marker
from sphyr_hpc import optimize
from sphyr_hpc.io import checkpoint as files
from sphyr_hpc.optimiser import driver, problems
from sphyr_hpc.optimiser.checkpointing import CheckpointSettings
from sphyr_hpc.runtime.petsc import petsc
from sphyr_hpc.runtime.process import Interrupted, interrupts

two_ranks = two_ranks_marker("tests/test_checkpoint.py")
ITERATIONS = 14
SIZE = (192, 64)  # multigrid with 4 levels (a one-level "multigrid" is a parallel LU, not reproducible run to run)
RUN = dict(solver="mg", iterations=ITERATIONS, tolerance=0.0, continuation=(1.0, 0.5, 3))


class Died(Exception):
    """A run ending without a word (what kill -9 leaves: nothing written after the last checkpoint)."""


def _problem():
    return problems.preset("mbb", SIZE[0], SIZE[1], 0.5)


def _shared_dir(tmp_path, name):
    """One folder for every rank (rank 0's tmp_path)."""
    return MPI.COMM_WORLD.bcast(str(tmp_path / name), root=0)


def _run(directory=None, comm=None, stop_at=None, how="signal", fields=None, every=4, **options):
    """``optimise`` with a checkpoint in ``directory`` (resumed if it holds one); ``stop_at``: SIGTERM
    to this process at that iteration (``how="signal"``) or an exception as if it died there."""
    comm = comm if comm is not None else petsc().COMM_WORLD
    settings = None
    if directory is not None:
        record = files.read_record(directory) if comm.tompi4py().rank == 0 else None
        record = comm.tompi4py().bcast(record, root=0)
        settings = CheckpointSettings(directory, every, {"test": 1}, record)

    def stop(iteration, system, physical, compliance, change):
        if iteration == stop_at:
            if how != "signal":
                raise Died(iteration)
            if comm.tompi4py().rank == 0:  # one rank gets it: the allreduce tells the other
                os.kill(os.getpid(), signal.SIGTERM)

    with interrupts():
        return driver.optimise(_problem(), driver.RunSettings(fields_dir=fields, fields_every=1, **{**RUN, **options}),
                               comm=comm, checkpoint=settings, callback=stop, log=lambda line: None)


def _steps(fields):
    """The iterations of the fields history (its XDMF index), in order."""
    (index,) = [name for name in os.listdir(fields) if name.endswith(".xdmf")]
    text = open(os.path.join(fields, index)).read()
    return [int(float(v)) for v in __import__("re").findall(r'<Time Value="([^"]+)"', text)]


def _interrupted_and_resumed(tmp_path, how, stop_at):
    directory = _shared_dir(tmp_path, "checkpoint")
    fields = _shared_dir(tmp_path, "fields")
    full = _run(fields=_shared_dir(tmp_path, "fields_full"))
    with pytest.raises(Interrupted if how == "signal" else Died):
        _run(directory, stop_at=stop_at, how=how, fields=fields)
    record = files.read_record(directory)
    saved = stop_at if how == "signal" else stop_at // 4 * 4  # the signal's iteration, or the last periodic one
    assert record["iteration"] == saved and len(record["history"]) == saved
    resumed = _run(directory, fields=fields)
    return full, resumed, fields


@pytest.mark.parametrize("how,stop_at", [("signal", 6), ("died", 7)])
def test_a_stopped_run_resumed_takes_the_same_steps(tmp_path, how, stop_at):
    full, resumed, fields = _interrupted_and_resumed(tmp_path, how, stop_at)
    assert np.array_equal(full["density"], resumed["density"])
    assert resumed["compliance"] == full["compliance"]
    assert [h["iteration"] for h in resumed["history"]] == list(range(1, ITERATIONS + 1))
    assert [h["compliance"] for h in resumed["history"]] == [h["compliance"] for h in full["history"]]
    # The continuation went on where it stopped (p = 1 + 0.5 * ((iteration - 1) // 3), up to 3).
    assert [h["penal"] for h in resumed["history"]] == [min(3.0, 1.0 + 0.5 * (i // 3)) for i in range(ITERATIONS)]
    # Steps written after the checkpoint by the run that died are dropped, then written again: each once.
    assert _steps(fields) == list(range(1, ITERATIONS + 1))


def test_an_mma_run_resumed_takes_the_same_steps(tmp_path):
    """MMA's state (the asymptotes, the two previous designs, its iteration count, its last multiplier) is in
    the checkpoint."""
    directory = str(tmp_path / "checkpoint")
    full = _run(update="mma")
    with pytest.raises(Died):
        _run(directory, stop_at=10, how="died", update="mma")
    assert {f"optimizer_{n}" for n in ("low", "upp", "xold1", "xold2")} <= set(files.read_record(directory)["vectors"])
    resumed = _run(directory, update="mma")
    assert np.array_equal(full["density"], resumed["density"])
    assert [h["compliance"] for h in resumed["history"]] == [h["compliance"] for h in full["history"]]
    with pytest.raises(files.CheckpointError, match="the update mma, not oc"):
        _run(directory)


@two_ranks
def test_a_stopped_run_resumed_on_2_ranks_takes_the_same_steps(tmp_path):
    def compute():
        full, resumed, _ = _interrupted_and_resumed(tmp_path, "signal", 6)
        if MPI.COMM_WORLD.rank == 0:
            assert np.array_equal(full["density"], resumed["density"])
            assert [h["compliance"] for h in resumed["history"]] == [h["compliance"] for h in full["history"]]
        return full["compliance"] == resumed["compliance"]

    assert all(collective(compute))


@two_ranks
def test_a_checkpoint_of_2_ranks_resumes_on_1(tmp_path):
    """Written on 2 ranks, resumed on one (rank 0 alone): the design agrees with the 2-rank run's to
    rounding (the ranks' sums and factorisations differ), the history is whole."""
    directory = _shared_dir(tmp_path, "checkpoint")

    def compute():
        full = _run(solver="direct")
        with pytest.raises(Died):
            _run(directory, stop_at=11, how="died", solver="direct")
        return full

    full = collective(compute)[0]
    if MPI.COMM_WORLD.rank == 0:
        resumed = _run(directory, comm=petsc().COMM_SELF, solver="direct")
        assert [h["iteration"] for h in resumed["history"]] == list(range(1, ITERATIONS + 1))
        # The compliance to 1e-10; the densities to 1e-8: six OC steps after the resumption amplify the
        # ranks' rounding (~1e-16) to a few 1e-10 in the densities.
        assert abs(resumed["compliance"] - full["compliance"]) < 1e-10 * full["compliance"]
        assert np.abs(resumed["density"] - full["density"]).max() < 1e-8


def _command(tmp_path, *extra):
    return ["--preset", "mbb", "--size", "48x16", "--solver", "mg", "--tolerance", "0", "--quiet",
            "--checkpoint", str(tmp_path / "ck"), *extra]


def test_resume_continues_a_finished_run_with_more_iterations(tmp_path):
    """``--resume --iterations 12`` after a run of 6: the run of 12 (its JSON and density)."""
    assert optimize.main(_command(tmp_path, "--iterations", "6", "--checkpoint-every", "4")) == 0
    assert files.read_record(tmp_path / "ck")["iteration"] == 6
    assert optimize.main(_command(tmp_path, "--iterations", "12", "--resume", "--json", str(tmp_path / "r.json"),
                                  "--save-density", str(tmp_path / "r.npy"))) == 0
    direct = ["--preset", "mbb", "--size", "48x16", "--solver", "mg", "--tolerance", "0", "--quiet",
              "--iterations", "12", "--json", str(tmp_path / "f.json"), "--save-density", str(tmp_path / "f.npy")]
    assert optimize.main(direct) == 0
    resumed, full = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("r", "f"))
    assert [h["iteration"] for h in resumed["history"]] == list(range(1, 13))
    assert resumed["compliance"] == full["compliance"]
    assert np.array_equal(np.load(tmp_path / "r.npy"), np.load(tmp_path / "f.npy"))


def test_checkpoint_usage_errors_name_the_folder_and_what_to_do(tmp_path, capsys):
    assert optimize.main(["--preset", "mbb", "--size", "48x16", "--resume"]) == 2
    assert "--resume needs --checkpoint DIR" in capsys.readouterr().err
    assert optimize.main(_command(tmp_path, "--iterations", "2")) == 0
    capsys.readouterr()
    assert optimize.main(_command(tmp_path, "--iterations", "4")) == 2
    assert "already holds a checkpoint (iteration 2): add --resume" in capsys.readouterr().err
    assert optimize.main(_command(tmp_path, "--iterations", "4", "--resume", "--radius", "2")) == 2
    assert "other settings (radius)" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert optimize.main(["--preset", "mbb", "--size", "48x16", "--checkpoint", str(tmp_path / "file")]) == 2
    assert "is a file" in capsys.readouterr().err
    (tmp_path / "ck" / files.RECORD_NAME).write_text("{not json")
    assert optimize.main(_command(tmp_path, "--iterations", "4", "--resume")) == 2
    assert "not a readable checkpoint" in capsys.readouterr().err


def test_resume_without_a_checkpoint_yet_starts_the_run(tmp_path, capsys):
    """What a job that always passes --resume needs on its first submission."""
    assert optimize.main(_command(tmp_path, "--iterations", "3", "--resume")) == 0
    assert "no checkpoint in" in capsys.readouterr().out
    assert files.read_record(tmp_path / "ck")["iteration"] == 3


def test_the_slurm_optimisation_job_resubmits_itself_until_the_run_is_done(tmp_path):
    """examples/slurm_optimize.sh with a fake srun (one rank; the first job gets SIGTERM, as --signal=TERM@120
    sends it before a time limit, once its first periodic checkpoint is written: mid-run however fast the
    machine) and a fake sbatch (which records its arguments)."""
    import subprocess
    import sys

    from conftest import ROOT

    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(
        '#!/bin/bash\nif [ "${SUBMISSION:-1}" != 1 ]; then exec "$@"; fi\n'
        'args=("$@"); for i in "${!args[@]}"; do [ "${args[$i]}" = --checkpoint ] && ck=${args[$((i + 1))]}; done\n'
        '"$@" & pid=$!\n'
        f'until [ -e "$ck/{files.RECORD_NAME}" ] || ! kill -0 $pid 2>/dev/null; do sleep 0.05; done\n'
        'kill -TERM $pid 2>/dev/null; wait $pid\n')
    (bin_dir / "sbatch").write_text(f'#!/bin/bash\necho "$@" >> {tmp_path}/sbatch.log\n')
    for name in ("srun", "sbatch"):
        (bin_dir / name).chmod(0o755)
    iterations = 30  # the script checkpoints every 10: the SIGTERM lands with 20 iterations to go
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SPHYR_HPC=str(ROOT), PYTHON=sys.executable,
               SIZE="128x64", ITERATIONS=str(iterations))
    script = str(ROOT / "examples" / "slurm_optimize.sh")
    first = subprocess.run(["bash", script], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "submitting the next job" in first.stdout
    stopped_at = files.read_record(tmp_path / "run-mbb" / "checkpoint")["iteration"]
    assert 10 <= stopped_at < iterations  # saved by the SIGTERM mid-run
    submitted = (tmp_path / "sbatch.log").read_text()
    assert "SUBMISSION=2" in submitted and f"OUT={tmp_path / 'run-mbb'}" in submitted
    # The next job (what sbatch would start): it resumes and finishes the run.
    env.update(SUBMISSION="2", OUT=str(tmp_path / "run-mbb"))
    second = subprocess.run(["bash", script], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert second.returncode == 0, second.stderr[-2000:]
    history = json.loads((tmp_path / "run-mbb" / "run.json").read_text())["history"]
    assert [h["iteration"] for h in history] == list(range(1, iterations + 1))
    assert len((tmp_path / "sbatch.log").read_text().splitlines()) == 1


def test_scaling_resume_keeps_the_finished_runs(tmp_path, capsys):
    """A study cut short after its first run (what an interrupt or a kill leaves in --json), resumed:
    the finished run is kept as it was (not run again), the rest is run; other settings are refused."""
    from sphyr_hpc import scaling

    out = tmp_path / "scaling.json"
    argv = ["--sizes", "24x12,48x24", "--ranks", "1", "--iterations", "3", "--design-iterations", "0",
            "--json", str(out), "--quiet", "--no-bandwidth"]
    assert scaling.main(argv) == 0
    first, second = json.loads(out.read_text())
    out.write_text(json.dumps([first]))  # the study as it stood after its first run
    assert scaling.main(argv + ["--resume"]) == 0
    kept, rerun = json.loads(out.read_text())
    assert kept == first  # the same wall time and load averages: not run again
    assert (rerun["nelx"], rerun["ranks"]) == (48, 1) and rerun["wall_seconds"] != second["wall_seconds"]
    assert scaling.main(argv[:5] + ["4"] + argv[6:] + ["--resume"]) == 2
    assert "other settings (iterations)" in capsys.readouterr().err
