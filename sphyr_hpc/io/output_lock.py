"""The output folder's lock: one run at a time writes a folder, and the lock says whose it is.

Two runs appending to and rewriting the same results.jsonl would lose records.
A run's rank 0 holds an exclusive ``flock`` on ``OUT/.sphyr_hpc.lock``, which the
kernel drops when the process ends however it ends, and writes into the file
the host and the process ids of every rank of the run (and each process's start
time, so that a reused process id is not taken for the run's).  The file is
emptied when the run ends, interrupted or not.  So:

- a lock that another process holds is refused, naming the processes in it and
  which of them still run (after :data:`WAIT_SECONDS`: ranks whose launcher was
  killed take up to 2 s to stop, and a ``--resume`` started right after the kill
  waits for them instead of failing);
- a free lock whose file still names processes is the lock of a run that did not
  end on its own path (a ``kill -9``): when none of them runs any more it is taken
  over with one line saying so; when some still run (ranks on this host that
  outlived their rank 0) it is refused, naming them.

Processes on another host cannot be looked at from here: a free lock is theirs no
longer (their rank 0 is gone, and ranks stop within 2 s of their launcher).  A file
system without locks (Lustre without ``-o flock``, some NFS mounts) gets a warning
and only the second check.
"""

import errno
import json
import os
import socket
import time

LOCK_NAME = ".sphyr_hpc.lock"
WAIT_SECONDS = 3.0
_POLL_SECONDS = 0.05
_NO_LOCKS = (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP)


class LockRefused(Exception):
    """The folder is another run's; the message names its processes and what to do."""


def this_process():
    """``(host, pid, start)`` of this process, for :func:`acquire` (gathered from every rank)."""
    return socket.gethostname(), os.getpid(), _start_time(os.getpid())


def _start_time(pid):
    """The process's start time in clock ticks after boot (/proc/PID/stat field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _running(process):
    """Whether ``(host, pid, start)`` is a process that still runs on this host."""
    host, pid, start = process
    return host == socket.gethostname() and start is not None and _start_time(pid) == start


def _named(processes):
    """``processes 12, 13 on host h`` (hosts in order)."""
    hosts = {}
    for host, pid, _ in processes:
        hosts.setdefault(host, []).append(str(pid))
    word = "process" if len(processes) == 1 else "processes"
    return f"{word} " + "; ".join(f"{', '.join(pids)} on {host}" for host, pids in hosts.items())


def _holders(handle):
    """The processes the lock file names (empty: none, or a file this code did not write)."""
    handle.seek(0)
    try:
        found = json.loads(handle.read() or "{}").get("processes", [])
        return [(str(h), int(p), None if s is None else int(s)) for h, p, s in found]
    except (ValueError, TypeError, AttributeError):
        return []


def _try_flock(handle):
    """True: locked; False: another process holds it; an OSError: this file system has no locks."""
    import fcntl

    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as err:
        if err.errno not in _NO_LOCKS:
            raise
        return err


class OutputLock:
    """The lock of one run on folder ``out`` (:func:`acquire`); :meth:`release` empties and frees it."""

    def __init__(self, handle, path):
        self.handle, self.path = handle, path

    def release(self):
        if self.handle is None:
            return
        try:
            self.handle.seek(0)
            self.handle.truncate()
            self.handle.flush()
        except OSError:
            pass  # the lock itself still goes with the handle
        self.handle.close()
        self.handle = None

    close = release


def acquire(out, processes, say, wait=WAIT_SECONDS):
    """The lock on ``out`` for a run of ``processes`` (``this_process()`` of every rank), or
    :class:`LockRefused`.  ``say(text)`` prints one line (a stale lock taken over, no locks here)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not truncated: the holder's names stay
    handle = os.fdopen(fd, "r+", encoding="utf-8")
    deadline = time.monotonic() + wait
    while (locked := _try_flock(handle)) is False and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
    holders = _holders(handle)
    if locked is False:
        handle.close()
        running = [p for p in holders if _running(p)]
        who = f" ({_named(holders)})" if holders else ""
        kill = f" (kill {' '.join(str(p) for _, p, _ in running)})" if running else ""
        raise LockRefused(f"another run is writing to {out}{who}: it holds {path}; wait for it to end or "
                          f"kill it{kill} before --resume")
    if locked is not True:
        say(f"warning: {out} is on a file system without file locks ({locked.strerror}): only the process "
            f"ids in {path} keep another run from writing there at the same time")
    if holders:
        running = [p for p in holders if _running(p)]
        if running:
            handle.close()
            raise LockRefused(f"{_named(running)} of an earlier run on {out} still run (their rank 0 is gone) "
                              f"and may write to it: kill them (kill {' '.join(str(p) for _, p, _ in running)}) "
                              f"before --resume")
        say(f"{path}: taking over the lock of an earlier run that ended without releasing it "
            f"({_named(holders)}, none of which runs any more)")
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"processes": [list(p) for p in processes]}) + "\n")
    handle.flush()
    return OutputLock(handle, path)
