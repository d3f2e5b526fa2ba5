"""A comparison of two runs (``python -m sphyr_hpc.report OUT_A --compare OUT_B``): what changed, B minus A.

For every model in both runs: overall and per subject, the mean topology_score
of A and of B, and the paired difference B - A over the samples (subject,
index) both runs answered, with its 95 % bootstrap interval and whether it
excludes 0 (:func:`sphyr_hpc.scoring.uncertainty.paired`).  Then every record
whose category changed (a tally category: ``unanswered``, a failed check or
``sound``; ``excluded`` for a broken sample; ``absent`` when the run has no such
record), and the counts of each change (e.g. ``severed_load_path -> sound``).

Runs with no model in common (two models' runs) are compared model against model: every model
of B against every model of A that answered some of the same samples, paired over those samples
(the difference of two models on the same samples), and the records are matched by subject and
index.  Runs that share neither a model nor a sample have nothing to compare:
:class:`NothingToCompare` says what each holds.
"""

import html
from collections import Counter

from ..scoring.uncertainty import paired
from .html import interval, page, plural, table

ABSENT = "absent"


class NothingToCompare(ValueError):
    """Two runs that share neither a model nor a sample: the message says what can be compared."""
LISTED = 500  # records listed at most (all changes are counted)


def answered(data, model):
    """{subject: {index: topology_score}} of ``model``'s answered records in a report's data."""
    return {s: {i: score for i, (score, ok) in scores.items() if ok}
            for s, scores in data.running.scores.get(model, {}).items()}


def _verdict(pair):
    if pair is None:
        return ("no sample answered by both", "")
    if pair["ci95"] == [0.0, 0.0]:
        return ("the same scores", "")
    return ("differs" if pair["excludes_zero"] else "no sure difference", "sure" if pair["excludes_zero"] else "unsure")


def comparison(data_a, data_b):
    """``(rows of the differences table, changed records, Counter of changes, models only in A, only in B)``.

    The pairs compared are the models both runs hold, else (:func:`pairs`) every model of B against
    every model of A on the samples both answered; a pair of two models is named ``B-model vs A-model``.
    """
    summary_a, summary_b = data_a.running, data_b.running
    models_a, models_b = set(summary_a.groups), set(summary_b.groups)
    rows = []
    compared = pairs(data_a, data_b)
    for model_a, model_b in compared:
        name = model_a if model_a == model_b else f"{model_b} vs {model_a}"
        pair = paired(answered(data_a, model_a), answered(data_b, model_b))
        entries_a = {s: g.entry() for s, g in summary_a.groups[model_a].items()}
        entries_b = {s: g.entry() for s, g in summary_b.groups[model_b].items()}
        subjects = sorted(set(entries_a) | set(entries_b)) if model_a == model_b else sorted(set(entries_a) & set(entries_b))
        rows.append(_row(name, "all subjects", [_overall({s: entries_a[s] for s in subjects if s in entries_a}),
                                                _overall({s: entries_b[s] for s in subjects if s in entries_b})],
                         pair, "all"))
        for subject in subjects:
            sub = (pair or {}).get("subjects", {}).get(subject)
            rows.append(_row(name, subject, [_cells(entries_a.get(subject)), _cells(entries_b.get(subject))], sub, ""))
    changed, counts = [], Counter()
    if all(a == b for a, b in compared):
        keys = {k: (k, k) for k in set(data_a.categories) | set(data_b.categories)}
    else:  # two models: a record of A's model and B's model on the same sample
        keys = {}
        for model_a, model_b in compared:
            for (model, subject, index) in data_a.categories:
                if model == model_a and (model_b, subject, index) in data_b.categories:
                    keys[(f"{model_b} vs {model_a}", subject, index)] = ((model_a, subject, index),
                                                                        (model_b, subject, index))
    for key in sorted(keys, key=lambda k: (k[0], k[1], _index(k[2]))):
        key_a, key_b = keys[key]
        before, after = data_a.categories.get(key_a, (ABSENT, None)), data_b.categories.get(key_b, (ABSENT, None))
        if before[0] != after[0]:
            counts[(before[0], after[0])] += 1
            changed.append((key, before, after))
    return rows, changed, counts, sorted(models_a - models_b), sorted(models_b - models_a)


def _samples(data, model):
    return {(s, i) for s, scores in answered(data, model).items() for i in scores}


def pairs(data_a, data_b):
    """``[(model of A, model of B)]`` to compare: the models both runs hold; else every two models that
    answered some of the same samples.  :class:`NothingToCompare` when there is none."""
    models_a, models_b = sorted(data_a.running.groups), sorted(data_b.running.groups)
    common = [m for m in models_a if m in data_b.running.groups]
    if common:
        return [(m, m) for m in common]
    found = [(a, b) for a in models_a for b in models_b if _samples(data_a, a) & _samples(data_b, b)]
    if not found:
        raise NothingToCompare(
            f"nothing to compare: A holds {_held(data_a)}, B holds {_held(data_b)}; report A --compare B compares "
            f"runs of the same model record by record, or two models that answered the same samples (subject "
            f"and index) by their paired difference")
    return found


def _held(data):
    models, subjects = sorted(data.running.groups), sorted(data.subjects)
    if not models:
        return "no record"
    shown = ", ".join(subjects[:3]) + (", ..." if len(subjects) > 3 else "")
    return f"{plural(len(models), 'model')} ({', '.join(models[:3])}{', ...' if len(models) > 3 else ''}) on {shown}"


def _cells(entry):
    """(coverage, mean topology_score) of a summary entry."""
    if not entry:
        return [None, None]
    return [f"{100 * entry['coverage']:.1f} %" if entry.get("coverage") is not None else None, entry["topology_score"]]


def _overall(entries):
    """(coverage, the leaderboard's mean over subjects) of a model's subject entries."""
    counted = sum(e["count"] - e["excluded"] for e in entries.values())
    answered = sum(e["answered"] for e in entries.values())
    means = [e["topology_score"] for e in entries.values() if e["topology_score"] is not None]
    return [f"{100 * answered / counted:.1f} %" if counted else None, sum(means) / len(means) if means else None]


def _index(index):
    return (0, index, "") if isinstance(index, int) else (1, 0, str(index))


def _row(model, subject, cells, pair, css):
    difference = pair.get("difference") if pair else None
    return ([model, subject, pair["samples"] if pair else 0] + cells[0] + cells[1]
            + [difference, interval(pair["ci95"]) if pair else None, _verdict(pair)], css)


def render_comparison(label_a, label_b, data_a, data_b):
    """The comparison page of run A (``label_a``) and run B."""
    rows, changed, counts, only_a, only_b = comparison(data_a, data_b)
    title = f"SPhyR comparison: {label_b} minus {label_a}"
    body = [f"<p class='note'>A: {html.escape(label_a)} ({plural(data_a.rows, 'record')}); "
            f"B: {html.escape(label_b)} ({plural(data_b.rows, 'record')}). Differences are B minus A, paired "
            f"over the samples both runs answered, with a 95 % bootstrap interval over those samples "
            f"(stratified by subject); <i>differs</i> when the interval excludes 0.</p>"]
    if not set(data_a.running.groups) & set(data_b.running.groups):
        body.append("<p class='note'>The runs share no model: each row is a model of B against a model of A "
                    "(<i>B-model vs A-model</i>), paired over the samples (subject, index) both answered, and "
                    "the records below are those two models' answers to the same sample.</p>")
    for models, which in ((only_a, "A"), (only_b, "B")):
        if models:
            body.append(f"<p class='note'>Only in {which}: {html.escape(', '.join(models))}.</p>")
    body.append("<h2>Mean topology_score, B minus A</h2>")
    body.append(table(["model", "subject", "samples both answered", "coverage A", "mean A", "coverage B", "mean B", "B - A",
                       "95 % interval", "verdict"], [r for r, _ in rows], [c for _, c in rows]))
    body.append(f"<h2>Records whose category changed</h2><p class='note'>{plural(len(changed), 'record')} "
                f"changed category (<code>unanswered</code>: completion missing or unreadable; "
                f"<code>excluded</code>: a broken sample; <code>{ABSENT}</code>: no such record in that run).</p>")
    if counts:
        body.append(table(["change (A -> B)", "records"],
                          [[f"{a} -> {b}", n] for (a, b), n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]))
        listed = changed[:LISTED]
        more = f" (the first {LISTED} of {len(changed):,})" if len(changed) > LISTED else ""
        body.append(f"<h3>The records{more}</h3>")
        body.append(table(["model", "subject", "index", "category A", "category B", "topology_score A",
                           "topology_score B"],
                          [[m, s, i if isinstance(i, int) else str(i), a[0], b[0], a[1], b[1]]
                           for (m, s, i), a, b in listed]))
    return page(title, "".join(body))
