"""Why a completion fails: ordered checks and one failure category per scored record.

A leaderboard of mean topology_score says who wins, not why the others lose.
Every scored record therefore also gets ``checks`` (every check below with
its outcome) and ``failure`` (the category of the first check that fails, in
this fixed order, from the most basic; ``sound`` when none does):

======================  ==========================================================
category                the check fails when
======================  ==========================================================
invalid_ground_truth    the ground truth poses no problem (no ``L`` or ``S`` cell,
                        empty or ragged): not the model's fault, the "Metrics" rules' all-zero
                        metrics
no_grid                 no grid was found in the completion text
wrong_shape             the completion's grid is not the ground truth's shape
unfilled_or_unparsable  a ``V`` was left in place or a cell is not a number
                        (``unfilled_cells + unparsable_cells > 0``)
severed_load_path       the design does not carry its load (``load_carrying`` false)
floating_material       material is floating free: ``floating_clusters > 0``
overspent_material      more material than the answer (``material_efficiency < 1``,
                        by more than rounding: ``< 1 - RATIO_TOLERANCE``)
weaker_than_yardstick   ``structural_efficiency < WEAK_BELOW`` (0.7)
sound                   every check passed
======================  ==========================================================

An outcome is ``"pass"``, ``"fail"`` or ``"skip"`` (nothing to judge: a
completion without a grid has no shape, one of the wrong shape no load path).
Checks after the first failure are still evaluated where they can be, so
``checks`` shows every problem of a record, ``failure`` the most basic one.
A record that could not be scored at all (``error``) gets neither.

Conventions:

* Material is a cell of density > 0 as the scorer reads it (``V`` and
  unparsable cells are 0; the ground truth's ``L`` and ``S`` cells are solid,
  as in the simulation).  Two material cells are connected when they share a
  node of the Q4 mesh, i.e. 8-neighbourhood: a corner joint transmits force in
  the finite-element model.  A *floating cluster* is a connected set of
  material touching neither an ``L`` nor an ``S`` cell.  The published scorer's
  ``isolated_clusters_count`` uses the same neighbourhood and material, on the
  completion's own ``L``/``S`` tokens.
* ``WEAK_BELOW`` = 0.7: the dataset's own answers reach a structural_efficiency
  of at least 0.743 on all 452 bundled v1 and v2_20 samples (lowest: v1
  full_hard 0; 1 below 0.8, 17 below 0.9), so a completion equal to the
  answer is never called weaker than the yardstick; below 0.7 a design is more
  than 1/0.7 = 1.43 times as compliant as the yardstick.
* ``beats_yardstick``: ``structural_efficiency_raw > 1 + RATIO_TOLERANCE``
  (1e-6, docs/scoring.md, "Parity": a ratio's digits below it are rounding; 36 of the 411 v1
  answers, which *are* the yardstick's seed, come out at 1 + 1e-13).  The
  same tolerance keeps ``overspent_material`` from firing on a volume
  fraction summed in another order.
* ``beats_yardstick`` is counted apart by material (the tallies):
  ``within_budget`` (``material_efficiency >= 1 - RATIO_TOLERANCE``: no more
  material than the answer, the yardstick's budget) would mean the yardstick
  is weak, and is expected to be 0; ``with_more_material`` is a design that
  spent more than the budget being stiffer, which says nothing about the
  yardstick.
* Tallies (summary.json's ``failures``) count every record a model's means
  count: the scored ones by category, and ``unanswered`` (its own category,
  first: the completion is missing or unreadable, ``completion_status``)
  beside them; shares are of ``records`` = scored + unanswered.  A record of
  a broken sample (another ``error``) is in no tally.
* The exact-match table: among completions with a valid grid
  (``valid_output_grid``: the ground truth's shape, every cell ``L``, ``S`` or
  a number in [0, 1]), the 2x2 counts of ``exact_match`` against
  ``load_carrying``; ``carrying_not_exact`` is the share that carries its load
  while string matching marks it wrong.
"""

import functools
from dataclasses import dataclass

import numpy as np

from ..core import loadcase as loadcases
from ..core.metrics import RATIO_TOLERANCE

WEAK_BELOW = 0.7
SOUND = "sound"
OVERALL = "all models"
SUMMARY_KEY = "failures"  # summary.json's top-level entry (not a model)


@dataclass(frozen=True)
class Check:
    """One check: the category a record falls in when it fails, and what it asks."""

    category: str
    question: str


CHECKS = (
    Check("invalid_ground_truth", "the ground truth has L and S cells and is rectangular"),
    Check("no_grid", "a grid was found in the completion"),
    Check("wrong_shape", "the grid has the ground truth's shape"),
    Check("unfilled_or_unparsable", "every cell is L, S or a number (no V left)"),
    Check("severed_load_path", "the design carries its load (load_carrying)"),
    Check("floating_material", "every cluster of material touches an L or S cell"),
    Check("overspent_material", "no more material than the answer (material_efficiency = 1)"),
    Check("weaker_than_yardstick", f"structural_efficiency >= {WEAK_BELOW}"),
)
CATEGORIES = tuple(c.category for c in CHECKS) + (SOUND,)
UNANSWERED = "unanswered"  # a tally's category of records whose completion is missing or unreadable
TALLY_CATEGORIES = (UNANSWERED,) + CATEGORIES
UNANSWERED_STATUSES = ("missing", "unreadable")
PASS, FAIL, SKIP = "pass", "fail", "skip"


def floating_clusters(rho, anchors):
    """Connected sets of material (``rho > 0``, 8-neighbourhood) containing no anchor cell.

    The grid is a Python integer, one bit a cell and a zero bit closing each
    row, so a cell's 8 neighbours are shifts of it (by 1 and by a row): the
    material reached from the anchors is grown one ring at a time, and what is
    left is counted a cluster at a time the same way.  On SPhyR's grids that is
    a few dozen integer operations, where ``scipy.ndimage.label`` spends ~50 us.
    """
    material = np.asarray(rho) > 0.0
    if material.ndim != 2:
        raise ValueError(f"floating_clusters needs a 2-D grid, not {material.ndim}-D")
    width = material.shape[1] + 1  # one zero bit after each row: shifts by 1 do not wrap
    cells = _bits(material, width)
    anchors = np.asarray(anchors, dtype=bool)
    rest = cells & ~_grown(_anchor_bits(anchors.tobytes(), anchors.shape) & cells, cells, width)
    count = 0
    while rest:
        rest &= ~_grown(rest & -rest, rest, width)  # the cluster of the lowest cell left
        count += 1
    return count


def _bits(mask, width):
    """A boolean (rows, width - 1) array as an integer: cell (r, c) is bit r * width + c."""
    padded = np.zeros((mask.shape[0], width), dtype=bool)
    padded[:, :-1] = mask
    return int.from_bytes(np.packbits(padded.ravel(), bitorder="little").tobytes(), "little")


@functools.lru_cache(maxsize=256)  # a sample's anchors (its L and S cells) serve all its completions
def _anchor_bits(packed, shape):
    """:func:`_bits` of a boolean array given as its bytes and shape."""
    return _bits(np.frombuffer(packed, dtype=bool).reshape(shape), shape[1] + 1)


def _grown(seed, within, width):
    """The cells of ``within`` connected (8-neighbourhood) to ``seed`` (a subset of it)."""
    while True:
        row = seed | (seed << 1) | (seed >> 1)
        grown = (row | (row << width) | (row >> width)) & within
        if grown == seed:
            return seed
        seed = grown


def _poses_problem(ground_truth):
    try:
        loadcases.from_grid(ground_truth)
    except loadcases.LoadCaseError:
        return False
    return True


def diagnose(completion, ground_truth, case, metrics):
    """``checks``, ``failure``, ``floating_clusters`` and ``beats_yardstick`` of one scored record.

    ``completion`` and ``ground_truth`` are the grids read from the record
    (``[]`` when the text holds none), ``case`` what
    :meth:`~sphyr_hpc.scoring.scorer.Scorer.prepare` made of them (None when they
    pose no problem) and ``metrics`` the record's metrics.  ``floating_clusters``
    is None when there is no design to count them in.
    """
    judged = case is not None
    gt_valid = judged or _poses_problem(ground_truth)
    floating = floating_clusters(case.rho, case.structural) if judged else None

    def outcome(ok, can_judge=True):
        return SKIP if not can_judge else (PASS if ok else FAIL)

    structural = metrics.get("structural_efficiency") or 0.0
    checks = {
        "invalid_ground_truth": outcome(gt_valid),
        "no_grid": outcome(bool(completion)),
        "wrong_shape": outcome(judged, gt_valid and bool(completion)),
        "unfilled_or_unparsable": outcome(metrics["unfilled_cells"] + metrics["unparsable_cells"] == 0, judged),
        "severed_load_path": outcome(bool(metrics["load_carrying"]), judged),
        "floating_material": outcome(floating == 0, judged),  # None (not counted) only when not judged
        "overspent_material": outcome(metrics["material_efficiency"] >= 1.0 - RATIO_TOLERANCE,
                                      judged and metrics["load_carrying"]),
        "weaker_than_yardstick": outcome(structural >= WEAK_BELOW, judged and metrics["load_carrying"]),
    }
    raw = metrics.get("structural_efficiency_raw") or 0.0
    return {"failure": first_failure(checks), "checks": checks, "floating_clusters": floating,
            "beats_yardstick": bool(raw > 1.0 + RATIO_TOLERANCE)}


def first_failure(checks):
    """The category of the first failed check in :data:`CHECKS` order, or ``sound``."""
    for check in CHECKS:
        if checks.get(check.category) == FAIL:
            return check.category
    return SOUND


# -- tallies: summary.json and the printed table -------------------------------------------------
class FailureTally:
    """Running counts of :func:`tally`: rows are added one at a time, tallies of parts merged.

    Only counts are kept, so a run tallies its records as they are scored and
    the ranks' tallies are merged at the end, without keeping the rows.
    """

    def __init__(self):
        self.counts = dict.fromkeys(TALLY_CATEGORIES, 0)
        self.beats = {"within_budget": 0, "with_more_material": 0}
        self.table = {"exact_carrying": 0, "exact_severed": 0, "inexact_carrying": 0, "inexact_severed": 0}

    def add(self, row):
        category = category_of(row)
        if category is None:
            return
        if category in self.counts:  # others: unclassified
            self.counts[category] += 1
            if row.get("beats_yardstick"):
                self.beats[beats_how(row)] += 1
        if row.get("valid_output_grid"):
            self.table[("exact_" if row.get("exact_match") else "inexact_")
                       + ("carrying" if row.get("load_carrying") else "severed")] += 1

    def merge(self, other):
        for mine, theirs in ((self.counts, other.counts), (self.table, other.table), (self.beats, other.beats)):
            for key in mine:
                mine[key] += theirs[key]
        return self

    def result(self):
        n = sum(self.counts.values())
        valid = sum(self.table.values())
        return {
            "records": n,
            "scored": n - self.counts[UNANSWERED],
            "counts": dict(self.counts),
            "shares": {c: (self.counts[c] / n if n else None) for c in TALLY_CATEGORIES},
            "beats_yardstick": sum(self.beats.values()),
            "beats_yardstick_within_budget": self.beats["within_budget"],
            "beats_yardstick_with_more_material": self.beats["with_more_material"],
            "exact_match_vs_load_carrying": dict(
                valid_grids=valid, **self.table,
                carrying_not_exact=self.table["inexact_carrying"] / valid if valid else None),
        }


def category_of(row):
    """A record's tally category: its ``failure``, ``unanswered``, or None (a broken sample: in no tally)."""
    if "error" in row:
        return UNANSWERED if row.get("completion_status") in UNANSWERED_STATUSES else None
    return row.get("failure")


def beats_how(row):
    """``within_budget`` or ``with_more_material``: how a record that beats the yardstick does it."""
    material = row.get("material_efficiency")
    more = isinstance(material, (int, float)) and material < 1.0 - RATIO_TOLERANCE
    return "with_more_material" if more else "within_budget"


def tally(rows):
    """Category counts and shares of the scored records among ``rows``, and their exact-match table."""
    counts = FailureTally()
    for row in rows:
        counts.add(row)
    return counts.result()


def failure_summary(tallies):
    """Per model (sorted) and over all models: category counts and shares, the exact-match table.

    ``tallies``: a :class:`FailureTally` per model.
    """
    overall = FailureTally()
    for part in tallies.values():
        overall.merge(part)
    return {
        "order": list(TALLY_CATEGORIES),
        "weak_below": WEAK_BELOW,
        "models": {m: tallies[m].result() for m in sorted(tallies)},
        OVERALL: overall.result(),
    }


_SHORT = {UNANSWERED: "unanswered", "invalid_ground_truth": "bad GT", "no_grid": "no grid", "wrong_shape": "shape",
          "unfilled_or_unparsable": "unfilled", "severed_load_path": "severed", "floating_material": "floating",
          "overspent_material": "overspent", "weaker_than_yardstick": "weak", SOUND: "sound"}
_TABLE = ("exact_carrying", "exact_severed", "inexact_carrying", "inexact_severed")


def format_failures(summary):
    """The printed tables: category shares per model, then exact_match against load_carrying."""
    entries = list(summary["models"].items()) + [(OVERALL, summary[OVERALL])]
    width = max(len(name) for name, _ in entries)
    head = (f"{'model':{width}s} {'records':>7s} " + " ".join(f"{_SHORT[c]:>10s}" for c in TALLY_CATEGORIES)
            + f" {'beats yardstick: within budget':>31s} {'with more material':>18s}")
    lines = [f"why completions fail (share of records; unanswered: completion missing or unreadable; else the "
             f"first failed check, weak = structural_efficiency < {summary['weak_below']})", head, "-" * len(head)]
    for name, t in entries:
        shares = " ".join(f"{t['shares'][c]:10.3f}" if t["shares"].get(c) is not None else f"{'-':>10s}"
                          for c in TALLY_CATEGORIES)
        lines.append(f"{name:{width}s} {t['records']:7d} {shares} {t.get('beats_yardstick_within_budget', 0):31d} "
                     f"{t.get('beats_yardstick_with_more_material', 0):18d}")
    head = (f"{'model':{width}s} {'valid':>6s} " + " ".join(f"{k:>16s}" for k in _TABLE)
            + f" {'carrying, not exact':>20s}")
    lines += ["", "exact_match against load_carrying (completions with a valid grid)", head, "-" * len(head)]
    for name, t in entries:
        x = t["exact_match_vs_load_carrying"]
        share = f"{x['carrying_not_exact']:20.3f}" if x["carrying_not_exact"] is not None else f"{'-':>20s}"
        lines.append(f"{name:{width}s} {x['valid_grids']:6d} " + " ".join(f"{x[k]:16d}" for k in _TABLE) + f" {share}")
    return lines
