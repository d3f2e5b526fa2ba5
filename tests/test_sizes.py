"""Samples of any size: the solver chosen by size, a sample's yardstick in pieces over ranks,
and parity (docs/scoring.md, "Parity") on the upscaled fixtures on 1 and 2 ranks.

Fixtures: tests/data/upscaled (copied unchanged from shared/data/sphyr/upscaled; its
README says how they were made): four v1 samples upscaled x4 (40x40) as result
folders, ground-truth and perturbed completions, and the published scorer's
metrics of each record in expected.jsonl.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA, ROOT
from sphyr_hpc.core import grid as grids
from sphyr_hpc.core import loadcase as loadcases
from sphyr_hpc import parity
from sphyr_hpc.runtime.petsc import petsc
from sphyr_hpc.optimiser import yardstick
from sphyr_hpc.score import main
from sphyr_hpc.solvers import sizing
from sphyr_hpc.solvers.base import SolverError
from sphyr_hpc.solvers.elasticity import elasticity_system
from sphyr_hpc.scoring import pieces as split

UPSCALED = DATA / "upscaled"
EXPECTED = {(r["model"], r["subject"], r["index"]): r
            for r in map(json.loads, (UPSCALED / "expected.jsonl").read_text().splitlines())}


def _rows(out):
    return {(r["model"], r["subject"], r["index"]): r
            for r in map(json.loads, (Path(out) / "results.jsonl").read_text().splitlines())}


def _score(out, ranks=1, *options):
    args = [str(UPSCALED / "results"), "--out", str(out), "--quiet", *options]
    if ranks == 1:
        assert main(args) == 0
    else:
        cmd = [str(ROOT / "bin" / "mpirun"), "-n", str(ranks), sys.executable, "-m", "sphyr_hpc.score", *args]
        # env: os.environ, not the C-level environment that this process's MPI singleton changed
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, env=dict(os.environ))
        assert done.returncode == 0, done.stderr[-3000:]
    return _rows(out)


# The solver chosen by size (40x40: SIMP on multigrid), and direct solves throughout.
SOLVERS = {"sized": (), "direct": ("--multigrid-dofs", str(10**9))}


@pytest.fixture(scope="module", params=list(SOLVERS))
def one_rank(request, tmp_path_factory):
    return request.param, _score(tmp_path_factory.mktemp("one") / "out", 1, *SOLVERS[request.param])


def test_upscaled_fixtures_hold_eight_published_records():
    assert len(EXPECTED) == 8
    assert {key[0] for key in EXPECTED} == {"upscaled-gt", "upscaled-perturbed"}


def test_every_upscaled_record_holds_the_parity_rules_on_one_rank(one_rank):
    _, rows = one_rank
    assert set(rows) == set(EXPECTED)
    broken = {key: parity.differences(rows[key], EXPECTED[key]) for key in EXPECTED}
    assert not {k: v for k, v in broken.items() if v}


def test_a_sample_split_over_two_ranks_gives_the_records_of_one_rank(one_rank, tmp_path):
    solver, rows = one_rank
    two = _score(tmp_path / "out", 2, *SOLVERS[solver])
    # Bit for bit by construction, so parity holds on 2 ranks as on 1: every piece and record is computed on
    # one rank's own serial system, each SIMP run starts its solver afresh (LinearSystem.reset), and the
    # pieces' designs are gathered as copies (sphyr_hpc/split.py); both runs use this process's BLAS kernel.
    assert two == rows
    broken = {key: parity.differences(two[key], EXPECTED[key]) for key in EXPECTED}
    assert not {k: v for k, v in broken.items() if v}


def _upscaled_problem():
    """The fixtures' full_easy[0] upscaled x4: load case, full mask, ground-truth densities."""
    stored = json.loads((UPSCALED / "results" / "upscaled-gt" / "full_easy.json").read_text())[0]
    truth = grids.as_grid(stored["ground_truth"])
    lc = loadcases.from_grid(truth)
    rho, _ = grids.densities(truth)
    rho[lc.structural_mask()] = 1.0
    return lc, ~lc.structural_mask(), rho


def test_solver_is_chosen_by_size():
    assert sizing.simp_solver(242) == "direct"   # 10x10: the hierarchy would be the coarse LU alone
    assert sizing.simp_solver(882) == "mg"       # 20x20 and up: the measured crossover
    assert sizing.simp_solver(13122) == "mg"
    assert sizing.simp_solver(100, mg_min_dofs=0) == "mg"
    assert sizing.simp_solver(10**9, mg_min_dofs=None) == "direct"
    lc, free, _ = _upscaled_problem()
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system, \
            yardstick.Workspace(system) as workspace:
        exact = sizing.exact_system(workspace.condensed, free)
        assert exact is system  # a full mask of 40x40 is not condensed
        assert workspace.simp_system(exact, mg_min_dofs=lc.n_dofs + 1) is system
        mg = workspace.simp_system(exact, mg_min_dofs=lc.n_dofs)
        assert mg is not system and mg.solver == "mg" and mg.prefix == sizing.SIMP_PREFIX
        assert workspace.simp_system(exact, mg_min_dofs=0) is mg  # made once, kept by the workspace


def test_yardstick_from_pieces_computed_apart_and_out_of_order_is_the_same(tmp_path, monkeypatch):
    lc, free, truth = _upscaled_problem()
    vf = float(truth.mean())
    opts = dict(seeds=(truth,), settings=yardstick.YardstickSettings(max_iterations=25, mg_min_dofs=0))
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system, \
            yardstick.Workspace(system) as workspace:
        whole = yardstick.yardstick(workspace, vf, free, truth, **opts)
    computed = {}
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system, \
            yardstick.Workspace(system) as workspace:
        for piece in reversed(yardstick.pieces()):  # another order, another system, as on another rank
            computed[piece] = yardstick.run_piece(workspace, piece, vf, free, truth, **opts)
    runs, solved = [], []
    solve = yardstick.compliance_of
    monkeypatch.setattr(yardstick, "compliance_of", lambda *a: solved.append(1) or solve(*a))
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system, \
            yardstick.Workspace(system) as workspace:
        assembled = yardstick.yardstick(workspace, vf, free, truth, computed=computed,
                                        on_run=lambda: runs.append(1), **opts)
    assert runs == []  # every SIMP run came from the pieces
    assert solved == []  # and every candidate's compliance
    # Exact by construction: the same runs on fresh serial systems (no warm start crosses runs), then the same
    # candidate solves and polish.
    assert assembled.compliance == whole.compliance
    np.testing.assert_array_equal(assembled.densities, whole.densities)


def test_a_run_whose_multigrid_stalls_is_run_again_on_the_exact_solver(monkeypatch):
    lc, free, truth = _upscaled_problem()
    vf = float(truth.mean())
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system, \
            yardstick.Workspace(system) as workspace:
        exact = yardstick.yardstick(workspace, vf, free, truth, seeds=(truth,),
                                    settings=yardstick.YardstickSettings(max_iterations=15, mg_min_dofs=None))
    from sphyr_hpc.solvers.system import GridSystem

    solve = GridSystem.solve
    calls = []

    def stalling(self, moduli):
        if self.solver == "mg":
            calls.append(1)
            if len(calls) % 7 == 0:  # some solve of every run stalls
                raise SolverError("KSP (cg/mg) did not converge: DIVERGED_ITS")
        return solve(self, moduli)

    monkeypatch.setattr(GridSystem, "solve", stalling)
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system, \
            yardstick.Workspace(system) as workspace:
        rescued = yardstick.yardstick(workspace, vf, free, truth, seeds=(truth,),
                                      settings=yardstick.YardstickSettings(max_iterations=15, mg_min_dofs=0))
    assert len(calls) >= 7
    # Exact by construction: every run stalls on multigrid and is redone from its start on the direct solver,
    # the arithmetic of the exact run.
    assert rescued.compliance == exact.compliance
    np.testing.assert_array_equal(rescued.densities, exact.densities)


def test_a_yardstick_over_two_ranks_runs_simp_on_multigrid_and_ends_cleanly(tmp_path):
    """The yardstick on a system over 2 ranks (COMM_WORLD), its SIMP runs on multigrid: exit status 0 (it
    ended in a segmentation fault when its system was closed: every multigrid solve failed in PETSc, a global
    SOR sweep that MPIAIJ refuses, and PETSc's KSPDestroy then freed a level vector twice), no multigrid
    solve failed, and the yardstick of one rank."""
    script = ROOT / "tests" / "scripts" / "yardstick_over_ranks.py"
    out = tmp_path / "yardstick.json"
    cmd = [str(ROOT / "bin" / "mpirun"), "-n", "2", sys.executable, "-X", "faulthandler", str(script), str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    two = json.loads(out.read_text())
    assert two["multigrid_failures"] == 0
    sys.path.insert(0, str(script.parent))
    try:
        from yardstick_over_ranks import MAX_ITERATIONS, upscaled_problem
    finally:
        sys.path.remove(str(script.parent))
    lc, free, truth = upscaled_problem()
    with elasticity_system(lc, comm=petsc().COMM_SELF, solver="direct") as system, \
            yardstick.Workspace(system) as workspace:
        one = yardstick.yardstick(workspace, float(truth.mean()), free, truth, seeds=(truth,),
                                  settings=yardstick.YardstickSettings(max_iterations=MAX_ITERATIONS, mg_min_dofs=0))
    # Not bit for bit: 2 ranks smooth block by block (local SOR sweeps) and sum in another order.
    assert two["compliance"] == pytest.approx(one.compliance, rel=1e-9)
    np.testing.assert_allclose(np.array(two["densities"]), one.densities, atol=1e-6)


def test_large_samples_up_to_one_per_rank_are_split_into_pieces_longest_first_on_several_ranks():
    from sphyr_hpc.io.records import read_result_file
    from sphyr_hpc.scoring.scorer import Scorer
    from sphyr_hpc.scoring.tasks import make_tasks

    samples = []
    for path in sorted((UPSCALED / "results" / "upscaled-gt").glob("*.json")):
        samples += read_result_file(path)
    small = read_result_file(ROOT / "examples" / "results" / "baseline-empty" / "full_easy.json")[:2]
    tasks = make_tasks(samples + small)
    scorer = Scorer()
    try:
        assert split.plan(tasks, scorer, 1) == []
        two = split.plan(tasks, scorer, 2)
        planned = split.plan(tasks, scorer, 8)
    finally:
        scorer.close()
    assert len({p.task for p in two}) == 2  # as many samples as ranks; the others stay whole tasks
    assert len(planned) == 4 * len(yardstick.pieces())  # the four 40x40 samples, not the 10x10 ones
    assert {len(tasks[p.task][0].ground_truth) for p in planned} == {40}
    assert [p.runs for p in planned] == sorted((p.runs for p in planned), reverse=True)
    assert sum(p.runs for p in planned) == 4 * split.YARDSTICK_RUNS


class _Counters:
    def __init__(self):
        self.value = 0

    def add_done(self, count):
        self.value += count
        return self.value


def test_progress_steps_never_exceed_what_a_task_promised():
    seen = []
    steps = split.Steps(refresh=seen.append, interval=0.0)  # every step sent at once
    counters = _Counters()
    steps.start(counters, 7)
    for _ in range(9):  # more runs than promised (e.g. --design-efficiency): capped
        steps.step()
    steps.finish()
    steps.start(counters, 3)
    steps.step()
    steps.finish()  # fewer (no yardstick for an invalid sample): topped up
    assert counters.value == 10
    assert seen == [1, 2, 3, 4, 5, 6, 7, 8, 10]


def test_progress_steps_are_sent_in_batches_and_every_promised_step_arrives(monkeypatch):
    """Records are steps: thousands a second are sent to the shared counter at most every interval."""
    clock = [100.0]
    monkeypatch.setattr(split.time, "monotonic", lambda: clock[0])
    seen = []
    steps = split.Steps(refresh=seen.append, interval=0.1)
    counters = _Counters()
    steps.start(counters, 1000)
    for i in range(999):
        steps.step()
        clock[0] += 0.001  # a step a millisecond
    assert 5 <= len(seen) <= 12 and seen == sorted(seen)  # about one send per 0.1 s, not 999
    steps.step()  # the last promised step is sent at once
    assert counters.value == 1000 and seen[-1] == 1000
    steps.start(counters, 5)
    steps.step(2)
    steps.finish()  # the rest, sent even within the interval
    assert counters.value == 1005 and seen[-1] == 1005
