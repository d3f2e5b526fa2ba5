"""Reading SPhyR result files and writing results, never losing a batch to bad input.

A *result file* is a JSON array of records with ``prompt``, ``ground_truth``
and ``completion`` (grids as text or lists of rows).  A folder is searched
recursively for ``*.json`` files; ``*_aggregated_results.json`` files are
summaries, not records, and are skipped.  A record's ``model`` is the name of
the folder holding its file, its ``subject`` the file name without ``.json``
and a trailing ``_results``, its ``index`` its position in the file.

Problems are reported as data: a file that cannot be read becomes a
:class:`FileProblem`, a record missing a field or holding an unusable grid
becomes a :class:`Sample` whose ``error`` names the reason.  When the fault is
the model's (no completion, or one that is not a grid) ``completion_status``
says so (``"missing"`` or ``"unreadable"``): such a record counts 0 in the
model's means (docs/scoring.md, "Means"); a record whose ground truth or
prompt is broken is left out of every model's means.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .. import grid as grids
from ..loadcase import gravity_from_folder
from .atomic import write_text_atomic

AGGREGATED_SUFFIX = "_aggregated_results.json"
RESULTS_SUFFIX = "_results"
REQUIRED_FIELDS = ("prompt", "ground_truth", "completion")


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
    completion_status: str = None  # "missing" / "unreadable": the model's fault, counts 0

    def fail(self, error, completion_status=None):
        """Mark the sample unusable; ``completion_status`` when the completion is at fault."""
        self.error, self.completion_status = error, completion_status

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
                p for p in path.rglob("*.json") if p.is_file() and not p.name.endswith(AGGREGATED_SUFFIX)
            )
        else:
            found.append(path)
    return found


def _grid(record, field):
    value = record[field]
    rows = grids.as_grid(value)
    return rows


def sample_from_record(record, model, subject, index, source, gravity):
    """A :class:`Sample` from one raw record (``error`` set when it is unusable)."""
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
    for field in ("ground_truth", "completion"):
        try:
            setattr(sample, field, _grid(record, field))
        except grids.GridError as err:
            sample.fail(f"{where}: {field}: {err}", "unreadable" if field == "completion" else None)
            return sample
    if "input_grid" in record:
        try:
            sample.input_grid = grids.as_grid(record["input_grid"])
        except grids.GridError:
            sample.input_grid = None
    else:
        prompt = record["prompt"]
        sample.input_grid = grids.prompt_input_grid(prompt) if isinstance(prompt, str) else None
    return sample


def read_result_file(path, gravity=None):
    """Samples of one result file, or a :class:`FileProblem` if it cannot be read."""
    path = Path(path)
    model = path.parent.name
    subject = subject_of(path)
    try:
        with open(path, encoding="utf-8") as handle:
            records = json.load(handle)
    except (OSError, UnicodeDecodeError) as err:
        return FileProblem(str(path), f"cannot read: {err}")
    except json.JSONDecodeError as err:
        return FileProblem(str(path), f"not valid JSON: {err}")
    if not isinstance(records, list):
        return FileProblem(str(path), f"expected a JSON array of records, found a {type(records).__name__}")
    g = gravity if gravity is not None else gravity_from_folder(model)
    return [sample_from_record(r, model, subject, i, str(path), g) for i, r in enumerate(records)]


def write_jsonl_atomic(path, rows):
    """JSON objects one per line, written atomically."""
    write_text_atomic(path, "".join(json.dumps(row, allow_nan=False) + "\n" for row in rows))


def _read_jsonl(path):
    """(line number, object or None, problem) for every non-blank line of a JSONL file."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line), None
            except json.JSONDecodeError as err:
                yield number, None, f"not valid JSON: {err}"


def read_dataset_completions(dataset, completions, model=None, gravity=None):
    """Samples pairing dataset records with completions by ``index``.

    Returns ``(samples, problems)``: broken lines and unreadable files are
    :class:`FileProblem` entries naming file and line; a dataset record with no
    completion, or a completion whose index is not in the dataset, becomes a
    sample with an ``error``.
    """
    problems = []
    subject = subject_of(Path(dataset).name[: -len(".jsonl")] if str(dataset).endswith(".jsonl") else dataset)
    model = model or Path(completions).stem
    if gravity is None:
        gravity = gravity_from_folder(Path(completions).parent.name)
        if gravity == (1.0, 0.0):
            gravity = gravity_from_folder(Path(dataset).parent.name)

    def load(path, required):
        records = {}
        try:
            for number, obj, problem in _read_jsonl(path):
                where = f"{path}:{number}"
                if problem:
                    problems.append(FileProblem(where, problem))
                elif not isinstance(obj, dict):
                    problems.append(FileProblem(where, f"a record must be a JSON object, not {type(obj).__name__}"))
                elif not isinstance(obj.get("index"), int) or isinstance(obj.get("index"), bool):
                    problems.append(FileProblem(where, "record has no integer 'index'"))
                elif obj["index"] in records:
                    problems.append(FileProblem(where, f"duplicate index {obj['index']}"))
                else:
                    missing = [f for f in required if f not in obj]
                    records[obj["index"]] = (number, obj, missing)
        except (OSError, UnicodeDecodeError) as err:
            problems.append(FileProblem(str(path), f"cannot read: {err}"))
            return None
        return records

    data = load(dataset, ("ground_truth",))
    done = load(completions, ("completion",))
    if data is None or done is None:
        return [], problems
    samples = []
    for index in sorted(set(data) | set(done)):
        sample = Sample(model, subject, index, str(completions), gravity)
        samples.append(sample)
        if index not in data:
            sample.error = f"{completions}:{done[index][0]}: index {index} is not in {dataset}"
            continue
        dline, drec, dmissing = data[index]
        if dmissing:
            sample.fail(f"{dataset}:{dline}: index {index}: missing field {', '.join(map(repr, dmissing))}")
            continue
        try:
            sample.ground_truth = grids.as_grid(drec["ground_truth"])
        except grids.GridError as err:
            sample.fail(f"{dataset}:{dline}: index {index}: ground_truth: {err}")
            continue
        if index not in done:
            sample.fail(f"{dataset}:{dline}: index {index} has no completion in {completions}", "missing")
            continue
        cline, crec, cmissing = done[index]
        if cmissing:
            sample.fail(f"{completions}:{cline}: index {index}: missing field 'completion'", "missing")
            continue
        try:
            sample.completion = grids.as_grid(crec["completion"])
        except grids.GridError as err:
            sample.fail(f"{completions}:{cline}: index {index}: completion: {err}", "unreadable")
            continue
        try:
            sample.input_grid = grids.as_grid(drec.get("input_grid")) if drec.get("input_grid") else None
        except grids.GridError:
            sample.input_grid = None
    return samples, problems


class ResultsLog:
    """``results.jsonl`` as an append-only log that survives being killed.

    Every rank appends whole lines with one ``write`` on an ``O_APPEND``
    descriptor and flushes, so lines from several ranks never interleave.  A
    kill can at worst leave one partial last line: :meth:`recover` drops it
    (rewriting the file atomically) and returns the rows already written, which
    ``--resume`` skips.  :meth:`finalise` rewrites the file sorted by
    (model, subject, index), again atomically.
    """

    def __init__(self, path):
        self.path = Path(path)
        self._fd = None

    def recover(self):
        """Rows already in the log (partial or broken lines dropped)."""
        if not self.path.exists():
            return []
        rows, dropped = [], 0
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    dropped += 1
                    continue
                if isinstance(row, dict) and "model" in row and "subject" in row and "index" in row:
                    rows.append(row)
                else:
                    dropped += 1
        if dropped:
            write_jsonl_atomic(self.path, rows)
        return rows

    def reset(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(self.path, [])

    def append(self, row):
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        data = (json.dumps(row, allow_nan=False) + "\n").encode("utf-8")
        written = os.write(self._fd, data)
        if written != len(data):  # regular files do not short-write short of a full disk
            raise OSError(f"short write to {self.path}")

    def close(self):
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def finalise(self):
        """Sorted, de-duplicated rows (last write of a key wins), rewritten atomically."""
        rows = {}
        for row in self.recover():
            rows[row_key(row)] = row
        ordered = [rows[k] for k in sorted(rows, key=_sort_key)]
        write_jsonl_atomic(self.path, ordered)
        return ordered


def row_key(row):
    return (row["model"], row["subject"], row["index"])


def _sort_key(key):
    model, subject, index = key
    return (str(model), str(subject), (0, index) if isinstance(index, int) else (1, str(index)))
