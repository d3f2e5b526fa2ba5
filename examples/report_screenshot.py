"""docs/report.png: report.html of the bundled examples as headless Chromium draws it.

    .venv/bin/python examples/report_screenshot.py [--out build/report_examples] [--png docs/report.png]

Scores ``examples/results`` (baseline-empty and baseline-random, 144 records)
into ``--out`` unless it already holds a results.jsonl, writes its report
(``python -m sphyr_hpc.report``) and screenshots report.html with
``chromium --headless --screenshot`` (``sphyr_hpc.reporting.html.screenshot``).
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sphyr_hpc.jobs.report import write_report  # noqa: E402
from sphyr_hpc.reporting.html import screenshot  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "build" / "report_examples"))
    parser.add_argument("--png", default=str(ROOT / "docs" / "report.png"))
    parser.add_argument("--size", default="1300x1700", help="browser window WIDTHxHEIGHT")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if not (out / "results.jsonl").is_file():
        from sphyr_hpc.score import main as score

        score([str(ROOT / "examples" / "results"), "--out", str(out), "--quiet", "--no-report"])
    page = write_report(out).paths[0]
    width, height = (int(v) for v in args.size.split("x"))
    print(screenshot(page, args.png, width=width, height=height))
    return 0


if __name__ == "__main__":
    sys.exit(main())
