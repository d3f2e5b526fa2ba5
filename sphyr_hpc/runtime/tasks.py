"""Independent tasks over MPI ranks, dynamically balanced, with every rank working.

The next task index comes from a counter on rank 0 that every rank increments
atomically (MPI one-sided ``Fetch_and_op`` in a passive-target epoch), so a
rank that finishes early simply takes the next task.  This departs from the
library default (``mpi4py.futures.MPICommExecutor``) for one reason: that
executor's root only dispatches, so on 2 ranks a single rank computes and the
speed-up from 1 to 2 ranks is 1.  Here no rank idles and no rank is a master.

The same window holds a second counter, the number of finished items, which
rank 0 reads to report progress.
"""

import time

import numpy as np
from mpi4py import MPI

_TASK, _DONE = 0, 1


class SharedCounters:
    """Two int64 counters on rank 0 of ``comm``: next task and items done (collective)."""

    def __init__(self, comm):
        self.comm = comm
        item = MPI.INT64_T.Get_size()
        self.win = MPI.Win.Allocate(2 * item if comm.rank == 0 else 0, item, comm=comm)
        if comm.rank == 0:
            self.win.Lock(0, MPI.LOCK_EXCLUSIVE)
            np.frombuffer(self.win.tomemory(), dtype=np.int64)[:] = 0
            self.win.Unlock(0)
        comm.Barrier()
        self._one = np.ones(1, dtype=np.int64)
        self._out = np.zeros(1, dtype=np.int64)

    def _fetch_add(self, slot, value):
        self._one[0] = value
        self.win.Lock(0, MPI.LOCK_SHARED)
        self.win.Fetch_and_op([self._one, MPI.INT64_T], [self._out, MPI.INT64_T], 0, slot, MPI.SUM)
        self.win.Unlock(0)
        return int(self._out[0])

    def next_task(self):
        return self._fetch_add(_TASK, 1)

    def claimed(self, n_tasks):
        """The task indices below ``n_tasks`` this rank claims, one at a time, as it asks."""
        while True:
            i = self.next_task()
            if i >= n_tasks:
                return
            yield i

    def stop(self, n_tasks):
        """Hand out no further task below ``n_tasks`` (tasks already claimed still run)."""
        self._fetch_add(_TASK, n_tasks)

    def add_done(self, count=1):
        return self._fetch_add(_DONE, count) + count

    def done(self):
        return self._fetch_add(_DONE, 0)

    def free(self):
        self.comm.Barrier()
        self.win.Free()


def run_dynamic(comm, n_tasks, run, progress=None, poll_seconds=0.2):
    """Run ``run(i, counters)`` for every task index on whichever rank asks first.

    ``run`` calls ``counters.add_done(k)`` as it finishes items.  On rank 0,
    ``progress(done)`` is called after each of its tasks and then polled until
    it returns True (all items done), so a progress bar keeps moving while the
    other ranks finish.  Collective; an exception leaves the window unfreed on
    purpose (the caller aborts the job instead of entering a collective).
    """
    counters = SharedCounters(comm)
    for i in counters.claimed(n_tasks):
        run(i, counters)
        if progress is not None and comm.rank == 0:
            progress(counters.done())
    if progress is not None and comm.rank == 0:
        while not progress(counters.done()):
            time.sleep(poll_seconds)
    wait_idle(comm)
    counters.free()


def wait_idle(comm, poll_seconds=0.001):
    """Wait for every rank of ``comm`` to get here, asleep rather than spinning.

    A rank blocked in an MPI collective polls the network at full speed (OpenMPI's
    default): where ranks share cores with each other or with other jobs, the ranks
    that ran out of work would take CPU time from the ones still working on the last
    tasks (a large sample's longest piece).  A non-blocking barrier tested every
    ``poll_seconds`` costs them nothing; the collective that follows then completes at once.
    """
    if comm.size == 1:
        return
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll_seconds)
