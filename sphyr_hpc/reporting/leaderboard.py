"""leaderboard.png: the models' mean topology_score as bars, best at the top, with their 95 % intervals."""

import warnings

from ..scoring.summary import NOTHING_TO_RANK, rankable


def warm_up():
    """Import matplotlib and load its fonts: a throw-away leaderboard drawn to memory (~0.4 s here)."""
    import io

    plot_leaderboard([{"model": "warm-up", "topology_score": 1.0}], io.BytesIO())


def drawable(name):
    """``name`` as a label matplotlib can draw: a lone surrogate (a folder name's byte that is not
    UTF-8, as Python decodes it) becomes its escape, ``\\udce9``.  matplotlib 3.10's font
    layer refuses such a string (a TypeError); the printed tables keep the name as it is."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def plot_leaderboard(board, path):
    """Horizontal bars of mean topology_score, best at the top (a note when nothing was scored)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # not pyplot: no GUI machinery, a third of the import time

    if not rankable(board):
        fig = Figure(figsize=(7.0, 1.2))
        FigureCanvasAgg(fig)
        fig.text(0.5, 0.5, NOTHING_TO_RANK, ha="center", va="center")
        fig.savefig(path, dpi=120)
        return
    with warnings.catch_warnings():
        # A model is named by its folder: a character the font lacks is drawn as a box (the
        # printed leaderboard and summary.json keep the name), not warned about on stderr.
        warnings.filterwarnings("ignore", message="Glyph .* missing from", category=UserWarning)
        _draw_leaderboard(board, path, Figure, FigureCanvasAgg)


def _draw_leaderboard(board, path, Figure, FigureCanvasAgg):
    names = [drawable(e["model"]) for e in board][::-1]
    values = [e["topology_score"] or 0.0 for e in board][::-1]
    fig = Figure(figsize=(7.0, 0.9 + 0.35 * len(board)))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    rows = range(len(names))
    # The bootstrap interval as an error bar where the board has one (summary.json's uncertainty).
    intervals = [e.get("topology_score_ci95") for e in board][::-1]
    xerr = None
    if all(intervals):
        xerr = [[max(0.0, v - ci[0]) for v, ci in zip(values, intervals)],
                [max(0.0, ci[1] - v) for v, ci in zip(values, intervals)]]
    ax.barh(rows, values, color="#3a6ea5", xerr=xerr, error_kw={"ecolor": "#222222", "capsize": 2, "lw": 0.8})
    # Model names as plain labels beside the axis, not as y ticks: a tick is several artists
    # (its line, grid line, labels), and 60 models' ticks took 40 % of the picture's time.
    ax.set_yticks([])
    ax.set_ylim(-0.6, len(names) - 0.4)
    beside = ax.get_yaxis_transform()  # x in axes fractions, y in data
    for y, (name, v) in enumerate(zip(names, values)):
        ax.text(-0.01, y, name, transform=beside, ha="right", va="center")
        ax.text(v + 0.01 + (xerr[1][y] if xerr else 0.0), y, f"{v:.3f}", va="center", fontsize=8)
    ax.set_xlim(0.0, 1.08)
    ax.set_xlabel("mean topology_score over subjects" + (" (bars: 95 % bootstrap interval)" if xerr else ""))
    ax.set_title("SPhyR leaderboard (sphyr_hpc)")
    # Margins from the widest model name as the renderer measures it: what tight_layout finds by
    # drawing the figure once more (a third of the time of 60 models' picture).
    font = ax.texts[0].get_fontproperties()
    widest = max(fig.canvas.get_renderer().get_text_width_height_descent(name, font, False)[0]
                 for name in names) / fig.dpi
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=min(0.8, (widest + 0.2) / width), right=1.0 - 0.15 / width,
                        bottom=0.6 / height, top=1.0 - 0.4 / height)
    # PNG's fastest deflate level: the picture is flat colour, a few % larger, encoded ~3x faster.
    fig.savefig(path, dpi=120, pil_kwargs={"compress_level": 1})
