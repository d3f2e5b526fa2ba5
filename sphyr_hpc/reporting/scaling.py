"""The pictures of a scaling study: time and KSP iterations against DOFs, speed-up against ranks."""


def baseline(entries):
    return {(e["nelx"], e["nely"]): e["seconds_per_iteration"] for e in entries
            if e.get("ranks") == 1 and "error" not in e}


def plot(entries, prefix):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [e for e in entries if "error" not in e]
    ranks = sorted({e["ranks"] for e in ok})
    paths = []
    for key, ylabel, name in (("seconds_per_iteration", "seconds per SIMP iteration", "time"),
                              ("ksp_iterations", "MG-CG iterations per solve (mean)", "ksp")):
        fig, ax = plt.subplots(figsize=(6, 4))
        for r in ranks:
            pts = sorted((e["dofs"], e[key]) for e in ok if e["ranks"] == r)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"{r} rank{'s' if r > 1 else ''}")
        ax.set_xscale("log")
        if key == "seconds_per_iteration":
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel("DOFs")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = f"{prefix}_{name}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    base = baseline(ok)
    fig, ax = plt.subplots(figsize=(6, 4))
    for (nelx, nely), t1 in sorted(base.items(), key=lambda kv: kv[0][0] * kv[0][1]):
        pts = sorted((e["ranks"], t1 / e["seconds_per_iteration"])
                     for e in ok if (e["nelx"], e["nely"]) == (nelx, nely))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"{nelx}x{nely}")
    if ranks:
        ax.plot(ranks, ranks, "k--", lw=0.8, label="ideal")
    ax.set_xlabel("MPI ranks")
    ax.set_ylabel("speed-up (time per iteration, 1 rank / R ranks)")
    ax.set_xticks(ranks)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = f"{prefix}_speedup.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    paths.append(path)
    return paths
