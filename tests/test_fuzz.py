"""Fuzz: random and mutated real records, scored in one run (also on 2 ranks), each answered exactly once.

A seeded generator (``random.Random(SEED)``, so a failure reproduces) builds
result files from the bundled published records: completions with random
tokens, shapes, nesting, types and sizes; ground truths and prompts broken or
reshaped; fields missing or extra; whole files in other encodings, cut short,
nested, of the wrong top-level type or random bytes; plus a dataset/completions
JSONL pair with damaged lines.  One ``score`` run must answer every record
exactly once (a metric row, an ``invalid_reason`` or an ``error``), name every
unreadable file or line on stderr, print no traceback or library warning, exit
with 0 or 1, and finish in bounded time.
"""

import json
import os
import random
import time
from pathlib import Path

import pytest
from mpi4py import MPI

from conftest import DATA, EXAMPLE_RESULTS, collective
from sphyr_hpc.score import main

SEED = int(os.environ.get("SPHYR_FUZZ_SEED", 14))  # another seed explores further: SPHYR_FUZZ_SEED=7 pytest ...
FILES = 80           # result files
RECORDS = 12         # at most per file
JSONL_RECORDS = 20   # dataset/completions pair
SECONDS = 300        # the bound on the whole run (on this 2-core machine it takes well under it)

TOKENS = ["0", "1", "0.0", "1.0", "0.5", "L", "S", "V", "x", "nan", "inf", "-1", "1.5", "1e999999999",
          "1e-400", "-0", "+.5", "\u0661", "\u0660.\u0665", "0,5", "```", "[", "\u216b", "\ud800", "\u00e9",
          "\U0001F600", "99999999999999999999999999", "0x1", "1_0", "\u00a0", "\x00", "None", "true"]
ODD_CELLS = [0, 1, 0.5, -3, 1e308, None, True, [], ["1"], [[["0"]]], {"v": 1}, "", " 1 "]


def _real_records():
    records = []
    for path in sorted(EXAMPLE_RESULTS.rglob("*.json")):
        records += json.loads(path.read_text())
    return records


def _lines(text):
    return [line.split() for line in text.splitlines()]


def _text(rows):
    return "\n".join(" ".join(row) for row in rows)


def _mutate_grid_text(rng, text):
    rows = _lines(text)
    kind = rng.randrange(10)
    if kind == 0 and rows:                                   # random cells replaced by random tokens
        for _ in range(rng.randint(1, 6)):
            row = rng.choice(rows)
            if row:
                row[rng.randrange(len(row))] = rng.choice(TOKENS)
    elif kind == 1 and rows:                                 # a row dropped, duplicated or cut
        i = rng.randrange(len(rows))
        [lambda: rows.pop(i), lambda: rows.insert(i, list(rows[i])), lambda: rows[i].pop() if rows[i] else None][
            rng.randrange(3)]()
    elif kind == 2:                                          # prose and code fences around it
        return f"Sure! Here it is:\n```\n{_text(rows)}\n```\nno wait\n" + _text(rows[: rng.randint(0, 3)])
    elif kind == 3:                                          # token soup of a random shape
        rows = [[rng.choice(TOKENS) for _ in range(rng.randint(0, 14))] for _ in range(rng.randint(0, 14))]
    elif kind == 4:                                          # random whitespace and line breaks
        return "".join(c if c != " " else rng.choice([" ", "\t", "  ", "\u00a0", "\u2028", "\r\n"]) for c in text)
    elif kind == 5:                                          # a grid inside the grid's lines
        return text.replace("\n", " " + rng.choice(TOKENS) + "\n", rng.randint(1, 5))
    return _text(rows)


def _mutate_value(rng, text):
    """A grid value: mutated text, a list of rows (maybe of odd cells), or something else entirely."""
    kind = rng.randrange(12)
    if kind < 6:
        return _mutate_grid_text(rng, text)
    if kind == 6:
        return [row for row in _lines(_mutate_grid_text(rng, text))]
    if kind == 7:
        return [[rng.choice(ODD_CELLS) for _ in range(rng.randint(0, 10))] for _ in range(rng.randint(0, 10))]
    if kind == 8:
        return [" ".join(row) for row in _lines(text)] + rng.choice([[], [1], [None], [["0"]]])
    if kind == 9:
        return rng.choice([None, 3.5, True, {"grid": text}, [], "", [[]], [None], 7])
    if kind == 10:
        return text + ("\n0 1 0 1 0" * rng.randint(100, 250_000))   # up to 2.5 MB, over the text limit
    return text


def _mutate_record(rng, record):
    record = dict(record)
    kind = rng.randrange(12)
    if kind < 5:
        record["completion"] = _mutate_value(rng, record["completion"])
    elif kind == 5:
        record["ground_truth"] = _mutate_value(rng, record["ground_truth"])
    elif kind == 6:
        prompt = record["prompt"]
        record["prompt"] = rng.choice([prompt.replace("Below is", "Above is"), prompt[: rng.randrange(len(prompt))],
                                       None, 42, ["V"], prompt + "\n0 V 1\n"])
    elif kind == 7:
        del record[rng.choice(["prompt", "ground_truth", "completion"])]
    elif kind == 8:
        record.update({rng.choice(["extra", "index", "model", "input_grid", ""]): rng.choice(ODD_CELLS + TOKENS)})
    elif kind == 9:
        return rng.choice([None, 1, "record", [record], []])
    elif kind == 10:
        record["ground_truth"] = rng.choice(["0 0\n0 0", "L L\nL L", "S\nL", "L 0 0\n0 0\nS S S", "",
                                             "\n".join(" ".join(["L"] * 300) if r == 0 else " ".join(["1"] * 300)
                                                       for r in range(299)) + "\n" + " ".join(["S"] * 300)])
    return record


def _file_bytes(rng, records):
    """(bytes, reason): reason starts the message expected for a file that is not an array of records."""
    text = json.dumps(records, ensure_ascii=rng.random() < 0.5)  # a lone surrogate is kept only if not ASCII

    def utf8(text, reason=None):  # a lone surrogate written as such is not UTF-8
        return text.encode("utf-8", "surrogatepass"), ("not UTF-8" if "\ud800" in text else reason)

    kind = rng.randrange(24)  # one file in four is broken as a whole
    if kind == 0:
        data, reason = utf8(text)
        return b"\xef\xbb\xbf" + data, reason                        # a byte-order mark is allowed
    if kind == 1:
        return json.dumps([{"note": "caf\u00e9"}] + records, ensure_ascii=False).encode("latin-1", "replace"), \
            "not UTF-8"
    if kind == 2:
        return text.encode("utf-16", "surrogatepass"), "not UTF-8"
    if kind == 3:
        return utf8(text[: rng.randrange(len(text))], "not valid JSON")
    if kind == 4:
        # Deeper than any supported Python's decoder goes: 3.11 stops at its recursion limit (1,000
        # levels), 3.12 and newer at a C stack limit of their own (a few thousand levels more).
        return utf8("[" * rng.choice([20_000, 100_000]) + text, "not readable JSON: nested too deeply")
    if kind == 5:
        return json.dumps(rng.choice([{"records": records}, "records", 3, None, True])).encode(), \
            "expected a JSON array"
    if kind == 7:                                        # an integer Python will not convert
        return utf8(text.replace("[", "[" + "7" * rng.randint(4301, 9000) + ", ", 1), "not valid JSON: Exceeds")
    if kind == 6:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 400))), ""   # any reason
    return utf8(text)


def _jsonl_pair(rng, tmp_path):
    """A dataset and a completions JSONL with damaged lines; the indices each must answer."""
    dataset = [json.loads(line) for line in (DATA / "full_easy_first20.jsonl").read_text().splitlines()]
    data_lines, done_lines, answered, broken = [], [], set(), []
    for record in dataset[:JSONL_RECORDS]:
        truth = _text(record["ground_truth"])
        data_lines.append(json.dumps(record).encode())
        answered.add(record["index"])
        if rng.random() < 0.15:
            continue                                           # no completion: an error row
        done = {"index": record["index"], "completion": _mutate_value(rng, truth)}
        done_lines.append(json.dumps(done).encode("utf-8", "surrogatepass"))
    for lines, name in ((data_lines, "toy.jsonl"), (done_lines, "fuzz-model.jsonl")):
        for _ in range(4):
            i = rng.randrange(len(lines) + 1)
            bad = rng.choice([b"[" * 100_000, b'{"index": ' + b"9" * 5000 + b"}",
                              b'{"index": 1, "completion": "\xff"}', b"[1, 2]", b'{"index": "one"}',
                              b'{"index": 3, ', b"\x00\x01", b"null"])
            lines.insert(i, bad)
        broken.append((tmp_path / name, [n for n, line in enumerate(lines, 1) if line.strip() and _is_bad(line)]))
        (tmp_path / name).write_bytes(b"\n".join(lines))
    # An index whose completion line is broken is answered as "no completion"; one only in the
    # completions is answered as "not in the dataset": either way every index read is answered.
    indices = answered | {json.loads(line)["index"] for line in done_lines if not _is_bad(line)}
    return tmp_path / "toy.jsonl", tmp_path / "fuzz-model.jsonl", indices, broken


def _is_bad(line):
    try:
        obj = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return True
    return not isinstance(obj, dict) or not isinstance(obj.get("index"), int)


def _build(base, files):
    """Write the fuzzed inputs under ``base``: (score arguments, expected keys, broken files, broken lines)."""
    rng = random.Random(SEED)
    real = _real_records()
    root = base / "results"
    expected, broken_files = set(), {}
    for f in range(files):
        model = rng.choice(["fuzz-a", "fuzz-b", "m\u00f6del-\U0001F600"])
        records = [_mutate_record(rng, rng.choice(real)) if rng.random() < 0.8 else rng.choice(real)
                   for _ in range(rng.randint(0, RECORDS))]
        data, broken = _file_bytes(rng, records)
        path = root / model / f"f{f:02d}_results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if broken is not None:
            broken_files[path] = broken
        else:
            expected.update((model, f"f{f:02d}", i) for i in range(len(records)))
    dataset, completions, indices, broken_lines = _jsonl_pair(rng, base)
    expected.update(("fuzz-model", "toy", i) for i in indices)
    args = [str(root), "--dataset", str(dataset), "--completions", str(completions), "--out", str(base / "out"),
            "--quiet"]
    return args, expected, broken_files, broken_lines


def _check(base, plan, status, err, seconds):
    """Assert every record answered exactly once and every broken input named; a one-line account."""
    _, expected, broken_files, broken_lines = plan
    rows = [json.loads(line) for line in (base / "out" / "results.jsonl").read_text().splitlines()]
    keys = [(r["model"], r["subject"], r["index"]) for r in rows]
    assert len(keys) == len(set(keys)), "a record answered twice"
    assert set(keys) == expected
    for row in rows:
        answers = ["error" in row, "invalid_reason" in row, row.get("physically_valid") is True]
        assert sum(answers) == 1, row
        if row.get("physically_valid"):
            assert 0.0 <= row["topology_score"] <= 1.0
    for path, reason in broken_files.items():
        assert f"not scored: {path}: {reason}" in err
    for path, numbers in broken_lines:
        for number in numbers:
            assert f"not scored: {path}:{number}: " in err
    assert "Traceback" not in err
    assert status in (0, 1)
    assert seconds < SECONDS
    kinds = {"error": sum("error" in r for r in rows), "invalid": sum("invalid_reason" in r for r in rows)}
    return (f"fuzz (seed {SEED}): {len(rows)} records answered ({len(rows) - sum(kinds.values())} scored, "
            f"{kinds['invalid']} invalid, {kinds['error']} errors), {len(broken_files)} files and "
            f"{sum(len(n) for _, n in broken_lines)} lines refused, in {seconds:.1f} s")


@pytest.mark.filterwarnings("error")  # a library warning is a failure too
def test_fuzzed_records_are_each_answered_exactly_once_without_a_traceback(tmp_path, capsys):
    plan = _build(tmp_path, FILES)
    started = time.perf_counter()
    status = main(plan[0])
    seconds = time.perf_counter() - started
    print(_check(tmp_path, plan, status, capsys.readouterr().err, seconds))


@pytest.mark.mpi
@pytest.mark.skipif(MPI.COMM_WORLD.size < 2, reason="needs 2 ranks: bin/mpirun -n 2 python -m pytest -m mpi")
@pytest.mark.filterwarnings("error")
def test_fuzzed_records_on_two_ranks_are_each_answered_exactly_once(tmp_path, capsys):
    """The same on every rank of COMM_WORLD: rank 0 reads, whichever rank is free scores."""

    world = MPI.COMM_WORLD
    base = Path(world.bcast(str(tmp_path), root=0))
    plan = collective(lambda: _build(base, FILES // 2) if world.rank == 0 else None)[0]
    started = time.perf_counter()
    status = main(plan[0])
    seconds = time.perf_counter() - started
    err = "".join(world.allgather(capsys.readouterr().err))  # a record's error is printed by the rank scoring it
    account = collective(lambda: _check(base, plan, status, err, seconds) if world.rank == 0 else None)[0]
    print(account.replace("fuzz", f"fuzz on {world.size} ranks", 1))
