"""Memory estimates before work: ``optimize`` and ``scaling`` refuse a run the node cannot hold.

The estimate (sphyr_hpc.optimiser.memory) is checked against the peaks real runs measure, the node's
memory (sphyr_hpc.runtime.node_memory) against cgroup files laid out as the kernel does, and the
refusal as a user meets it: one line, exit status 2, nothing run.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from sphyr_hpc.optimiser import memory
from sphyr_hpc.runtime import node_memory
from sphyr_hpc.runtime.node_memory import NodeMemory

ROOT = Path(__file__).resolve().parent.parent
MPIRUN = str(ROOT / "bin" / "mpirun")


def _launch(ranks):
    return [sys.executable] if ranks == 1 else [MPIRUN, "-n", str(ranks), sys.executable]


def _run(cmd, timeout=600):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _too_large_side():
    """The side of a square mbb grid whose estimate on 1 rank is twice what this node has."""
    node = node_memory.available()
    assert node is not None, "this machine says nothing of its memory (/proc/meminfo)"
    per_dof = memory.BYTES_PER_DOF["mg"][0]
    return int(math.sqrt(2 * node.bytes / per_dof / 2)) + 1


# -- the estimate against measured peaks ------------------------------------------------------------
# The default solver at each size: direct at 256x128 (66,306 DOFs), mg at 512x256 and 1024x512.
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("size", ["256x128", "512x256", "1024x512"])
def test_the_estimate_is_within_25_percent_of_the_measured_peak_per_rank(tmp_path, size, ranks):
    out = tmp_path / "run.json"
    run = _run(_launch(ranks) + ["-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", size, "--iterations", "1",
                                 "--quiet", "--json", str(out)])
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(out.read_text())
    measured = max(data["summary"]["peak_memory_mb_per_rank"])
    estimate = memory.per_rank_bytes(data["dofs"], None, ranks) / memory.MB
    assert data["solver"] == ("direct" if size == "256x128" else "mg")
    assert abs(estimate / measured - 1) <= 0.25, f"{size} on {ranks}: estimated {estimate:.0f} MB, " \
                                                 f"measured {measured:.0f} MB"


# -- the model's own rules --------------------------------------------------------------------------
def test_more_ranks_need_less_per_rank_and_the_suggested_ranks_fit():
    n_dofs = memory.grid_dofs(10000, 10000)
    node = NodeMemory(16 * 2**30, "MemAvailable", ranks=2)
    one, two, eight = (memory.per_rank_bytes(n_dofs, "mg", r) for r in (1, 2, 8))
    assert one > two > eight
    needed = memory.ranks_needed(n_dofs, "mg", 2, node.bytes)
    assert memory.per_rank_bytes(n_dofs, "mg", needed) * 2 <= node.bytes
    assert memory.per_rank_bytes(n_dofs, "mg", needed - 1) * 2 > node.bytes
    reason = memory.refusal("mbb 10000x10000", n_dofs, None, 2, node)
    assert f"at least {needed} ranks on {math.ceil(needed / 2)} nodes like this one (2 a node)" in reason
    assert memory.refusal("mbb 100x100", memory.grid_dofs(100, 100), None, 2, node) is None


def test_a_direct_solve_too_large_for_the_node_is_told_that_mg_would_fit():
    n_dofs = memory.grid_dofs(2048, 1024)
    node = NodeMemory(4 * 2**30, "the cgroup limit less its usage", ranks=1)
    reason = memory.refusal("mbb 2048x1024", n_dofs, "direct", 1, node)
    assert reason is not None and "--solver mg" in reason and "with solver direct" in reason
    assert "the cgroup limit less its usage" in reason
    assert memory.refusal("mbb 2048x1024", n_dofs, "mg", 1, node) is None


def test_the_bandwidth_arrays_count_in_the_estimate():
    n_dofs = memory.grid_dofs(256, 128)
    assert memory.per_rank_bytes(n_dofs, "mg", 1, 800 * 2**20) - memory.per_rank_bytes(n_dofs, "mg", 1) == \
        800 * 2**20


# -- the node's memory -------------------------------------------------------------------------------
def _cgroup_files(tmp_path, v2, limits):
    """A /proc/self/cgroup and a cgroup tree whose folders ``a`` and ``a/b`` hold (limit, usage)."""
    root = tmp_path / "cgroup"
    proc = tmp_path / "proc_cgroup"
    base = root if v2 else root / "memory"
    names = ("memory.max", "memory.current") if v2 else ("memory.limit_in_bytes", "memory.usage_in_bytes")
    for folder, (limit, usage) in limits.items():
        (base / folder).mkdir(parents=True, exist_ok=True)
        (base / folder / names[0]).write_text(f"{limit}\n")
        (base / folder / names[1]).write_text(f"{usage}\n")
    proc.write_text("0::/a/b\n" if v2 else "12:pids:/a/b\n4:memory:/a/b\n0::/\n")
    return proc, root


@pytest.mark.parametrize("v2", [True, False])
def test_the_cgroup_room_is_the_tightest_limit_less_its_usage_over_the_ancestors(tmp_path, v2):
    unlimited = "max" if v2 else str(2**63 - 4096)
    proc, root = _cgroup_files(tmp_path, v2, {"a": (8 * 2**30, 5 * 2**30), "a/b": (unlimited, 1 * 2**30)})
    assert node_memory.cgroup_room(proc, root) == 3 * 2**30
    proc, root = _cgroup_files(tmp_path / "none", v2, {"a": (unlimited, 0), "a/b": (unlimited, 0)})
    assert node_memory.cgroup_room(proc, root) is None


def test_meminfo_available_is_read_in_bytes(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683792 kB\nMemFree:  100 kB\nMemAvailable:   24170256 kB\n")
    assert node_memory.meminfo_available(meminfo) == 24170256 * 1024
    assert node_memory.meminfo_available(tmp_path / "missing") is None


# -- the refusal, as a user meets it ---------------------------------------------------------------
@pytest.mark.parametrize("ranks", [1, 2])
def test_optimize_refuses_a_grid_the_node_cannot_hold_in_one_line_before_any_work(tmp_path, ranks):
    side = _too_large_side()
    out = tmp_path / "run.json"
    run = _run(_launch(ranks) + ["-m", "sphyr_hpc.optimize", "--preset", "mbb", "--size", f"{side}x{side}",
                                 "--iterations", "1", "--json", str(out)], timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout == ""  # not even the load average: nothing started
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr  # rank 0 alone prints
    line = lines[0]
    assert line.startswith(f"python -m sphyr_hpc.optimize: error: mbb {side}x{side}: ")
    assert f"on {ranks} rank" in line and "with solver mg" in line and "per rank" in line
    assert "the node has (" in line and "ranks" in line and "a smaller grid" in line and "--force" in line
    if ranks == 2:
        assert "for the 2 ranks on this node" in line
    assert not out.exists()


def test_scaling_refuses_a_size_list_with_a_run_the_node_cannot_hold_before_any_run(tmp_path):
    side = _too_large_side()
    out = tmp_path / "study.json"
    run = _run([sys.executable, "-m", "sphyr_hpc.scaling", "--sizes", f"32x16,{side}x{side}", "--ranks", "1,2",
                "--iterations", "2", "--design-iterations", "0", "--json", str(out)], timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout == ""  # no run started (each is logged with its command)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert f"--sizes {side}x{side}: " in lines[0] and "1 more of the study's runs" in lines[0]
    assert "--force" in lines[0]
    assert list(tmp_path.iterdir()) == []


def _tiny_node(monkeypatch, module, attribute, ranks=1):
    """This node, as the check sees it, with 40 MB: under the process's own peak."""
    reading = NodeMemory(40 * memory.MB, "MemAvailable", ranks)
    monkeypatch.setattr(module, attribute, lambda *args: reading)


def test_optimize_with_force_goes_on_past_the_refusal_saying_so(tmp_path, monkeypatch, capsys):
    from sphyr_hpc import optimize

    _tiny_node(monkeypatch, memory, "node_memory")
    out = tmp_path / "run.json"
    argv = ["--preset", "mbb", "--size", "32x16", "--iterations", "1", "--quiet", "--json", str(out)]
    assert optimize.main(argv) == 2
    refused = capsys.readouterr()
    assert "error: mbb 32x16: " in refused.err and "over the 40 MB the node has (MemAvailable)" in refused.err
    assert "load average" not in refused.out and not out.exists()
    assert optimize.main(argv + ["--force"]) == 0
    forced = capsys.readouterr()
    assert "warning: mbb 32x16: " in forced.err and "going on (--force)" in forced.err
    assert json.loads(out.read_text())["iterations"] == 1


def test_scaling_with_force_goes_on_past_the_refusal_and_its_runs_too(tmp_path, monkeypatch, capsys):
    from sphyr_hpc import scaling
    from sphyr_hpc.jobs import scaling as job

    _tiny_node(monkeypatch, job, "available")
    out = tmp_path / "study.json"
    argv = ["--sizes", "32x16", "--ranks", "1", "--iterations", "2", "--design-iterations", "0", "--no-bandwidth",
            "--quiet", "--json", str(out)]
    assert scaling.main(argv) == 2
    assert "--sizes 32x16: " in capsys.readouterr().err and not out.exists()
    assert scaling.main(argv + ["--force"]) == 0
    assert "going on (--force)" in capsys.readouterr().err
    (entry,) = json.loads(out.read_text())
    assert "error" not in entry and entry["dofs"] == memory.grid_dofs(32, 16)


def test_the_peak_a_run_reports_is_its_own_when_a_large_process_started_it(tmp_path):
    # ru_maxrss is kept across fork and exec: a run started by a process holding 800 MB (a test
    # session late in the suite, a notebook) reported that process's peak as its own.
    code = ("import subprocess, sys, numpy as np\n"
            "held = np.ones(100_000_000)\n"
            "sys.exit(subprocess.run([sys.executable, '-m', 'sphyr_hpc.optimize', '--preset', 'mbb', '--size', '64x32',\n"
            "                         '--iterations', '1', '--quiet', '--json', sys.argv[1]]).returncode)\n")
    run = _run([sys.executable, "-c", code, str(tmp_path / "run.json")])
    assert run.returncode == 0, run.stdout + run.stderr
    measured = max(json.loads((tmp_path / "run.json").read_text())["summary"]["peak_memory_mb_per_rank"])
    assert measured < 400, f"64x32 reported a peak of {measured:.0f} MB"
