"""report.html's "With tools" section: summary.json's ``tools`` as one table, and the calls.

Per model run with and without tools on the same samples: the tools-minus-no-tools delta of
topology_score per subject and overall, with its paired 95 % bootstrap interval
(:mod:`sphyr_hpc.scoring.tool_runs`); then per run with tools, its calls per sample, the share of
samples that called a tool, and the milliseconds a call took.  Empty when no run had tools.
"""

from ..scoring.tool_runs import TOOLS_KEY, delta_rows
from .html import interval, table


def tools_section(summary):
    """The section's HTML ('' when summary.json has no ``tools``)."""
    stats = summary.get(TOOLS_KEY)
    if not stats or not stats.get("runs"):
        return ""
    rows, classes = [], []
    for entry in stats["runs"]:
        model = entry["model"] or "(no run without tools)"
        for subject, diff, ci, sure, n in delta_rows(entry) or [("-", None, None, None, 0)]:
            verdict = None if sure is None else (("excludes 0", "sure") if sure else ("includes 0", "unsure"))
            rows.append([model, "+".join(entry["tools"]), subject,
                         (f"{diff:+.3f}", verdict[1]) if diff is not None else None, interval(ci), verdict, n])
            classes.append("all" if subject == "overall" else "")
    calls = []
    for entry in stats["runs"]:
        c = entry["calls"]
        calls.append([entry["with_tools"], c["samples"], c["mean"],
                      f"{100 * c['share_calling']:.1f} %" if c["share_calling"] is not None else None,
                      c["total"], c["ms_per_call"]])
    note = ("<p class='note'>Each model run with tools and without on the same samples: the tools-minus-no-tools "
            "difference of topology_score, per subject and overall (the mean over subjects of the mean per-sample "
            "difference), over the samples both runs count (a missing or unreadable answer counts 0 in both). "
            f"<b>95 % interval</b>: paired bootstrap over samples, stratified by subject ({stats['resamples']} "
            f"resamples, seed {stats['seed']}).</p>")
    calls_note = ("<p class='note'><b>calls per sample</b>: the mean number of tool calls; <b>share calling</b>: "
                  "samples with at least one call; <b>ms per call</b>: a call's mean time (simulate's as the tool "
                  "timed it, python's as Inspect did).</p>")
    return ("<h2 id='tools'>With tools</h2>" + note
            + table(["model", "tools", "subject", "tools minus no tools", "95 % interval", "interval", "samples"],
                    rows, classes)
            + calls_note + table(["run with tools", "samples", "calls per sample", "share calling", "calls",
                                  "ms per call"], calls))
