"""The output folder's lock names its processes; a stale one is taken over with one line, a live one
refused naming its processes; and a rank whose launcher ends stops on the interrupt path by itself."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import EXAMPLE_RESULTS, ROOT
from sphyr_hpc.io import output_lock
from sphyr_hpc.io.output_lock import LOCK_NAME, LockRefused, acquire, this_process
from sphyr_hpc.score import main

HOLD = textwrap.dedent("""
    import fcntl, json, os, sys, time
    sys.path.insert(0, sys.argv[2])
    from sphyr_hpc.io.output_lock import this_process
    with open(sys.argv[1], "r+") as handle:
        if sys.argv[3] == "flock":
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps({"processes": [list(this_process())]}) + "\\n")
        handle.flush()
        print("held", flush=True)
        time.sleep(120)
""")


def _holder(out, how):
    """A process that names itself in out's lock file (and holds the flock: ``how="flock"``)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / LOCK_NAME).touch()
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out / LOCK_NAME), str(ROOT), how],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_the_lock_names_the_host_and_every_process_of_the_run_and_is_emptied_on_release(tmp_path):
    said = []
    ranks = [this_process(), (socket.gethostname(), 4242, 17)]
    lock = acquire(tmp_path / "out", ranks, said.append)
    content = json.loads((tmp_path / "out" / LOCK_NAME).read_text())
    assert content == {"processes": [list(p) for p in ranks]} and said == []
    lock.release()
    assert (tmp_path / "out" / LOCK_NAME).read_text() == ""
    acquire(tmp_path / "out", ranks, said.append).release()  # an emptied lock is free: nothing said
    assert said == []


def test_a_lock_whose_processes_are_gone_is_taken_over_with_one_line(tmp_path, capsys):
    gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    record = (socket.gethostname(), gone.pid, output_lock._start_time(gone.pid))
    gone.kill()
    gone.wait()
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"processes": [list(record)]}) + "\n")  # a killed run's
    assert main([str(EXAMPLE_RESULTS / "baseline-empty" / "full_easy.json"), "--out", str(out), "--quiet",
                 "--no-report"]) == 0
    err = capsys.readouterr().err
    taken = [line for line in err.splitlines() if "taking over the lock" in line]
    assert len(taken) == 1 and f"process {gone.pid} on {socket.gethostname()}" in taken[0], err
    assert (out / LOCK_NAME).read_text() == ""  # the run's own lock released at its end
    assert len((out / "results.jsonl").read_text().splitlines()) == 5


@pytest.mark.parametrize("how", ["flock", "named"])
def test_a_lock_whose_process_runs_is_refused_naming_it(tmp_path, how, capsys, monkeypatch):
    # flock: the other run holds the lock.  named: it does not (its rank 0 is gone) but a process the
    # file names still runs on this host and may write.
    monkeypatch.setattr(output_lock, "WAIT_SECONDS", 0.2)
    out = tmp_path / "out"
    holder = _holder(out, how)
    try:
        with pytest.raises(LockRefused) as refused:
            acquire(out, [this_process()], print, wait=0.2)
        assert f"{holder.pid} on {socket.gethostname()}" in str(refused.value)
        assert f"kill {holder.pid}" in str(refused.value)
        status = main([str(EXAMPLE_RESULTS / "baseline-empty"), "--out", str(out), "--resume", "--quiet"])
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert status == 2 and err.count(f"kill {holder.pid}") == 1, err
    assert not (out / "results.jsonl").exists()


def test_a_lock_held_while_its_ranks_stop_is_waited_for(tmp_path):
    """A --resume started right after a launcher was killed meets the lock of ranks still stopping
    (within 2 s): it waits for them instead of being refused."""
    out = tmp_path / "out"
    holder = _holder(out, "flock")
    subprocess.Popen(["sh", "-c", f"sleep 1; kill {holder.pid}"])
    lock = acquire(out, [this_process()], print)
    holder.wait()
    lock.release()


WATCHED = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    from sphyr_hpc import cli

    def run(args, context):
        print("started", flush=True)
        time.sleep(60)
        return 0

    command = cli.Command(prog="watched", build_parser=lambda: cli.Parser(prog="watched"), run=run, mpi=False,
                          interrupt_note=lambda args: "; note")
    sys.exit(cli.main(command, []))
""")


def test_a_process_whose_launcher_ends_stops_on_the_interrupt_path(tmp_path):
    """The watchdog (runtime/launcher.py): a rank's launcher killed, the rank ends within 2 s through
    the command's interrupt path (its message, status 143), not by the launcher's signals."""
    err = tmp_path / "err.txt"
    launcher = subprocess.Popen(["sh", "-c", f'"$0" -c "$1" "$2" 2>"$3" & echo $!; wait', sys.executable,
                                 WATCHED, str(ROOT), str(err)], stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, OMPI_COMM_WORLD_SIZE="1"), start_new_session=True)
    rank = int(launcher.stdout.readline())
    assert launcher.stdout.readline().strip() == "started"
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.wait()
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{rank}") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not os.path.exists(f"/proc/{rank}")
    text = err.read_text()
    assert text.count("watched: interrupted (SIGTERM: sh, the launcher that started it, is gone); note") == 1, text
