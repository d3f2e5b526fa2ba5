"""What ``python -m sphyr_hpc.report`` runs (and ``score`` at the end of a run): the report of an output folder.

:func:`write_report` streams ``OUT/results.jsonl`` once into a
:class:`~sphyr_hpc.reporting.collect.ReportData` (counts, sums, per-record
scores and categories, and only the best and worst rows whole), then writes
``OUT/report/*.png`` (the charts), ``OUT/report/<model>.html`` (one page per
model) and ``OUT/report.html`` last, each atomically.  Its title comes from
the run: the models, and the dataset or input folders ``run.json`` names.
:func:`write_comparison` writes ``OUT_A/compare.html``: run B minus run A.
:func:`merge_runs` makes one run of several: their records in one results.jsonl and summary.json.
"""

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..io.atomic import write_bytes_atomic, write_text_atomic
from ..io.fields import safe_name
from ..io.jsonl import ROW_FIELDS, read_jsonl
from ..io.results_log import row_key, sort_key
from ..reporting import figures
from ..reporting.collect import ReportData
from ..reporting.compare import render_comparison
from ..reporting.html import PICTURES, REPORT_NAME, plural, render_report
from ..reporting.tools_delta import tools_section
from ..reporting.model_page import render_model_page
from ..scoring import diagnosis
from ..scoring.summary import leaderboard

COMPARE_NAME = "compare.html"


@dataclass
class Written:
    """What a report wrote: report.html first, then every other file; the results.jsonl lines it dropped."""

    paths: list = field(default_factory=list)
    dropped: list = field(default_factory=list)  # [(line number, why)]


def _names(items, at_most=3):
    items = list(items)
    return ", ".join(items) if len(items) <= at_most else f"{', '.join(items[:at_most])}, ..."


def _run_json(out_dir):
    try:
        run = json.loads((Path(out_dir) / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return run if isinstance(run, dict) else {}


def run_title(out_dir, models, run=None):
    """'SPhyR report: my-model on full_easy.jsonl': the models and what run.json (``run``, if already read) says they answered."""
    inputs = (_run_json(out_dir) if run is None else run).get("inputs") or {}
    who = f"{plural(len(models), 'model')} ({_names(models)})" if len(models) != 1 else models[0] if models else "no model"
    datasets = inputs.get("dataset")
    if isinstance(datasets, list) and datasets:  # several datasets: how many, and their folders
        source = f" on {plural(len(datasets), 'subject')} ({_names(sorted({Path(d).parent.name for d in datasets}))})"
    elif datasets:
        source = f" on {Path(datasets).name}"
    elif inputs.get("paths"):
        source = " from " + _names(str(Path(*Path(p).parts[-2:])) for p in inputs["paths"])
    else:
        source = f" in {Path(out_dir).resolve().name}"
    return f"SPhyR report: {who}{source}"


def _page_names(models):
    """{model: file name of its page}, distinct even for names that differ only in unsafe characters."""
    names, used = {}, set()
    for model in models:
        name, n = f"{safe_name(model)}.html", 2
        while name in used or name == REPORT_NAME:
            name, n = f"{safe_name(model)}_{n}.html", n + 1
        used.add(name)
        names[model] = name
    return names


@dataclass
class Report:
    """What every part of a report needs: the data, summary.json's content, the leaderboard, names."""

    out_dir: Path
    data: ReportData
    summary: dict
    board: list
    title: str
    pages: dict  # {model: its page's file name in PICTURES}
    own: list = None  # the models whose pages this part writes (None: every model)
    yardsticks: dict = None  # how many yardsticks came from the store and how many were computed

    @classmethod
    def of(cls, out_dir, data, summary=None, title=None, yardsticks=None):
        """``yardsticks``: the run's counts (default: run.json's, where it has them)."""
        summary = summary if summary is not None else data.result()
        board = leaderboard(summary)
        models = [e["model"] for e in board]
        run = _run_json(out_dir) if title is None or yardsticks is None else {}  # read once
        if yardsticks is None:
            yardsticks = run.get("yardsticks")
            if isinstance(yardsticks, dict) and isinstance(run.get("completions"), dict):
                yardsticks = dict(yardsticks, completions=run["completions"])
        return cls(Path(out_dir), data, summary, board, title or run_title(out_dir, models, run), _page_names(models),
                   yardsticks=yardsticks)

    @property
    def models(self):
        return [e["model"] for e in self.board]

    def parts(self, weights):
        """The report split for ranks: part p writes the pages of the models dealt to it, in turns of
        ``weights[p]`` models (the rank that also draws the charts takes fewer, or none), with only their data."""
        turns = [p for p, weight in enumerate(weights) for _ in range(weight)]
        shares = [[m for i, m in enumerate(self.models) if turns[i % len(turns)] == p] for p in range(len(weights))]
        return [replace(self, data=self.data.slim(share), own=share) for share in shares]

    def write_model_pages(self):
        """The pages of this part's models (every model's by default); the paths."""
        paths = []
        for model in self.models if self.own is None else self.own:
            path = self.out_dir / PICTURES / self.pages[model]
            write_text_atomic(path, render_model_page(model, self.title, self.summary, self.data,
                                                      f"../{REPORT_NAME}"), fsync=False)
            paths.append(path)
        return paths

    def render_main(self):
        """The charts, written (report.html is what names them), and report.html's text, not written
        yet: (text, chart paths)."""
        models, summary = self.models, self.summary
        fsum = summary[diagnosis.SUMMARY_KEY]
        topo = {m: {s: e["topology_score"] for s, e in summary[m].items()} for m in models}
        names = models + [diagnosis.OVERALL]
        shares = {m: fsum["models"][m]["shares"] for m in models}
        shares[diagnosis.OVERALL] = fsum[diagnosis.OVERALL]["shares"]
        charts = [("topology_heat_map.png", figures.heat_map(models, sorted(self.data.subjects), topo),
                   "mean topology_score per model and subject"),
                  ("failures.png", figures.failure_bars(names, shares, diagnosis.TALLY_CATEGORIES),
                   "categories per model (share of records)")]
        paths = []
        for name, png, _ in charts:
            write_bytes_atomic(self.out_dir / PICTURES / name, png, fsync=False)
            paths.append(self.out_dir / PICTURES / name)
        page = render_report(self.title, self.data, summary, self.board, charts,
                             {m: f"{PICTURES}/{self.pages[m]}" for m in models}, self.yardsticks,
                             tools_section(summary))
        return page, paths

    def write_main(self, rendered=None):
        """report.html (last: it names only pages already written) from :meth:`render_main`'s result
        (``rendered``, else rendered now); the paths, report.html's first."""
        page, paths = rendered if rendered is not None else self.render_main()
        write_text_atomic(self.out_dir / REPORT_NAME, page)
        return [self.out_dir / REPORT_NAME] + paths


def write_report(out_dir, title=None):
    """report.html, report/<model>.html and report/*.png from ``out_dir/results.jsonl``: a :class:`Written`."""
    written = Written()
    data, written.dropped = ReportData.read(Path(out_dir) / "results.jsonl")
    report = Report.of(out_dir, data, title=title)
    pages = report.write_model_pages()
    written.paths = report.write_main() + pages
    return written


def write_comparison(out_a, out_b, path=None):
    """``out_a/compare.html`` (or ``path``): run B minus run A; returns (path, dropped lines of A, of B)."""
    data_a, dropped_a = ReportData.read(Path(out_a) / "results.jsonl")
    data_b, dropped_b = ReportData.read(Path(out_b) / "results.jsonl")
    path = Path(path) if path else Path(out_a) / COMPARE_NAME
    write_text_atomic(path, render_comparison(str(out_a), str(out_b), data_a, data_b))
    return path, dropped_a, dropped_b


@dataclass
class Merged:
    """What :func:`merge_runs` wrote: the record count, the leaderboard, the records found in two runs
    ``[(key, first run, other run)]``, the lines each run's results.jsonl dropped ``{run: [(line, why)]}``."""

    records: int
    board: list
    title: str
    twice: list = field(default_factory=list)
    dropped: dict = field(default_factory=dict)


def merge_runs(runs, out):
    """``out/results.jsonl`` and ``out/summary.json`` of the records of every run in ``runs`` (score
    output folders), each record once: one scored in two runs is kept from the first and listed in
    :attr:`Merged.twice`.  The leaderboard is the mean over subjects, as a single run's."""
    lines, where, twice, dropped = {}, {}, [], {}
    for run in runs:
        dropped[run] = []
        for number, row, problem in read_jsonl(Path(run) / "results.jsonl")[0]:
            if problem or not isinstance(row, dict) or not set(ROW_FIELDS) <= row.keys():
                dropped[run].append((number, problem or "not a results row (model, subject, index)"))
                continue
            key = row_key(row)
            if key in lines:
                twice.append((key, where[key], run))
                continue
            lines[key], where[key] = json.dumps(row, allow_nan=False), run
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    keys = sorted(lines, key=sort_key)
    write_text_atomic(out / "results.jsonl", "".join(lines[k] + "\n" for k in keys))
    data, _ = ReportData.read(out / "results.jsonl")
    summary = data.result()
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=2, allow_nan=False) + "\n")
    board = leaderboard(summary)
    models = [e["model"] for e in board]
    who = f"{plural(len(models), 'model')} ({_names(models)})" if len(models) != 1 else models[0] if models else "no model"
    title = f"SPhyR report: {who} from {plural(len(runs), 'run')} ({_names(Path(r).name for r in runs)})"
    return Merged(len(keys), board, title, twice, {r: d for r, d in dropped.items() if d})
