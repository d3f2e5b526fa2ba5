"""What every benchmark records and how it writes its results (imported by the scripts here)."""

import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sphyr_hpc.io.atomic import write_text_atomic  # noqa: E402

# A benchmark times the work, so no run it starts reads a yardstick stored by an earlier run (the
# second round of a side-by-side would otherwise time a warm store).  benchmarks/store.py, which
# measures the store, names its stores with --store.  A setting of your own wins.
os.environ.setdefault("SPHYR_HPC_STORE", "none")

# shared/data/sphyr beside the checkout (a clone) or beside the folder that holds it (a worktree).
SPHYR_DATA = next((p / "shared" / "data" / "sphyr" for p in (ROOT.parent, ROOT.parent.parent)
                   if (p / "shared" / "data" / "sphyr").is_dir()), ROOT.parent / "shared" / "data" / "sphyr")


def machine(load_before):
    """The machine and its load average before (given) and now."""
    return {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "loadavg_before": load_before, "loadavg_after": os.getloadavg()}


def machine_line(m):
    """The Markdown sentence naming the machine ``machine()`` described and its load averages."""
    def load(values):
        return tuple(round(v, 2) for v in values)
    return (f"Machine: {m['platform']}, Python {m['python']}, {m['cpus']} CPUs, load average before "
            f"{load(m['loadavg_before'])}, after {load(m['loadavg_after'])}.")


def commit_of(checkout=ROOT):
    """The short hash of a checkout's HEAD."""
    import subprocess

    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True,
                          text=True).stdout.strip()


def children(pid):
    """The process ids ``pid`` has started, from any of its threads (none once it has ended)."""
    started = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return started
    for task in tasks:
        try:
            started += [int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    return started


def process_name(pid):
    """The command name of process ``pid``, or None once it has ended."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_results(out, report, markdown):
    """``out`` (JSON) and the Markdown beside it, each written atomically."""
    out = Path(out)
    write_text_atomic(out, json.dumps(report, indent=2) + "\n")
    write_text_atomic(out.with_suffix(".md"), markdown)
