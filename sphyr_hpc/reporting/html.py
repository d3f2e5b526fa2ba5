"""report.html: a benchmark report people look at, from ``results.jsonl`` alone.

``python -m sphyr_hpc.report OUT_DIR`` (and ``score``, unless ``--no-report``)
reads ``OUT_DIR/results.jsonl`` and writes:

* ``OUT_DIR/report.html``: one self-contained file (tables, the PNGs embedded
  as ``data:`` URIs, inline CSS, no script), which opens from disk in any browser;
* ``OUT_DIR/report/*.png``: the same pictures as files (each figure in the
  HTML links its file): ``topology_heat_map.png`` (models x subjects, mean
  topology_score), ``failures.png`` (stacked failure categories per model),
  ``completions_<model>.png`` (per model, the best and worst completion of
  each subject: completion | ground truth | yardstick optimum).

Nothing is rescored: metrics, failure categories (:mod:`sphyr_hpc.scoring.diagnosis`)
and the grids to draw are read from the records, so a finished, resumed or
copied run can be reported again in seconds.  Every file is written
atomically.  Records scored before failure categories existed are counted as
unclassified.
"""

import base64
import html
import math
import time
from pathlib import Path

from ..scoring import diagnosis as failures
from ..core.metrics import STRUCTURAL_METRIC_KEYS
from ..scoring.summary import leaderboard, summarise
from . import figures
from ..io.atomic import write_bytes_atomic, write_text_atomic
from ..io.fields import safe_name
from ..io.jsonl import read_rows
from ..io.results_log import row_key, sort_key

REPORT_NAME = "report.html"
PICTURES = "report"


def _score(row):
    value = row.get("topology_score")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


def pick_best_and_worst(rows):
    """{model: [(subject, best, worst)]} by topology_score (ties: the lower index)."""
    groups = {}
    for row in rows:
        if "error" not in row:
            groups.setdefault(row["model"], {}).setdefault(row["subject"], []).append(row)
    picks = {}
    for model, subjects in groups.items():
        picks[model] = []
        for subject in sorted(subjects):
            items = sorted(subjects[subject], key=lambda r: sort_key(row_key(r)))
            best = max(items, key=_score)
            worst = min(items, key=_score)
            picks[model].append((subject, best, worst))
    return picks


# -- HTML ----------------------------------------------------------------------------------------
_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td.name, th.name { text-align: left; } td.name { white-space: nowrap; }
tr.all td { font-weight: bold; background: #fafafa; }
figure { margin: 12px 0; } figcaption { font-size: 12px; color: #555; }
img { max-width: 100%; border: 1px solid #ddd; }
p.note { font-size: 13px; color: #444; max-width: 900px; }
"""


def _cell(value, digits=3):
    if value is None:
        return "<td>-</td>"
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, int):
        return f"<td>{value}</td>"
    if isinstance(value, float):
        return f"<td>{value:.{digits}f}</td>"
    return f'<td class="name">{html.escape(str(value))}</td>'


def _header(text):
    return html.escape(text).replace("_", "_<wbr>")  # long field names may break after an underscore


def _table(header, rows, classes=()):
    head = "".join(f'<th class="name">{_header(h)}</th>' if i == 0 else f"<th>{_header(h)}</th>"
                   for i, h in enumerate(header))
    body = "".join(f'<tr class="{c}">' + "".join(_cell(v) for v in row) + "</tr>"
                   for row, c in zip(rows, list(classes) + [""] * len(rows)))
    return f"<table><tr>{head}</tr>{body}</table>"


def _figure_html(name, data, caption):
    encoded = base64.b64encode(data).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{encoded}" alt="{html.escape(caption)}">'
            f'<figcaption>{html.escape(caption)} (<a href="{PICTURES}/{html.escape(name)}">{PICTURES}/'
            f"{html.escape(name)}</a>)</figcaption></figure>")


def render_html(title, rows, broken, board, fsum, pictures):
    """The page; ``pictures`` are ``(file name, PNG bytes, caption)``: heat map, failure bars, then one
    best/worst mosaic per model."""
    models = list(fsum["models"])
    scored = sum(1 for r in rows if "error" not in r)
    unclassified = sum(1 for r in rows if "error" not in r and r.get("failure") not in failures.CATEGORIES)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p class='note'>{len(rows)} records ({scored} scored, {len(rows) - scored} errors"
             + (f", {broken} unreadable lines" if broken else "")
             + (f", {unclassified} without a known failure category (scored by an older version?)" if unclassified else "")
             + f"), {len(models)} models, {len({r['subject'] for r in rows})} subjects. "
             f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by sphyr_hpc.</p>"]

    parts.append("<h2>Leaderboard</h2><p class='note'>Models ranked by the mean over subjects of their mean "
                 "topology_score (every subject weighs the same).</p>")
    parts.append(_table(["#", "model", "subjects", "records", "errors"] + list(STRUCTURAL_METRIC_KEYS),
                        [[i, e["model"], e["subjects"], e["records"], e["errors"]] + [e[k] for k in STRUCTURAL_METRIC_KEYS]
                         for i, e in enumerate(board, start=1)]))
    heat, bars, *mosaics = [_figure_html(*picture) for picture in pictures]
    parts.append(heat)

    parts.append("<h2>Why completions fail</h2><p class='note'>Each scored completion falls in the category of "
                 "the first check it fails, in this order; <code>sound</code> when it passes them all. "
                 "Every record of results.jsonl keeps every check's outcome in <code>checks</code>.</p>")
    parts.append(_table(["category", "the check passes when"],
                        [[c.category, c.question] for c in failures.CHECKS]
                        + [[failures.SOUND, "every check passes"]]))
    names = models + [failures.OVERALL]
    tallies = [fsum["models"][m] for m in models] + [fsum[failures.OVERALL]]
    classes = [""] * len(models) + ["all"]
    parts.append("<h3>Share of scored completions per category</h3>")
    parts.append(_table(["model", "classified"] + list(failures.CATEGORIES) + ["beats yardstick"],
                        [[n, t["records"]] + [t["shares"][c] for c in failures.CATEGORIES] + [t["beats_yardstick"]]
                         for n, t in zip(names, tallies)], classes))
    parts.append("<h3>Counts</h3>")
    parts.append(_table(["model", "classified"] + list(failures.CATEGORIES),
                        [[n, t["records"]] + [t["counts"][c] for c in failures.CATEGORIES]
                         for n, t in zip(names, tallies)], classes))
    parts.append(bars)

    parts.append("<h3>Exact match against load carrying</h3><p class='note'>Completions with a valid grid "
                 "(the ground truth's shape, every cell L, S or a number in [0, 1]). "
                 "<b>carrying, not exact</b>: the share that carries its load while string matching marks it "
                 "wrong.</p>")
    keys = ("exact_carrying", "exact_severed", "inexact_carrying", "inexact_severed")
    parts.append(_table(["model", "valid grids", "exact, carrying", "exact, severed", "not exact, carrying",
                         "not exact, severed", "carrying, not exact"],
                        [[n, t["exact_match_vs_load_carrying"]["valid_grids"]]
                         + [t["exact_match_vs_load_carrying"][k] for k in keys]
                         + [t["exact_match_vs_load_carrying"]["carrying_not_exact"]]
                         for n, t in zip(names, tallies)], classes))

    parts.append("<h2>Best and worst completions</h2><p class='note'>Per model and subject, the completion "
                 "with the highest and the lowest topology_score: completion | ground truth | yardstick optimum. "
                 "Load cells red, support cells blue, masked cells green (given cells grey), a V left in place "
                 "or an unparsable cell orange.</p>")
    for (_, _, model), fragment in zip(pictures[2:], mosaics):
        parts.append(f"<h3>{html.escape(model)}</h3>{fragment}")
        subjects = {}
        for row in rows:
            if row["model"] == model:
                subjects.setdefault(row["subject"], []).append(row)
        counts = {s: failures.tally(items)["counts"] for s, items in sorted(subjects.items())}
        parts.append(f"<p class='note'>{html.escape(model)}: failure categories per subject (counts)</p>")
        parts.append(_table(["subject"] + list(failures.CATEGORIES),
                            [[s] + [c[k] for k in failures.CATEGORIES] for s, c in counts.items()]))
    parts.append("</body></html>\n")
    return "".join(parts)


# -- the whole report ----------------------------------------------------------------------------
def write_report(out_dir, title=None):
    """report.html and report/*.png from ``out_dir/results.jsonl``; returns the paths written."""
    out_dir = Path(out_dir)
    rows, broken = read_rows(out_dir / "results.jsonl")
    summary = summarise(rows)
    board = leaderboard(summary)
    fsum = summary[failures.SUMMARY_KEY]
    models = [e["model"] for e in board]
    subjects = sorted({r["subject"] for r in rows})
    topo = {m: {s: e["topology_score"] for s, e in summary[m].items()} for m in models}

    pictures = [("topology_heat_map.png", figures.heat_map(models, subjects, topo),
                 "mean topology_score per model and subject")]
    names = models + [failures.OVERALL]
    shares = {m: fsum["models"][m]["shares"] for m in models}
    shares[failures.OVERALL] = fsum[failures.OVERALL]["shares"]
    pictures.append(("failures.png", figures.failure_bars(names, shares, failures.CATEGORIES),
                     "failure categories per model (share of scored completions)"))
    picks = pick_best_and_worst(rows)
    used = set()
    for model in models:
        if model not in picks:
            continue
        name = f"completions_{safe_name(model)}.png"
        n = 2
        while name in used:  # two model names that differ only in unsafe characters
            name, n = f"completions_{safe_name(model)}_{n}.png", n + 1
        used.add(name)
        pictures.append((name, figures.completions_mosaic(model, picks[model]), model))

    paths = []
    for name, data, _ in pictures:
        path = out_dir / PICTURES / name
        write_bytes_atomic(path, data, fsync=False)
        paths.append(path)
    page = render_html(title or f"SPhyR report: {out_dir.resolve().name}", rows, broken, board, fsum, pictures)
    path = out_dir / REPORT_NAME
    write_text_atomic(path, page)
    return [path] + paths


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
                               f"--user-data-dir={profile}", f"--window-size={width},{height}",
                               f"--screenshot={png}", Path(page).resolve().as_uri()],
                              capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not png.is_file():
        raise RuntimeError(f"{exe} drew no screenshot (status {done.returncode}): {done.stderr[-2000:]}")
    return png
