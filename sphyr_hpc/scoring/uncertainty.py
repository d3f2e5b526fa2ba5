"""How sure a mean topology_score is: standard errors and bootstrap intervals over samples.

A model's score is a mean over a few dozen samples per subject, so two models
0.01 apart may be in either order on another draw of samples.  As benchmark
harnesses do, every mean carries its standard error and a 95 % interval from a
bootstrap over samples, and adjacent models on the leaderboard get a paired
comparison over the samples both answered.

Conventions:

* The values are per-record topology_scores with the summary's rules
  (:mod:`sphyr_hpc.scoring.summary`): a missing or unreadable completion
  counts 0, a record of a broken sample is left out.
* A subject's statistic is the mean of its samples; a model's overall
  statistic is the mean over its subjects of the subject means (the
  leaderboard's), so its bootstrap is *stratified*: every resample draws each
  subject's samples with replacement from that subject alone.
* Standard error of a subject mean: ``std(values, ddof=1) / sqrt(n)`` (None
  when n < 2); of the overall mean: ``sqrt(sum of the subjects' squared
  standard errors) / number of subjects`` (None when a subject's is None).
* Interval: the 2.5th and 97.5th percentiles (numpy's linear interpolation)
  of :data:`RESAMPLES` bootstrap means.  Resample indices depend only on the
  number of samples and :data:`SEED` (one ``(RESAMPLES x n)`` matrix per n,
  drawn once), so a report is reproducible, and a comparison of a model with
  itself gives an interval of exactly 0.
* Paired comparison of A and B: per subject, the samples (subject, index) both
  answered (scored, no ``error``); the difference is the mean over those
  subjects of the mean per-sample difference ``b - a``, bootstrapped the same
  stratified way; ``excludes_zero`` when the interval lies strictly on one
  side of 0.
"""

from functools import lru_cache

import numpy as np

RESAMPLES = 2000
SEED = 24
LEVEL = 0.95


@lru_cache(maxsize=256)
def resample_indices(n):
    """The ``(RESAMPLES, n)`` sample indices of every bootstrap of n samples (read-only, cached)."""
    rng = np.random.default_rng([SEED, n])
    indices = rng.integers(0, n, size=(RESAMPLES, n))
    indices.setflags(write=False)
    return indices


@lru_cache(maxsize=256)
def _resample_weights(n):
    """``resample_indices(n)`` as weights: row r holds how often each sample is drawn, over n.

    A bootstrap mean is then one matrix-vector product (``weights @ values``)
    instead of a gather of RESAMPLES x n values and a sum.
    """
    rows = np.repeat(np.arange(RESAMPLES), n)
    counts = np.bincount(rows * n + resample_indices(n).ravel(), minlength=RESAMPLES * n)
    weights = counts.reshape(RESAMPLES, n) / n
    weights.setflags(write=False)
    return weights


def _intervals(boots):
    """The 95 % percentile interval of every row of ``boots`` (one numpy call for all)."""
    tail = 100.0 * (1.0 - LEVEL) / 2.0
    bounds = np.percentile(boots, [tail, 100.0 - tail], axis=-1)
    return [[float(lo), float(hi)] for lo, hi in zip(*bounds)]


def subject_bootstrap(values):
    """(mean, standard error, the RESAMPLES bootstrap means) of one subject's values."""
    values = np.asarray(values, dtype=float)
    n = values.size
    mean = float(values.mean())
    se = float(values.std(ddof=1) / np.sqrt(n)) if n > 1 else None
    if np.all(values == values[0]):  # every resample is the same mean: exactly, not to rounding
        return mean, se, np.full(RESAMPLES, mean)
    return mean, se, _resample_weights(n) @ values


def stratified(by_subject):
    """Mean, standard error and 95 % interval of the mean over subjects of subject means.

    ``by_subject``: {subject: values} (subjects without values are skipped).
    Returns ``{"mean", "se", "ci95", "samples", "subjects": {s: {mean, se, ci95, samples}}}``,
    or None when no subject has a value.
    """
    subjects, boots, ses = {}, [], []
    for subject in sorted(by_subject):
        values = by_subject[subject]
        if len(values) == 0:
            continue
        mean, se, boot = subject_bootstrap(values)
        subjects[subject] = {"mean": mean, "se": se, "ci95": None, "samples": len(values)}
        boots.append(boot)
        ses.append(se)
    if not subjects:
        return None
    boots.append(np.mean(boots, axis=0))  # the overall statistic of every resample
    *intervals, overall = _intervals(np.array(boots))
    for entry, interval in zip(subjects.values(), intervals):
        entry["ci95"] = interval
    means = [s["mean"] for s in subjects.values()]
    se = None if any(s is None for s in ses) else float(np.sqrt(np.sum(np.square(ses))) / len(ses))
    return {"mean": float(np.mean(means)), "se": se, "ci95": overall,
            "samples": sum(s["samples"] for s in subjects.values()), "subjects": subjects}


def paired(a, b):
    """B minus A over the samples both answered: ``{difference, se, ci95, excludes_zero, samples, subjects}``.

    ``a`` and ``b``: {subject: {index: topology_score}} of the answered records
    only.  None when no sample was answered by both.
    """
    differences = {}
    for subject in sorted(set(a) & set(b)):
        common = sorted(set(a[subject]) & set(b[subject]), key=lambda i: (isinstance(i, str), str(i) if isinstance(i, str) else i))
        if common:
            differences[subject] = np.array([b[subject][i] for i in common], dtype=float) - np.array(
                [a[subject][i] for i in common], dtype=float)
    result = stratified(differences)
    if result is None:
        return None
    lo, hi = result["ci95"]
    return {"difference": result["mean"], "se": result["se"], "ci95": result["ci95"],
            "excludes_zero": bool(lo > 0.0 or hi < 0.0), "samples": result["samples"],
            "subjects": {s: dict(e, difference=e.pop("mean"), excludes_zero=bool(e["ci95"][0] > 0.0
                                                                                 or e["ci95"][1] < 0.0))
                         for s, e in result["subjects"].items()}}
