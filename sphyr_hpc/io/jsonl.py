"""Reading JSON files line by line, each line on its own: the one JSONL reader of the package.

Every JSONL file goes through :func:`read_jsonl`: datasets, completions,
results logs, certify.jsonl, published metrics.  A broken line costs only
itself (it comes back as a problem naming why); untrusted input is refused
from its size first (:class:`~sphyr_hpc.io.limits.InputLimits`).
"""

import json
import os
import stat
import sys

from ..core import grid as grids
from .atomic import write_text_atomic
from .limits import InputLimits


# What decoding untrusted JSON may raise besides JSONDecodeError: the C scanner recurses once
# per nesting level ("[[[[..."), and a document can ask for more memory than there is.
DECODE_LIMITS = {RecursionError: "nested too deeply to decode", MemoryError: "too large to decode in memory"}


def decode_json(text):
    """(value, None) or (None, reason) for one JSON document."""
    try:
        return json.loads(text), None
    except ValueError as err:  # JSONDecodeError, or an integer of more digits than Python converts
        return None, f"not valid JSON: {err}"
    except (RecursionError, MemoryError) as err:
        return None, f"not readable JSON: {DECODE_LIMITS[type(err)]}"


def read_bytes(path, limits):
    """(bytes, None) or (None, reason): the whole file, refused from its size if over the limit."""
    try:
        # Non-blocking open, then fstat: a FIFO or a device named like a result file is refused
        # instead of blocking the run (no effect on regular files).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with open(fd, "rb") as handle:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                return None, "not a regular file"
            reason = limits.file_too_large(status.st_size)
            if reason:
                return None, reason
            data = handle.read(limits.max_file_bytes + 1)  # never more, should the file grow meanwhile
    except OSError as err:
        return None, f"cannot read: {err}"
    except MemoryError:
        return None, "cannot read: out of memory"
    if len(data) > limits.max_file_bytes:
        return None, limits.file_too_large(len(data))
    return data, None


def utf8(data):
    """(text, None) or (None, reason); a UTF-8 byte-order mark is allowed."""
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as err:
        return None, f"not UTF-8: {err}"


def write_jsonl_atomic(path, rows):
    """JSON objects one per line, written atomically."""
    write_text_atomic(path, "".join(json.dumps(row, allow_nan=False) + "\n" for row in rows))


def _decode_lines(raw_lines):
    """(line number, object or None, problem) for every non-blank line, each decoded on its own."""
    for number, raw in enumerate(raw_lines, start=1):
        line, problem = utf8(raw)
        if problem:
            yield number, None, problem
        elif line.strip():
            obj, problem = decode_json(line)
            yield number, obj, problem


def _stream_lines(path):
    with open(path, "rb") as handle:
        yield from _decode_lines(handle)


def read_jsonl(path, limits=None):
    """``(lines, None)``, or ``(None, reason)`` for a file that cannot be read at all.

    ``lines`` yields (line number, object or None, problem) for every non-blank
    line; each line is decoded on its own, so a broken line costs only itself.
    ``limits`` (an :class:`~sphyr_hpc.io.limits.InputLimits`): untrusted input,
    refused from its size before it is read.  None: a file this package wrote,
    streamed line by line at any size (an unreadable one raises ``OSError``
    when ``lines`` is iterated).
    """
    if limits is None:
        return _stream_lines(path), None
    data, reason = read_bytes(path, limits)
    if reason:
        return None, reason
    return _decode_lines(data.split(b"\n")), None


ROW_FIELDS = ("model", "subject", "index")


def read_rows(path):
    """``(rows, broken)``: the results rows of a JSONL file this package wrote (``results.jsonl``),
    and how many non-blank lines are not one (broken JSON, not an object, no model/subject/index)."""
    rows, broken = [], 0
    for _, obj, problem in read_jsonl(path)[0]:
        if (problem or not isinstance(obj, dict) or not set(ROW_FIELDS) <= obj.keys()
                or not isinstance(obj["model"], str) or not isinstance(obj["subject"], str)):
            broken += 1
        else:
            rows.append(obj)
    return rows, broken


def read_dataset(path, limit=None, errors=None):
    """(position, record) of the first ``limit`` records of a dataset JSONL file.

    Blank lines are skipped.  Unreadable records are reported on ``errors`` as
    ``path:line: reason`` and left out, but still take their position and count
    towards ``limit``.  The ``ground_truth`` (and ``input_grid``, if present) come
    back as lists of rows of stripped str.  ``errors`` defaults to the current
    ``sys.stderr``.
    """
    errors = sys.stderr if errors is None else errors
    position = 0
    lines, reason = read_jsonl(path, InputLimits())  # each line on its own, within the default input limits
    if reason:
        print(f"{path}: skipped, {reason}", file=errors)
        return
    for line_number, record, problem in lines:
        if limit is not None and position >= limit:
            return
        here, position = position, position + 1
        if problem:
            print(f"{path}:{line_number}: skipped, {problem}", file=errors)
            continue
        if not isinstance(record, dict):
            print(f"{path}:{line_number}: skipped, a record must be a JSON object, "
                  f"not {type(record).__name__}", file=errors)
            continue
        try:
            truth = grids.as_grid(record.get("ground_truth"))
            grids.grid_shape(truth)
        except grids.GridError as err:
            print(f"{path}:{line_number}: skipped, no usable ground_truth: {err}", file=errors)
            continue
        input_grid = record.get("input_grid")
        try:
            input_grid = grids.as_grid(input_grid) if input_grid is not None else None
        except grids.GridError as err:
            # docs/scoring.md, "Metrics": without a usable input grid every non-L/S cell is free.
            print(f"{path}:{line_number}: input_grid ignored: {err}", file=errors)
            input_grid = None
        yield here, dict(record, ground_truth=truth, input_grid=input_grid)
