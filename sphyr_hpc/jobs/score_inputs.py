"""A scoring run's inputs: which files, checked before any work, read, and recorded for --resume.

Light on purpose: the command checks its inputs with these before MPI and
PETSc are imported (a usage error costs nothing).
"""

import json
from pathlib import Path

from ..io import limits as input_limits
from ..io.inspect_log import NEEDS_INSPECT, inspect_available, log_files, read_inspect_log, with_tools
from ..io.records import FileProblem, find_result_files, read_dataset_completions, read_result_file
from ..io.records import holds_dataset_records
from ..runtime.messages import (array_given_as_jsonl, dataset_given_as_path, existing_results, jsonl_given_as_path,
                                no_completion_in, no_such)
from ..runtime.process import UsageError

# The bundled example records: the repository's examples/ folder, which sphyr_hpc/_examples links
# to and a non-editable install carries as package data.
# (The package's own folder, which is what importlib.resources.files("sphyr_hpc") gives for an
# installed or editable package, without importing importlib.resources at every start.)
EXAMPLES = Path(__file__).parent.parent / "_examples" / "results"


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
    if args.model and len(args.completions) > 1:
        raise UsageError("--model names one completions file; give one --completions file per run")
    paths = input_paths(args)
    if not args.paths and not args.dataset and not args.inspect_log and not EXAMPLES.is_dir():
        raise UsageError(f"no input given and the bundled examples are not installed ({EXAMPLES}): name result "
                         f"files or folders, or --dataset D.jsonl --completions C.jsonl")
    missing = [str(p) for p in paths + ([args.dataset] if args.dataset else []) + args.completions + args.inspect_log
               if not Path(p).exists()]
    if missing:
        raise UsageError(no_such(missing, folders=True))
    jsonl = [p for p in args.paths if Path(p).is_file() and str(p).endswith(".jsonl")]
    if jsonl:
        raise UsageError(jsonl_given_as_path(jsonl[0]))
    for option, path in [("--dataset", args.dataset)] * bool(args.dataset) + [("--completions", c) for c in args.completions]:
        first = _first_character(path)
        if first == "[":
            raise UsageError(array_given_as_jsonl(option, path))
        if option == "--completions" and first == "":
            raise UsageError(no_completion_in(path))
    limits = input_limits.from_args(args)
    for path in args.paths:
        if Path(path).is_file() and _first_character(path) == "[" and holds_dataset_records(_json_or_none(path, limits)):
            raise UsageError(dataset_given_as_path(path))
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
    for log in log_files(args.inspect_log):
        dataset, model, lines, reason = read_inspect_log(log)
        if reason is None and not Path(args.dataset or dataset).is_file():
            reason = f"its dataset {dataset} is not here: give the dataset's path with --dataset"
        if reason:
            problems.append(FileProblem(str(log), reason))
            continue
        tools = {line["index"]: line["tools"] for _, line, _ in lines if "tools" in line}  # a run with tools
        if args.model:
            model = with_tools(args.model, next(iter(tools.values()))["names"] if tools else ())
        read, trouble = read_dataset_completions(args.dataset or dataset, log, model, args.gravity,
                                                 limits, defer_completion=True, lines=lines)
        for sample in read:  # its row keeps the run's tools and the sample's calls
            sample.tools = tools.get(sample.index)
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
    for completions in args.completions:
        read, trouble = read_dataset_completions(args.dataset, completions, args.model, args.gravity, limits,
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
    inputs = [Path(p).resolve() for p in paths + [args.dataset] + args.completions + args.inspect_log if p]
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
            "dataset": str(Path(args.dataset).resolve()) if args.dataset else None,
            "completions": [str(Path(c).resolve()) for c in args.completions],
            "model": args.model, "gravity": list(args.gravity) if args.gravity else None,
            "design_efficiency": args.design_efficiency}


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
