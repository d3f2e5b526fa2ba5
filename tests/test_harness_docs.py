"""Every block of docs/harness.md runs as printed, in order, in a fresh-checkout-like folder.

The mechanism of tests/test_readme.py, for one page whose blocks build on each other: a ```jsonl
block whose fence names a file is that file, written first; then every ```sh line and ```python
block runs in the order of the page, each a test (a later one reads what an earlier one wrote).
A line ending in ``# exit status N`` must exit with N. NOT_RUN names what needs more than a test
machine has, each with its reason; blocks that need inspect-ai are skipped, saying so, without it.
A ```text block is shown, not run.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

PAGE = ROOT / "docs" / "harness.md"
NOT_RUN = (  # (pattern in a command line, why it is not run here)
    (".venv-lm-eval", "needs lm-eval's own venv (56 packages from PyPI) and a served model"),
    ("OPENAI_API_KEY=", "needs an OpenAI API key"),
    ("ollama/", "needs a model served by Ollama"),
    ("pip install", "installs from PyPI (bin/setup --test has installed the [inspect] extra)"),
)
NEEDS_INSPECT = ("inspect_ai", "--inspect-log", ".venv/bin/inspect")
COMMENT = re.compile(r"\s{2,}#\s*(.*)$")
STATUS = re.compile(r"exit status (\d+)")
FENCE = re.compile(r"^```(\S*)\s*(.*)$")
HAS_INSPECT = importlib.util.find_spec("inspect_ai") is not None


def blocks():
    """(language, info after the language, text) of every fenced block of the page, in order."""
    found, inside = [], None
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        fence = FENCE.match(line)
        if fence and inside is None:
            inside, lines = (fence.group(1), fence.group(2).strip()), []
        elif line.startswith("```") and inside is not None:
            found.append((*inside, "\n".join(lines) + "\n"))
            inside = None
        elif inside is not None:
            lines.append(line)
    assert inside is None, "a fenced block of docs/harness.md is not closed"
    return found


def steps():
    """(kind, text, expected status) of every sh line and python block, in order."""
    found = []
    for language, _, text in blocks():
        if language == "python":
            found.append(("python", text, 0))
        elif language == "sh":
            for line in filter(str.strip, text.splitlines()):
                comment = COMMENT.search(line)
                status = STATUS.search(comment.group(1)) if comment else None
                found.append(("sh", (line[: comment.start()] if comment else line).strip(),
                              int(status.group(1)) if status else 0))
    return found


def test_the_page_has_commands_python_and_files_and_every_block_is_one_this_file_runs():
    kinds = [kind for kind, _, _ in steps()]
    assert kinds.count("sh") >= 6 and kinds.count("python") >= 3
    assert any(language == "jsonl" and info for language, info, _ in blocks())
    for language, info, _ in blocks():
        assert language in ("sh", "python", "jsonl", "text"), f"a block of language {language!r} is not run"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    folder = tmp_path_factory.mktemp("harness")
    for name in ("bin", "examples", "docs", "tests", ".venv", "sphyr_hpc", "constraints"):
        (folder / name).symlink_to(ROOT / name)
    for name in ("setup.cfg", "setup.py"):  # copies with their times, as tests/test_readme.py makes them
        shutil.copy2(ROOT / name, folder / name)
    for language, info, text in blocks():
        if language == "jsonl" and info:
            (folder / info).write_text(text, encoding="utf-8")
    return folder


def _skip_reason(kind, text):
    for pattern, reason in NOT_RUN:
        if kind == "sh" and pattern in text:
            return reason
    if not HAS_INSPECT and any(word in text for word in NEEDS_INSPECT):
        return ("needs inspect-ai: .venv/bin/python -m pip install -c constraints/debian12.txt --no-build-isolation "
                "-e '.[inspect]'")
    return None


@pytest.mark.parametrize("number", range(len(steps())))
def test_harness_block_runs_as_printed(number, checkout):
    kind, text, status = steps()[number]
    reason = _skip_reason(kind, text)
    if reason:
        pytest.skip(f"{text.splitlines()[0][:60]}: {reason}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMIX_RANK"))}
    env["PWD"] = str(checkout)
    if kind == "python":
        script = checkout / f"harness_block_{number}.py"
        script.write_text(text, encoding="utf-8")
        python = checkout / ".venv" / "bin" / "python"
        argv = [str(python) if python.exists() else sys.executable, script.name]
    else:
        argv = ["bash", "-c", text]
    run = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, timeout=900, env=env)
    assert run.returncode == status, f"{text}\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    assert "Traceback" not in run.stderr
    if kind == "python":
        assert run.stdout.strip(), "a python block prints nothing"
