"""An Inspect AI log read as completions: what ``python -m sphyr_hpc.score --inspect-log LOG`` scores.

The log of ``inspect eval sphyr_hpc/sphyr`` names its dataset (the task's metadata
``sphyr_hpc_dataset``, its absolute path; else the dataset's location, which Inspect writes relative
to the folder it ran in) and its model, and holds each sample's answer: sample ``i`` of the log becomes the line
``{"index", "completion"}`` of a completions file (a sample that failed in Inspect, one with
``error`` instead of ``completion``), so the log is scored like the completions file the same
answers would make.  A run with tools (the task's metadata ``sphyr_hpc_tools``) is another model's
run: its model is named ``MODEL+TOOL`` (:func:`with_tools`) and each line also holds ``tools``, the
run's tools and that sample's calls and the seconds they took (:func:`tool_calls`), which
``score`` keeps in the sample's row.  Read with Inspect's own reader (:func:`inspect_ai.log.read_eval_log`); the
first epoch's samples are read.  Needs ``inspect-ai`` (``pip install 'sphyr_hpc[inspect]'``).
"""

from pathlib import Path

NEEDS_INSPECT = "reading an Inspect log needs inspect-ai: pip install 'sphyr_hpc[inspect]'"
LOG_SUFFIXES = (".eval", ".json")
DATASET_KEY = "sphyr_hpc_dataset"  # the task's metadata: the dataset file's (or folder's) absolute path
FAILED_IN_INSPECT = "the sample failed in Inspect"  # the reason of a sample with an error, not an answer
TOOLS_KEY = "sphyr_hpc_tools"  # the task's metadata: the tools a run had (none: the key is absent)


def with_tools(model, tools):
    """The name a run with ``tools`` goes by: ``openai/gpt-4o+simulate``, ``model`` for none."""
    return "+".join([model, *tools])


SIMULATE_SECONDS = "sphyr_hpc_simulate_seconds"  # a sample's store: each simulate call's own seconds


def tool_calls(sample, names):
    """A sample's ``tools`` entry: the run's tool ``names``, its calls and their seconds: each simulate
    call's own time (the tool keeps it in the sample's store), any other call's working time as
    Inspect timed it."""
    events = [event for event in sample.events or () if getattr(event, "event", None) == "tool"]
    timed = (sample.store or {}).get(SIMULATE_SECONDS)
    seconds = sum(float(event.working_time or 0.0) for event in events
                  if timed is None or event.function != "simulate") + sum(timed or ())
    return {"names": list(names), "calls": len(events), "seconds": round(seconds, 6)}


def inspect_available():
    """True when inspect-ai can be imported."""
    import importlib.util

    return importlib.util.find_spec("inspect_ai") is not None


def log_files(paths):
    """The log files of ``paths``: files as given, a folder's ``*.eval`` and ``*.json`` logs sorted."""
    found = []
    for path in map(Path, paths):
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.suffix in LOG_SUFFIXES and not p.is_dir())
        else:
            found.append(path)
    return found


def read_inspect_log(path):
    """``(dataset, model, lines, reason)`` of one log: ``lines`` are ``(sample number, object, None)``
    as :func:`~sphyr_hpc.io.jsonl.read_jsonl` yields them; ``reason`` (the rest None) when the log
    cannot be read."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        return None, None, None, NEEDS_INSPECT
    try:
        log = read_eval_log(str(path))
    except Exception as err:  # noqa: BLE001  (any fault of an untrusted file is its own line)
        return None, None, None, f"not a readable Inspect log: {type(err).__name__}: {str(err)[:200]}"
    dataset = (log.eval.metadata or {}).get(DATASET_KEY) or getattr(log.eval.dataset, "location", None)
    if not dataset:
        return None, None, None, "the log names no dataset (a log of the task sphyr_hpc/sphyr names it): give --dataset"
    tools = list((log.eval.metadata or {}).get(TOOLS_KEY) or ())
    lines = []
    several = not str(dataset).endswith(".jsonl")  # a folder's subjects: each sample names its file
    for number, sample in enumerate(log.samples or [], start=1):
        if sample.epoch != 1:
            continue
        line = {"index": (sample.metadata or {}).get("index", sample.id)}
        if several and "dataset" in (sample.metadata or {}):  # the line answers its sample's dataset file
            line["dataset"] = sample.metadata["dataset"]
        if sample.error is not None:
            line["error"] = f"{FAILED_IN_INSPECT}: {sample.error.message.splitlines()[0][:300]}"
        else:
            line["completion"] = sample.output.completion
        if tools:
            line["tools"] = tool_calls(sample, tools)
        lines.append((number, line, None))
    return dataset, with_tools(log.eval.model, tools), lines, None
