"""A scoring run's inputs: which files, checked before any work, read, and recorded for --resume.

Light on purpose: the command checks its inputs with these before MPI and
PETSc are imported (a usage error costs nothing).
"""

import json
import re
from pathlib import Path

from ..io import limits as input_limits
from ..io.inspect_log import NEEDS_INSPECT, inspect_available, log_files, read_inspect_log, with_tools
from ..io.records import FileProblem, find_result_files, read_dataset_completions, read_result_file, subject_of
from ..io.records import holds_dataset_records
from ..runtime.messages import (array_given_as_jsonl, dataset_given_as_path, existing_results, jsonl_given_as_path,
                                no_completion_in, no_such)
from ..runtime.process import UsageError
from .prompts import dataset_files  # a dataset folder is its *.jsonl files, as for the prompts

# The bundled example records: the repository's examples/ folder, which sphyr_hpc/_examples links
# to and a non-editable install carries as package data.
# (The package's own folder, which is what importlib.resources.files("sphyr_hpc") gives for an
# installed or editable package, without importing importlib.resources at every start.)
EXAMPLES = Path(__file__).parent.parent / "_examples" / "results"


DATASET_SUFFIX = ".jsonl"


def completions_files(completions):
    """The completions files of ``--completions`` values: a file as given, a folder's ``*.jsonl`` files
    (searched recursively) sorted."""
    found = []
    for path in map(Path, completions):
        found += (sorted(p for p in path.rglob(f"*{DATASET_SUFFIX}") if not p.is_dir()) if path.is_dir()
                  else [path])
    return found


def subject_name(dataset):
    """A dataset file's subject: its name without ``.jsonl`` (and a trailing ``_results``)."""
    name = Path(dataset).name
    return subject_of(name[: -len(DATASET_SUFFIX)] if name.endswith(DATASET_SUFFIX) else name)


def _names_its_dataset(path):
    """True when a completions file's first line names its dataset (``dataset``, or an OpenAI batch
    line's ``custom_id`` with a prefix): such a file answers whichever dataset each line names."""
    try:
        with open(path, "rb") as handle:
            line = next((raw for raw in handle if raw.strip()), b"")
        obj = json.loads(line)
    except (OSError, ValueError):
        return False
    if not isinstance(obj, dict):
        return False
    custom = obj.get("custom_id")
    return isinstance(obj.get("dataset"), str) or (isinstance(custom, str) and bool(re.match(r".+[-:/#]\d+$", custom)))


def completion_pairs(args):
    """``[(dataset file, completions file or None, model)]``: which completions answer which dataset.

    A completions file answers the subject it is named by, ``SUBJECT/MODEL.jsonl`` or
    ``MODEL/SUBJECT.jsonl`` (the model: ``--model``, else the other name); else, with one dataset,
    that dataset (the model: ``--model``, else the file's name); else, when its lines name their
    dataset, every dataset (each line the one it names).  A model's subject without a file is
    ``(dataset, None, model)``, every record of it unanswered.  Raises :class:`UsageError` for a
    completions file that names no subject.
    """
    datasets = dataset_files(args.dataset)
    files = completions_files(args.completions)
    subjects = {}
    for dataset in datasets:
        if subject_name(dataset) in subjects:
            raise UsageError(f"--dataset: two datasets of the subject {subject_name(dataset)} "
                             f"({subjects[subject_name(dataset)]}, {dataset}): give one of them")
        subjects[subject_name(dataset)] = dataset
    answered, everywhere = {}, []
    for c in files:
        if c.parent.name in subjects:
            key = (args.model or c.stem, c.parent.name)
        elif subject_name(c) in subjects:
            key = (args.model or c.parent.name, subject_name(c))
        elif len(datasets) == 1:  # one dataset: every file answers it
            key = (args.model or c.stem, subject_name(datasets[0]))
        elif _names_its_dataset(c):
            everywhere.append(c)
            continue
        else:
            raise UsageError(
                f"--completions {c} names no subject of the {len(subjects)} datasets: name it SUBJECT.jsonl in "
                f"the model's folder or MODEL.jsonl in a folder SUBJECT/ (a subject: {_names(subjects)}), or "
                f"write its lines with \"dataset\" or a custom_id SUBJECT-INDEX")
        if key in answered:
            raise UsageError(f"--completions {answered[key]} and {c} both answer {key[1]} for the model {key[0]}: "
                             f"give one of them")
        answered[key] = c
    pairs = [(subjects[s], c, m) for (m, s), c in answered.items()]
    pairs += [(d, c, args.model or c.stem) for c in everywhere for d in datasets]
    models = {m for _, _, m in pairs}
    covered = {(m, subject_name(d)) for d, _, m in pairs}
    pairs += [(subjects[s], None, m) for m in models for s in subjects if (m, s) not in covered]
    return sorted(pairs, key=lambda p: (p[2], subject_name(p[0]), str(p[1])))


def _names(items, at_most=4):
    items = sorted(items)
    return ", ".join(items) if len(items) <= at_most else f"{', '.join(items[:at_most])}, ..."


def input_paths(args):
    """The result files and folders to read: the arguments, else the bundled examples."""
    return list(args.paths) if args.paths or args.dataset or args.inspect_log else [EXAMPLES]


def check_inputs(args):
    """Raise :class:`UsageError` for what is wrong with the input options (before any work)."""
    if args.completions and not args.dataset:
        raise UsageError("--completions needs --dataset")
    if args.inspect_log:
        _check_inspect_logs(args)
    elif args.dataset and not args.completions:
        raise UsageError("--dataset needs --completions (to validate a dataset use: score validate --dataset ...)")
    if args.model and len(args.completions) > 1 and len(dataset_files(args.dataset)) <= 1:
        raise UsageError("--model names one completions file; give one --completions file per run")
    paths = input_paths(args)
    if not args.paths and not args.dataset and not args.inspect_log and not EXAMPLES.is_dir():
        raise UsageError(f"no input given and the bundled examples are not installed ({EXAMPLES}): name result "
                         f"files or folders, or --dataset D.jsonl --completions C.jsonl")
    missing = [str(p) for p in paths + args.dataset + args.completions + args.inspect_log if not Path(p).exists()]
    if missing:
        raise UsageError(no_such(missing, folders=True))
    jsonl = [p for p in args.paths if Path(p).is_file() and str(p).endswith(".jsonl")]
    if jsonl:
        raise UsageError(jsonl_given_as_path(jsonl[0]))
    for path in args.paths:  # a folder of no result file: a dataset folder, a score output, a typo's sibling
        if Path(path).is_dir() and not find_result_files([path]):
            datasets = sorted(p.name for p in Path(path).glob("*.jsonl"))
            hint = (f"it holds JSONL files ({datasets[0]}, ...): score a dataset folder with --dataset {path} "
                    f"--completions DIR" if datasets else "a PATH is a result file (*.json) or a folder of them")
            raise UsageError(f"no result files under {path} (a folder without a *.json file): {hint}")
    for log in args.inspect_log:
        if Path(log).is_dir() and not log_files([log]):
            raise UsageError(f"--inspect-log {log} is a folder without an Inspect log (*.eval, *.json): name the "
                             f"logs or the folder inspect eval wrote them to (--log-dir)")
    dataset_files(args.dataset)  # a dataset folder without a dataset, two datasets of one name: usage errors
    files = completions_files(args.completions)
    empty = [c for c in args.completions if Path(c).is_dir() and not files_in(c, files)]
    if empty:
        raise UsageError(f"--completions {empty[0]} is a folder without a *.jsonl file: --completions takes "
                         f"completions files (JSONL) or folders of them")
    if len(dataset_files(args.dataset)) > 1 and args.model and len(completions_files(args.completions)) > 1:
        raise UsageError("--model names the model of one completions file; with several datasets the model is "
                         "each file's (MODEL/SUBJECT.jsonl or SUBJECT/MODEL.jsonl)")
    for option, path in ([("--dataset", d) for d in dataset_files(args.dataset)]
                         + [("--completions", c) for c in completions_files(args.completions)]):
        first = _first_character(path)
        if first == "[":
            raise UsageError(array_given_as_jsonl(option, path))
        if option == "--completions" and first == "":
            raise UsageError(no_completion_in(path))
    limits = input_limits.from_args(args)
    for path in args.paths:
        if Path(path).is_file() and _first_character(path) == "[" and holds_dataset_records(_json_or_none(path, limits)):
            raise UsageError(dataset_given_as_path(path))
    if args.completions and not args.inspect_log:
        completion_pairs(args)  # a completions file that answers no subject is a usage error
    if args.certified and not (Path(args.certified) / "certify.jsonl").is_file():
        raise UsageError(f"no certify.jsonl in {args.certified} (made by python -m sphyr_hpc.certify --out DIR)")
    check_output_folders(args, paths)


def _check_inspect_logs(args):
    if args.completions:
        raise UsageError("--inspect-log and --completions are two runs: score the logs and the completions files "
                         "apart, or turn one into the other")
    if not inspect_available():
        raise UsageError(NEEDS_INSPECT)
    if args.model and len(log_files(p for p in args.inspect_log if Path(p).exists())) > 1:
        raise UsageError("--model names one --inspect-log log; give one log per run")


def _inspect_log_inputs(args, limits):
    """(samples, problems) of every --inspect-log log, each against the dataset it names."""
    samples, problems = [], []
    given = dataset_files(args.dataset)
    for log in log_files(args.inspect_log):
        dataset, model, lines, reason = read_inspect_log(log)
        if reason is None and given:  # --dataset: where the logs' datasets are now (by name, or the one given)
            named = [d for d in given if d.name == Path(dataset).name]
            dataset = str(named[0] if named else given[0] if len(given) == 1 else dataset)
        if reason is None and not Path(dataset).exists():
            reason = f"its dataset {dataset} is not here: give the dataset's path with --dataset"
        if reason:
            problems.append(FileProblem(str(log), reason))
            continue
        # a run with tools: each sample's calls, by (its dataset file's name in a folder's log, index)
        tools = {(line.get("dataset"), line["index"]): line["tools"] for _, line, _ in lines if "tools" in line}
        if args.model:
            model = with_tools(args.model, next(iter(tools.values()))["names"] if tools else ())
        files = dataset_files([dataset])
        for file in files:  # a log of a folder answers each of its subjects
            read, trouble = read_dataset_completions(file, log, model, args.gravity,
                                                     limits, defer_completion=True, lines=lines)
            for sample in read:  # its row keeps the run's tools and the sample's calls
                sample.tools = tools.get((file.name if Path(dataset).is_dir() else None, sample.index))
            samples += read
            problems += trouble
    return samples, problems


def load_inputs(args):
    """(samples, problems) of every input, in input order; every rank reads them itself.

    Ground truths and prompts are parsed once per distinct text; completions are kept as read
    and parsed by the rank that scores them (:meth:`~sphyr_hpc.io.records.Sample.parsed`).
    """
    samples, problems = [], []
    limits = input_limits.from_args(args)
    for path in find_result_files(input_paths(args)):
        read = read_result_file(path, gravity=args.gravity, limits=limits, defer_completion=True)
        if isinstance(read, FileProblem):
            problems.append(read)
        else:
            samples += read
    for dataset, completions, model in completion_pairs(args) if args.completions else []:
        if completions is None:  # a model's subject without a completions file: every record unanswered
            read, trouble = read_dataset_completions(dataset, f"(no completions file of {model} for "
                                                              f"{subject_name(dataset)})", model, args.gravity,
                                                     limits, lines=[])
        else:
            read, trouble = read_dataset_completions(dataset, completions, model, args.gravity, limits,
                                                     defer_completion=True)
        samples += read
        problems += trouble
    if args.inspect_log:
        read, trouble = _inspect_log_inputs(args, limits)
        samples += read
        problems += trouble
    return samples, problems


def check_output_folders(args, paths):
    """--out and --fields must be folders (or not exist yet) outside every input folder."""
    inputs = [Path(p).resolve() for p in paths + args.dataset + args.completions + args.inspect_log if p]
    for option, folder in (("--out", args.out), ("--fields", args.fields)):
        if folder is None:
            continue
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{option} {folder} is a file; {option} names a folder (give a new or existing "
                             f"folder)")
        if option == "--out" and not (args.resume or getattr(args, "overwrite", False)):
            records = _records_in(folder / "results.jsonl")
            if records:
                raise UsageError(existing_results(folder, records))
        resolved = folder.resolve()
        for source in inputs:
            if source.is_dir() and (resolved == source or source in resolved.parents):
                raise UsageError(f"{option} {folder} is inside the input folder {source}: the next run would read "
                                 f"its outputs as results; choose a folder outside it")


def _first_character(path, chunk=65536):
    """The first character of a file that is not white space ("": none; None: the file cannot be read)."""
    try:
        with open(path, "rb") as handle:
            while True:
                data = handle.read(chunk)
                if not data:
                    return ""
                text = data.lstrip(b" \t\r\n\xef\xbb\xbf")
                if text:
                    return chr(text[0])
    except OSError:
        return None


def _json_or_none(path, limits):
    """A named result file's JSON (None when it is not JSON or over the file-size limit)."""
    try:
        if Path(path).stat().st_size > limits.max_file_bytes:
            return None
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def _records_in(path):
    """Non-blank lines of an earlier run's results.jsonl (0 when there is none)."""
    try:
        with open(path, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return 0


def inputs_of(args, paths):
    """What a run's records come from, as run.json records it: --resume must see the same."""
    logs = {"inspect_logs": [str(Path(p).resolve()) for p in args.inspect_log]} if args.inspect_log else {}
    return {**logs, "paths": sorted(str(Path(p).resolve()) for p in paths),
            "dataset": _datasets_of(args),
            "completions": [str(Path(c).resolve()) for c in args.completions],
            "model": args.model, "gravity": list(args.gravity) if args.gravity else None,
            "design_efficiency": args.design_efficiency}


def _datasets_of(args):
    """run.json's ``dataset``: the one dataset file's path, a list of them for several (folders: their
    files), None without --dataset."""
    files = [str(p.resolve()) for p in dataset_files(args.dataset)]
    return files[0] if len(files) == 1 and len(args.dataset) == 1 and Path(args.dataset[0]).is_file() else files or None


def files_in(folder, files):
    """The ``files`` under ``folder``."""
    folder = Path(folder).resolve()
    return [f for f in files if folder in f.resolve().parents]


def check_resume(run_json, inputs):
    """A UsageError naming what differs if ``run_json`` was written from other inputs."""
    try:
        before = json.loads(Path(run_json).read_text(encoding="utf-8")).get("inputs")
    except (OSError, ValueError, AttributeError):
        return  # no (readable) record of the inputs: nothing to compare
    if not isinstance(before, dict):
        return
    changed = [key for key in inputs if before.get(key) != inputs[key]]
    if changed:
        what = "; ".join(f"{key}: {before.get(key)} then, {inputs[key]} now" for key in changed)
        raise UsageError(f"--resume: {Path(run_json).parent} was written from other inputs ({what}); "
                         f"rerun with the same inputs, or drop --resume to start over")
