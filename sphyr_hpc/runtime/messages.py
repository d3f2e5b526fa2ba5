"""The wording of what the commands tell a user: one sentence per fault, the same in every command.

Every command says the same thing for the same fault ("no such file: X",
never "dataset file not found" in one and "cannot read" in another), and
every line a command prints about its inputs or outputs starts with the
program's name (:func:`say`), so a line in a batch system's log names who
wrote it.  A usage error's text comes from here and is printed by the runner
(``cli.report_usage_error``: ``prog: error: text``, exit status 2).

Exit statuses of a write failure: :data:`WRITE_FAILED_STATUS` (a full disk,
a quota, a vanished folder: nothing is lost, ``--resume`` finishes).
"""

import sys
from pathlib import Path

__all__ = ["WRITE_FAILED_STATUS", "array_given_as_jsonl", "certified_count", "dataset_given_as_path", "existing_results",
           "jsonl_given_as_path", "no_completion_in", "no_such", "prog_of", "say", "unanswered", "write_failed"]

# A run that could not write its output (ENOSPC, EDQUOT, EIO, ...): not a usage error (2) nor a bug (3).
WRITE_FAILED_STATUS = 4


def prog_of(command):
    """The program name of ``python -m sphyr_hpc.<command>`` (what every line starts with)."""
    return f"python -m sphyr_hpc.{command}"


def say(prog, text, file=None):
    """Print ``prog: text`` on stderr (the caller decides which rank speaks)."""
    sys.stdout.flush()  # what the command printed before comes first, also when both go to one file
    print(f"{prog}: {text}", file=sys.stderr if file is None else file, flush=True)


def no_such(paths, folders=False):
    """``no such file: a, b`` (or ``no such file or folder`` where a folder would do)."""
    what = "file or folder" if folders else "file"
    return f"no such {what}: {', '.join(map(str, paths))}"


def jsonl_given_as_path(path):
    """A dataset or completions file (JSONL) named where a result file (a JSON array) goes."""
    return (f"{path} is a JSONL file (one record per line), not a result file (a JSON array of records): "
            f"score a dataset and a model's completions with --dataset D.jsonl --completions C.jsonl")


def array_given_as_jsonl(option, path):
    """A JSON array named where JSON lines (one record a line) go."""
    return (f"{option} {path} is a JSON array; {option} reads JSON lines, one record a line: write each "
            f"record on a line of its own (jq -c '.[]' {path} > {Path(path).stem}.jsonl)")


def dataset_given_as_path(path):
    """A JSON array of dataset records (no completion) named where a result file goes."""
    return (f"{path} holds dataset records (input_grid and ground_truth, no completion), not a model's results: "
            f"score a model's completions of it with --dataset D.jsonl --completions C.jsonl")


def no_completion_in(path):
    """A completions file without a single line to score."""
    return f"--completions {path} holds no completion (no line in the file): nothing of it to score"


def existing_results(out, records):
    """``--out`` already holds a run's results and neither --resume nor --overwrite was given."""
    return (f"--out {out} already holds an earlier run's results ({records} records in "
            f"{out}/results.jsonl): add --resume to finish that run, --overwrite to replace it, "
            f"or choose a new --out folder")


def unanswered(count, total, list_path):
    """One line for every record a model left without a completion."""
    return (f"{count} of {total} records have no completion (each counts 0 in its model's means); "
            f"their list is in {list_path}")


def write_failed(folder, err, kept):
    """One line for an output that could not be written mid-run: where, why, what is kept, what to do."""
    why = getattr(err, "strerror", None) or str(err)
    return (f"cannot write to {folder} ({why}); the {kept} records already in {folder}/results.jsonl are "
            f"kept: free some space (or fix the folder), then run the same command with --resume to finish")


def certified_count(folder, count, scored):
    """How many scored records ``score --certified`` could give a certified optimum."""
    others = ("" if count == scored else
              "; the others' are null: certify did not see their sample or did not prove it optimal")
    return f"--certified {folder}: {count} of {scored} scored records had a certificate (certified_* fields){others}"
