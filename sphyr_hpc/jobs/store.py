"""What ``python -m sphyr_hpc.store`` runs: list a yardstick store, check it, prune it (docs/store.md).

* :func:`list_store`: what the store holds (entries, size, algorithm
  versions, grid sizes, datasets seen, damaged entries, writers' temporary files);
* :func:`check_store`: a random sample of the current version's entries
  recomputed (spread over the ranks) and compared under the parity rule of a
  yardstick's compliance (:func:`~sphyr_hpc.scoring.yardstick_store.agree`);
  on the machine that wrote them they are bit for bit the same;
* :func:`prune_store`: entries of other algorithm versions or formats,
  damaged entries and stale temporary files removed, and the same of the
  scored completions' tables (a table of other scorer code is never read again).

``check`` recomputes yardsticks only: a table row keeps a digest of its
completion, not the completion, so it cannot be recomputed from the store.

Every function returns the exit status (0, or 1 when something is wrong:
damaged or disagreeing entries found by ``list``/``check``) on every rank.
"""

import random
import sys
import time
from collections import Counter

import numpy as np

from ..io.yardstick_store import DamagedEntry, OtherFormat, YardstickStore, decode
from ..optimiser.yardstick import YARDSTICK_ALGORITHM_VERSION
from ..scoring.scored_store import code_digest
from ..scoring.scorer import Scorer, ScoringConfig
from ..scoring.yardstick_store import agree, inputs_of, result_of, solver_options


def _megabytes(size):
    return f"{size / 1e6:.1f} MB"


def _survey(store):
    """``(entries, damaged, temporaries, other_formats)``: ``[(file, header)]`` of the readable entries,
    ``[(file, why)]`` of the damaged ones and of those of another format, and the writers' temporary files."""
    entries, damaged, temporaries, other_formats = [], [], [], []
    for stored in store.files():
        if not stored.digest:
            temporaries.append(stored)
            continue
        try:
            entries.append((stored, YardstickStore.header_of(stored.path)))
        except OtherFormat as err:
            other_formats.append((stored, str(err)))
        except DamagedEntry as err:
            damaged.append((stored, str(err)))
    return entries, damaged, temporaries, other_formats


def _size(survey):
    """Bytes of every file of a :func:`_survey`."""
    entries, damaged, temporaries, other_formats = survey
    return sum(s.size for s, _ in entries + damaged + other_formats) + sum(t.size for t in temporaries)


def list_store(store, out=None):
    """Print what ``store`` holds; 1 when it holds damaged entries (a run replaces them as it meets them)."""
    out = sys.stdout if out is None else out
    survey = _survey(store)
    entries, damaged, temporaries, other_formats = survey
    size = _size(survey)
    current = [h for _, h in entries if h.get("algorithm") == YARDSTICK_ALGORITHM_VERSION]
    print(f"store {store.root} (yardstick algorithm version {YARDSTICK_ALGORITHM_VERSION})", file=out)
    print(f"entries: {len(entries) + len(damaged) + len(other_formats)} ({_megabytes(size)}): {len(current)} of this "
          f"algorithm version, {len(entries) - len(current) + len(other_formats)} of other versions or formats "
          f"(prune removes them; a run replaces those it meets), {len(damaged)} damaged", file=out)
    stale = sum(YardstickStore.is_stale_temporary(t) for t in temporaries)
    if temporaries:
        print(f"temporary files: {len(temporaries)} ({stale} older than an hour: prune removes them)", file=out)
    if entries:
        shapes = Counter(f"{h['loadcase']['nely']}x{h['loadcase']['nelx']}" for _, h in entries)
        print("grids: " + ", ".join(f"{shape} {n}" for shape, n in shapes.most_common()), file=out)
        datasets = Counter(name for _, h in entries for name in (h.get("dataset") or "?").split(","))
        print("datasets seen: " + ", ".join(f"{name} {n}" for name, n in sorted(datasets.items())), file=out)
        writers = Counter(f"sphyr_hpc {h.get('package')} (algorithm {h.get('algorithm')})" for _, h in entries)
        print("written by: " + ", ".join(f"{w} {n}" for w, n in writers.most_common()), file=out)
        created = sorted(h.get("created", "") for _, h in entries)
        print(f"written: {created[0]} to {created[-1]}", file=out)
    damaged_tables = _list_tables(store, out)
    for stored, why in (damaged + damaged_tables)[:5]:
        print(f"damaged: {stored.path}: {why}", file=out)
    return 1 if damaged or damaged_tables else 0


def _list_tables(store, out):
    """The scored completions' line of ``list`` (when the store holds tables); their damaged ones."""
    survey = _survey(store.scored)
    tables, damaged, temporaries, other_formats = survey
    if not any(survey):
        return damaged
    size = _size(survey)
    current = [h for _, h in tables if h.get("algorithm") == code_digest()]
    rows = sum(len(h.get("completions") or ()) for h in current)
    print(f"scored completions: {len(tables) + len(damaged) + len(other_formats)} sample tables "
          f"({_megabytes(size)}): {len(current)} of this scorer's code ({rows} completions), "
          f"{len(tables) - len(current) + len(other_formats)} of other code or formats (prune removes them), "
          f"{len(damaged)} damaged", file=out)
    return damaged


def _recompute(path, options):
    """One check row: the entry at ``path`` recomputed here."""
    try:
        header, arrays = decode(path.read_bytes())
        stored = result_of(header, arrays)
    except (OSError, DamagedEntry) as err:
        return {"path": str(path), "status": "damaged", "why": str(err)}
    if header.get("petsc_options", []) != options:
        return {"path": str(path), "status": "skipped", "why": f"computed with PETSc options {header['petsc_options']}"}
    lc, free, pinned, vf, seeds, penal, radius, mg_min_dofs = inputs_of(header, arrays)
    scorer = Scorer(ScoringConfig(penal=penal, filter_radius=radius, mg_min_dofs=mg_min_dofs))
    try:
        started = time.perf_counter()
        result = scorer.optimum(lc, free, pinned, vf, seeds)
        seconds = time.perf_counter() - started
    finally:
        scorer.close()
    why = agree(stored.compliance, result.compliance)
    identical = (why is None and float(stored.compliance).hex() == float(result.compliance).hex()
                 and np.array_equal(stored.densities, result.densities))
    return {"path": str(path), "status": "disagrees" if why else "agrees", "why": why, "identical": identical,
            "seconds": seconds, "grid": f"{lc.nely}x{lc.nelx}"}


def check_store(store, samples, seed, comm, out=None):
    """Recompute ``samples`` random entries of this algorithm version (over the ranks of ``comm``) and
    compare; 1 when one disagrees or is damaged."""
    out = sys.stdout if out is None else out
    chosen = None
    if comm.rank == 0:
        entries, damaged, _, _ = _survey(store)
        current = sorted(str(s.path) for s, h in entries if h.get("algorithm") == YARDSTICK_ALGORITHM_VERSION)
        chosen = random.Random(seed).sample(current, min(samples, len(current)))
        chosen += [str(s.path) for s, _ in damaged]
    chosen = comm.bcast(chosen, root=0)
    options = solver_options()
    from pathlib import Path

    mine = [_recompute(Path(chosen[i]), options) for i in range(comm.rank, len(chosen), comm.size)]
    rows = comm.gather(mine, root=0)
    status = None
    if comm.rank == 0:
        rows = [r for part in rows for r in part]
        status = _report_check(store, rows, out)
    return comm.bcast(status, root=0)


def _report_check(store, rows, out):
    tally = Counter(r["status"] for r in rows)
    identical = sum(1 for r in rows if r.get("identical"))
    seconds = sum(r.get("seconds", 0.0) for r in rows)
    print(f"store {store.root}: {len(rows)} entries checked: {tally['agrees']} agree under the parity rule "
          f"({identical} bit for bit), {tally['disagrees']} disagree, {tally['damaged']} damaged, "
          f"{tally['skipped']} skipped; {seconds:.1f} s of recomputing", file=out)
    for row in rows:
        if row["status"] in ("disagrees", "damaged", "skipped"):
            print(f"{row['status']}: {row['path']}: {row['why']}", file=out)
    return 1 if tally["disagrees"] or tally["damaged"] else 0


def prune_store(store, dry_run=False, out=None):
    """Remove entries of other algorithm versions or formats, damaged entries and stale temporary files."""
    out = sys.stdout if out is None else out
    entries, damaged, temporaries, other_formats = _survey(store)
    doomed = [(s, f"algorithm version {h.get('algorithm')}") for s, h in entries
              if h.get("algorithm") != YARDSTICK_ALGORITHM_VERSION]
    doomed += [(s, "another format") for s, _ in other_formats]
    doomed += [(s, "damaged") for s, _ in damaged]
    doomed += [(t, "stale temporary file") for t in temporaries if YardstickStore.is_stale_temporary(t)]
    tables, damaged_tables, table_temporaries, other_tables = _survey(store.scored)
    doomed += [(s, "scored table of other code") for s, h in tables if h.get("algorithm") != code_digest()]
    doomed += [(s, "scored table of other code") for s, _ in other_tables]
    doomed += [(s, "damaged scored table") for s, _ in damaged_tables]
    doomed += [(t, "stale temporary file") for t in table_temporaries if YardstickStore.is_stale_temporary(t)]
    removed = freed = 0
    for stored, _ in doomed:
        if dry_run or YardstickStore.remove(stored.path):
            removed += 1
            freed += stored.size
    verb = "would remove" if dry_run else "removed"
    reasons = Counter(why for _, why in doomed)
    detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
    print(f"store {store.root}: {verb} {removed} files ({_megabytes(freed)}){': ' + detail if detail else ''}; "
          f"{len(entries) - sum(1 for _, h in entries if h.get('algorithm') != YARDSTICK_ALGORITHM_VERSION)} "
          f"entries of algorithm version {YARDSTICK_ALGORITHM_VERSION} kept", file=out)
    return 0
