"""The tools a model may be given in the Inspect task (``-T tools=simulate`` or ``-T tools=python``).

``simulate(grid)``: the benchmark's analysis of a grid written as the model would answer it, as
JSON (:func:`sphyr_hpc.jobs.simulate.simulate_grid`: compliance, load_carrying, volume_fraction,
the first failed check; never the answer or the yardstick).  ``python(code)``: Inspect's own
Python tool, run in the task's sandbox (``docker`` where a docker daemon runs, else Inspect's
``local`` sandbox: the code runs as the user on the host, docs/harness.md).

:func:`answer_with_tools` is the solver of a run with tools: the sample's tools offered, the
model's calls run one turn at a time, and after ``max_tool_calls`` calls the model is asked for
its answer with the tools withheld (``tool_choice="none"``).  The prompt is SPhyR's with one
paragraph added (:data:`PARAGRAPHS`), quoted in docs/harness.md; without tools it is SPhyR's,
byte for byte.
"""

import json
import shutil
import time

from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.tool import python, tool
from inspect_ai.util import store as sample_store

from sphyr_hpc.io.inspect_log import SIMULATE_SECONDS
from sphyr_hpc.jobs.answer import scorer_of
from sphyr_hpc.jobs.simulate import simulate_grid

TOOLS = ("simulate", "python")
MAX_TOOL_CALLS = 10  # -T max_tool_calls's default
PYTHON_TIMEOUT = 60  # seconds a python() call may run

PARAGRAPHS = {
    "simulate": (
        "You may call the tool simulate(grid) before you answer, up to {N} times. It runs the benchmark's "
        "finite-element analysis on a completed grid, written as you would answer (one row per line, cells "
        "separated by spaces; its L and S cells are the loads and supports), and returns JSON: compliance (lower is "
        "stiffer; null when infinite), load_carrying, volume_fraction (the share of "
        "material), and failure, the first check the design fails (no_grid, wrong_shape, no_load_or_support, "
        "unfilled_or_unparsable, severed_load_path, floating_material) or sound. It does not tell you the expected answer."),
    "python": (
        "You may call the tool python(code) before you answer, up to {N} times. It runs a Python script and "
        "returns what the script prints (each call is a fresh process; print what you want to see)."),
}


def parse_tools(tools):
    """``-T tools=`` as a tuple of tool names (``none``/empty: no tools); ValueError naming the option."""
    if tools is None or tools is False:
        return ()
    names = [t.strip() for t in (tools if isinstance(tools, (list, tuple)) else str(tools).split(",")) if t.strip()]
    if names in (["none"], ["false"]):
        return ()
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise ValueError(f"-T tools={tools}: unknown tool {', '.join(unknown)} (give simulate, python or none)")
    return tuple(dict.fromkeys(names))


def parse_max_tool_calls(value):
    """``-T max_tool_calls=`` as a whole number >= 0; ValueError naming the option."""
    try:
        calls = int(value)
    except (TypeError, ValueError):
        calls = -1
    if calls < 0 or str(calls) != str(value).strip():
        raise ValueError(f"-T max_tool_calls={value}: give a whole number of calls, 0 or more")
    return calls


def prompt_with_tools(prompt, tools, max_tool_calls):
    """SPhyR's prompt with one paragraph per tool (none added without tools)."""
    added = [PARAGRAPHS[name].replace("{N}", str(max_tool_calls)) for name in tools]
    return "\n\n".join([prompt, *added])


def default_sandbox():
    """``docker`` where the docker command is on PATH, else Inspect's ``local`` sandbox."""
    return "docker" if shutil.which("docker") else "local"


@tool
def simulate(input_grid: str, gravity: list, store=True):
    """The ``simulate`` tool of one sample (its masked ``input_grid`` as text and its gravity)."""

    async def execute(grid: str) -> str:
        """Run the benchmark's finite-element analysis on a completed grid.

        Args:
          grid: The completed grid as you would answer it: one row per line, cells separated by spaces.

        Returns:
          JSON with compliance (null where infinite), load_carrying, volume_fraction and failure.
        """
        started = time.perf_counter()
        result = json.dumps(simulate_grid(grid, input_grid, tuple(gravity), store))
        # the call's own time, kept in the sample's store: Inspect's working time of a call also holds
        # the time other samples held the event loop (their scoring computes yardsticks)
        sample_store().set(SIMULATE_SECONDS, sample_store().get(SIMULATE_SECONDS, []) + [time.perf_counter() - started])
        return result

    return execute


def tools_of(names, metadata, store=True):
    """The Inspect tools ``names`` of one sample (its ``metadata``: input grid and gravity)."""
    made = {"simulate": lambda: simulate(metadata["input_grid"], metadata["gravity"], store),
            "python": lambda: python(timeout=PYTHON_TIMEOUT)}
    return [made[name]() for name in names]


@solver
def answer_with_tools(names, max_tool_calls=MAX_TOOL_CALLS, store=True):
    """Generate with the tools ``names`` until the model answers; after ``max_tool_calls`` calls the
    tools are withheld and the model must answer."""
    if "simulate" in names:  # PETSc and the scorer started now: no call's working time holds their start
        scorer_of(store)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.tools = tools_of(names, state.metadata, store)
        calls = 0
        while not state.completed:
            state.tool_choice = "auto" if calls < max_tool_calls else "none"
            state = await generate(state, tool_calls="single")
            made = len(state.output.message.tool_calls or []) if state.output.choices else 0
            if not made or state.tool_choice == "none":
                break
            calls += made
        return state

    return solve
