"""Reading SPhyR result files and writing results, never losing a batch to bad input.

A *result file* is a JSON array of records with ``prompt``, ``ground_truth``
and ``completion`` (grids as text or lists of rows).  A folder is searched
recursively for ``*.json`` files; ``*_aggregated_results.json`` files are
summaries, not records, and are skipped.  A record's ``model`` is the name of
the folder holding its file, its ``subject`` the file name without ``.json``
and a trailing ``_results``, its ``index`` its position in the file.

Problems are reported as data, and each costs only itself: a file that cannot
be read (too large, not UTF-8, not JSON, nested too deeply, not an array)
becomes a :class:`FileProblem` naming it, a JSONL line likewise names file and
line; a record missing a field, holding an unusable grid or over a limit of
:class:`~sphyr_hpc.io.limits.InputLimits` becomes a :class:`Sample` whose
``error`` names the reason, and a completion too long to parse one whose
``invalid_reason`` does (it is scored as a completion with no grid).  When the
fault is the model's (no completion, or one that is not a grid)
``completion_status`` says so (``"missing"`` or ``"unreadable"``): such a
record counts 0 in the model's means (docs/scoring.md, "Means"); a record
whose ground truth or prompt is broken is left out of every model's means.

Every model answers the same samples, so a ground truth or prompt given as
text is parsed once (a bounded table by text, :data:`SHARED_TEXTS` entries)
and its grid shared, read-only, by every record that quotes it: reading
costs one parse per sample and one per completion, not three per record.
"""

import json
from dataclasses import dataclass
from pathlib import Path


from ..core import grid as grids
from ..runtime.cache import BoundedCache
from ..runtime.messages import dataset_given_as_path
from ..core.loadcase import gravity_from_folder
from .completions import OTHER_DATASET, LineProblem, completion_line, index_of
from .jsonl import DECODE_LIMITS, decode_json, read_bytes, read_jsonl, utf8
from .limits import InputLimits

AGGREGATED_SUFFIX = "_aggregated_results.json"
RESULTS_SUFFIX = "_results"
REQUIRED_FIELDS = ("prompt", "ground_truth", "completion")
# Texts of ground truths and prompts whose grids are kept: two per sample of the largest
# benchmark (v1 has 411 samples), so a model folder read after another finds them all.
SHARED_TEXTS = 4096
_SHARED = BoundedCache(SHARED_TEXTS)
# Completion texts whose grids are kept (read-only, like the shared ones above) when they are parsed
# by :meth:`Sample.parsed`: the models' answers to one sample are parsed one after another, and
# often agree to the character.
COMPLETION_TEXTS = 256
_COMPLETIONS = BoundedCache(COMPLETION_TEXTS)


def _shared_grid(value, parse):
    """``parse(value)``, parsed once per distinct text (grids given as lists are parsed each time)."""
    if not isinstance(value, str):
        return parse(value)
    return _SHARED.get_or_compute((parse, value), lambda: parse(value))


@dataclass
class Sample:
    """One completion to score, or the reason it cannot be."""

    model: str
    subject: str
    index: int
    source: str
    gravity: tuple = (1.0, 0.0)
    completion: list = None
    ground_truth: list = None
    input_grid: list = None
    error: str = None
    invalid_reason: str = None
    completion_status: str = None  # "missing" / "unreadable": the model's fault, counts 0
    deferred: tuple = None  # (raw completion, where) of a completion read with defer_completion
    tools: dict = None  # a run with tools: its tools and this sample's calls (io/inspect_log.py), kept in the row

    def fail(self, error, completion_status=None):
        """Mark the sample unusable; ``completion_status`` when the completion is at fault."""
        self.error, self.completion_status = error, completion_status

    def parsed(self):
        """This sample with its completion parsed: itself, or (read with ``defer_completion``) a copy.

        The copy holds the completion's grid, or the ``error`` of one that is
        not a grid value; this sample keeps only the raw text, so a batch
        holds its inputs as read, and a rank parses the completions it scores.
        """
        if self.deferred is None:
            return self
        (raw, where), sample = self.deferred, self._copy()
        try:
            sample.completion = (_COMPLETIONS.get_or_compute(raw, lambda: grids.as_grid(raw))
                                 if isinstance(raw, str) else grids.as_grid(raw))
            if not sample.completion:
                sample.invalid_reason = grids.unread_format(raw) or sample.invalid_reason
        except grids.GridError as err:
            sample.fail(f"{where}: completion: {err}", "unreadable")
        except (RecursionError, MemoryError) as err:  # a cell nested as deep as the JSON decoder allowed
            sample.ground_truth = sample.input_grid = None
            sample.error = f"{where}: grid not readable: {DECODE_LIMITS[type(err)]}"
        return sample

    def _copy(self):
        """``dataclasses.replace(self, deferred=None)`` without its per-field checks (a record each)."""
        sample = object.__new__(Sample)
        sample.__dict__.update(self.__dict__)
        sample.deferred = None
        return sample

    @property
    def key(self):
        return (self.model, self.subject, self.index)


@dataclass
class FileProblem:
    path: str
    reason: str


def subject_of(path):
    stem = Path(path).name
    stem = stem[: -len(".json")] if stem.endswith(".json") else stem
    return stem[: -len(RESULTS_SUFFIX)] if stem.endswith(RESULTS_SUFFIX) else stem


def find_result_files(paths):
    """Result files under ``paths`` (files or folders), sorted within each folder."""
    found = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            found += sorted(
                # Not only regular files: a FIFO or a dangling link named *.json is reported, not skipped.
                p for p in path.rglob("*.json") if not p.is_dir() and not p.name.endswith(AGGREGATED_SUFFIX)
            )
        else:
            found.append(path)
    return found


def _cells(rows):
    """(cells, shape text) of a parsed grid, ragged or not."""
    widths = {len(row) for row in rows}
    shape = f"{len(rows)}x{widths.pop()}" if len(widths) == 1 else f"{len(rows)} rows"
    return sum(len(row) for row in rows), shape


def _grid_and_cells(value):
    """(grid, (cells, shape text)) of a ground truth: both computed once per distinct text."""
    grid = grids.as_grid(value)
    return grid, _cells(grid) if grid else None


def parse_grids(sample, values, where, limits, defer_completion=False):
    """Fill ``sample``'s grids from raw field ``values``, within ``limits``.

    ``values`` holds ``ground_truth`` and ``completion`` and may hold
    ``input_grid`` or ``prompt``; ``where`` maps each field to the location
    named in messages.  Sets ``error`` (unusable or over-limit ground truth,
    prompt or input grid; a completion that is not a grid value) or
    ``invalid_reason`` (a completion over the text limit, left unparsed).
    Every check is one pass over what was read.  With ``defer_completion`` the
    completion is kept as read and parsed by :meth:`Sample.parsed`.
    """
    try:
        return _parse_grids(sample, values, where, limits, defer_completion)
    except (RecursionError, MemoryError) as err:  # a cell nested as deep as the JSON decoder allowed
        sample.ground_truth = sample.completion = sample.input_grid = None
        sample.error = f"{where['completion']}: grid not readable: {DECODE_LIMITS[type(err)]}"
        return sample


def parse_ground_truth(sample, values, where, limits):
    """The ground-truth side of :func:`parse_grids`: whether ``values``' ground truth (and input
    grid or prompt) are usable and within ``limits``; sets ``sample.ground_truth`` or ``error``."""
    for field in ("ground_truth", "input_grid", "prompt"):
        if field in values:
            reason = limits.text_too_long(field, grids.text_length(values[field]))
            if reason:
                sample.error = f"{where[field]}: {reason}"
                return False
    try:
        sample.ground_truth, cells = _shared_grid(values["ground_truth"], _grid_and_cells)
    except grids.GridError as err:
        sample.error = f"{where['ground_truth']}: ground_truth: {err}"
        return False
    reason = limits.too_many_cells("ground truth", *cells) if sample.ground_truth else None
    if reason:
        sample.error = f"{where['ground_truth']}: {reason}"
        sample.ground_truth = None
        return False
    return True


def _parse_grids(sample, values, where, limits, defer_completion):
    if not parse_ground_truth(sample, values, where, limits):
        return sample
    reason = limits.text_too_long("completion", grids.text_length(values["completion"]))
    if reason:
        sample.invalid_reason, sample.completion = reason, []
    elif defer_completion:
        sample.deferred = (values["completion"], where["completion"])
    else:
        try:
            sample.completion = grids.as_grid(values["completion"])
            if not sample.completion:
                sample.invalid_reason = grids.unread_format(values["completion"])
        except grids.GridError as err:
            sample.fail(f"{where['completion']}: completion: {err}", "unreadable")
            return sample
    if "input_grid" in values:
        try:
            sample.input_grid = grids.as_grid(values["input_grid"]) if values["input_grid"] else None
        except grids.GridError:
            sample.input_grid = None
    else:
        prompt = values.get("prompt")
        sample.input_grid = _shared_grid(prompt, grids.prompt_input_grid) if isinstance(prompt, str) else None
    return sample


def sample_from_record(record, model, subject, index, source, gravity, limits=InputLimits(), defer_completion=False):
    """A :class:`Sample` from one raw record (``error`` set when it is unusable); ``defer_completion``:
    see :meth:`Sample.parsed`."""
    sample = Sample(model, subject, index, source, gravity)
    where = f"{source} record {index}"
    if not isinstance(record, dict):
        sample.error = f"{where}: record is a {type(record).__name__}, not an object"
        return sample
    missing = [f for f in REQUIRED_FIELDS if f not in record and not (f == "prompt" and "input_grid" in record)]
    if missing:
        sample.fail(f"{where}: missing field {', '.join(repr(f) for f in missing)}",
                    "missing" if missing == ["completion"] else None)
        return sample
    fields = ("ground_truth", "completion", "input_grid" if "input_grid" in record else "prompt")
    return parse_grids(sample, {f: record[f] for f in fields}, dict.fromkeys(fields, where), limits, defer_completion)


def _one_object_per_line(text):
    """True when ``text``'s first line is a JSON object on its own: a JSONL file named like a result file."""
    first, _ = decode_json(text.lstrip().split("\n", 1)[0])
    return isinstance(first, dict)


def read_result_file(path, gravity=None, limits=InputLimits(), defer_completion=False):
    """Samples of one result file, or a :class:`FileProblem` if it cannot be read.

    ``defer_completion``: completions are kept as read, for :meth:`Sample.parsed`.
    """
    path = Path(path)
    model = path.parent.name
    subject = subject_of(path)
    data, reason = read_bytes(path, limits)
    text, reason = utf8(data) if data is not None else (None, reason)
    records, reason = decode_json(text) if text is not None else (None, reason)
    if reason and reason.startswith("not valid JSON: Extra data") and _one_object_per_line(text):
        reason += " (one JSON object per line is JSONL: score it with --dataset D.jsonl --completions C.jsonl)"
    if reason:
        return FileProblem(str(path), reason)
    if not isinstance(records, list):
        return FileProblem(str(path), f"expected a JSON array of records, found a {type(records).__name__}")
    if holds_dataset_records(records):
        return FileProblem(str(path), dataset_given_as_path(path))
    g = gravity if gravity is not None else gravity_from_folder(model)
    source = str(path)
    return [sample_from_record(r, model, subject, i, source, g, limits, defer_completion) for i, r in enumerate(records)]


def holds_dataset_records(records):
    """True when ``records`` (a JSON array) are a dataset's: objects with a ground truth, none with a completion."""
    return bool(records) and all(isinstance(r, dict) and "ground_truth" in r and "completion" not in r
                                 for r in records)


def _indexed(path, line_fields, problems, limits, lines=None):
    """{index: (line number, fields, why)} of a JSONL file (or its ``lines`` already read), None when
    it cannot be read; ``line_fields(object)`` is ``(index, fields, why)``; problems appended."""
    if lines is None:
        lines, reason = read_jsonl(path, limits)
        if reason:
            problems.append(FileProblem(str(path), reason))
            return None
    records = {}
    for number, obj, problem in lines:
        where = f"{path}:{number}"
        try:
            if problem:
                raise LineProblem(problem)
            if not isinstance(obj, dict):
                raise LineProblem(f"a record must be a JSON object, not {type(obj).__name__}")
            index, fields, why = line_fields(obj)
        except LineProblem as err:
            problems.append(FileProblem(where, str(err)))
            continue
        if index == OTHER_DATASET:
            continue
        if index in records:
            problems.append(FileProblem(where, f"duplicate index {index}"))
        else:
            records[index] = (number, fields, why)
    return records


def read_dataset_completions(dataset, completions, model=None, gravity=None, limits=InputLimits(),
                             defer_completion=False, lines=None):
    """Samples pairing dataset records with completions by ``index``.

    Returns ``(samples, problems)``: broken lines and unreadable files are
    :class:`FileProblem` entries naming file and line; a dataset record with no
    completion, or a completion whose index is not in the dataset, becomes a
    sample with an ``error``.  A completions line is any form
    :func:`~sphyr_hpc.io.completions.completion_line` reads (a line of another
    dataset is left out).  ``lines``: the completions' ``(line number, object,
    problem)`` already read (an Inspect log's, :mod:`sphyr_hpc.io.inspect_log`),
    ``completions`` then only names them.
    """
    problems = []
    subject = subject_of(Path(dataset).name[: -len(".jsonl")] if str(dataset).endswith(".jsonl") else dataset)
    model = model or Path(completions).stem
    if gravity is None:
        gravity = gravity_from_folder(Path(completions).parent.name)
        if gravity == (1.0, 0.0):
            gravity = gravity_from_folder(Path(dataset).parent.name)

    def dataset_fields(obj):
        return index_of(obj), obj, "missing field 'ground_truth'" if "ground_truth" not in obj else None

    data = _indexed(dataset, dataset_fields, problems, limits)
    done = _indexed(completions, lambda obj: completion_line(obj, subject, Path(dataset).name), problems, limits,
                    lines)
    if data is None or done is None:
        return [], problems
    # A completion whose index names no dataset record answers nothing: a line of the completions
    # file that is not scored (named in file order), not a record of the run.
    known = f"{min(data)} to {max(data)}" if data else "none"
    for index in sorted(set(done) - set(data), key=lambda i: done[i][0]):
        problems.append(FileProblem(f"{completions}:{done[index][0]}",
                                    f"index {index} is not in {dataset} (its indices: {known})"))
    problems.sort(key=_line_order)
    samples = []
    for index in sorted(data):
        sample = Sample(model, subject, index, str(completions), gravity)
        samples.append(sample)
        dline, drec, dmissing = data[index]
        if dmissing:
            sample.fail(f"{dataset}:{dline}: index {index}: {dmissing}")
            continue
        in_data = f"{dataset}:{dline}: index {index}"
        truth = {"ground_truth": drec["ground_truth"], "input_grid": drec.get("input_grid")}
        if index not in done or done[index][2]:
            # No completion: the model's zero, unless the sample itself is broken (then nobody's).
            if parse_ground_truth(sample, truth, dict.fromkeys(truth, in_data), limits):
                sample.fail(f"{in_data} has no completion in {completions}" if index not in done else
                            f"{completions}:{done[index][0]}: index {index}: {done[index][2]}", "missing")
            continue
        cline, completion, _ = done[index]
        values = {**truth, "completion": completion}
        where = {"ground_truth": in_data, "input_grid": in_data, "completion": f"{completions}:{cline}: index {index}"}
        parse_grids(sample, values, where, limits, defer_completion)
    return samples, problems


def _line_order(problem):
    """(file, line number) of a problem naming ``file:line`` (a whole file's problem first)."""
    path, _, number = problem.path.rpartition(":")
    return (path, int(number)) if number.isdigit() else (problem.path, 0)


# json.dumps(row, allow_nan=False) builds a new encoder every call (only the all-defaults call
# reuses one); this one is json.dumps's own with allow_nan=False, made once.
