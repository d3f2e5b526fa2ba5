"""The prompt a model is shown: SPhyR's template filled with a record's input grid (docs/harness.md).

The template is SPhyR's, character for character: every prompt of the published result records
equals it filled with that record's input grid.  ``{GRID}`` is the input grid as text (rows joined
by newlines, cells by single spaces) and ``{FILL_INSTRUCTION}`` says what a masked cell takes, by
difficulty: a subject whose name ends in ``_hard`` asks for one-decimal densities, any other for
0 or 1.  :func:`sphyr_hpc.core.grid.prompt_input_grid` reads the grid back out of a prompt.
"""

from . import grid as grids

EASY_FILL = "'V' cells with either '1' (solid) or '0' (empty)"
HARD_FILL = ("'V' cells with a floating point number between 0 and 1, with one decimal place "
             "(e.g., 0.0, 0.1, 0.2, ..., 1.0)")
HARD_SUFFIX = "_hard"

TEMPLATE = (
    "You are given a structural material distribution represented as a grid. Each cell can have one of the "
    "following states:\n"
    "- 'L' indicates applied load.\n"
    "- 'V' indicates void.\n"
    "- 'S' indicates support.\n"
    "\n"
    "The goal is to predict the correct material distribution by filling in all {FILL_INSTRUCTION}, based on "
    "the surrounding structure and implicit physical reasoning (such as load paths, supports, and forces).\n"
    "\n"
    "Important: The completed structure should use as little material as possible while remaining stable and "
    "plausible for carrying the applied forces. Minimize material usage unless necessary for structural "
    "support.\n"
    "\n"
    f"{grids.PROMPT_GRID_MARKER}\n"
    "\n"
    "{GRID}\n"
    "\n"
    "Please output the completed grid by replacing all {FILL_INSTRUCTION}.\n"
    "Maintain the same format as the input: one row per line, cells separated by spaces, and the total number "
    "of rows and columns unchanged.\n"
    "Return only the completed grid without any additional explanation."
)


class PromptError(ValueError):
    """A record that no prompt can be built from (no usable input grid)."""


def is_hard(subject):
    """True for a hard subject (its name ends in ``_hard``): the prompt asks for densities."""
    return str(subject).endswith(HARD_SUFFIX)


def fill_instruction(hard):
    return HARD_FILL if hard else EASY_FILL


def input_grid_of(record):
    """The rectangular input grid of a dataset record (``input_grid`` as rows or text); :class:`PromptError`."""
    if not isinstance(record, dict):
        raise PromptError(f"record is a {type(record).__name__}, not an object")
    if "input_grid" not in record:
        raise PromptError("missing field 'input_grid'")
    try:
        grid = grids.as_grid(record["input_grid"])
        grids.grid_shape(grid)
    except grids.GridError as err:
        raise PromptError(f"input_grid: {err}") from None
    if any(not cell or any(c.isspace() for c in cell) for row in grid for cell in row):
        raise PromptError("input_grid: a cell is empty or holds whitespace")
    return grid


def prompt_of(record, subject=None, hard=None):
    """SPhyR's prompt for a dataset ``record`` (a dict with ``input_grid``), as the published runs showed it.

    ``hard`` chooses the fill instruction; by default it follows ``subject``'s name (``..._hard`` is
    hard, anything else, also no subject, easy).  Raises :class:`PromptError` for a record without a
    rectangular input grid.
    """
    grid = input_grid_of(record)
    instruction = fill_instruction(is_hard(subject or "") if hard is None else hard)
    return TEMPLATE.replace("{FILL_INSTRUCTION}", instruction).replace("{GRID}", grids.grid_to_text(grid))
