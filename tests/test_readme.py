"""Every shell command and Python block of the README runs as printed, in a fresh-checkout-like folder.

The ```sh lines run one by one, in order (a later line may read what an earlier one wrote); a
```jsonl block whose fence names a file (```jsonl my-answers.jsonl) is that file, written before the
commands run; every ```python block runs as a script from the folder's root. A few commands are
too long or need what a test machine lacks: EXPENSIVE names them, each with its reason.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

README = ROOT / "README.md"
# Run by hand, not here (each pattern is matched against a command line):
EXPENSIVE = (
    "bin/test",      # the whole test suite, of which this file is a part: minutes
    "benchmarks/",   # benchmarks: minutes each, and their numbers are the point, not their exit status
    "sbatch ",       # needs a Slurm cluster
)
COMMENT = re.compile(r"\s{2,}#\s*(.*)$")
STATUS = re.compile(r"exit status (\d+)")
FENCE = re.compile(r"^```(\S*)\s*(.*)$")


def readme_blocks():
    """(language, info after the language, text) of every fenced block of the README, in order."""
    blocks, inside = [], None
    for line in README.read_text(encoding="utf-8").splitlines():
        fence = FENCE.match(line)
        if fence and inside is None:
            inside, lines = (fence.group(1), fence.group(2).strip()), []
        elif line.startswith("```") and inside is not None:
            blocks.append((*inside, "\n".join(lines) + "\n"))
            inside = None
        elif inside is not None:
            lines.append(line)
    assert inside is None, "a fenced block of README.md is not closed"
    return blocks


def readme_commands():
    """(command, expected exit status) of every line of the README's ```sh blocks, in order."""
    commands = []
    for language, _, text in readme_blocks():
        if language != "sh":
            continue
        for line in text.splitlines():
            if not line.strip():
                continue
            comment = COMMENT.search(line)
            command = line[: comment.start()] if comment else line
            status = STATUS.search(comment.group(1)) if comment else None
            commands.append((command.strip(), int(status.group(1)) if status else 0))
    return commands


def readme_files():
    """{file name: text} of the ```jsonl blocks whose fence names a file."""
    return {info: text for language, info, text in readme_blocks() if language == "jsonl" and info}


def readme_python():
    return [text for language, _, text in readme_blocks() if language == "python"]


def test_the_readme_has_commands_python_and_an_example_file_and_names_only_files_that_exist():
    commands = readme_commands()
    assert len(commands) >= 5
    assert readme_python() and readme_files()
    written = set(readme_files())
    for command, _ in commands:
        for token in command.split():
            if token.startswith(("examples/", "tests/", "bin/", "docs/", "benchmarks/")):
                assert (ROOT / token).exists(), f"{command}: {token} does not exist"
            if token.endswith(".jsonl") and "/" not in token:
                assert token in written, f"{command}: {token} is neither in the repository nor a README block"


def test_every_readme_language_is_one_this_file_runs_or_plain_text():
    for language, _, _ in readme_blocks():
        assert language in ("sh", "python", "jsonl", ""), f"README block of language {language!r} is not run"


def test_the_readme_stays_short():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= 250, f"README.md has {lines} lines: move detail to docs/"


@pytest.fixture(scope="module")
def fresh_checkout(tmp_path_factory):
    """A folder that looks like a fresh clone with bin/setup run: the repository's files, outputs of its own."""
    folder = tmp_path_factory.mktemp("clone")
    for name in ("bin", "examples", "docs", "tests", ".venv", "sphyr_hpc", "environment.yml"):
        (folder / name).symlink_to(ROOT / name)
    # Copies with their times, not links: bin/setup (the quick start runs it) rebuilds when setup.py is
    # newer than the built kernels, and a new link is; it would then point .venv's editable install
    # at this temporary folder, which pytest deletes.
    for name in ("setup.cfg", "setup.py"):
        shutil.copy2(ROOT / name, folder / name)
    for name, text in readme_files().items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _run(argv, folder):
    return subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=900, env=dict(os.environ))


@pytest.mark.parametrize("command, status", [c for c in readme_commands() if not any(e in c[0] for e in EXPENSIVE)])
def test_readme_command_runs_as_printed(command, status, fresh_checkout):
    run = _run(["bash", "-c", command], fresh_checkout)
    assert run.returncode == status, f"{command}\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("number", range(len(readme_python())))
def test_readme_python_runs_as_printed(number, fresh_checkout):
    script = fresh_checkout / f"readme_block_{number}.py"
    script.write_text(readme_python()[number], encoding="utf-8")
    python = fresh_checkout / ".venv" / "bin" / "python"
    run = _run([str(python) if python.exists() else sys.executable, script.name], fresh_checkout)
    assert run.returncode == 0, f"README python block {number}\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    assert run.stdout.strip(), "a README python block prints nothing"


def test_the_quick_starts_bin_setup_leaves_the_venvs_install_the_checkouts(fresh_checkout):
    """The quick start runs bin/setup in the folder of links, whose .venv is the checkout's: the
    package is the same folder, so nothing is installed again (it was, and the venv's install then
    named the temporary folder, its console scripts gone while pip reinstalled them)."""
    run = _run(["bin/setup"], fresh_checkout)
    assert run.returncode == 0, run.stderr[-3000:]
    python = ROOT / ".venv" / "bin" / "python"
    where = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.distribution('sphyr_hpc')"
                            ".read_text('direct_url.json'))"], cwd="/", capture_output=True, text=True, timeout=60)
    assert json.loads(where.stdout)["url"] == ROOT.resolve().as_uri(), where.stdout
