"""The memory a node has for a run: MemAvailable or its cgroup's room, the smaller, and the ranks sharing it.

:func:`available` reads ``/proc/meminfo``'s ``MemAvailable`` (what the kernel
can give without swapping) and the room left under every memory cgroup limit
this process runs under, its own and its ancestors' (cgroup v2 ``memory.max``
less ``memory.current``, cgroup v1 ``memory.limit_in_bytes`` less
``memory.usage_in_bytes``: a batch system's allocation), and returns the
smaller.  :func:`node_memory` is its collective form: the ranks of one node
(``MPI.Comm.Split_type(COMM_TYPE_SHARED)``) count themselves and take their
node leader's reading, so that every rank of a node sees the same numbers.
"""

import os
from dataclasses import dataclass
from pathlib import Path

MEMINFO = "/proc/meminfo"
PROC_CGROUP = "/proc/self/cgroup"
CGROUP_ROOT = "/sys/fs/cgroup"
UNLIMITED = 2**60  # cgroup v1 writes "no limit" as a number near 2^63


@dataclass(frozen=True)
class NodeMemory:
    """Bytes a node can give a run, where that figure comes from, and how many ranks share it."""

    bytes: int
    source: str
    ranks: int = 1


def meminfo_available(path=MEMINFO):
    """``MemAvailable`` of ``/proc/meminfo`` in bytes, or None where there is none."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _read_bytes(path):
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= UNLIMITED else value


def _ancestors(root, relative):
    """``root/relative`` and each of its parents down to ``root`` (inside a container the path of
    ``/proc/self/cgroup`` may not exist under ``root``: then ``root`` alone is the process's cgroup)."""
    parts = [p for p in relative.split("/") if p]
    for depth in range(len(parts), -1, -1):
        folder = Path(root, *parts[:depth])
        if folder.is_dir():
            yield folder


def cgroup_room(proc_cgroup=PROC_CGROUP, root=CGROUP_ROOT):
    """The bytes left under the tightest memory cgroup limit of this process, or None without one."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    rooms = []
    for line in lines:
        hierarchy, controllers, relative = (line.split(":", 2) + ["", ""])[:3]
        if hierarchy == "0" and controllers == "":  # cgroup v2
            folders, limit, usage = _ancestors(root, relative), "memory.max", "memory.current"
        elif "memory" in controllers.split(","):  # cgroup v1
            folders, limit, usage = _ancestors(os.path.join(root, "memory"), relative), \
                "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        for folder in folders:
            cap = _read_bytes(folder / limit)
            if cap is not None:
                rooms.append(max(cap - (_read_bytes(folder / usage) or 0), 0))
    return min(rooms) if rooms else None


def available():
    """The :class:`NodeMemory` this process can use (one rank), or None when nothing says."""
    readings = [(value, source) for value, source in ((meminfo_available(), "MemAvailable"),
                                                      (cgroup_room(), "the cgroup limit less its usage"))
                if value is not None]
    if not readings:
        return None
    value, source = min(readings)
    return NodeMemory(value, source)


def node_memory(comm):
    """The :class:`NodeMemory` of this rank's node (collective on the mpi4py communicator ``comm``):
    its leader's reading and the number of ranks of ``comm`` on the node; None when nothing says."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        reading = node.bcast(available() if node.rank == 0 else None, root=0)
        ranks = node.size
    finally:
        node.Free()
    if reading is None:
        return None
    return NodeMemory(reading.bytes, reading.source, ranks)
