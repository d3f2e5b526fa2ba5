"""The one progress bar of the commands: tqdm on stderr, drawn by rank 0 only."""

import sys


def progress_bar(total, quiet=False, unit="step"):
    """A tqdm bar of ``total`` ``unit``s on stderr; None with ``quiet`` or nothing to count (nothing drawn, nothing polled,
    tqdm not even imported)."""
    if quiet or not total:  # nothing to do (a finished run resumed): no "0step" bar
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=sys.stderr, dynamic_ncols=True, smoothing=0.05)
