"""Independent tasks over MPI ranks, dynamically balanced, with every rank working.

The next task index comes from a counter on rank 0 that every rank increments
atomically (MPI one-sided ``Fetch_and_op`` in a passive-target epoch), so a
rank that finishes early simply takes the next task.  This departs from the
library default (``mpi4py.futures.MPICommExecutor``) for one reason: that
executor's root only dispatches, so on 2 ranks a single rank computes and the
speed-up from 1 to 2 ranks is 1.  Here no rank idles and no rank is a master.

The same window holds a second counter, the number of finished items, which
rank 0 reads to report progress.  Two ways to run the tasks, over the same
counters: :func:`run_dynamic` (each rank keeps what it computes) and
:func:`stream_to_root` (every result reaches rank 0 as it is computed).
"""

import time

import numpy as np
from mpi4py import MPI

_TASK, _DONE = 0, 1
_RESULT_TAG = 15
_POLL_SECONDS = 0.005  # rank 0's wait for the other ranks' results: latency negligible next to a task


class SharedCounters:
    """Two int64 counters on rank 0 of ``comm``: next task and items done (collective)."""

    def __init__(self, comm):
        self.comm = comm
        item = MPI.INT64_T.Get_size()
        # Allocating the window is a blocking collective: every rank first gets here asleep, in
        # Python, where a signal that reaches them all is taken by each (see Interruptible).
        wait_idle(comm)
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


class Interruptible(MPI.Intracomm):
    """A communicator whose blocking collectives first wait for every rank asleep, in Python
    (:func:`wait_idle`): a signal that reaches every rank while one of them is still at work is then
    taken by all of them (CPython runs a signal handler between bytecodes, never inside a blocking
    MPI call), so they end the interrupt together (:func:`~sphyr_hpc.runtime.process.end_interrupted`)
    instead of one waiting inside the collective for a rank that has left.  The same communicator,
    not a copy: ``Interruptible(comm)`` and ``comm`` can be used side by side."""

    def Barrier(self):
        wait_idle(self)

    def barrier(self):
        wait_idle(self)


for _name in ("bcast", "gather", "allgather", "scatter", "allreduce", "reduce", "alltoall",
              "Bcast", "Gather", "Allgather", "Scatter", "Allreduce", "Reduce"):
    def _patient(self, *args, _call=getattr(MPI.Intracomm, _name), **kwargs):
        wait_idle(self)
        return _call(self, *args, **kwargs)

    _patient.__name__ = _name
    setattr(Interruptible, _name, _patient)
del _name


def stream_to_root(comm, n_tasks, compute, poll_seconds=_POLL_SECONDS):
    """Every task's results on rank 0, as they are computed; a generator every rank runs to the end.

    ``compute(i)`` is a list of results of task ``i``, run by whichever rank
    claims the task (rank 0 too: between its own tasks it yields what the
    others sent).  On rank 0 every result is yielded, in the order they finish;
    on the other ranks nothing.  Stopping early on rank 0 (closing the
    generator) hands out no further task; what is in flight is collected.
    Collective on ``comm``, whose point-to-point messages it uses (pass a
    duplicate).
    """
    counters = SharedCounters(comm)
    if comm.rank != 0:
        requests = []
        for i in counters.claimed(n_tasks):
            for result in compute(i):
                requests.append(comm.isend(result, dest=0, tag=_RESULT_TAG))
        requests.append(comm.isend(None, dest=0, tag=_RESULT_TAG))  # "finished", after all its results
        MPI.Request.waitall(requests)
        counters.free()
        return
    running = [comm.size - 1]  # ranks that have not said "finished"

    def received(block):
        """What has arrived; with ``block``, everything until every rank has finished.  Waiting
        polls with a short sleep: a blocking receive spins, taking a core from the ranks at work."""
        while running[0]:
            if not comm.iprobe(source=MPI.ANY_SOURCE, tag=_RESULT_TAG):
                if not block:
                    return
                time.sleep(poll_seconds)
                continue
            result = comm.recv(source=MPI.ANY_SOURCE, tag=_RESULT_TAG)
            if result is None:
                running[0] -= 1
            else:
                yield result

    try:
        for i in counters.claimed(n_tasks):
            yield from compute(i)
            yield from received(block=False)
        yield from received(block=True)
    finally:
        if running[0]:  # stopped early: no more tasks for anyone; collect what is in flight
            counters.stop(n_tasks)
            for _ in received(block=True):
                pass
        counters.free()
