"""Runs with tools beside runs without: the tools-minus-no-tools delta of topology_score and the calls.

A record of an Inspect run with tools holds ``tools`` (:mod:`sphyr_hpc.io.inspect_log`): the
run's tools, the sample's ``calls`` and the ``seconds`` they took.  Its model is named
``MODEL+TOOL``; the run without tools is ``MODEL``.  summary.json's ``tools`` (present only when
some record was made with tools) holds, per run with tools:

* ``model`` (the run without tools, when it is in the same results), ``with_tools`` (the run's
  name) and ``tools``;
* the paired delta of topology_score, run with tools minus run without, over the samples both
  runs count (a missing or unreadable completion counts 0 in both, as in the means; a broken
  sample is in neither): ``difference``, ``se``, ``ci95``, ``excludes_zero``, ``samples`` and
  the same per subject in ``subjects`` (:func:`sphyr_hpc.scoring.uncertainty.paired`: the mean
  over subjects of the mean per-sample difference, its bootstrap stratified by subject, fixed
  seed); None when the run without tools is not there;
* ``calls``: ``samples`` (the run's records), ``mean`` (tool calls per sample), ``share_calling``
  (the share of samples with at least one call), ``total`` and ``ms_per_call`` (the calls' mean
  time: :func:`sphyr_hpc.io.inspect_log.tool_calls`).
"""

from collections import defaultdict

from . import uncertainty

TOOLS_KEY = "tools"  # summary.json's top-level entry (not a model), present when a run had tools


class ToolRuns:
    """The runs with tools among the rows, their calls per sample; merged over ranks like the summary."""

    def __init__(self):
        self.runs = {}  # model name -> (model without tools, tool names)
        self.calls = defaultdict(dict)  # model -> {(subject, index): (calls, seconds)}

    def add(self, row):
        tools = row.get("tools")
        if not isinstance(tools, dict):
            return
        model = row["model"]
        names = list(tools.get("names") or ())
        base = model[: -len("+".join([""] + names))] if names and model.endswith("+".join([""] + names)) else None
        self.runs[model] = (base, names)
        self.calls[model][(row["subject"], row.get("index"))] = (int(tools.get("calls") or 0),
                                                                  float(tools.get("seconds") or 0.0))

    def merge(self, other):
        self.runs.update(other.runs)
        for model, calls in other.calls.items():
            self.calls[model].update(calls)
        return self

    def __getstate__(self):
        return {"runs": self.runs, "calls": dict(self.calls)}

    def __setstate__(self, state):
        self.__init__()
        self.runs.update(state["runs"])
        self.calls.update(state["calls"])

    def __bool__(self):
        return bool(self.runs)

    def result(self, scores):
        """summary.json's ``tools``; ``scores``: the running summary's {model: {subject: {index: (score,
        answered)}}} of the counted records."""
        entries = []
        for model in sorted(self.runs):
            base, names = self.runs[model]
            counted = {m: {s: {i: value for i, (value, _) in by.items()} for s, by in scores.get(m, {}).items()}
                       for m in (model, base) if m is not None}
            pair = uncertainty.paired(counted[base], counted[model]) if base in scores else None
            entries.append({"model": base if base in scores else None, "with_tools": model, "tools": names,
                            "delta": pair, "calls": self._calls(model)})
        return {"statistic": "topology_score", "resamples": uncertainty.RESAMPLES, "seed": uncertainty.SEED,
                "level": uncertainty.LEVEL, "runs": entries}

    def _calls(self, model):
        # in record order: the sums must not depend on the order the ranks' rows were merged in
        calls = self.calls[model]
        per_sample = [calls[key] for key in sorted(calls, key=_record_order)]
        total = sum(calls for calls, _ in per_sample)
        seconds = sum(s for _, s in per_sample)
        n = len(per_sample)
        return {"samples": n, "mean": total / n if n else None,
                "share_calling": sum(calls > 0 for calls, _ in per_sample) / n if n else None,
                "total": total, "ms_per_call": 1e3 * seconds / total if total else None}


def _record_order(key):
    subject, index = key
    return (subject, 0, index, "") if isinstance(index, (int, float)) else (subject, 1, 0, str(index))


def _signed(value):
    return f"{value:+.3f}" if value is not None else "-"


def _interval(ci):
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "-"


def delta_rows(entry):
    """``[(subject or 'overall', difference, ci95, excludes_zero, samples)]`` of one run's delta (overall last)."""
    pair = entry.get("delta")
    if not pair:
        return []
    rows = [(s, e["difference"], e["ci95"], e["excludes_zero"], e["samples"]) for s, e in pair["subjects"].items()]
    return rows + [("overall", pair["difference"], pair["ci95"], pair["excludes_zero"], pair["samples"])]


def format_tool_runs(stats):
    """The printed table of summary.json's ``tools``: per run with tools, its delta per subject and
    overall, and its calls."""
    if not stats or not stats.get("runs"):
        return []
    lines = ["# tools minus no tools: topology_score, paired over the samples both runs count (95% bootstrap "
             "interval, stratified by subject)"]
    header = f"{'model':30s} {'tools':10s} {'subject':26s} {'delta':>7s} {'95% interval':>18s} {'sure':>4s} {'samples':>7s}"
    lines += [header, "-" * len(header)]
    for entry in stats["runs"]:
        name, tools = entry["model"] or f"{entry['with_tools']} (no run without tools)", "+".join(entry["tools"])
        for subject, diff, ci, sure, n in delta_rows(entry) or [("-", None, None, None, 0)]:
            lines.append(f"{name:30s} {tools:10s} {subject:26s} {_signed(diff):>7s} {_interval(ci):>18s} "
                         f"{('yes' if sure else 'no') if sure is not None else '-':>4s} {n:7d}")
    lines.append("")
    lines.append(f"{'run with tools':40s} {'samples':>7s} {'calls/sample':>12s} {'share calling':>13s} "
                 f"{'calls':>6s} {'ms/call':>8s}")
    for entry in stats["runs"]:
        c = entry["calls"]
        mean = f"{c['mean']:.2f}" if c["mean"] is not None else "-"
        share = f"{100 * c['share_calling']:.1f}%" if c["share_calling"] is not None else "-"
        ms = f"{c['ms_per_call']:.1f}" if c["ms_per_call"] is not None else "-"
        lines.append(f"{entry['with_tools']:40s} {c['samples']:7d} {mean:>12s} {share:>13s} {c['total']:6d} {ms:>8s}")
    return lines
