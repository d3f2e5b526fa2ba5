"""What ``python -m sphyr_hpc.prompts`` runs: every dataset record's prompt, one JSON line each.

A line is ``{"index", "subject", "dataset", "prompt"}``: the record's index, the subject (the
dataset file's name without ``.jsonl``), the dataset file's name and SPhyR's prompt
(:func:`sphyr_hpc.core.prompt.prompt_of`).  A record no prompt can be built from is named on
stderr (``FILE:LINE: skipped, reason``) and costs only itself.
"""

import json
import sys
from pathlib import Path

from ..core.prompt import PromptError, prompt_of
from ..io.atomic import write_text_atomic
from ..io.jsonl import read_jsonl
from ..io.limits import InputLimits
from ..runtime.messages import no_such
from ..runtime.process import UsageError

DATASET_SUFFIX = ".jsonl"


def subject_of(path):
    """The subject of a dataset file: its name without ``.jsonl``."""
    name = Path(path).name
    return name[: -len(DATASET_SUFFIX)] if name.endswith(DATASET_SUFFIX) else Path(path).stem


def dataset_files(paths, distinct=True):
    """The dataset files named by ``paths``: files as given, a folder's ``*.jsonl`` files sorted.

    :class:`UsageError` for a path that does not exist, a folder with no dataset, or (``distinct``)
    two datasets of the same name (a prompts file, and a scoring run, tell datasets apart by name:
    one dataset version per file or run).
    """
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(no_such(missing, folders=True))
    files = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.glob(f"*{DATASET_SUFFIX}") if not p.is_dir())
            if not found:
                raise UsageError(f"{path} holds no dataset (*{DATASET_SUFFIX} files)")
            files += found
        else:
            files.append(path)
    seen = {}
    for path in files if distinct else ():
        if path.name in seen:
            raise UsageError(f"{seen[path.name]} and {path} have the same name: a prompts file and a scoring run "
                             f"tell datasets apart by name; give one dataset version per run (one --out each)")
        seen[path.name] = path
    return files


def prompt_rows(path, hard=None, errors=None, limits=InputLimits()):
    """(rows, skipped) of one dataset file; each skipped record is one line on ``errors`` (stderr)."""
    errors = sys.stderr if errors is None else errors
    subject, rows, skipped, seen = subject_of(path), [], 0, set()
    lines, reason = read_jsonl(path, limits)
    if reason:
        print(f"{path}: skipped, {reason}", file=errors)
        return rows, 1
    for number, record, problem in lines:
        where = f"{path}:{number}"
        index = record.get("index") if isinstance(record, dict) else None
        try:
            if problem:
                raise PromptError(problem)
            if not isinstance(record, dict):
                raise PromptError(f"a record must be a JSON object, not {type(record).__name__}")
            if not isinstance(index, int) or isinstance(index, bool):
                raise PromptError("record has no integer 'index' (prompts and completions pair by it)")
            if index in seen:
                raise PromptError(f"duplicate index {index}")
            prompt = prompt_of(record, subject, hard)
        except PromptError as err:
            print(f"{where}: skipped, {err}", file=errors)
            skipped += 1
            continue
        seen.add(index)
        rows.append({"index": index, "subject": subject, "dataset": Path(path).name, "prompt": prompt})
    return rows, skipped


def run_prompts(paths, out, hard=None, errors=None):
    """Write the prompts of every dataset under ``paths`` to ``out``; the exit status (1: a record skipped)."""
    rows, skipped, files = [], 0, dataset_files(paths)
    for path in files:
        more, bad = prompt_rows(path, hard, errors)
        rows += more
        skipped += bad
    write_text_atomic(out, "".join(json.dumps(row) + "\n" for row in rows))
    note = f" ({skipped} record{'s' if skipped != 1 else ''} skipped, named above)" if skipped else ""
    print(f"{len(rows)} prompts of {len(files)} dataset{'s' if len(files) != 1 else ''} -> {out}{note}")
    return 1 if skipped else 0
