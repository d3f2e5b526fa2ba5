"""The completion lines model runners write, read as they are (docs/harness.md, "Completions").

One line of a completions file is one of:

* ``{"index": 3, "completion": "..."}``: the plain form (``{"index": 3, "error": "..."}``: a
  record the runner has no completion of, and why);
* a line of the prompts file (``python -m sphyr_hpc.prompts``) with a ``completion`` added: its
  ``dataset`` names the dataset file, and a line of another dataset is not this dataset's;
* an OpenAI batch output line, ``{"custom_id": "full_easy-3", "response": {"status_code": 200,
  "body": {"choices": [{"message": {"content": "..."}}]}}, "error": null}``: the index is the
  number that ends ``custom_id``, and a prefix before it (``full_easy-``, ``full_easy.jsonl:``)
  names the subject or the dataset file; a failed request is a record with no completion.

:func:`completion_line` turns each into ``(index, completion, why)``.
"""

import json
import re

# SUBJECT-INDEX, SUBJECT:INDEX, SUBJECT/INDEX, SUBJECT#INDEX or INDEX alone.
CUSTOM_ID = re.compile(r"^(?:(?P<prefix>.*?)[-:/#])?(?P<index>\d+)$")
OTHER_DATASET = "other dataset"


class LineProblem(ValueError):
    """A completion line that is none of the forms: the message says what it is and what to write."""


def _index_problem(record):
    """Why a line's ``index`` is not one, and what to write instead."""
    if "index" not in record:
        return "record has no 'index' (records pair by their integer index)"
    index = record["index"]
    if isinstance(index, str) and index.strip().lstrip("+-").isdigit():
        return f"'index' is the string {json.dumps(index)}, not an integer: write \"index\": {int(index)}"
    if isinstance(index, float) and index.is_integer():
        return f"'index' is the number {index!r}, not an integer: write \"index\": {int(index)}"
    return f"'index' is {json.dumps(index)[:40]} ({type(index).__name__}), not an integer"


def index_of(record):
    """The integer ``index`` of a JSONL record; :class:`LineProblem` saying what to write otherwise."""
    index = record.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise LineProblem(_index_problem(record))
    return index


def _batch_content(line):
    """(content, why) of an OpenAI batch output line: the text, or why the request has none."""
    error = line.get("error")
    response = line.get("response")
    if error:
        message = error.get("message") if isinstance(error, dict) else error
        return None, f"the batch request failed: {str(message)[:200]}"
    if not isinstance(response, dict):
        return None, "the batch line has no 'response'"
    body = response.get("body")
    status = response.get("status_code")
    if status != 200:
        detail = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(body.get("error"), dict) else ""
        return None, f"the batch request answered status {status}{': ' + str(detail)[:200] if detail else ''}"
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None, "the batch response has no choices[0].message.content (a chat completions body)"
    if not isinstance(content, str):
        return None, "the batch response's message has no text content (a refusal or a tool call)"
    return content, None


def _batch_index(custom_id, subject, dataset_name):
    """The index a ``custom_id`` names, or :data:`OTHER_DATASET` when its prefix names another dataset."""
    match = CUSTOM_ID.match(custom_id) if isinstance(custom_id, str) else None
    if match is None:
        raise LineProblem(f"custom_id {json.dumps(custom_id)[:60]} does not end in the record's index: "
                          f"write custom_id as SUBJECT-INDEX (e.g. {subject}-3)")
    prefix = match.group("prefix")
    if prefix and prefix not in (subject, dataset_name):
        return OTHER_DATASET
    return int(match.group("index"))


def completion_line(record, subject, dataset_name):
    """``(index, completion, why)`` of one completions line of the dataset ``dataset_name`` (``subject``).

    ``completion`` is None when the line has none, and ``why`` then says why (a missing field, a
    failed batch request); ``index`` is :data:`OTHER_DATASET` for a line of another dataset (skipped).
    Raises :class:`LineProblem` for a line that is none of the forms.
    """
    if "custom_id" in record and "index" not in record:
        index = _batch_index(record["custom_id"], subject, dataset_name)
        content, why = _batch_content(record) if index != OTHER_DATASET else (None, None)
        return index, content, why
    if "dataset" in record and isinstance(record["dataset"], str) and record["dataset"] != dataset_name:
        return OTHER_DATASET, None, None
    index = index_of(record)
    if "completion" not in record:
        error = record.get("error")
        return index, None, f"no completion: {str(error)[:200]}" if error else "missing field 'completion'"
    return index, record["completion"], None
