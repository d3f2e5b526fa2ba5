"""Peak memory per rank of an optimisation, estimated before any work from the grid, the solver and the ranks.

The model (docs/optimize.md, "Memory"): a rank's peak resident set is the
process itself (Python, NumPy, MPI and PETSc loaded: :data:`BASE_MB`) plus a
number of bytes per DOF it owns, one per solver and per kind of run
(:data:`BYTES_PER_DOF`: one rank, whose matrices are sequential and whose
direct solver is PETSc's Cholesky, or several, with parallel matrices and MUMPS'
LU), plus what the options add (``--bandwidth``'s two copy arrays).  The
coefficients are fitted to the peaks ``benchmarks/memory_model.py`` measures
(``benchmarks/results/memory_model.md``): the per-DOF terms at 2048x1024 and
4096x2048 for ``mg``, at the largest grids that fit the machine measured for
``gamg`` and ``direct``.

:func:`refusal` is the one-line reason to refuse a run whose ranks on one node
would need more than the node has (:mod:`sphyr_hpc.runtime.node_memory`), or
None; :func:`check` is its collective form for a run on MPI ranks, the same
answer on every rank (the node that has the least room per rank decides).
"""

import math
import sys

from ..runtime.node_memory import node_memory
from ..runtime.process import UsageError
from ..solvers.elasticity import default_solver

MB = 2**20
# The process's own peak, MB per rank: a 64x32 grid (4,290 DOFs) with mg, where the grid adds
# under 2 MB (benchmarks/results/memory_model.md: 92.0-92.4 MB on one rank, 92.4-92.8 on two).
BASE_MB = {"one": 92.0, "several": 93.0}
# Bytes per DOF a rank owns: (one rank, several ranks), least-squares slopes through the base of the
# peaks at mg's 2048x1024 and 4096x2048, gamg's 1024x512 and 2048x1024, direct's 512x256 and 1024x512.
BYTES_PER_DOF = {"direct": (3086.0, 5300.0), "mg": (412.0, 434.0), "gamg": (741.0, 1302.0)}
FORCE = "--force"


def grid_dofs(nelx, nely):
    """The DOFs of a nelx x nely grid: two per node."""
    return 2 * (int(nelx) + 1) * (int(nely) + 1)


def per_rank_bytes(n_dofs, solver, ranks, extra_bytes=0):
    """The estimated peak resident bytes of one of ``ranks`` ranks solving ``n_dofs`` DOFs with
    ``solver`` (None: the default at that size), ``extra_bytes`` more per rank for the options."""
    kind = "one" if ranks == 1 else "several"
    per_dof = BYTES_PER_DOF[solver or default_solver(n_dofs)][0 if ranks == 1 else 1]
    return BASE_MB[kind] * MB + per_dof * n_dofs / ranks + extra_bytes


def size_text(nbytes):
    """``23.4 GB`` or ``512 MB`` (binary units, as ``free -h`` prints them)."""
    return f"{nbytes / 2**30:.1f} GB" if nbytes >= 2**30 else f"{nbytes / MB:.0f} MB"


def ranks_needed(n_dofs, solver, per_node, node_bytes, extra_bytes=0):
    """The fewest ranks (more than one), ``per_node`` to a node of ``node_bytes``, whose estimate fits;
    None when no number does (the process alone would not fit)."""
    room = node_bytes / per_node - BASE_MB["several"] * MB - extra_bytes
    if room <= 0:
        return None
    ranks = max(2, per_node, math.ceil(BYTES_PER_DOF[solver][1] * n_dofs / room))
    while per_rank_bytes(n_dofs, solver, ranks, extra_bytes) * per_node > node_bytes:  # rounding only
        ranks += 1
    return ranks


def refusal(what, n_dofs, solver, ranks, node, extra_bytes=0):
    """The one-line reason to refuse ``what`` (``n_dofs`` DOFs over ``ranks`` ranks, ``node.ranks`` of
    them on a node of ``node.bytes``), or None when the estimate fits (or nothing says what the node has)."""
    if node is None:
        return None
    solver = solver or default_solver(n_dofs)
    each = per_rank_bytes(n_dofs, solver, ranks, extra_bytes)
    if each * node.ranks <= node.bytes:
        return None
    on_node = (f"{size_text(each * node.ranks)} for the {node.ranks} ranks on this node"
               if node.ranks > 1 else "1 rank on this node")
    advice = []
    needed = ranks_needed(n_dofs, solver, node.ranks, node.bytes, extra_bytes)
    if needed is not None:
        nodes = math.ceil(needed / node.ranks)
        advice.append(f"at least {needed} ranks on {nodes} nodes like this one ({node.ranks} a node)"
                      if nodes > 1 else f"{needed} ranks")
    if solver != "mg" and per_rank_bytes(n_dofs, "mg", ranks, extra_bytes) * node.ranks <= node.bytes:
        advice.append("--solver mg")
    advice += ["a smaller grid", f"{FORCE} to run anyway"]
    return (f"{what}: {n_dofs:,} DOFs on {ranks} rank{'s' if ranks > 1 else ''} with solver {solver} need an "
            f"estimated {size_text(each)} per rank ({on_node}), over the {size_text(node.bytes)} the node has "
            f"({node.source}); use {', '.join(advice[:-1])} or {advice[-1]}")


def check(what, n_dofs, solver, comm, force=False, extra_bytes=0):
    """Collective on the mpi4py communicator ``comm``: :class:`UsageError` with :func:`refusal`'s line on
    every rank when the node with the least room per rank cannot hold the estimate, unless ``force``
    (then rank 0 prints the line as a warning and the run goes on)."""
    node = node_memory(comm)
    nodes = [n for n in comm.allgather(node) if n is not None]
    tightest = min(nodes, key=lambda n: n.bytes / n.ranks) if nodes else None
    reason = refusal(what, n_dofs, solver, comm.size, tightest, extra_bytes)
    if reason is None:
        return None
    if not force:
        raise UsageError(reason)
    if comm.rank == 0:
        print(f"warning: {reason.split('; use ')[0]}; going on ({FORCE})", file=sys.stderr, flush=True)
    return reason
