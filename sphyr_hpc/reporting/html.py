"""report.html: a benchmark report a maintainer can trust, from ``results.jsonl`` alone.

``python -m sphyr_hpc.report OUT_DIR`` (and ``score``, unless ``--no-report``)
reads ``OUT_DIR/results.jsonl`` and writes (:mod:`sphyr_hpc.jobs.report`):

* ``OUT_DIR/report.html``: one self-contained page (tables, the charts
  embedded as ``data:`` URIs, inline CSS, no script), which opens from disk:
  what the run is (its title names the models and the dataset or folders),
  the leaderboard with coverage (answered, missing, unreadable) beside every
  mean, each mean topology_score's standard error and 95 % bootstrap
  interval, and whether each model is surely ahead of the next (a paired
  interval over the samples both answered); the heat map; why completions
  fail (unanswered records their own category, beating the yardstick split by
  material); the exact-match table; links to the per-model pages;
* ``OUT_DIR/report/<model>.html``: one page per model (its per-subject
  means with coverage and intervals, categories, and the best and worst
  completion of each subject drawn with the mask), so report.html stays small
  at benchmark scale (60 models: ~0.2 MB instead of 11 MB);
* ``OUT_DIR/report/*.png``: the charts as files (each figure links its file).

Nothing is rescored: metrics, failure categories (:mod:`sphyr_hpc.scoring.diagnosis`)
and the grids to draw are read from the records, so a finished, resumed or
copied run can be reported again in seconds.  Every file is written
atomically.  Records scored before failure categories existed are counted as
unclassified.
"""

import base64
import html
import time
from pathlib import Path

from ..core.metrics import STRUCTURAL_METRIC_KEYS
from ..scoring import diagnosis

REPORT_NAME = "report.html"
PICTURES = "report"

CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; vertical-align: top; }
th { background: #f0f0f0; } td.name, th.name { text-align: left; } td.name { white-space: nowrap; }
tr.all td { font-weight: bold; background: #fafafa; }
td.sure { color: #1a6b1a; } td.unsure { color: #9a6a00; }
figure { margin: 12px 0; } figcaption { font-size: 12px; color: #555; }
img { max-width: 100%; border: 1px solid #ddd; } td img { border: none; display: block; }
p.note { font-size: 13px; color: #444; max-width: 1000px; }
"""


class Raw(str):
    """A table cell already written as HTML (a link), put in as it is."""


def plural(n, word, words=None):
    """``1 model``, ``2 models``, ``0 models`` (``words``: an irregular plural)."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def cell(value, digits=3, css=""):
    klass = f' class="{css}"' if css else ""
    if value is None:
        return f"<td{klass}>-</td>"
    if isinstance(value, Raw):
        return f'<td class="name {css}">{value}</td>'
    if isinstance(value, bool):
        return f"<td{klass}>{'yes' if value else 'no'}</td>"
    if isinstance(value, int):
        return f"<td{klass}>{value:,}</td>"
    if isinstance(value, float):
        return f"<td{klass}>{value:.{digits}f}</td>"
    return f'<td class="name {css}">{html.escape(str(value))}</td>'


def _header(text):
    return html.escape(text).replace("_", "_<wbr>")  # long field names may break after an underscore


def table(header, rows, classes=()):
    """An HTML table; a row's cell may be ``(value, css class)``."""
    head = "".join(f'<th class="name">{_header(h)}</th>' if i == 0 else f"<th>{_header(h)}</th>"
                   for i, h in enumerate(header))
    body = "".join(f'<tr class="{c}">' + "".join(cell(v[0], css=v[1]) if isinstance(v, tuple) else cell(v) for v in row)
                   + "</tr>" for row, c in zip(rows, list(classes) + [""] * len(rows)))
    return f"<table><tr>{head}</tr>{body}</table>"


def data_uri(png):
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def figure(name, data, caption, folder=PICTURES):
    """A figure embedding ``data`` (PNG bytes) and linking its file ``folder/name``."""
    link = f"{folder}/{name}" if folder else name
    return (f'<figure><img src="{data_uri(data)}" alt="{html.escape(caption)}">'
            f'<figcaption>{html.escape(caption)} (<a href="{html.escape(link)}">{html.escape(link)}</a>)'
            f"</figcaption></figure>")


def page(title, body):
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>{body}"
            f"<p class='note'>Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by sphyr_hpc.</p></body></html>\n")


def interval(ci):
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else None


def sure(pair):
    """Cells of a paired comparison: the difference, its interval, whether it excludes 0, the samples."""
    if not pair or pair.get("difference") is None:
        return [None, None, None, None]
    verdict = ("ahead", "sure") if pair["excludes_zero"] else ("not sure", "unsure")
    return [(f"{pair['difference']:+.3f}", verdict[1]), interval(pair["ci95"]), verdict, pair["samples"]]


COVERAGE = ["records", "answered", "missing", "unreadable", "unparsable", "coverage"]


def coverage_cells(entry):
    """records, answered, missing, unreadable, unparsable, coverage of a leaderboard or summary entry."""
    records = entry.get("records", entry.get("count"))
    return [records, entry.get("answered"), entry.get("missing", 0), entry.get("unreadable", 0),
            entry.get("unparsable", 0),
            (f"{100 * entry['coverage']:.1f} %" if entry.get("coverage") is not None else None)]


# -- the main page -------------------------------------------------------------------------------
def yardsticks_note(counts):
    """How many yardsticks came from the store and how many were computed (run.json's ``yardsticks``)."""
    if not isinstance(counts, dict):
        return ""
    where = f"the store {html.escape(str(counts['store']))}" if counts.get("store") else "no store"
    note = (f" Yardsticks: {counts.get('from_store', 0)} from the store, {counts.get('computed', 0)} computed "
            f"({where}).")
    completions = counts.get("completions")
    if counts.get("store") and isinstance(completions, dict):
        note += (f" Distinct completions: {completions.get('from_store', 0)} from the store, "
                 f"{completions.get('computed', 0)} computed.")
    return note


def _overview(data, board, subjects, yardsticks=None):
    models = len(board)
    answered = sum(e["answered"] for e in board)
    missing = sum(e["missing"] for e in board)
    unreadable = sum(e["unreadable"] for e in board)
    excluded = sum(e["excluded"] for e in board)
    parts = [f"{plural(data.rows, 'record')}: {answered:,} answered and scored, {missing:,} missing, "
             f"{unreadable:,} unreadable (missing and unreadable completions count 0 in every mean)"]
    unparsable = sum(e.get("unparsable", 0) for e in board)
    if unparsable:
        parts.append(f"{plural(unparsable, 'record')} scored from a completion with a cell left V or that is not a "
                     f"number (<b>unparsable</b>: the cell reads as 0, the published rule, and the rest is scored; "
                     f"docs/scoring.md, \"Unparsable cells\")")
    if excluded:
        parts.append(f"{plural(excluded, 'record')} of broken samples (ground truth or prompt), left out of "
                     f"every model's means")
    if data.broken:
        parts.append(f"{plural(data.broken, 'line')} of results.jsonl dropped (not a results row)")
    if data.unclassified:
        parts.append(f"{plural(data.unclassified, 'record')} without a known failure category (scored by an "
                     f"older version?)")
    return (f"<p class='note'>{'; '.join(parts)}. {plural(models, 'model')}, {plural(len(subjects), 'subject')}."
            f"{yardsticks_note(yardsticks)}</p>")


def _leaderboard(board, model_pages, uncertainty):
    note = (f"<p class='note'>Models ranked by the mean over subjects of their mean topology_score (every "
            f"subject weighs the same; a missing or unreadable completion counts 0; <b>unparsable</b>: records "
            f"scored although a cell was left V or is not a number, which reads as 0). <b>se</b>: standard error; "
            f"<b>95 % interval</b>: bootstrap over samples, stratified by subject "
            f"({uncertainty.get('resamples', '-')} resamples, seed {uncertainty.get('seed', '-')}). "
            f"<b>vs next</b>: this model minus the next one over the samples both answered, with its paired 95 % "
            f"interval; <i>ahead</i> when the interval excludes 0, <i>not sure</i> when the order could be "
            f"either way.</p>")
    others = [k for k in STRUCTURAL_METRIC_KEYS if k != "topology_score"]
    rows, means = [], []
    for i, e in enumerate(board, start=1):
        link = model_pages.get(e["model"])
        name = Raw(f'<a href="{html.escape(link)}">{html.escape(e["model"])}</a>') if link else e["model"]
        rows.append([i, name, e["subjects"]] + coverage_cells(e)
                    + [e["topology_score"], e.get("topology_score_se"), interval(e.get("topology_score_ci95"))]
                    + sure(e.get("vs_next")))
        means.append([i, name] + coverage_cells(e) + [e[k] for k in others])
    return (note + table(["#", "model", "subjects"] + COVERAGE
                         + ["topology_score", "se", "95 % interval", "vs next", "its 95 % interval", "order",
                            "samples both answered"], rows)
            + "<h3>The other means</h3><p class='note'>The same records and rules (a missing or unreadable "
              "completion counts 0).</p>" + table(["#", "model"] + COVERAGE + others, means))


def _why(fsum, names, tallies, classes):
    parts = ["<h2>Why completions fail</h2><p class='note'>Every record a mean counts is in one category: "
             "<code>unanswered</code> when the completion is missing or unreadable (it counts 0; not a scorer "
             "error), else the first check the scored completion fails, in this order; <code>sound</code> "
             "when it passes them all. Every record of results.jsonl keeps every check's outcome in "
             "<code>checks</code>.</p>"]
    parts.append(table(["category", "a record is in it when"],
                       [[diagnosis.UNANSWERED, "its completion is missing or unreadable (no grid to score)"]]
                       + [[c.category, f"not: {c.question}"] for c in diagnosis.CHECKS]
                       + [[diagnosis.SOUND, "every check passes"]]))
    cats = list(diagnosis.TALLY_CATEGORIES)
    parts.append("<h3>Share of records per category (count)</h3><p class='note'><b>beats yardstick within "
                 "budget</b>: structural_efficiency_raw > 1 with no more material than the answer (the "
                 "yardstick's budget): it would mean the yardstick is weak, and is expected to be 0. <b>with "
                 "more material</b>: a design that spent more than the budget is stiffer, which says nothing "
                 "about the yardstick.</p>")

    def share(t, count):
        return f"{count / t['records']:.3f} ({count:,})" if t["records"] else f"- ({count:,})"

    parts.append(table(["model", "records"] + cats + ["beats yardstick within budget", "with more material"],
                       [[n, t["records"]] + [share(t, t["counts"][c]) for c in cats]
                        + [share(t, t["beats_yardstick_within_budget"]), share(t, t["beats_yardstick_with_more_material"])]
                        for n, t in zip(names, tallies)], classes))
    return "".join(parts)


def _exact(names, tallies, classes):
    keys = ("exact_carrying", "exact_severed", "inexact_carrying", "inexact_severed")
    return ("<h3>Exact match against load carrying</h3><p class='note'>Completions with a valid grid "
            "(the ground truth's shape, every cell L, S or a number in [0, 1]). "
            "<b>carrying, not exact</b>: the share that carries its load while string matching marks it "
            "wrong.</p>"
            + table(["model", "valid grids", "exact, carrying", "exact, severed", "not exact, carrying",
                     "not exact, severed", "carrying, not exact"],
                    [[n, t["exact_match_vs_load_carrying"]["valid_grids"]]
                     + [t["exact_match_vs_load_carrying"][k] for k in keys]
                     + [t["exact_match_vs_load_carrying"]["carrying_not_exact"]]
                     for n, t in zip(names, tallies)], classes))


def render_report(title, data, summary, board, charts, model_pages, yardsticks=None, sections=""):
    """The main page.  ``charts``: ``[(file name, PNG bytes, caption)]`` (heat map, failure bars);
    ``model_pages``: {model: relative link of its page}; ``sections``: HTML put after the leaderboard
    (runs with tools, :mod:`sphyr_hpc.reporting.tools_delta`)."""
    fsum = summary[diagnosis.SUMMARY_KEY]
    subjects = sorted(data.subjects)
    models = [e["model"] for e in board]
    heat, bars = [figure(*chart) for chart in charts]
    names = models + [diagnosis.OVERALL]
    tallies = [fsum["models"][m] for m in models] + [fsum[diagnosis.OVERALL]]
    classes = [""] * len(models) + ["all"]
    body = [_overview(data, board, subjects, yardsticks), "<h2>Leaderboard</h2>",
            _leaderboard(board, model_pages, summary.get("uncertainty") or {}), sections, heat,
            _why(fsum, names, tallies, classes), bars, _exact(names, tallies, classes),
            "<h2>Per model</h2><p class='note'>Each model's page holds its per-subject means (with coverage and "
            "intervals), categories, and the best and worst completion of every subject, drawn with the "
            "mask.</p><ul>"]
    body += [f'<li><a href="{html.escape(model_pages[m])}">{html.escape(m)}</a></li>' for m in models
             if m in model_pages]
    body.append("</ul>")
    return page(title, "".join(body))
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser():
    """A headless-capable Chromium on PATH, or None."""
    import shutil

    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def screenshot(page, png, width=1400, height=2400, timeout=120):
    """``page`` (a report.html) rendered by headless Chromium into ``png``: what a reader sees.

    Raises ``FileNotFoundError`` without a browser, ``RuntimeError`` when it draws nothing.
    """
    import subprocess
    import tempfile

    exe = browser()
    if exe is None:
        raise FileNotFoundError(f"no browser on PATH (tried {', '.join(BROWSERS)})")
    png = Path(png).resolve()
    with tempfile.TemporaryDirectory() as profile:  # a throw-away profile: no state between runs
        done = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               "--disable-quic", "--no-first-run", "--disable-background-networking",
                               "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={profile}", f"--window-size={width},{height}",
                               f"--screenshot={png}", Path(page).resolve().as_uri()],
                              capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not png.is_file():
        raise RuntimeError(f"{exe} drew no screenshot (status {done.returncode}): {done.stderr[-2000:]}")
    return png
