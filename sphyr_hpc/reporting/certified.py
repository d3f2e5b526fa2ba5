"""certify.png: the share of samples certified optimal per subject, and every yardstick gap."""

import numpy as np


def plot(rows, summary, path):
    """certify.png at ``path``: :func:`figure`, written."""
    figure(rows, summary).savefig(path, dpi=120)


def figure(rows, summary):
    """Share certified optimal per subject, and every sample's yardstick gap (every point whole inside
    the axes: the gap axis reaches past the largest and smallest gap)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    subjects = list(summary)
    fig = Figure(figsize=(11.0, 1.2 + 0.32 * len(subjects)))
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(subjects))[::-1]
    left.barh(y, [100.0 * (summary[s]["share_optimal"] or 0.0) for s in subjects], color="#3a6ea5")
    left.set_yticks(y, subjects, fontsize=8)
    left.set_xlim(0, 100)
    left.set_xlabel("samples certified optimal (%)")
    for yi, subject in zip(y, subjects):
        gaps = [100.0 * r["yardstick_gap"] for r in rows if r["subject"] == subject and "error" not in r
                and r["yardstick_gap"] is not None]
        colours = ["#2a9d5c" if r["status"] == "optimal" else "#d1495b" for r in rows
                   if r["subject"] == subject and "error" not in r and r["yardstick_gap"] is not None]
        right.scatter(gaps, np.full(len(gaps), yi), s=12, c=colours, alpha=0.7)
    right.axvline(0.0, color="grey", lw=0.8)
    right.set_xscale("symlog", linthresh=1.0)
    gaps = [100.0 * r["yardstick_gap"] for r in rows if "error" not in r and r.get("yardstick_gap") is not None]
    if gaps:  # symlog: a margin of a factor 1.5 (plus 1 %) on each side keeps the outermost markers whole
        right.set_xlim(min(0.0, min(gaps)) * 1.5 - 1.0, max(0.0, max(gaps)) * 1.5 + 1.0)
    right.set_xlabel("yardstick / certified lower bound - 1 (%): green exact, red bounded")
    fig.suptitle("The yardstick against the certified binary optimum (sphyr_hpc.certify)")
    fig.tight_layout()
    return fig
