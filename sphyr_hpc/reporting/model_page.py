"""One model's page of the report (``report/<model>.html``): per subject, its numbers and its grids.

Per subject: coverage beside the mean topology_score, its standard error and
95 % interval, the failure categories (counts), then the best and the worst
completion drawn (completion | ground truth | yardstick optimum, the mask
outlined, :mod:`sphyr_hpc.reporting.grids`).  When every record of a subject
scores the same, one record is shown and the tie is said, instead of one
record twice as "best" and "worst"; otherwise each caption says how many
records share its score.  The grids are embedded PNGs, so the page opens on
its own.
"""

import html

from ..scoring import diagnosis
from . import grids
from .html import COVERAGE, Raw, coverage_cells, data_uri, interval, page, plural, table

_PANEL_HEAD = "completion | ground truth | yardstick optimum"


_BLANK = {"completion": "completion (no grid to draw)", "ground_truth": "ground truth (none)",
          "optimum": "yardstick optimum (not computed: the completion was not analysed)"}


def blank_panels(row):
    """The panels of a record's picture left blank (grey), each with why: none for a record analysed."""
    g = row.get("grids") or {}
    return [_BLANK[name] for name in grids.PANELS if not grids.drawable(g.get(name))]


def _caption(kind, row, ties):
    score = row.get("topology_score") or 0.0
    others = f", {plural(ties - 1, 'other record')} at this score" if ties > 1 else ""
    blank = blank_panels(row)
    blank = f"; blank: {', '.join(blank)}" if blank else ""
    return f"{kind}: #{row.get('index')} topo {score:.3f} {row.get('failure', '?')}{others}{blank}"


def _picture(row, caption):
    image = grids.png(grids.triple(row), level=1)  # flat colours: the fastest deflate is a few % larger
    return Raw(f'<img src="{data_uri(image)}" alt="{html.escape(caption)}" width="{image_width()}">'
               f"<br>{html.escape(caption)}")


def image_width():
    return 3 * grids.BOX + 2 * grids.GAP


def render_model_page(model, title, summary, data, back):
    """The page of ``model``: ``summary`` is summary.json's content, ``data`` the report's
    :class:`~sphyr_hpc.reporting.collect.ReportData`; ``back`` links report.html."""
    subjects = summary.get(model, {})
    stats = ((summary.get("uncertainty") or {}).get("models") or {}).get(model) or {}
    per_subject = stats.get("subjects") or {}
    cats = list(diagnosis.TALLY_CATEGORIES)
    rows, categories = [], []
    for subject, entry in subjects.items():
        s = per_subject.get(subject) or {}
        counts = data.tallies[model][subject].result()["counts"]
        rows.append([subject] + coverage_cells(entry) + [entry["topology_score"], s.get("se"), interval(s.get("ci95"))])
        categories.append([subject] + [counts[c] for c in cats])
    total = {k: sum(e.get(k, 0) for e in subjects.values())
             for k in ("count", "answered", "missing", "unreadable", "unparsable", "excluded")}
    counted = total["count"] - total["excluded"]
    total["coverage"] = total["answered"] / counted if counted else None
    overall = [("all subjects", "")] + coverage_cells(total) + [stats.get("mean"), stats.get("se"),
                                                                interval(stats.get("ci95"))]
    body = [f"<p class='note'><a href='{html.escape(back)}'>back to the report</a> ({html.escape(title)})</p>",
            "<h2>Per subject</h2><p class='note'>Mean topology_score (missing and unreadable completions count "
            "0), its standard error and 95 % bootstrap interval over samples; <i>all subjects</i>: the mean of "
            "the subject means (the leaderboard's).</p>",
            table(["subject"] + COVERAGE + ["topology_score", "se", "95 % interval"], rows + [overall],
                  [""] * len(rows) + ["all"]),
            "<h3>Categories (records)</h3>", table(["subject"] + cats, categories),
            f"<h2>Best and worst completions</h2><p class='note'>Each picture: {_PANEL_HEAD}. "
            f"{html.escape(grids.LEGEND)}. Ties: the record with the lowest index is drawn.</p>"]
    picks = data.picks.get(model, {})
    lines = []
    for subject in sorted(picks):
        pick = picks[subject]
        if pick.all_tie:
            note = f"all {plural(pick.count, 'scored record')} score {pick.best.get('topology_score') or 0.0:.3f}"
            lines.append([subject, _picture(pick.best, _caption("every record", pick.best, pick.best_ties)),
                          Raw(html.escape(note) + ": one picture for best and worst")])
        else:
            lines.append([subject, _picture(pick.best, _caption("best", pick.best, pick.best_ties)),
                          _picture(pick.worst, _caption("worst", pick.worst, pick.worst_ties))])
    if lines:
        body.append(table(["subject", "best", "worst"], lines))
    else:
        body.append("<p class='note'>No record of this model was scored: nothing to draw.</p>")
    return page(f"{model}: per subject", "".join(body))
