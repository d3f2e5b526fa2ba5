"""Reading SPhyR result files and writing results, never losing a batch to bad input.

A *result file* is a JSON array of records with ``prompt``, ``ground_truth``
and ``completion`` (grids as text or lists of rows).  A folder is searched
recursively for ``*.json`` files; ``*_aggregated_results.json`` files are
summaries, not records, and are skipped.  A record's ``model`` is the name of
the folder holding its file, its ``subject`` the file name without ``.json``
and a trailing ``_results``, its ``index`` its position in the file.

Problems are reported as data: a file that cannot be read becomes a
:class:`FileProblem`, a record missing a field or holding an unusable grid
becomes a :class:`Sample` whose ``error`` names the reason.
"""

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import grid as grids
from ..loadcase import gravity_from_folder

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
        sample.error = f"{where}: missing field {', '.join(repr(f) for f in missing)}"
        return sample
    for field in ("completion", "ground_truth"):
        try:
            setattr(sample, field, _grid(record, field))
        except grids.GridError as err:
            sample.error = f"{where}: {field}: {err}"
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
    """Write JSON objects one per line; the file appears complete or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, allow_nan=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
