"""SPhyR as an Inspect AI task (docs/harness.md, "Inspect AI"), registered as ``sphyr_hpc/sphyr``.

    inspect eval sphyr_hpc/sphyr --model openai/gpt-4o-mini -T dataset=examples/data/v1/full_easy.jsonl

The registry name works from any folder wherever the package is installed (site-packages, or an
editable PEP 660 install: the ``inspect_ai`` entry point, :mod:`sphyr_hpc.inspect._registry`); from
a checkout, ``inspect eval sphyr_hpc/inspect/task.py`` runs the same task (Inspect takes a task file
only as a path relative to the working folder).  One sample per dataset record: the input is
SPhyR's prompt (:func:`sphyr_hpc.core.prompt.prompt_of`, the prompt ``python -m sphyr_hpc.prompts``
writes), the target the ground truth as text, and the metadata the record's index, subject, dataset
file and input grid.  The model answers once (``generate()``), or with tools;
:func:`sphyr_hpc.inspect.scorer.topology_score` scores the answer.  Task options (``-T``):
``dataset`` (a dataset JSONL file, or a folder of them: every subject in it, the samples named
``SUBJECT-INDEX``; absolute or relative to the folder ``inspect eval`` starts in; default the
bundled v1 ``full_easy``), ``hard`` (true/false: the fill instruction, default by the
subject's name), ``store`` (the yardstick store: default ``score``'s, a folder, or ``none``), and
for a run with tools ``tools`` (``simulate``, ``python``; the prompt gets a paragraph per tool and the
solver is :func:`sphyr_hpc.inspect.tools.answer_with_tools`), ``max_tool_calls`` and ``sandbox`` (the
python tool's: default ``docker`` where it is on PATH, else Inspect's ``local``).
A record no sample can be made of is named on stderr (``FILE:LINE: skipped, reason``) and left out.
A run in which every sample of the task failed (no model answered: a provider that cannot be reached,
tiktoken's download offline) ends with one line on stderr saying so and naming the first error, and
exits with status 1 (:class:`AllFailed`, an Inspect hook at the end of the run; the ``inspect``
command only: ``inspect_ai.eval`` from Python returns the log, whose status says it).
The log names the dataset (the task's metadata ``sphyr_hpc_dataset``, its absolute path: Inspect
writes the dataset's location relative to the folder it ran in), so
``python -m sphyr_hpc.score --inspect-log LOG`` scores it like a completions file, from any folder.
"""

import os
import sys
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.hooks import Hooks, RunEnd, hooks
from inspect_ai.solver import generate

from sphyr_hpc.core import grid as grids
from sphyr_hpc.core.loadcase import gravity_from_folder
from sphyr_hpc.inspect.scorer import topology_score
from sphyr_hpc.inspect.tools import (MAX_TOOL_CALLS, answer_with_tools, default_sandbox, parse_max_tool_calls,
                                     parse_tools, prompt_with_tools)
from sphyr_hpc.io.inspect_log import DATASET_KEY, TOOLS_KEY
from sphyr_hpc.io.jsonl import read_jsonl
from sphyr_hpc.io.limits import InputLimits
from sphyr_hpc.jobs.prompts import dataset_files, prompt_rows, subject_of
from sphyr_hpc.runtime.process import UsageError

DEFAULT_DATASET = Path(__file__).resolve().parent.parent / "_examples" / "data" / "v1" / "full_easy.jsonl"


def ground_truths(path, errors=None):
    """{index: ground truth as text} of a dataset file's records whose ground truth is a grid."""
    errors = sys.stderr if errors is None else errors
    truths = {}
    lines, _ = read_jsonl(path, InputLimits())  # a file that cannot be read: prompt_rows names it
    for number, record, problem in lines or ():
        if problem or not isinstance(record, dict) or not isinstance(record.get("index"), int):
            continue  # prompt_rows names these
        try:
            truth = grids.as_grid(record.get("ground_truth"))
            grids.grid_shape(truth)
        except grids.GridError as err:
            print(f"{path}:{number}: skipped, ground_truth: {err}", file=errors)
            continue
        truths[record["index"]] = grids.grid_to_text(truth)
    return truths


def samples_of(path, hard=None, tools=(), max_tool_calls=MAX_TOOL_CALLS):
    """The Inspect samples of one dataset file, in file order (with ``tools``, the prompt says what
    each does: :func:`sphyr_hpc.inspect.tools.prompt_with_tools`)."""
    gravity = list(gravity_from_folder(Path(path).resolve().parent.name))
    truths = ground_truths(path)
    samples = []
    for row in prompt_rows(path, hard)[0]:
        if row["index"] not in truths:
            continue
        samples.append(Sample(
            id=row["index"], input=prompt_with_tools(row["prompt"], tools, max_tool_calls), target=truths[row["index"]],
            metadata={"index": row["index"], "subject": row["subject"], "dataset": row["dataset"],
                      "input_grid": grids.grid_to_text(grids.prompt_input_grid(row["prompt"])),
                      "gravity": gravity}))
    return samples


def dataset_path(dataset):
    """The dataset file or folder ``-T dataset=`` names: a relative path from the folder ``inspect eval``
    was started in (the shell's ``$PWD``; Inspect runs a task file in the file's own folder), else
    from the task file's folder, as Inspect resolves it.  A folder must hold ``*.jsonl`` files."""
    path = Path(dataset).expanduser()
    started_in = os.environ.get("PWD")
    if not path.is_absolute() and started_in and (Path(started_in) / path).exists():
        path = Path(started_in) / path
    if path.is_dir():
        try:
            dataset_files([path])
        except UsageError as err:
            raise ValueError(f"-T dataset={dataset}: {err} (give a SPhyR dataset JSONL file or a folder of "
                             f"them)") from None
        return path.resolve()
    if not path.is_file():
        raise ValueError(f"-T dataset={dataset}: no such dataset file or folder (a SPhyR dataset JSONL file, or a "
                         f"folder of them)")
    return path.resolve()


def _store(store):
    """``-T store=``: true (score's store), false/none (no store) or a folder."""
    if isinstance(store, str) and store.lower() in ("none", "false", "no"):
        return None
    return store


@task
def sphyr(dataset: str = str(DEFAULT_DATASET), hard: bool | None = None, store: str | bool | None = True,
          tools: str | None = None, max_tool_calls: int = MAX_TOOL_CALLS, sandbox: str | None = None):
    """SPhyR on one dataset file or a folder of them: its prompts, answered once (or with tools),
    scored by sphyr_hpc (module docstring)."""
    path = dataset_path(dataset)
    names, max_tool_calls = parse_tools(tools), parse_max_tool_calls(max_tool_calls)
    samples = []
    for file in dataset_files([path]):
        for sample in samples_of(file, hard, names, max_tool_calls):
            if path.is_dir():  # ids unique over the subjects: SUBJECT-INDEX
                sample.id = f"{sample.metadata['subject']}-{sample.metadata['index']}"
            samples.append(sample)
    extra, solve = {}, generate()
    if names:  # the run records its tools; the no-tools run is the one it always was
        extra = {TOOLS_KEY: list(names), "sphyr_hpc_max_tool_calls": max_tool_calls}
        solve = answer_with_tools(names, max_tool_calls, _store(store))
    name = subject_of(path) if path.is_file() else path.name
    return Task(dataset=MemoryDataset(samples, name=name, location=str(path)),
                solver=solve, scorer=topology_score(store=_store(store)),
                sandbox=(sandbox or default_sandbox()) if "python" in names else None,
                metadata={DATASET_KEY: str(path), **extra})


TASK_NAME = "sphyr_hpc/sphyr"


def all_failed(log):
    """The line saying that every sample of a log of this task failed (None when one did not, or the log
    is another task's): how many, and the first error."""
    if log is None or log.eval.task not in (TASK_NAME, "sphyr"):
        return None
    samples = log.samples or []  # at the end of a run Inspect hands the logs' headers only
    failed = [s for s in samples if s.error is not None]
    if samples and len(failed) < len(samples):
        return None
    if not samples and (log.status != "error" or (log.results and log.results.completed_samples)):
        return None
    message = failed[0].error.message if failed else (log.error.message if log.error else None)
    if message is None:
        return None
    what = f"all {len(samples)} samples failed" if samples else "the run stopped at its first failed sample"
    return (f"{TASK_NAME}: {what}, no model answered (the first error: {message.splitlines()[0][:300]}); "
            f"the log is {log.location}")


@hooks(name="sphyr_hpc_all_failed", description="sphyr_hpc/sphyr: a run whose samples all failed says so "
                                                "and exits with status 1")
class AllFailed(Hooks):
    """At the end of an ``inspect eval`` run: every sample of a sphyr_hpc/sphyr log failed -> one line on
    stderr, the last, and exit status 1 (Inspect itself exits 0 then); from Python
    (``inspect_ai.eval``) the line only, the log's ``status`` being Inspect's answer there."""

    async def on_run_end(self, data: RunEnd) -> None:
        lines = [line for line in map(all_failed, data.logs or []) if line]
        if lines:
            sys.stdout.flush()
            print("\n".join(lines), file=sys.stderr, flush=True)
            if "inspect_ai._cli.main" in sys.modules:  # the inspect command; from Python the log's status says it
                raise SystemExit(1)
