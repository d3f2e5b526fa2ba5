"""Limits on untrusted input: how much the scorer agrees to read and to solve.

Completions are text from models, result folders are assembled by anyone, and
a benchmark run is hours of cluster time: one hostile file must cost only
itself, and no input may talk the scorer into unbounded work.  Every limit is
checked before the work it bounds, in time linear in what was already read:

* ``max_file_bytes``: an input file (JSON or JSONL) larger than this is refused
  by name from its size, before it is read (and never more than this many
  bytes are read, should it grow meanwhile);
* ``max_text_chars``: a grid given as text (or as a list of rows, counted as
  the text it prints as) longer than this is not parsed.  A completion that
  long gets the all-zero metrics with an ``invalid_reason`` naming the limit
  (it is the model's answer, and a wrong one); a ground truth, input grid or
  prompt that long makes the record an ``error``;
* ``max_cells``: a ground truth with more cells than this is refused per record
  (an ``error`` saying how to raise the limit): its yardstick is hundreds of
  SIMP runs, each solving the whole grid many times.

The defaults are generous for real data: SPhyR grids are 10x10 and 20x20 (a
completion is a few kB), and 65,536 cells covers 256x256, the upscaled SPhyR
samples and the scaling studies users run with the scorer (a 200x200 sample
already takes ~30 s on one core).  All three are command-line options of
``sphyr_hpc.score`` (:func:`add_arguments`).
"""

import argparse
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class InputLimits:
    """How much the scorer reads and solves per file, per grid text and per grid."""

    max_file_bytes: int = 256 * 2**20
    max_text_chars: int = 1_000_000
    max_cells: int = 65_536

    def file_too_large(self, size):
        """The reason to refuse a file of ``size`` bytes, or None."""
        if size <= self.max_file_bytes:
            return None
        return (f"file is {size:,} bytes, over the limit of {self.max_file_bytes:,} "
                f"(raise it with {option('max_file_bytes')})")

    def text_too_long(self, what, length):
        """The reason not to parse a grid text of ``length`` characters, or None."""
        if length <= self.max_text_chars:
            return None
        return (f"{what} is {length:,} characters, over the limit of {self.max_text_chars:,} on a grid's text "
                f"(raise it with {option('max_text_chars')})")

    def too_many_cells(self, what, cells, shape):
        """The reason to refuse a grid of ``cells`` cells (``shape`` as text, e.g. ``1000x1000``), or None."""
        if cells <= self.max_cells:
            return None
        return (f"{what} is {shape} = {cells:,} cells, over the limit of {self.max_cells:,} "
                f"(raise it with {option('max_cells')})")


def option(name):
    """The command-line option of a limit: ``max_cells`` -> ``--max-cells``."""
    return "--" + name.replace("_", "-")


def positive_int(text):
    """argparse type: a whole number of at least 1 (``1_000`` and ``1,000`` read as 1000)."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


_HELP = {
    "max_file_bytes": "refuse input files larger than this many bytes, before reading them",
    "max_text_chars": "do not parse a grid text longer than this (a completion that long is invalid, "
                      "a ground truth or prompt that long an error)",
    "max_cells": "refuse ground truths with more cells than this (the yardstick's cost grows with the grid)",
}


def add_arguments(parser):
    """``--max-file-bytes``, ``--max-text-chars`` and ``--max-cells`` on an argparse parser."""
    group = parser.add_argument_group("input limits")
    for field in fields(InputLimits):
        group.add_argument(option(field.name), dest=field.name, type=positive_int, default=field.default,
                           metavar="N", help=_HELP[field.name] + " (default: %(default)s)")
    return group


def from_args(args):
    """The :class:`InputLimits` of parsed arguments."""
    return InputLimits(**{field.name: getattr(args, field.name) for field in fields(InputLimits)})
