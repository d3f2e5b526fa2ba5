"""SPhyR's prompts and the Inspect AI task, counted: what issue 40 must show, as measured.

1. Prompts.  ``python -m sphyr_hpc.prompts`` on examples/data/v1 and examples/data/v2_20: the lines
   written, and how many quote their record's input grid (the grid read back out of the prompt) with
   the fill instruction of the subject's difficulty.  Every stored prompt (the result records of
   examples/results, of shared/data/sphyr/results and of shared/data/sphyr/upscaled/results) is
   looked up among those dataset records by subject and the input grid it quotes, and by subject
   and ground truth.  Then each stored record is made a dataset record of its own (the grid its
   prompt quotes, its ground truth; one dataset file per folder, model and subject), and the prompts
   command's line for it is compared with the stored prompt byte for byte.
2. The ground truth as the answers.  Inspect's ``eval()`` runs the task ``sphyr_hpc/sphyr`` on all of
   v1/full_easy with ``mockllm/model`` answering each prompt with its record's ground truth
   (``custom_outputs``: the ``inspect`` command cannot give mockllm answers).  Each sample's score
   against ``score --completions``'s ``topology_score`` of the same text, and the results.jsonl of
   ``score --inspect-log`` on the log against that of ``score --completions``, byte for byte (cmp).
3. The ``inspect`` command: ``inspect eval sphyr_hpc/sphyr --model mockllm/model`` on all of
   v1/full_easy from a folder outside the checkout (tiktoken's o200k_base from .venv/share/tiktoken,
   bin/setup --test): every answer is mockllm's one sentence; the same comparisons.
4. One sample's score and metadata as the log's JSON holds them (a .eval log is a zip of JSON files).
5. ``inspect view`` on 127.0.0.1 and headless Chromium, driven through its DevTools protocol (the
   viewer fetches the sample after the page has loaded, and ``chromium --screenshot`` does not wait
   for it): the scoring tab of one sample of run 2, its text checked for the score and the metadata
   names, saved as inspect_view_sample.png.  The viewer and Chromium are stopped afterwards.
6. numpy, petsc4py and mpi4py: Debian's packages, a venv with no extras (before) and .venv with the
   Inspect extra (after), each with the folder it imports them from; ``pip check`` in .venv.

    .venv/bin/python benchmarks/inspect_evidence.py [--port 7575]

Results: ``benchmarks/results/inspect_evidence.{json,md}`` and ``inspect_view_sample.png``.
"""

import argparse
import asyncio
import base64
import filecmp
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

from _common import ROOT, SPHYR_DATA, commit_of, machine, machine_line, now, write_results

from sphyr_hpc.core import grid as grids
from sphyr_hpc.core.prompt import EASY_FILL, HARD_FILL

PYTHON = ROOT / ".venv" / "bin" / "python"
DATA = ROOT / "examples" / "data"
DATASET = DATA / "v1" / "full_easy.jsonl"
MODEL = "mockllm/model"
STORED = {"examples/results": ROOT / "examples" / "results", "shared/data/sphyr/results": SPHYR_DATA / "results",
          "shared/data/sphyr/upscaled/results": SPHYR_DATA / "upscaled" / "results"}
METADATA = ("load_carrying", "structural_efficiency", "material_efficiency", "exact_match", "failure")
O200K = ROOT / ".venv" / "share" / "tiktoken" / "fb374d419588a4632f3f557e76b4b70aebbca790"
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}  # this process's MPI is not theirs


def run(argv, cwd=ROOT, env=None):
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env or ENV, capture_output=True, text=True,
                          timeout=1800)


def lines_of(path):
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def grid_key(grid):
    return tuple(map(tuple, grid))


# 1. prompts ---------------------------------------------------------------------------------------

def bundled_prompts(work):
    """The prompts command on v1 and v2_20: lines, and how many quote their record as they should."""
    found, records = {}, {}
    for version in ("v1", "v2_20"):
        out = work / f"{version}.prompts.jsonl"
        done = run([PYTHON, "-m", "sphyr_hpc.prompts", DATA / version, "--out", out])
        lines = lines_of(out)
        ok = 0
        for line in lines:
            record = next(r for r in lines_of(DATA / version / line["dataset"]) if r["index"] == line["index"])
            records[(version, line["subject"], line["index"])] = record
            hard = line["subject"].endswith("_hard")
            ok += (grids.prompt_input_grid(line["prompt"]) == record["input_grid"]
                   and line["prompt"].count(HARD_FILL if hard else EASY_FILL) == 2)
        found[version] = {"status": done.returncode, "printed": done.stdout.strip(), "lines": len(lines),
                          "quoting_their_record_with_the_subjects_fill": ok,
                          "datasets": len({line["dataset"] for line in lines})}
    return found, records


def stored_records():
    """(folder label, model, subject, record) of every stored result record, in file order."""
    for label, folder in STORED.items():
        for path in sorted(folder.glob("*/*.json")):
            for record in json.loads(path.read_text(encoding="utf-8")):
                yield label, path.parent.name, path.stem, record


def stored_prompts(work, records):
    """Every stored prompt: matched to a bundled record, and the prompts command on its own record."""
    by_input, by_truth = {}, {}
    for (version, subject, index), record in records.items():
        by_input.setdefault((subject, grid_key(record["input_grid"])), []).append((version, index))
        by_truth.setdefault((subject, grid_key(record["ground_truth"])), []).append((version, index))
    folders = {label: {"records": 0, "matched_by_subject_and_input_grid": 0, "matched_by_subject_and_ground_truth": 0,
                       "truth_matches": [], "own_record_prompts_equal": 0, "sphyr_template": 0}
               for label in STORED}
    stored, dataset_root = {}, work / "own"
    for label, model, subject, record in stored_records():
        entry = folders[label]
        entry["records"] += 1
        quoted = grids.prompt_input_grid(record["prompt"])
        truth = grids.as_grid(record["ground_truth"])
        entry["sphyr_template"] += record["prompt"].startswith("You are given a structural material distribution")
        entry["matched_by_subject_and_input_grid"] += (subject, grid_key(quoted)) in by_input
        hits = by_truth.get((subject, grid_key(truth)), [])
        if hits:
            entry["matched_by_subject_and_ground_truth"] += 1
            version, index = hits[0]
            mask = records[(version, subject, index)]["input_grid"]
            entry["truth_matches"].append({
                "stored": f"{model}/{subject}.json", "dataset_record": f"{version}/{subject}.jsonl index {index}",
                "input_cells_differing": sum(a != b for ra, rb in zip(mask, quoted) for a, b in zip(ra, rb))})
        folder = dataset_root / label.replace("/", "_") / model
        folder.mkdir(parents=True, exist_ok=True)
        index = sum(1 for key in stored if key[:3] == (label, model, subject))
        with open(folder / f"{subject}.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"index": index, "input_grid": quoted, "ground_truth": truth}) + "\n")
        stored[(label, model, subject, index)] = record["prompt"]
    for label in STORED:
        for folder in sorted((dataset_root / label.replace("/", "_")).iterdir()):
            out = work / f"own-{label.replace('/', '_')}-{folder.name}.jsonl"
            run([PYTHON, "-m", "sphyr_hpc.prompts", folder, "--out", out])
            for line in lines_of(out):
                prompt = stored[(label, folder.name, line["subject"], line["index"])]
                folders[label]["own_record_prompts_equal"] += line["prompt"].encode() == prompt.encode()
    same_files = sum(filecmp.cmp(path, STORED["shared/data/sphyr/results"] / path.relative_to(STORED["examples/results"]),
                                 shallow=False)
                     for path in STORED["examples/results"].glob("*/*.json"))
    return {"folders": folders, "example_files_identical_to_shared": same_files,
            "example_files": len(list(STORED["examples/results"].glob("*/*.json")))}


# 2-4. Inspect ---------------------------------------------------------------------------------------

def ground_truth_log(log_dir):
    """Inspect's eval() of sphyr_hpc/sphyr on DATASET, mockllm answering with each record's ground truth."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from sphyr_hpc.inspect.task import samples_of

    truths = {r["index"]: grids.grid_to_text(r["ground_truth"]) for r in lines_of(DATASET)}
    by_prompt = {sample.input: truths[sample.id] for sample in samples_of(DATASET)}

    def answer(messages, tools, tool_choice, config):
        output = ModelOutput.from_content(model=MODEL, content=by_prompt[messages[-1].text])
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # no token counting
        return output

    started = time.perf_counter()
    log = inspect_eval("sphyr_hpc/sphyr", model=get_model(MODEL, custom_outputs=answer), log_dir=str(log_dir),
                       task_args={"dataset": str(DATASET), "store": "none"}, display="none")[0]
    return Path(log.location), round(time.perf_counter() - started, 1)


def command_log(log_dir, elsewhere):
    """``inspect eval sphyr_hpc/sphyr --model mockllm/model`` on DATASET from a folder outside the checkout."""
    started = time.perf_counter()
    done = run([ROOT / ".venv" / "bin" / "inspect", "eval", "sphyr_hpc/sphyr", "--model", MODEL, "--log-dir", log_dir,
                "-T", f"dataset={DATASET}", "-T", "store=none", "--display", "none"], cwd=elsewhere,
               env={**ENV, "TIKTOKEN_CACHE_DIR": str(O200K.parent), "PWD": str(elsewhere)})
    seconds = round(time.perf_counter() - started, 1)
    if done.returncode != 0:
        raise SystemExit(f"inspect eval exited {done.returncode}:\n{done.stderr[-3000:]}")
    (log,) = Path(log_dir).glob("*.eval")
    return log, seconds


def compared(log_file, work, name):
    """A log's samples against ``score --completions`` on the same answers, and cmp of the results."""
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_file))
    completions = work / f"{name}.completions.jsonl"
    completions.write_text("".join(json.dumps({"index": s.id, "completion": s.output.completion}) + "\n"
                                   for s in log.samples), encoding="utf-8")
    common = ["--no-store", "--quiet", "--no-report"]
    by_completions = run([PYTHON, "-m", "sphyr_hpc.score", "--dataset", DATASET, "--completions", completions,
                          "--model", MODEL, "--out", work / f"{name}-completions", *common])
    by_log = run([PYTHON, "-m", "sphyr_hpc.score", "--inspect-log", log_file, "--out", work / f"{name}-log", *common])
    rows = {r["index"]: r for r in lines_of(work / f"{name}-completions" / "results.jsonl")}
    from_log = {r["index"]: r for r in lines_of(work / f"{name}-log" / "results.jsonl")}
    gaps = [abs(s.scores["topology_score"].value - rows[s.id]["topology_score"]) for s in log.samples]
    log_gaps = [abs(from_log[i]["topology_score"] - rows[i]["topology_score"]) for i in rows]
    same = filecmp.cmp(work / f"{name}-completions" / "results.jsonl", work / f"{name}-log" / "results.jsonl",
                       shallow=False)
    values = [s.scores["topology_score"].value for s in log.samples]
    return {"log": log_file.name, "status": log.status, "task": log.eval.task, "samples": len(log.samples),
            "distinct_answers": len({s.output.completion for s in log.samples}),
            "inspect_metrics": {k: m.value for k, m in log.results.scores[0].metrics.items()},
            "topology_score_min_max": [min(values), max(values)],
            "score_completions_status": by_completions.returncode, "score_inspect_log_status": by_log.returncode,
            "max_abs_inspect_minus_score": max(gaps), "max_abs_inspect_log_minus_completions": max(log_gaps),
            "results_jsonl_rows": len(rows), "results_jsonl_identical_cmp": same}


def sample_json(log_file, sample_id):
    """One sample's topology_score as the log's own JSON holds it (the zip member of the sample)."""
    with zipfile.ZipFile(log_file) as log:
        (member,) = [n for n in log.namelist() if n == f"samples/{sample_id}_epoch_1.json"]
        sample = json.loads(log.read(member))
    return member, sample["scores"]["topology_score"], sample["metadata"]


# 5. inspect view -------------------------------------------------------------------------------------

def wait_for(url, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.read()
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer in {seconds} s")


async def devtools_screenshot(port, url, png, needles, seconds=90):
    """Chromium (DevTools on ``port``) opens ``url`` at 1400x1000; once the page's text holds every
    needle (or after ``seconds``), a PNG of it.  Returns the page's text and the seconds it took."""
    import aiohttp

    (page,) = [t for t in json.loads(wait_for(f"http://127.0.0.1:{port}/json/list")) if t["type"] == "page"]
    async with aiohttp.ClientSession() as http, http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
        numbers = itertools.count(1)

        async def call(method, **params):
            number = next(numbers)
            await ws.send_json({"id": number, "method": method, "params": params})
            async for message in ws:
                reply = json.loads(message.data)
                if reply.get("id") == number:
                    return reply.get("result", {})
            raise SystemExit("Chromium closed its DevTools connection")

        await call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)
        await call("Page.navigate", url=url)
        started = time.monotonic()
        deadline, text = started + seconds, ""
        while time.monotonic() < deadline:
            result = await call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''",
                                returnByValue=True)
            text = result.get("result", {}).get("value", "")
            if all(needle in text for needle in needles):
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)  # the last rows painted
        shot = await call("Page.captureScreenshot", format="png")
        png.write_bytes(base64.b64decode(shot["data"]))
        return text, round(time.monotonic() - started, 1)


def viewer_screenshot(log_file, sample_id, png, port, work):
    """inspect view of the log's folder, and Chromium's picture of one sample's scoring tab."""
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
        raise SystemExit(f"something already answers on 127.0.0.1:{port}: give another --port")
    except OSError:
        pass
    viewer = subprocess.Popen([str(ROOT / ".venv" / "bin" / "inspect"), "view", "--log-dir", str(log_file.parent),
                               "--port", str(port), "--host", "127.0.0.1"], env=ENV, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    browser = None
    try:
        wait_for(f"http://127.0.0.1:{port}/")
        if viewer.poll() is not None:
            raise SystemExit(f"inspect view exited {viewer.returncode}")
        url = f"http://127.0.0.1:{port}/#/logs/{log_file.name}/samples/sample/{sample_id}/1/scoring"
        devtools = port + 1
        browser = subprocess.Popen(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                                    f"--remote-debugging-port={devtools}", f"--user-data-dir={work / 'chromium'}",
                                    "--window-size=1400,1000", "about:blank"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        needles = ("topology_score", *METADATA[:3], "failure")
        text, waited = asyncio.run(devtools_screenshot(devtools, url, png, needles))
    finally:
        for process in (browser, viewer):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)
    size = png.stat().st_size
    if size > 300_000:  # small enough to commit
        from PIL import Image

        Image.open(png).convert("RGB").quantize(colors=64).save(png, optimize=True)
    return {"url": url.replace(f"127.0.0.1:{port}", "127.0.0.1:PORT"), "png_bytes": png.stat().st_size,
            "seconds_until_the_page_held_them": waited,
            "page_text_holds": {needle: needle in text for needle in needles},
            "page_text": text.strip().splitlines()[:60]}


# 6. versions ------------------------------------------------------------------------------------------

# petsc4py found the package's way (Debian keeps it off sys.path: sphyr_hpc/runtime/petsc.py)
VERSIONS = ("import json, importlib.util as u\n"
            "from sphyr_hpc.runtime.petsc import missing_requirements\n"
            "assert not missing_requirements()\n"
            "import numpy, petsc4py, mpi4py\n"
            "print(json.dumps({m.__name__: [m.__version__, m.__file__.rsplit('/', 2)[0]] for m in (numpy, petsc4py, mpi4py)}"
            " | {'inspect_ai': bool(u.find_spec('inspect_ai'))}))")


def versions(work):
    debian = run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", "python3-numpy", "python3-petsc4py-real",
                  "python3-petsc4py", "python3-mpi4py"]).stdout.split("\n")
    bare = work / "venv-no-extras"
    run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", bare])
    # sphyr_hpc from the checkout (PYTHONPATH) for its petsc4py finder: nothing is installed in this venv
    before = json.loads(run([bare / "bin" / "python", "-c", VERSIONS], cwd=work, env={**ENV, "PYTHONPATH": str(ROOT)}).stdout)
    after = json.loads(run([PYTHON, "-c", VERSIONS], cwd=work).stdout)
    check_before = run([bare / "bin" / "python", "-m", "pip", "check"])
    check = run([PYTHON, "-m", "pip", "check"])
    inspect_version = run([PYTHON, "-c", "import inspect_ai; print(inspect_ai.__version__)"]).stdout.strip()
    return {"debian_packages": [line for line in debian if line.strip()], "venv_without_extras": before,
            "dot_venv_with_inspect_extra": after, "inspect_ai": inspect_version,
            "pip_check": (check.stdout + check.stderr).strip(), "pip_check_status": check.returncode,
            "pip_check_without_extras": (check_before.stdout + check_before.stderr).strip(),
            "pip_check_without_extras_status": check_before.returncode}


# the report ------------------------------------------------------------------------------------------

def markdown(report):
    p, gt, cli, meta, view, v = (report[k] for k in ("prompts", "ground_truth_run", "command_run", "sample_json",
                                                     "inspect_view", "versions"))
    score = meta["score"]
    out = ["# SPhyR's prompts and the Inspect AI task, counted", "",
           f"`.venv/bin/python benchmarks/inspect_evidence.py` at {report['commit']}, {report['date']}; "
           f"inspect-ai {v['inspect_ai']}. {machine_line(report['machine'])}", "",
           "## The prompts", "",
           "`python -m sphyr_hpc.prompts` on the bundled dataset prefixes:", "",
           "| datasets | files | lines written | quoting their record's input grid, with the subject's fill |",
           "|---|---|---|---|"]
    for version, r in p["bundled"].items():
        out.append(f"| examples/data/{version} | {r['datasets']} | {r['lines']} | "
                   f"{r['quoting_their_record_with_the_subjects_fill']} |")
    out += ["", "The stored prompts, looked up among those records and written again from their own records:", "",
            "| stored result records | records | SPhyR's template | same subject and input grid in v1/v2_20 | "
            "same subject and ground truth | prompts command on its own record, equal byte for byte |",
            "|---|---|---|---|---|---|"]
    for label, r in p["stored"]["folders"].items():
        out.append(f"| {label} | {r['records']} | {r['sphyr_template']} | {r['matched_by_subject_and_input_grid']} | "
                   f"{r['matched_by_subject_and_ground_truth']} | {r['own_record_prompts_equal']} |")
    matches = [m for r in p["stored"]["folders"].values() for m in r["truth_matches"]]
    out += ["", f"No stored prompt is the prompt of a bundled record: the result records are other samples of "
            f"the same subjects (0 share a subject and input grid). {len(matches)} share a subject and ground truth "
            f"with one, under another mask ("
            + "; ".join(f"{m['stored']} and {m['dataset_record']}: {m['input_cells_differing']} input cells differ"
                        for m in matches[:2])
            + "), so no prompt of a bundled record can be compared with a stored one byte for byte. What can be: "
            "each stored record made a dataset record of its own (the grid its prompt quotes, its ground truth) "
            "gives back its stored prompt byte for byte through the prompts command, for every record whose "
            "prompt is SPhyR's template. The upscaled records' prompts are not: they hold only the grid "
            "between the template's two grid lines (\"Below is the input grid with masked regions:\" ... "
            f"\"Please output the completed grid.\"). {p['stored']['example_files_identical_to_shared']} of the "
            f"{p['stored']['example_files']} files of examples/results are byte for byte those of "
            "shared/data/sphyr/results: the 288 records there are 144 prompts twice.", "",
            "## The ground truth as the answers (Inspect's eval(), mockllm/model with custom_outputs)", ""]
    rows = [("run", "ground truth, eval()", "mockllm's sentence, `inspect eval sphyr_hpc/sphyr`")]
    for key, label in (("samples", "samples"), ("distinct_answers", "distinct answers"), ("status", "Inspect status"),
                       ("topology_score_min_max", "topology_score min, max"),
                       ("max_abs_inspect_minus_score", "max abs(Inspect score - score's topology_score)"),
                       ("max_abs_inspect_log_minus_completions",
                        "max abs(--inspect-log's topology_score - --completions')"),
                       ("score_completions_status", "score --completions exit status"),
                       ("score_inspect_log_status", "score --inspect-log exit status"),
                       ("results_jsonl_identical_cmp", "results.jsonl identical (cmp)"), ("seconds", "Inspect run, s")):
        rows.append((label, json.dumps(gt[key]), json.dumps(cli[key])))
    out += [f"| {' | '.join(rows[0])} |", "|---|---|---|", *(f"| {' | '.join(r)} |" for r in rows[1:])]
    out += ["", f"Both on all of examples/data/v1/full_easy.jsonl. The `inspect` command ran from a folder outside "
            "the checkout, naming the task by its registry name and the dataset by its absolute path, with "
            "TIKTOKEN_CACHE_DIR=.venv/share/tiktoken (mockllm/model counts each prompt's tokens with tiktoken's "
            "o200k_base, which tiktoken would otherwise download). It cannot give mockllm chosen answers "
            "(`-M custom_outputs=` passes YAML values, and mockllm takes ModelOutput objects only), hence eval() "
            "for the ground truth.", "",
            f"## One sample's score in the log's JSON ({meta['log']}, member `{meta['member']}`)", "",
            "```json", json.dumps({"value": meta["score"]["value"], "answer_chars": len(meta["score"]["answer"] or ""),
                                   "metadata": meta["score"]["metadata"]}, indent=2), "```", "",
            "## inspect view", "",
            f"`inspect view --log-dir LOGS --host 127.0.0.1 --port PORT`, then headless Chromium at `{view['url']}` "
            f"(sample {meta['sample']} of the ground-truth run, its scoring tab): "
            f"[inspect_view_sample.png](inspect_view_sample.png), {view['png_bytes']} bytes. The page's text holds "
            + ", ".join(f"{k}: {'yes' if ok else 'NO'}" for k, ok in view["page_text_holds"].items()) + ".", "",
            f"Looked at (the picture committed with these results): the breadcrumb (the log's folder, its file, "
            f"the sample); the sample's header (id {meta['sample']}, epoch 1, the task sphyr_hpc/sphyr, "
            f"mockllm/model) with its input, target, answer and score; the SCORING tab selected: the prompt (folded "
            f"after its first lines), the scorer's row (topology_score, the answer, whose rows the viewer runs "
            f"together on one line, the score {score['value']} and the explanation `{score['explanation']}`) and "
            f"the METADATA table: "
            + ", ".join(f"{k} {json.dumps(score['metadata'][k])}" for k in METADATA)
            + " (the viewer rounds structural_efficiency to 5 digits). The ground truth scores below 1 here: "
            "the yardstick (the masked cells optimised at the ground truth's volume) is stiffer than it, and "
            "structural_efficiency is the yardstick's compliance over the answer's (docs/scoring.md).", "",
            "## numpy, petsc4py and mpi4py", "",
            "| where | numpy | petsc4py | mpi4py | inspect_ai importable |", "|---|---|---|---|---|"]
    for label, key in (("a venv with no extras (before)", "venv_without_extras"),
                       (".venv with the Inspect extra (after)", "dot_venv_with_inspect_extra")):
        r = v[key]
        out.append(f"| {label} | {r['numpy'][0]} ({r['numpy'][1]}) | {r['petsc4py'][0]} ({r['petsc4py'][1]}) | "
                   f"{r['mpi4py'][0]} ({r['mpi4py'][1]}) | {r['inspect_ai']} |")
    out += ["", "Debian's packages: " + "; ".join(v["debian_packages"]) + ".", "",
            f"`.venv/bin/python -m pip check` (exit status {v['pip_check_status']}): `{v['pip_check']}`; in the "
            f"venv with no extras (exit status {v['pip_check_without_extras_status']}): "
            f"`{v['pip_check_without_extras']}` (Debian's own packages, which both venvs see).", ""]
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=7575, help="inspect view's port (Chromium's DevTools: the next)")
    parser.add_argument("--sample", type=int, default=0, help="the sample of the ground-truth run to picture")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "inspect_evidence.json"))
    args = parser.parse_args(argv)
    if not O200K.is_file():
        raise SystemExit(f"{O200K} is missing: bin/setup --test puts tiktoken's o200k_base there")
    load_before = os.getloadavg()
    started = time.perf_counter()
    results = Path(args.out).parent
    with tempfile.TemporaryDirectory(prefix="sphyr_inspect_evidence_") as work:
        work = Path(work)
        bundled, records = bundled_prompts(work)
        prompts = {"bundled": bundled, "stored": stored_prompts(work, records)}
        print(json.dumps(prompts, indent=1)[:3000], file=sys.stderr)
        gt_log, gt_seconds = ground_truth_log(work / "logs-ground-truth")
        ground_truth = {**compared(gt_log, work, "ground-truth"), "seconds": gt_seconds}
        elsewhere = work / "elsewhere"
        elsewhere.mkdir()
        cli_log, cli_seconds = command_log(work / "logs-command", elsewhere)
        command = {**compared(cli_log, work, "command"), "seconds": cli_seconds}
        member, score, metadata = sample_json(gt_log, args.sample)
        sample = {"log": gt_log.name, "member": member, "sample": args.sample, "score": score,
                  "sample_metadata": {k: v for k, v in metadata.items() if k != "input_grid"}}
        view = viewer_screenshot(gt_log, args.sample, results / "inspect_view_sample.png", args.port, work)
        stack = versions(work)
    report = {"date": now(), "commit": commit_of(), "machine": machine(load_before),
              "seconds": round(time.perf_counter() - started, 1), "prompts": prompts,
              "ground_truth_run": ground_truth, "command_run": command, "sample_json": sample,
              "inspect_view": view, "versions": stack}
    write_results(args.out, report, markdown(report))


if __name__ == "__main__":
    main()
