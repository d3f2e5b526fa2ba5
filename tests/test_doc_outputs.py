"""What README.md and docs/ show a command printing is what it prints; every time they give is checked.

One mechanism for every page (docs/development.md, "Writing docs"):

- A ```console block is a session: each line starting with ``$ `` is a command, run with bash from
  a folder that looks like a fresh checkout (one folder per page, the page's blocks in order, so a
  command may read what an earlier one of the page wrote), and the lines after it, up to the next
  ``$ `` line, are what it prints (stdout and stderr as one stream; a progress bar's ``\\r``
  redraws reduced to the last one; under ``bin/mpirun``, whose launcher forwards a rank's stdout and
  stderr apart and may cut a line of one with the other, the two streams' lines in any interleaving that
  keeps each stream's order). ``  # exit status N`` after a command gives its status
  (default 0). The printed text must match the block line by line, runs of spaces counting as one,
  after the block's placeholders:

  - ``{n}``: any number (a value that varies: a count of stored yardsticks, a path's digits);
  - ``{t:LO-HI}``: a time in seconds measured now, which must lie in [LO, HI] (a range generous
    enough for a loaded machine; a page's prose gives the same range);
  - ``{*}``: any text within a line (a temporary path);
  - a line ``...``: any number of lines, none included.

- A time in prose (``12 s``, ``3-5 min``) that no console block of the page measures names the
  benchmark result it comes from in an HTML comment on the same line:
  ``<!-- time: benchmarks/results/long_runs.json runs.mbb_300x100.seconds -->`` (the value at that
  key, in seconds, must lie in the range the line gives just before the comment), or
  ``<!-- time: benchmarks/results/certify.md -->`` (every time on the line is, as rounded, a number
  of that file), or ``<!-- time: console -->`` (the range is that of a ``{t:LO-HI}`` of the page's
  console blocks, which measure it).
  docs/performance.md, all of it benchmark results each with the command that reproduces it, and
  table rows (which name their benchmark in a column) are exempt.

- README.md's table of the leaderboard's columns names every column the leaderboard prints, and
  no other.

- Every fenced block names its language: ``console`` (run here), ``sh`` (commands shown without
  their output; the README's are run by tests/test_readme.py), ``python``, ``jsonl``, ``text``. An
  unnamed fence fails, so a new page's blocks are marked before they land.
"""

import functools
import json
import os
import re
import subprocess

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = ("console", "sh", "python", "jsonl", "text")
FENCE = re.compile(r"^```(\S*)\s*(.*)$")
COMMAND_STATUS = re.compile(r"\s{2,}#\s*exit status (\d+)\s*$")
PLACEHOLDER = re.compile(r"\{n\}|\{t:([0-9.]+)-([0-9.]+)\}|\{\*\}")
NUMBER = r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# A time in prose: "12 s", "0.5-2 s", "3.5-4 min", "about 7 min" (ms and hours too).
TIME = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*-\s*(\d+(?:\.\d+)?))?\s*(ms|s|min|h)\b(?!/)")
TIME_MARK = re.compile(r"<!--\s*time:\s*(\S+)(?:\s+(\S+))?\s*-->")
UNITS = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}
TIMES_EXEMPT = ("performance.md",)
# The environment every console command runs in: argparse wraps help at COLUMNS, so the help a page
# shows is the help at this width; the store is the session's own (the counts it prints are {n}).
WIDTH = "100"


def _rel(page):
    return str(page.relative_to(ROOT))


def blocks(page):
    """(language, info, first line number, text lines) of every fenced block of ``page``."""
    found, inside = [], None
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line)
        if inside is None and fence:
            inside, lines = (fence.group(1), fence.group(2).strip(), number), []
        elif inside is not None and line.startswith("```"):
            found.append((*inside, lines))
            inside = None
        elif inside is not None:
            lines.append(line)
    assert inside is None, f"{_rel(page)}: a fenced block is not closed"
    return found


def sessions(page):
    """[(command, status, expected lines, line number)] of the page's console blocks, in order."""
    steps = []
    for language, _, start, lines in blocks(page):
        if language != "console":
            continue
        for offset, line in enumerate(lines, start + 1):
            if line.startswith("$ "):
                status = COMMAND_STATUS.search(line)
                command = line[2:status.start()] if status else line[2:]
                steps.append([command.strip(), int(status.group(1)) if status else 0, [], offset])
            else:
                assert steps and steps[-1][3] > start, f"{_rel(page)}:{offset}: output before any '$ ' command"
                steps[-1][2].append(line)
    return steps


def line_pattern(line):
    """The regex of one expected line and the (low, high) range of each of its time groups, in order."""
    regex, ranges, at, line = [], [], 0, line.strip()
    for match in PLACEHOLDER.finditer(line):
        regex.append(_literal(line[at:match.start()]))
        if match.group(0) == "{n}":
            regex.append(NUMBER)
        elif match.group(0) == "{*}":
            regex.append(r".*?")
        else:
            ranges.append((float(match.group(1)), float(match.group(2))))
            regex.append(f"({NUMBER})")
        at = match.end()
    regex.append(_literal(line[at:]))
    return re.compile("".join(regex)), ranges


def _matches(expected, actual):
    """The (value, low, high) of every time when ``actual`` lines match ``expected`` ones, else None."""
    if not expected:
        return [] if not actual else None
    if expected[0].strip() == "...":
        for skip in range(len(actual) + 1):
            rest = _matches(expected[1:], actual[skip:])
            if rest is not None:
                return rest
        return None
    if not actual:
        return None
    regex, ranges = line_pattern(expected[0])
    match = regex.fullmatch(actual[0].strip())
    if match is None:
        return None
    rest = _matches(expected[1:], actual[1:])
    if rest is None:
        return None
    return [(float(v.replace(",", "")), *r) for v, r in zip(match.groups(), ranges)] + rest


def _literal(text):
    return r"[ \t]+".join(re.escape(piece) for piece in re.split(r"[ \t]+", text))


def _trimmed(lines):
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def printed(text):
    """What a terminal would show of ``text``: each line's last ``\\r`` redraw, trailing blanks gone."""
    return "\n".join(_trimmed([line.rsplit("\r", 1)[-1] for line in text.split("\n")]))


def _interleaved(expected, out, err):
    """:func:`_matches` over the lines of two streams taken in any interleaving that keeps each one's
    order (an mpirun's stdout and stderr, forwarded apart)."""
    expected = tuple(expected)

    @functools.lru_cache(maxsize=None)
    def match(e, o, r):
        if e == len(expected):
            return [] if o == len(out) and r == len(err) else None
        if expected[e].strip() == "...":
            for skip_o in range(len(out) - o + 1):
                for skip_r in range(len(err) - r + 1):
                    rest = match(e + 1, o + skip_o, r + skip_r)
                    if rest is not None:
                        return rest
            return None
        regex, ranges = line_pattern(expected[e])
        for lines, at, step in ((out, o, (1, 0)), (err, r, (0, 1))):
            found = regex.fullmatch(lines[at].strip()) if at < len(lines) else None
            rest = match(e + 1, o + step[0], r + step[1]) if found else None
            if rest is not None:
                return [(float(v.replace(",", "")), *g) for v, g in zip(found.groups(), ranges)] + rest
        return None

    return match(0, 0, 0)


def check(expected, output, stderr=None):
    """None when ``output`` is what ``expected`` shows, else why not.  ``stderr``: the command's stderr
    apart from ``output`` (its stdout), its lines in any interleaving with ``output``'s."""
    shown = printed(output)
    if stderr is not None:
        said = printed(stderr)
        times = _interleaved(_trimmed(expected), shown.split("\n") if shown else [], said.split("\n") if said else [])
        shown = "\n".join(part for part in (shown, said) if part)
    else:
        times = _matches(_trimmed(expected), shown.split("\n") if shown else [])
    if times is None:
        return _first_difference(expected, shown)
    for value, low, high in times:
        if not low <= value <= high:
            return f"a time the page gives as {low:g}-{high:g} s was measured {value:g} s"
    return None


def _first_difference(expected, shown):
    """The first expected line the output does not match (with the output's line there)."""
    actual = shown.split("\n")
    for at, line in enumerate(_trimmed(expected)):
        if line.strip() == "...":
            return f"the output around the page's '...' does not match:\n{shown}"
        if at >= len(actual) or not line_pattern(line)[0].fullmatch(actual[at].strip()):
            got = actual[at] if at < len(actual) else "(end of output)"
            return f"expected line {at + 1}:\n  {line.strip()}\nprinted:\n  {got.strip()}\nwhole output:\n{shown}"
    return f"the output has more lines than the page shows:\n{shown}"


def test_the_pattern_matches_placeholders_and_refuses_a_changed_word():
    expected = ["full_easy: {n} samples (easy), {t:0-60}s on 2 rank(s)", "...", "store {*}", "done"]
    assert check(expected, "full_easy: 20 samples (easy), 8s on 2 rank(s)\nx\ny\nstore /tmp/a b\ndone\n") is None
    assert "was measured 61" in check(expected, "full_easy: 20 samples (easy), 61s on 2 rank(s)\nstore x\ndone")
    assert "expected line 1" in check(expected, "full_easy: 20 examples (easy), 8s on 2 rank(s)\nstore x\ndone")
    assert check(["a   b  {n}"], "a b 1,024\n") is None and check(["a b"], "a b c") is not None
    assert check(["x"], "10%|#  | 1/9\r100%|###| 9/9\rx\n") is None


def test_an_mpirun_commands_two_streams_match_in_any_interleaving_that_keeps_each_ones_order():
    assert check(["a", "...", "warn: {n} late", "...", "done"], "a\nb\ndone\n", "warn: 3 late\n") is None
    assert check(["a", "warn: x", "done"], "a\ndone\n", "warn: x\n") is None
    assert check(["a", "done"], "a\ndone\n", "warn: x\n") is not None  # a line the page does not show
    assert check(["done", "a", "warn: x"], "a\ndone\n", "warn: x\n") is not None  # stdout's order kept
    assert "was measured 9" in check(["w {t:0-5}", "a"], "a\n", "w 9\n")


@pytest.mark.parametrize("page", PAGES, ids=[_rel(p) for p in PAGES])
def test_every_fence_names_a_language_this_suite_knows(page):
    unnamed = [f"{_rel(page)}:{start}" for language, _, start, _ in blocks(page) if language not in LANGUAGES]
    assert not unnamed, f"fenced blocks without a language of {LANGUAGES}: {unnamed}"


@pytest.fixture(scope="session")
def doc_store(tmp_path_factory):
    return tmp_path_factory.mktemp("doc-store")


def _checkout(folder):
    for name in ("bin", "examples", "docs", "tests", ".venv", "sphyr_hpc", "setup.cfg", "setup.py", "environment.yml"):
        (folder / name).symlink_to(ROOT / name)
    return folder


SESSION_PAGES = [p for p in PAGES if sessions(p)]


def test_the_docs_show_console_sessions():
    assert {p.name for p in SESSION_PAGES} >= {"validate.md", "score.md", "certify.md"}


@pytest.mark.parametrize("page", SESSION_PAGES, ids=[_rel(p) for p in SESSION_PAGES])
def test_every_console_block_prints_what_the_page_shows(page, tmp_path, doc_store):
    folder = _checkout(tmp_path)
    env = dict(os.environ, COLUMNS=WIDTH, SPHYR_HPC_STORE=str(doc_store))
    env.pop("XDG_CACHE_HOME", None)
    wrong = []
    for command, status, expected, number in sessions(page):
        apart = command.startswith("bin/mpirun ")  # (its stdout and stderr come forwarded apart)
        run = subprocess.run(["bash", "-c", command], cwd=folder, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE if apart else subprocess.STDOUT, text=True, timeout=900, env=env)
        why = check(expected, run.stdout, run.stderr if apart else None)
        if run.returncode != status:
            why = (f"exit status {run.returncode}, the page says {status}\n"
                   f"{printed(run.stdout + (run.stderr or ''))[-3000:]}")
        if why:
            wrong.append(f"{_rel(page)}:{number}: $ {command}\n{why}")
    assert not wrong, "\n\n".join(wrong)


def _prose(page):
    """(line number, line) of the page outside fenced blocks and tables."""
    inside = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            inside = not inside
        elif not inside and not line.lstrip().startswith("|"):
            yield number, line


def _seconds(match):
    scale = UNITS[match.group(3)]
    low = float(match.group(1)) * scale
    return low, (float(match.group(2)) * scale if match.group(2) else low)


def _rounds_to(numbers, text, scale):
    """True when one of ``numbers``, in the page's unit or in seconds (``scale``: seconds per unit),
    rounds to ``text`` as the page writes it (0.11 for 0.111; 0.95 ms for 0.000945)."""
    digits = len(text.partition(".")[2])
    return any(round(n, digits) == float(text) or round(n / scale, digits) == float(text) for n in numbers)


def _value(data, key):
    for part in key.split("."):
        data = data[part]
    return float(data)


@pytest.mark.parametrize("page", [p for p in PAGES if p.name not in TIMES_EXEMPT],
                         ids=[_rel(p) for p in PAGES if p.name not in TIMES_EXEMPT])
def test_every_time_in_prose_names_the_benchmark_result_it_comes_from(page):
    wrong = []
    for number, line in _prose(page):
        mark = TIME_MARK.search(line)
        times = list(TIME.finditer(line[: mark.start()] if mark else line))
        if not times:
            continue
        where = f"{_rel(page)}:{number}"
        if mark is None:
            wrong.append(f"{where}: {', '.join(t.group(0) for t in times)} without <!-- time: RESULT [KEY] -->")
            continue
        result = ROOT / mark.group(1)
        if mark.group(1) == "console":  # measured by a console block of the page, with this range
            shown = {tuple(float(v) for v in r) for _, _, lines, _ in sessions(page)
                     for r in re.findall(r"\{t:([0-9.]+)-([0-9.]+)\}", "\n".join(lines))}
            missing = [t.group(0) for t in times if _seconds(t) not in shown]
            if missing:
                wrong.append(f"{where}: {missing} is no range of a console block of the page {sorted(shown)}")
        elif not result.is_file():
            wrong.append(f"{where}: {mark.group(1)} does not exist")
        elif mark.group(2):  # one measured value: the last time before the comment is its range
            low, high = _seconds(times[-1])
            if high == low:
                wrong.append(f"{where}: {times[-1].group(0)} is one number; give a range for a measured time")
                continue
            value = _value(json.loads(result.read_text(encoding="utf-8")), mark.group(2))
            if not low <= value <= high:
                wrong.append(f"{where}: {times[-1].group(0)}, but {mark.group(1)} {mark.group(2)} is {value:g} s")
        else:
            numbers = [float(v) for v in re.findall(r"(?<![\w.])\d+(?:\.\d+)?", result.read_text(encoding="utf-8"))]
            absent = [t.group(0) for t in times
                      if not all(_rounds_to(numbers, v, UNITS[t.group(3)]) for v in t.groups()[:2] if v)]
            if absent:
                wrong.append(f"{where}: {absent} not in {mark.group(1)}")
    assert not wrong, "\n".join(wrong)


WRITES = ("--out", "--fields", "--png", "--json", "--save-density")
COMMAND_MODULE = re.compile(r"-m sphyr_hpc\.(\w+)")


def doc_commands():
    """(page, line, command) of every command the README and then docs/ show, in reading order."""
    commands = []
    for page in PAGES:
        for language, _, start, lines in blocks(page):
            for number, line in enumerate(lines, start + 1):
                if language == "console" and line.startswith("$ "):
                    commands.append((page, number, line[2:]))
                elif language == "sh" and line.strip():
                    commands.append((page, number, line))
    return commands


def _written(command):
    """The paths a documented command writes (its output options; score's default out/)."""
    status = COMMAND_STATUS.search(command) or re.search(r"#\s*exit status (\d+)", command)
    command = re.split(r"\s{2,}#", command)[0]
    if (status and status.group(1) == "2") or "--resume" in command or "--overwrite" in command:
        return []
    paths = []
    for part in command.split("&&"):
        module = COMMAND_MODULE.search(part)
        if module is None or "--help" in part:
            continue
        tokens = part.split()
        outs = [tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t in WRITES]
        if module.group(1) == "score" and "--out" not in tokens:
            outs.append("out")
        paths += [p.rstrip("/") for p in outs if not p.isupper()]
    return paths


def test_following_the_docs_in_order_no_command_writes_where_another_wrote():
    seen, clashes = {}, []
    for page, number, command in doc_commands():
        for path in _written(command):
            for other, where in seen.items():
                inside = path == other or path.startswith(other + "/") or other.startswith(path + "/")
                if inside and where[0] != (page, command):
                    clashes.append(f"{_rel(page)}:{number} writes {path}, which {where[1]} writes ({other})")
            seen.setdefault(path, ((page, command), f"{_rel(page)}:{number}"))
    assert not clashes, "\n".join(clashes)


def test_the_readme_explains_every_column_the_leaderboard_prints_and_no_other():
    from sphyr_hpc.api import STRUCTURAL_METRIC_KEYS
    from sphyr_hpc.scoring.summary import format_leaderboard

    entry = {"model": "m", "subjects": 1, "records": 1, "answered": 1, "missing": 0, "unreadable": 0,
             "unparsable": 0, "coverage": 1.0, **dict.fromkeys(STRUCTURAL_METRIC_KEYS, 1.0)}
    header = format_leaderboard([entry])[0]
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("| column | meaning |"):].split("\n\n")[0]
    explained = [name for row in table.splitlines()[2:] for name in re.findall(r"`([^`]+)`", row.split("|")[1])]
    rest = header.replace("# model", "")
    for name in explained:
        assert name in rest, f"README.md explains {name!r}, which the leaderboard does not print: {header}"
        rest = rest.replace(name, "", 1)
    assert not rest.split(), f"the leaderboard prints {rest.split()} that README.md's column table does not explain"
