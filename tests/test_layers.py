"""The shape of the package: one direction of imports, and rooms of a readable size.

The rule of the layers (runtime -> core -> solvers -> io -> optimiser -> scoring
-> reporting -> jobs -> the commands and the API at the top) is checked by the
import-cycle tool, which counts every import, also one inside a function.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import console_script

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sphyr_hpc"
TOOL = ROOT / "tests" / "tools" / "import_cycles.py"  # also the check of the layers in docs
MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 300
COMMANDS = ("prompts", "score", "validate", "certify", "report", "optimize", "generate", "scaling", "parity", "store")


def _sources():
    return [p for p in sorted(PACKAGE.rglob("*.py")) if "_examples" not in p.parts]


def test_no_import_cycle_and_no_import_reaching_up_a_layer():
    run = subprocess.run([sys.executable, str(TOOL), "sphyr_hpc"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    reported = [line for line in run.stdout.splitlines() if not line.startswith(("  ", " "))][:-1]
    assert reported == [], run.stdout
    assert "0 cycle(s) or import(s) reaching up" in run.stdout


def _oversized():
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            lines = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and lines > MAX_FUNCTION_LINES:
                found.append(f"function {path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines")
            elif isinstance(node, ast.ClassDef) and lines > MAX_CLASS_LINES:
                found.append(f"class {path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_no_function_over_80_lines_and_no_class_over_300():
    assert _oversized() == []


def test_every_command_is_a_thin_module_with_a_main_and_a_console_script():
    setup = (ROOT / "setup.cfg").read_text()
    for name in COMMANDS:
        source = (PACKAGE / f"{name}.py").read_text()
        assert "def main(argv=None" in source and "cli.main(" in source, name
        assert f"sphyr-{name} = sphyr_hpc.__main__:script" in setup, name  # ends as python -m does
        assert "sys.exit(run_as_process(main))" in source, name  # python -m: signals, status to bin/mpirun


def test_python_m_sphyr_hpc_lists_every_command():
    run = subprocess.run([sys.executable, "-m", "sphyr_hpc"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    for name in COMMANDS:
        assert f"\n  {name} " in run.stdout


SCRIPT = console_script("score")


@pytest.mark.skipif(SCRIPT is None, reason="the console scripts are not installed (pip install -e . installs them)")
def test_every_console_script_is_its_command():
    from sphyr_hpc.__main__ import COMMANDS as LISTED

    for name, _ in LISTED:
        run = subprocess.run([console_script(name), "--help"], capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 0 and f"python -m sphyr_hpc.{name}" in run.stdout, (name, run.stderr[-2000:])


def _documented_modules():
    """(folder heading, module path) of every row of docs/design.md's "Modules" section."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    rows, folder = [], None
    for line in section.splitlines():
        if line.startswith("### "):
            folder = "" if "top level" in line else line[4:].strip("`/ ")
        elif line.startswith("| `") and folder is not None:
            rows.append((folder, line.split("`")[1]))
    return rows


def test_design_lists_every_module_in_its_layer():
    rows = _documented_modules()
    listed = [path for _, path in rows]
    actual = sorted(str(p.relative_to(PACKAGE)) for p in _sources())
    assert sorted(set(listed)) == sorted(listed), "a module is listed twice in docs/design.md"
    missing = sorted(set(actual) - set(listed))
    stale = sorted(set(listed) - set(actual))
    assert not missing, f"modules missing from docs/design.md's Modules section: {missing}"
    assert not stale, f"docs/design.md lists modules that do not exist: {stale}"
    for folder, path in rows:
        assert str(Path(path).parent).replace(".", "") == folder, f"{path} is listed under {folder or 'top level'}"
