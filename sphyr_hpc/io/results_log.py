"""``results.jsonl``: the append-only log of a scoring run, and the order of its rows."""

import json
import errno
import os
from pathlib import Path

import numpy as np

from .atomic import temporary_beside
from .jsonl import read_jsonl, write_jsonl_atomic

_ROW_ENCODER = json.JSONEncoder(allow_nan=False)
# json.dumps's own C encoder, made once: JSONEncoder.encode makes a new one each call, which
# costs more than encoding a record's few new fields.  Without the circular-reference check
# (rows are trees), so the text is the same.  None: the C accelerator is missing.
_C_ENCODER = None if json.encoder.c_make_encoder is None else json.encoder.c_make_encoder(
    None, _ROW_ENCODER.default, json.encoder.encode_basestring_ascii, None, _ROW_ENCODER.key_separator,
    _ROW_ENCODER.item_separator, False, False, False)


class ResultsLog:
    """``results.jsonl`` as an append-only log that survives being killed.

    Every rank appends whole lines with one ``write`` on an ``O_APPEND``
    descriptor and flushes, so lines from several ranks never interleave.  A
    kill can at worst leave one partial last line: :meth:`recover` drops it
    (rewriting the file atomically) and returns the rows already written, which
    ``--resume`` skips.  :meth:`finalise` rewrites the file sorted by
    (model, subject, index), again atomically; :meth:`assemble` does the same
    for a log of this run's lines only, every rank copying its own.
    """

    def __init__(self, path):
        self.path = Path(path)
        self._fd = None

    def recover(self):
        """Rows already in the log (partial or broken lines dropped)."""
        if not self.path.exists():
            return []
        rows, dropped = [], 0
        for _, row, problem in read_jsonl(self.path)[0]:
            if not problem and isinstance(row, dict) and "model" in row and "subject" in row and "index" in row:
                rows.append(row)
            else:
                dropped += 1
        if dropped:
            write_jsonl_atomic(self.path, rows)
        return rows

    def reset(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(self.path, [])

    def append(self, row, text=None):
        """Append ``row`` as one line; returns the line's ``(offset, length)`` in the file.

        ``text``: the row's JSON text when the caller has it (:func:`encode_row` of ``row``, for
        example put together by :func:`joined_row`), else the row is encoded here.
        """
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        data = ((encode_row(row) if text is None else text) + "\n").encode("utf-8")
        written = os.write(self._fd, data)
        if written != len(data):  # regular files do not short-write short of a full disk
            raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)}: {written} of {len(data)} bytes written",
                          str(self.path))
        # O_APPEND moves this descriptor's offset to the end of its own write, atomically.
        return os.lseek(self._fd, 0, os.SEEK_CUR) - written, written

    def close(self):
        """Stop appending.  No fsync: what makes the results durable is the sorted rewrite that
        follows (:meth:`assemble` or :meth:`finalise`, which fsync), as appends during a run are not."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def finalise(self):
        """Sorted, de-duplicated rows (last write of a key wins), rewritten atomically."""
        rows = {}
        for row in self.recover():
            rows[row_key(row)] = row
        ordered = [rows[k] for k in sorted(rows, key=sort_key)]
        write_jsonl_atomic(self.path, ordered)
        return ordered


    def assemble(self, comm, places, total):
        """:meth:`finalise` for a log that holds only this run's lines, every rank copying its own.

        Collective.  ``places``: ``(position, offset, length)`` of each line this rank
        appended that the sorted file keeps, ``position`` its place among the ``total``
        lines of the sorted file (every rank knows the sorted keys: it read the inputs).
        The line lengths are summed over the ranks (8 bytes per line), each rank copies
        its lines to their places in a temporary file, which then replaces the log.
        Nothing is decoded and no rank holds the file: the copying is split over the
        ranks and costs the bytes moved.
        """
        from mpi4py import MPI

        lengths = np.zeros(total, dtype=np.int64)
        for position, _, length in places:
            lengths[position] = length
        comm.Allreduce(MPI.IN_PLACE, lengths, op=MPI.SUM)
        starts = np.cumsum(lengths) - lengths
        tmp = None
        if comm.rank == 0:
            fd, tmp = temporary_beside(self.path)
            os.ftruncate(fd, int(lengths.sum()))
            os.close(fd)
        tmp = comm.bcast(tmp, root=0)
        source = os.open(self.path, os.O_RDONLY)
        target = os.open(tmp, os.O_WRONLY)
        try:
            for position, offset, length in places:
                _copy_range(source, target, length, offset, int(starts[position]))
            os.fsync(target)
        finally:
            os.close(source)
            os.close(target)
        comm.Barrier()
        if comm.rank == 0:
            os.replace(tmp, self.path)
        comm.Barrier()


def _copy_range(source, target, length, offset, to):
    """``length`` bytes of ``source`` at ``offset`` to ``target`` at ``to`` (in the kernel where it can)."""
    while length > 0:
        try:
            done = os.copy_file_range(source, target, length, offset, to)
        except OSError:  # a file system or kernel without it: through memory
            done = os.pwrite(target, os.pread(source, length, offset), to)
        if done <= 0:
            raise OSError(f"copying results: {length} bytes left at offset {offset}")
        length, offset, to = length - done, offset + done, to + done


def encode_row(row):
    """A row's JSON text as a line of results.jsonl holds it (no NaN or infinity: json_safe first);
    also any dict or list in a row, as the row's text holds it."""
    if _C_ENCODER is None or type(row) not in (dict, list):
        return _ROW_ENCODER.encode(row)
    return "".join(_C_ENCODER(row, 0))


def encode_items(mapping):
    """The JSON text of a non-empty dict's items without its braces: what they add to a row's text."""
    return encode_row(mapping)[1:-1]


_ASCII = json.encoder.encode_basestring_ascii


def joined_row(head, items):
    """:func:`encode_row` of the row of ``head``'s items (a dict) followed by items whose text is
    ``items`` (:func:`encode_items`): the encoder writes a dict's items in order, joined by ", "."""
    model, subject, index = head.get("model"), head.get("subject"), head.get("index")
    if (len(head) == 3 and type(model) is str and type(subject) is str and type(index) is int
            and list(head) == ["model", "subject", "index"]):  # a record's head, as the encoder writes it
        return f'{{"model": {_ASCII(model)}, "subject": {_ASCII(subject)}, "index": {int.__repr__(index)}, {items}}}'
    return encode_row(head)[:-1] + ", " + items + "}"


def row_key(row):
    return (row["model"], row["subject"], row["index"])


def sort_key(key):
    """The order of records in results.jsonl: model, subject, then integer indices before others."""
    model, subject, index = key
    return (str(model), str(subject), (0, index) if isinstance(index, int) else (1, str(index)))
