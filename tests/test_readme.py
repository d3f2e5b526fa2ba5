"""Every shell command of the README runs as printed (the cheap ones here; the long runs are listed)."""

import os
import re
import subprocess

import pytest

from conftest import ROOT

README = ROOT / "README.md"
# Minutes each on this machine (the suite itself, benchmarks), or needing a cluster's batch
# system: run by hand (see the README), not here.
EXPENSIVE = ("sphyr_hpc.optimize", "sphyr_hpc.scaling", "bin/test", "benchmarks/", "sbatch ")
COMMENT = re.compile(r"\s{2,}#\s*(.*)$")
STATUS = re.compile(r"exit status (\d+)")


def readme_commands():
    """(command, expected exit status) of every line of the README's ```sh blocks, in order."""
    commands, inside = [], False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```sh" if not inside else False
            continue
        if inside and line.strip():
            comment = COMMENT.search(line)
            command = line[: comment.start()] if comment else line
            status = STATUS.search(comment.group(1)) if comment else None
            commands.append((command.strip(), int(status.group(1)) if status else 0))
    return commands


def test_the_readme_has_shell_commands_and_names_only_files_that_exist():
    commands = readme_commands()
    assert len(commands) >= 8
    for command, _ in commands:
        for token in command.split():
            if token.startswith(("examples/", "tests/", "bin/", "docs/")):
                assert (ROOT / token).exists(), f"{command}: {token} does not exist"


@pytest.fixture(scope="module")
def fresh_checkout(tmp_path_factory):
    """A folder that looks like a fresh clone with bin/setup run: the repository's files, outputs of its own."""
    folder = tmp_path_factory.mktemp("clone")
    for name in ("bin", "examples", "docs", "tests", ".venv", "sphyr_hpc", "setup.cfg", "setup.py", "environment.yml"):
        (folder / name).symlink_to(ROOT / name)
    return folder


@pytest.mark.parametrize("command, status", [c for c in readme_commands() if not any(e in c[0] for e in EXPENSIVE)])
def test_readme_command_runs_as_printed(command, status, fresh_checkout):
    run = subprocess.run(["bash", "-c", command], cwd=fresh_checkout, capture_output=True, text=True,
                         timeout=900, env=dict(os.environ))
    assert run.returncode == status, f"{command}\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    assert "Traceback" not in run.stderr
