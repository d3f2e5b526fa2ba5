"""Issue 42's twelve defects of a new user's first hour: each command run in an old and a new checkout.

The issue asks, "for each of the 12: the command, its output before and after".  Every command is
run as a user types it from a checkout (``bin/mpirun -n 2 .venv/bin/python -m sphyr_hpc.score
...``), in a fresh temporary folder per defect and checkout that holds links to the checkout's
``bin``, ``.venv`` and ``examples``, so that what a command writes lands in that folder.  Every run
has no yardstick store (``SPHYR_HPC_STORE=none``, as every benchmark) and ``COLUMNS=100`` (the
width at which docs/ shows ``--help``).  Recorded per run: the command, its exit status, its wall
seconds and the lines of its stderr and stdout that bear on the defect (all of them, or those
picked, with the rule that picked them and the number left out), and facts read from what it wrote.
For the defects of docs and help (6, 7, 8, 9, 11) also the lines of the docs in each checkout.

The old checkout's 10000x10000 ``optimize`` and ``scaling`` (defect 1) run under ``prlimit
--as=3221225472 timeout 120`` (3 GiB of address space a process, 2 minutes): uncapped, the issue
reports, the process grows until the kernel kills it at 24 GB, saying nothing.  The interrupts
(defect 2) are sent as ``timeout --preserve-status -s INT`` sends them, to the command's process,
at a moment read from the run's output folder (as tests/test_interrupts.py does): on a quiet
machine the bundled examples take about 3 s, start-up included, and the docs' ``timeout ... 4``
can come after the end.  That command is run too, and signals at start-up: 0, 0.1, 0.2 and 0.3 s
after the rank processes appeared (Python's imports, MPI starting).  The long runs of defect 8 are not run again (benchmarks/long_runs.py
times them); certify is.

    /usr/bin/python3 benchmarks/first_hour_before_after.py --old ../old-ac6b086 [--new .]

Results: ``benchmarks/results/first_hour_before_after.{json,md}``.  About two minutes.
"""

import argparse
import html
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, children, commit_of, machine, machine_line, now, process_name, write_results

PYTHON = ".venv/bin/python -m sphyr_hpc"
MPIRUN = "bin/mpirun -n 2 .venv/bin/python -m sphyr_hpc"
FULL_EASY = "examples/data/v1/full_easy.jsonl"
CAP_BYTES = 3 * 1024**3
CAPPED = f"prlimit --as={CAP_BYTES} timeout 120 "
WIDTH = "100"
RUN_LIMIT_S = 600  # a run still going then is killed (its process group) and recorded as such
STARTUP_DELAYS = (0.0, 0.1, 0.2, 0.3)  # defect 2's interrupts at start-up, after the ranks appeared
HEAD, TAIL = 20, 10  # an output longer than HEAD + TAIL lines, nothing picked, is shown as its ends


# --- running a command as a user types it ---------------------------------------------------------

def workspace(tree, parent, name):
    """A fresh folder in which a user's commands run as from the checkout ``tree``."""
    work = parent / name
    work.mkdir()
    for entry in ("bin", ".venv", "examples"):
        (work / entry).symlink_to(tree / entry)
    return work


def matching(*patterns):
    """A pick: the lines matching any of ``patterns``."""
    def pick(lines):
        return [line for line in lines if any(re.search(p, line) for p in patterns)], \
            "those matching " + " or ".join(f"`{p}`" for p in patterns)
    return pick


def options(*names):
    """A pick: the paragraphs of ``names`` in an argparse ``--help``."""
    def pick(lines):
        shown = []
        for name in names:
            at = next((i for i, line in enumerate(lines) if re.match(rf"\s+{re.escape(name)}\b", line)), None)
            if at is None:
                shown.append(f"[no option {name}]")
                continue
            end = next((i for i in range(at + 1, len(lines)) if re.match(r"\s{1,4}-", lines[i]) or not lines[i].strip()),
                       len(lines))
            shown += lines[at:end]
        return shown, "the help of " + ", ".join(names)
    return pick


def every(lines):
    return "its one line" if len(lines) == 1 else f"all {len(lines)} lines"


PROGRESS_BAR = re.compile(r"^\s*\d+%\|.*\]$")  # a line that is only a progress bar's redraw


def excerpt(text, pick=None):
    """The lines of ``text`` to show (a line that is only a progress bar left out) and how they were chosen."""
    lines = [line.split("\r")[-1].rstrip() for line in text.split("\n")]
    bars = sum(1 for line in lines if PROGRESS_BAR.match(line))
    lines = [line for line in lines if not PROGRESS_BAR.match(line)]
    while lines and not lines[-1]:
        lines.pop()
    if pick is not None:
        shown, rule = pick(lines)
        how = every(lines) if shown == lines else f"{len(shown)} of {len(lines)} lines: {rule}"
    elif len(lines) > HEAD + TAIL:
        shown = lines[:HEAD] + [f"[... {len(lines) - HEAD - TAIL} lines left out ...]"] + lines[-TAIL:]
        how = f"the first {HEAD} and the last {TAIL} of {len(lines)} lines"
    else:
        shown, how = lines, every(lines)
    if bars:
        how += f" ({bars} progress-bar lines left out)"
    return {"lines": shown, "how": how, **({"all": lines} if shown != lines else {})}


def run(work, command, pick=None, env=None, interrupt=None):
    """``command`` run in ``work``: exit status, wall seconds, stderr (all) and stdout (``pick``ed).

    ``interrupt``: (condition, what) sends SIGINT to the command's process once ``condition(work, pid)``
    holds, as ``timeout -s INT`` does; ``env``: variables added to the command's environment."""
    environment = dict(os.environ, COLUMNS=WIDTH, **(env or {}))
    signalled = None
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(shlex.split(command), cwd=work, env=environment, stdout=out, stderr=err, text=True,
                                start_new_session=True)
        try:
            if interrupt is not None:
                condition, what = interrupt
                while proc.poll() is None and not condition(work, proc.pid) and time.perf_counter() - start < RUN_LIMIT_S:
                    time.sleep(0.005)
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                    signalled = f"SIGINT after {time.perf_counter() - start:.2f} s, {what}"
                else:
                    signalled = f"none: the run had ended before {what}"
            proc.wait(timeout=max(1.0, RUN_LIMIT_S - (time.perf_counter() - start)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            signalled = f"killed (SIGKILL to its process group) after {RUN_LIMIT_S} s"
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    return {"command": command, "env": env or {}, "status": proc.returncode, "seconds": round(seconds, 2),
            "signal": signalled, "stderr": excerpt(stderr), "stdout": excerpt(stdout, pick), "facts": {}}


def ranks_started(pid):
    """Whether the mpirun that ``pid`` is (or started) has started its rank processes."""
    return any(process_name(launcher) == "mpirun" and children(launcher) for launcher in [pid, *children(pid)])


def ranks_running_for(delay):
    """An interrupt moment: ``delay`` seconds after the rank processes appeared."""
    seen = []

    def condition(work, pid):
        if not seen and ranks_started(pid):
            seen.append(time.perf_counter())
        return bool(seen) and time.perf_counter() - seen[0] >= delay
    return condition, f"{delay} s after the rank processes appeared (Python starting, then MPI)"


def line_count(path):
    return len(path.read_text().splitlines()) if path.exists() else 0


def listing(folder):
    """The names in ``folder`` (a folder's with a slash), or that it was not written."""
    if not folder.is_dir():
        return f"{folder.name}/ not written"
    return ", ".join(sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())) or "empty"


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


# --- reading the docs -------------------------------------------------------------------------------

def fenced_blocks(page):
    """(first line number, info, lines) of every fenced block of ``page``."""
    found, inside = [], None
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            if inside is None:
                inside = (number + 1, line[3:].strip(), [])
            else:
                found.append(inside)
                inside = None
        elif inside is not None:
            inside[2].append(line)
    return found


def doc_lines(tree, page, pattern):
    """The lines of ``tree/page`` matching ``pattern``, as {"source", "lines"} (with line numbers)."""
    text = (tree / page).read_text().splitlines() if (tree / page).exists() else []
    hits = [f"{n}: {line}" for n, line in enumerate(text, 1) if re.search(pattern, line)]
    return {"source": f"{page}, the lines matching `{pattern}`", "lines": hits or ["[none]"]}


def doc_paragraph(tree, page, first):
    """The paragraph of ``tree/page`` from the line matching ``first``, with the fenced block right after it."""
    text = (tree / page).read_text().splitlines()
    at = next((i for i, line in enumerate(text) if re.search(first, line)), None)
    if at is None:
        return {"source": f"{page}: no line matches `{first}`", "lines": ["[none]"]}
    end = next((i for i in range(at, len(text)) if not text[i].strip()), len(text))
    if end + 1 < len(text) and text[end + 1].startswith("```"):
        end = next((i for i in range(end + 2, len(text)) if text[i].startswith("```")), len(text) - 1) + 1
    return {"source": f"{page}:{at + 1}-{end}", "lines": text[at:end]}


def doc_command(tree, page, pattern):
    """The first command shown in a fenced block of ``tree/page`` that matches ``pattern`` (comment cut)."""
    for _, _, lines in fenced_blocks(tree / page):
        for line in lines:
            if re.search(pattern, line) and "-m sphyr_hpc." in line:
                return re.split(r"\s{2,}#", line.removeprefix("$ "))[0].strip()
    return None


WRITES = ("--out", "--fields", "--png", "--json", "--save-density")
COMMAND = re.compile(r"(bin/setup && )?(bin/mpirun|mpirun|srun|\.venv/bin/python|python3?) .*-m sphyr_hpc\.\w+(?!:)\b")


FOLLOWED = ("README.md", "docs/fields.md", "docs/optimize.md")  # the pages defect 9 names, in reading order


def doc_outputs(tree):
    """(page:line, module, paths) of every command the pages FOLLOWED show, in reading order: the paths
    its output options name (score's default out/), a refused command (exit status 2) or one that
    finishes or replaces a run (--resume, --overwrite) left out."""
    found = []
    for page in (tree / name for name in FOLLOWED):
        for start, info, lines in fenced_blocks(page):
            language = info.split()[0] if info else ""
            if language not in ("", "sh", "console"):
                continue  # text, python, jsonl: shown, not run
            for number, line in enumerate(lines, start):
                if language == "console" and not line.startswith("$ "):
                    continue  # what a command prints
                command = line.removeprefix("$ ")
                if not COMMAND.match(command) or re.search(r"#\s*exit status 2|--resume|--overwrite|--help", command):
                    continue
                for part in re.split(r"\s{2,}#", command)[0].split("&&"):
                    module = re.search(r"-m sphyr_hpc\.(\w+)", part)
                    if module is None:
                        continue
                    tokens = part.split()
                    paths = [tokens[i + 1].rstrip("/") for i, t in enumerate(tokens[:-1]) if t in WRITES]
                    if module.group(1) == "score" and "--out" not in tokens:
                        paths.append("out")
                    paths = [p for p in paths if not p.isupper()]
                    if paths:
                        found.append((f"{page.relative_to(tree)}:{number}", module.group(1), paths))
    return found


def doc_clashes(outputs):
    """Each output an earlier command of the docs already wrote (the same path or one inside the other)."""
    seen, clashes = {}, []
    for where, module, paths in outputs:
        for path in paths:
            for other, (first, _) in seen.items():
                if (path == other or path.startswith(other + "/") or other.startswith(path + "/")) and first != where:
                    clashes.append(f"{where} ({module}) writes {path}, which {first} wrote ({other})")
            seen.setdefault(path, (where, module))
    return clashes


def documented_output_lines_not_printed(doc, printed):
    """The lines of a doc's output block that no line the program printed matches (runs of spaces as
    one; the docs test's placeholders {n}, {t:LO-HI} and {*} as any text)."""
    def pattern(line):
        parts = re.split(r"(\{n\}|\{t:[0-9.]+-[0-9.]+\}|\{\*\})", " ".join(line.split()))
        return "".join(".*" if p.startswith("{") and p.endswith("}") else re.escape(p) for p in parts)
    printed = [" ".join(line.split()) for line in printed]
    return [line for line in doc if line.strip() and line.strip() != "..."
            and not any(re.fullmatch(pattern(line), p) for p in printed)]


# --- the twelve -------------------------------------------------------------------------------------

SCORE_LINES = matching(r"records \(", r"of \d+ records", r"^\s+#\s+model", r"^\s+\d+ \S", r"not scored",
                       r"nothing to rank", r"error", r"unparsable", r"^leaderboard:", r"^report:")


def optimize_without_a_size_check(side, tree, work):
    capped = CAPPED if side == "old" else ""
    return {"runs": [run(work, f"{capped}{PYTHON}.optimize --preset mbb --size 10000x10000 --iterations 1"),
                     run(work, f"{capped}{MPIRUN}.optimize --preset mbb --size 10000x10000"),
                     run(work, f"{capped}{PYTHON}.scaling --sizes 10000x10000 --json scaling.json")]}


def two_stories_on_an_interrupt(side, tree, work):
    mid_run = (lambda w, _: line_count(w / "o" / "results.jsonl") >= 10, "when o/results.jsonl held 10 records (mid-run)")
    started = (lambda w, _: (w / "o" / ".sphyr_hpc.lock").exists(),
               "when o/.sphyr_hpc.lock appeared (the start: inputs read, output folder locked)")
    runs = []
    for launcher, moment, env in (
            ("bin/mpirun", mid_run, {}),
            # Open MPI's own mpirun: as root it needs these two; ob1 as bin/mpirun and tests/test_interrupts.py
            ("mpirun", started, {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                                 "OMPI_MCA_pml": "ob1"})):
        shutil.rmtree(work / "o", ignore_errors=True)
        r = run(work, f"{launcher} -n 2 .venv/bin/python -m sphyr_hpc.score --no-store --quiet --out o",
                env=env, interrupt=moment)
        run_json = work / "o" / "run.json"
        r["facts"] = {"o/ after": listing(work / "o"), "o/results.jsonl lines": line_count(work / "o" / "results.jsonl"),
                      "run.json finished": json.loads(run_json.read_text()).get("finished") if run_json.exists() else None}
        runs.append(r)
    score = "bin/mpirun -n 2 .venv/bin/python -m sphyr_hpc.score --no-store --quiet --out o"
    # The docs' own command (the signal after 4 s), then signals at start-up (imports, MPI starting)
    shutil.rmtree(work / "o", ignore_errors=True)
    runs.append(run(work, f"timeout --preserve-status -s INT 4 {score}", SCORE_LINES))
    for delay in STARTUP_DELAYS:
        shutil.rmtree(work / "o", ignore_errors=True)
        runs.append(run(work, score, SCORE_LINES, interrupt=ranks_running_for(delay)))
    return {"runs": runs, "docs": [doc_paragraph(tree, "docs/score.md", r"^\*\*Interrupts\.\*\*|SIGINT or SIGTERM on any rank"),
                                   doc_paragraph(tree, "docs/score.md", r"^\*\*A bare `mpirun`\.\*\*")]}


def a_dataset_that_is_a_json_array(side, tree, work):
    records = [json.loads(line) for line in (tree / FULL_EASY).read_text().splitlines()[:3]]
    (work / "array_dataset.json").write_text(json.dumps(records))
    runs = []
    for command, out in (
            (f"{MPIRUN}.score --dataset array_dataset.json --completions examples/completions/my-model.jsonl --out out/",
             "out"),
            (f"{MPIRUN}.score array_dataset.json --out out-path/", "out-path")):
        r = run(work, command, SCORE_LINES)
        r["facts"] = {f"{out}/ after": listing(work / out)}
        errors = [rec.get("error") for rec in jsonl(work / out / "results.jsonl") if rec.get("error")]
        if errors:
            r["facts"][f"{out}/results.jsonl"] = f"{len(errors)} records with an error, the first: {errors[0]}"
        runs.append(r)
    return {"runs": runs, "setup": "array_dataset.json: the first 3 records of examples/data/v1/full_easy.jsonl as one JSON array"}


def summary_counts(work, out, model):
    entry = json.loads((work / out / "summary.json").read_text()).get(model, {}) if (work / out / "summary.json").exists() else {}
    return {subject: {k: v[k] for k in ("count", "errors", "answered", "missing", "unparsable", "excluded") if k in v}
            for subject, v in entry.items()} or "summary.json not written"


def completions_naming_no_record(side, tree, work):
    truth = json.loads((tree / FULL_EASY).read_text().splitlines()[0])["ground_truth"]
    (work / "bad_indices.jsonl").write_text("".join(json.dumps({"index": i, "completion": truth}) + "\n"
                                                    for i in (999, -1, "abc")))
    r = run(work, f"{MPIRUN}.score --dataset {FULL_EASY} --completions bad_indices.jsonl --out out/", SCORE_LINES)
    r["facts"] = {"summary.json, model bad_indices": summary_counts(work, "out", "bad_indices")}
    return {"runs": [r], "setup": "bad_indices.jsonl: 3 lines, index 999, -1 and \"abc\", each completed with record 0's ground truth"}


def an_empty_completions_file(side, tree, work):
    (work / "empty.jsonl").write_text("")
    r = run(work, f"{MPIRUN}.score --dataset {FULL_EASY} --completions empty.jsonl --out out/", SCORE_LINES)
    r["facts"] = {"out/ after": listing(work / "out")}
    return {"runs": [r], "setup": "empty.jsonl: an empty file"}


def validate_docs_against_validate(side, tree, work):
    # a store, empty, as the doc's session has (its last line names it)
    r = run(work, f"{MPIRUN}.validate --dataset {FULL_EASY} --samples 20", env={"SPHYR_HPC_STORE": "store"})
    block = next((lines for _, _, lines in fenced_blocks(tree / "docs/validate.md")
                  if any(line.startswith("completion") for line in lines)), [])
    shown = [line for line in block if not line.startswith(("$ ", "bin/mpirun"))]
    printed = r["stdout"].get("all", r["stdout"]["lines"]) + r["stderr"].get("all", r["stderr"]["lines"])
    r["facts"] = {"lines of the doc's block that the program does not print":
                  documented_output_lines_not_printed(shown, printed) or "none"}
    return {"runs": [r], "docs": [{"source": "docs/validate.md, the block of what validate prints", "lines": shown},
                                  doc_lines(tree, "docs/validate.md", r"volume_")]}


def validate_help_against_its_doc(side, tree, work):
    r = run(work, f"{PYTHON}.validate --help", options("--hard"))
    return {"runs": [r], "docs": [doc_lines(tree, "docs/validate.md", r"file name|0\.0, 0\.2")]}


def times_the_docs_promise(side, tree, work):
    r = run(work, f"{MPIRUN}.certify --dataset examples/data/v1/3_random_row_easy.jsonl --samples 6 "
                  f"--node-budget 2000 --out cert/", matching(r"^3_random_row_easy", r"samples on \d+ rank"))
    measured = tree / "benchmarks/results/long_runs.json"
    if measured.exists():
        runs = json.loads(measured.read_text())["runs"]
        r["facts"] = {f"{tree.name}/benchmarks/results/long_runs.json": {
            name: f"{v['seconds']} s on {v['date']}, load average before {[round(x, 1) for x in v['loadavg_before']]}, "
                  f"after {[round(x, 1) for x in v['loadavg_after']]}" for name, v in sorted(runs.items())}}
    else:
        r["facts"] = {"benchmarks/results/long_runs.json": "not in this checkout"}
    return {"runs": [r], "docs": [doc_paragraph(tree, "README.md", r"How long the long runs take"),
                                  doc_paragraph(tree, "docs/certify.md", r"^On those first 6 samples")]}


def my_answers(tree, work):
    """The README's my-answers.jsonl, as its block shows it."""
    block = next((lines for _, info, lines in fenced_blocks(tree / "README.md") if info.endswith("my-answers.jsonl")), [])
    (work / "my-answers.jsonl").write_text("".join(line + "\n" for line in block))


def docs_followed_in_order_collide(side, tree, work):
    my_answers(tree, work)
    outputs = doc_outputs(tree)
    runs = []
    for page, pattern in (("README.md", r"--out out-fields/"), ("docs/fields.md", r"sphyr_hpc\.score")):
        command = doc_command(tree, page, pattern)
        if command is None:
            continue
        r = run(work, command, SCORE_LINES)
        r["facts"] = {"from": page, "the folder after": listing(work)}
        runs.append(r)
    return {"runs": runs, "docs": [
        {"source": f"the outputs each command of {', '.join(FOLLOWED)} names, in that order (score's default out/)",
         "lines": [f"{where} {module}: {', '.join(paths)}" for where, module, paths in outputs]},
        {"source": "the outputs an earlier documented command already wrote",
         "lines": doc_clashes(outputs) or ["none"]}]}


def score_help(side, tree, work):
    return {"runs": [run(work, f"{PYTHON}.score --help", options("--report", "--store")),
                     run(work, f"{PYTHON}.score --datset {FULL_EASY}")]}


def where_the_best_and_worst_completions_are(side, tree, work):
    my_answers(tree, work)
    command = doc_command(tree, "README.md", r"--out out-mine/")
    runs = [run(work, command, SCORE_LINES), run(work, f"{PYTHON}.report out-mine/")]
    pages = sorted(p.name for p in (work / "out-mine" / "report").glob("*.html"))
    pictures = sorted(p.name for p in (work / "out-mine" / "report").glob("*.png"))
    runs[1]["facts"] = {"out-mine/report/": f"{len(pages)} page(s) {pages}, {len(pictures)} picture(s) {pictures}"}
    return {"runs": runs, "docs": [doc_lines(tree, "README.md", r"best and worst")]}


def unparsable_told(page):
    """What a report page tells of unparsable cells: its table columns named so and its other sentences
    naming them (the failure category unfilled_or_unparsable aside)."""
    if not page.exists():
        return "not written"
    raw = re.sub(r"<(style|script)\b.*?</\1>", " ", page.read_text(), flags=re.S).replace("<wbr>", "")
    text = html.unescape(re.sub(r"<[^>]+>", " ", raw))
    parts = (" ".join(part.split()) for part in re.split(r"(?<=[.;])\s+|\s{3,}", text))
    sentences = [part for part in parts if re.search(r"(?<!or_)unparsable", part) and "answered missing" not in part]
    return [f"{raw.count('<th>unparsable</th>')} table column(s) headed unparsable"] + sentences


def unparsable_cells_said_nowhere(side, tree, work):
    records = [json.loads(line) for line in (tree / "examples/data/v1/full_hard.jsonl").read_text().splitlines()[:3]]
    (work / "full_hard.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    completions = []
    for record, bad in zip(records, ("nan", "inf", None)):
        grid = [list(row) for row in record["ground_truth"]]
        if bad:  # the first masked cell the answer leaves void
            i, j = next((i, j) for i, row in enumerate(record["input_grid"]) for j, cell in enumerate(row)
                        if cell == "V" and float(grid[i][j]) == 0.0)
            grid[i][j] = bad
        completions.append(json.dumps({"index": record["index"], "completion": grid}) + "\n")
    (work / "nan-model.jsonl").write_text("".join(completions))
    r = run(work, f"{MPIRUN}.score --dataset full_hard.jsonl --completions nan-model.jsonl --out out/", SCORE_LINES)
    r["facts"] = {
        "results.jsonl": [f"index {rec['index']}: failure {rec.get('failure')}, topology_score {rec.get('topology_score')}"
                          for rec in jsonl(work / "out" / "results.jsonl")],
        "summary.json, model nan-model": summary_counts(work, "out", "nan-model"),
        **{f"out/{page}": unparsable_told(work / "out" / page) for page in ("report.html", "report/nan-model.html")}}
    return {"runs": [r], "setup": "full_hard.jsonl: the first 3 records of examples/data/v1/full_hard.jsonl; "
                                  "nan-model.jsonl: their ground truths, with the first masked cell the answer leaves "
                                  "void written nan (record 0) and inf (record 1), record 2 unchanged"}


ITEMS = [
    (1, "optimize and scaling estimate no memory",
     "`optimize --preset mbb --size 10000x10000 --iterations 1` printed the load average, then the kernel killed it "
     "for memory at 24 GB with no word; `optimize` and `scaling` estimate nothing.",
     "exit 2 within 3 s with an estimate, on 1 and 2 ranks", optimize_without_a_size_check),
    (2, "an interrupt prints two stories",
     "exit 130 and the right message, then OpenMPI's `MPI_ABORT was invoked on rank 0 ...` banner (or an "
     "`ORTE_ERROR_LOG` line); docs/score.md promises one message.",
     "one message, no banner; the bare mpirun as docs/score.md describes it (also run here: the docs' own "
     "command, whose signal comes after 4 s, and signals at start-up)", two_stories_on_an_interrupt),
    (3, "a dataset that is a JSON array",
     "`--dataset array_dataset.json` gave `...:1: a record must be a JSON object, not list`, one `index N is not in "
     "...` line per completion, exit 1, and a leaderboard and report still written; as a result PATH it was read as "
     "3 records each `missing field 'completion'`.",
     "one usage line, exit 2, nothing written", a_dataset_that_is_a_json_array),
    (4, "completion indices not in the dataset",
     "999, -1 and \"abc\" against the 29-record full_easy: `31 records (0 scored, 29 without a completion, 2 errors)`, "
     "`29 of 31 records`; summary.json called them `excluded`; \"abc\" named on stderr and counted nowhere; lines "
     "start with `error:` and print in reverse order.",
     "29 records; the 3 lines named in file order and counted, not records", completions_naming_no_record),
    (5, "an empty completions file",
     "a full leaderboard row of 0.000, `29 records (0 scored, 29 without a completion ...)`, exit 1; nothing said "
     "the file holds no completion.", "one line saying the file holds no completion", an_empty_completions_file),
    (6, "docs/validate.md shows output validate no longer prints",
     "the doc showed `full_easy: 6 samples`, columns `stiffness ... volume`, a last line `Reference optimiser beaten "
     "by the dataset answer on 0/6`, and listed `volume_fraction` where the table shows the volume ratio.",
     "the doc's block is what the program prints", validate_docs_against_validate),
    (7, "validate --help and its doc disagree",
     "the help said hard probes apply \"when the file name ends with 'hard'\", the doc \"a file name containing "
     "`hard`\"; the help said \"one-decimal densities\", the doc listed 0.0/0.2/0.5/0.7/1.0.",
     "one rule and one list of densities in both", validate_help_against_its_doc),
    (8, "the times the docs promise are 3-10x off",
     "README's 300x100 MBB (\"3.5-4 min\") took 66 s; the 320x320 upscaled sample (\"about 7 min\") about 45 s; "
     "certify (\"about 20 s\") 1.9 s.", "times that hold, each naming where it comes from", times_the_docs_promise),
    (9, "following the docs in order collides",
     "docs/fields.md's `score ... --out out-fields/ --fields fields/` was refused because the README's earlier run "
     "wrote `out-fields/`; docs/optimize.md's `--fields out/history` wrote a 131 MB history into the quick start's `out/`.",
     "no documented command writes where an earlier one wrote", docs_followed_in_order_collide),
    (10, "score --help",
     "`--report` said \"write DIR/report.html\" (the option is `--out`); the `--store` default text was garbled; "
     "`--datset` got `unrecognized arguments` with no \"did you mean --dataset\".",
     "OUT in --report's help, one default for --store, a suggestion for --datset", score_help),
    (11, "where the best and worst completions are",
     "README said report.html holds each model's best and worst completions (they are on `report/<model>.html`); "
     "`report out-mine/` printed `(3 pages and pictures in out-mine/report)` for 2 pages.",
     "the README names report/<model>.html; report counts pages and pictures apart",
     where_the_best_and_worst_completions_are),
    (12, "a NaN or inf cell is said nowhere",
     "a NaN or inf cell in a hard completion got `failure: unfilled_or_unparsable` and `topology_score 1.0`, counted "
     "fully in the mean, and nothing in the leaderboard or report told the user.",
     "an `unparsable` count per model", unparsable_cells_said_nowhere),
]


# --- the results -------------------------------------------------------------------------------------

def run_block(r):
    """A run as a console transcript: the command, its stderr and stdout as picked, its status."""
    env = " ".join(f"{k}={v}" for k, v in r["env"].items())
    lines = [f"$ {env + ' ' if env else ''}{r['command']}"]
    if r["signal"]:
        lines.append(f"# signal: {r['signal']}")
    for stream in ("stderr", "stdout"):
        if r[stream]["lines"]:
            lines += [f"# {stream}, {r[stream]['how']}:", *r[stream]["lines"]]
        else:
            lines.append(f"# {stream}: nothing")
    lines.append(f"# exit status {r['status']}, {r['seconds']} s")
    return ["```text", *lines, "```"]


def fact_lines(facts):
    out = []
    for name, value in facts.items():
        if isinstance(value, list):
            out += [f"- {name}:"] + [f"  - {v}" for v in value]
        elif isinstance(value, dict):
            out += [f"- {name}:"] + [f"  - {k}: {v}" for k, v in value.items()]
        else:
            out.append(f"- {name}: {value}")
    return out


def markdown(report):
    trees = report["checkouts"]
    lines = ["# Issue 42, a new user's first hour: the 12 commands, before and after", "",
             f"`{report['command']}`: old = {trees['old']['commit']} (`{trees['old']['path']}`), new = "
             f"{trees['new']['commit']} (`{trees['new']['path']}`).", "",
             "Each command is run as typed from a checkout, in a fresh temporary folder per defect and checkout "
             "holding links to the checkout's `bin`, `.venv` and `examples` (outputs land in the folder), with "
             "`SPHYR_HPC_STORE=none` and `COLUMNS=100`. stderr is shown whole (its ends when long), stdout as "
             "picked (the rule is given with each). Defect 1's old runs are capped: "
             f"`{CAPPED.strip()}` ({CAP_BYTES // 2**30} GiB of address space a process, 2 minutes); uncapped, "
             "the issue reports, the old run grows until the kernel kills it at 24 GB with no word. "
             "(`+` after a commit: the checkout's uncommitted changes on top of it.)", "",
             machine_line(report["machine"]), "",
             "| # | defect | old: exit status (seconds) | new: exit status (seconds) |", "|---|---|---|---|"]
    for item in report["items"]:
        cells = [", ".join(f"{r['status']} ({r['seconds']})" for r in item[side]["runs"]) for side in ("old", "new")]
        lines.append(f"| {item['n']} | {item['title']} | {cells[0]} | {cells[1]} |")
    for item in report["items"]:
        lines += ["", f"## {item['n']}. {item['title']}", "", f"The issue: {item['issue']}", "",
                  f"Asked of the fix: {item['asked']}."]
        if item.get("setup"):
            lines += ["", f"Inputs made in the folder: {item['setup']}."]
        for side in ("old", "new"):
            lines += ["", f"### {side} ({trees[side]['commit']})"]
            for doc in item[side].get("docs", []):
                fence = "````" if any(line.startswith("```") for line in doc["lines"]) else "```"
                lines += ["", f"{doc['source']}:", "", f"{fence}text", *doc["lines"], fence]
            for r in item[side]["runs"]:
                lines += ["", *run_block(r)]
                if r["facts"]:
                    lines += ["", *fact_lines(r["facts"])]
    return "\n".join(lines) + "\n"


def checkout(path):
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=path, capture_output=True,
                           text=True).stdout.strip()
    return {"path": str(path), "commit": commit_of(path) + ("+" if dirty else "")}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--old", required=True, help="the checkout before the fixes (its bin/setup run)")
    parser.add_argument("--new", default=str(ROOT), help="the checkout with the fixes")
    parser.add_argument("--only", type=int, nargs="+", default=[n for n, *_ in ITEMS], help="defects to run")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "first_hour_before_after.json"))
    args = parser.parse_args(argv)
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    load_before = os.getloadavg()
    items = []
    with tempfile.TemporaryDirectory(prefix="sphyr_first_hour_") as parent:
        for n, title, issue, asked, make in ITEMS:
            if n not in args.only:
                continue
            item = {"n": n, "title": title, "issue": issue, "asked": asked}
            for side, tree in trees.items():
                result = make(side, tree, workspace(tree, Path(parent), f"{n}-{side}"))
                item["setup"] = result.pop("setup", None)
                item[side] = result
                print(f"{n} {side}: " + ", ".join(f"{r['status']} ({r['seconds']} s)" for r in result["runs"]), flush=True)
            items.append(item)
    report = {"date": now(), "machine": machine(load_before),
              "command": " ".join([sys.executable, "benchmarks/first_hour_before_after.py", *(argv or sys.argv[1:])]),
              "checkouts": {side: checkout(tree) for side, tree in trees.items()}, "items": items}
    write_results(args.out, report, markdown(report))


if __name__ == "__main__":
    main()
