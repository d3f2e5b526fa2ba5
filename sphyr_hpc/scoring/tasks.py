"""A scoring run's tasks: records grouped by what their yardstick depends on, and one record scored.

Records are grouped by sample (ground truth, masked cells, gravity): one rank
computes a group's yardstick once and scores every completion of it
(:func:`make_tasks`, largest group first); :func:`score_sample` gives one
record's results row, with bad data as ``error`` rather than an exception.
"""

from ..core import grid as grids
from ..core import loadcase as loadcases
from ..io.atomic import json_safe
from ..io.results_log import joined_row, sort_key
from .record_fields import write_record_fields
from .sample_scorer import SampleScorer


def sample_key(sample):
    """What a yardstick depends on: ground truth, masked cells and gravity.

    Cells are compared by value, so an easy subject's ``1`` and a hard
    subject's ``1.0`` (SPhyR's full_easy and full_hard share samples) make one
    task: one rank computes the yardstick once, instead of two ranks twice.
    """
    if sample.error:
        return ("error", sample.key)
    truth = tuple(tuple(_cell_value(cell) for cell in row) for row in sample.ground_truth)
    mask = tuple(tuple(cell == grids.MASK for cell in row) for row in sample.input_grid or ())
    return (sample.gravity, truth, mask)


def _cell_value(cell):
    value = grids.parse_density(cell)  # None for L, S, V and anything that is not a finite number
    return cell if value is None else round(value, 6)  # rounded as YardstickKey rounds densities


def _cost(group):
    sample = group[0]
    if sample.error or not sample.ground_truth:
        return 0
    cells = sum(len(row) for row in sample.ground_truth)
    masked = sum(cell == grids.MASK for row in (sample.input_grid or ()) for cell in row) or cells
    return cells * masked


def make_tasks(samples):
    """Samples grouped by yardstick, most expensive group first (ties: input order)."""
    groups = {}
    shared = {}  # records quoting the same texts share their parsed grids: grouped by identity first
    for sample in samples:
        if sample.error:
            groups.setdefault(sample_key(sample), []).append(sample)
        else:
            shared.setdefault((id(sample.ground_truth), id(sample.input_grid), sample.gravity), []).append(sample)
    for records in shared.values():  # then by value: one sample_key per distinct text, not per record
        groups.setdefault(sample_key(records[0]), []).extend(records)
    ordered = list(groups.values())
    ordered.sort(key=_cost, reverse=True)
    return ordered


def sorted_places(samples):
    """``(position, owner)``: each record key's place in the sorted results file, and the sample
    whose row the file keeps when several share a key (the last in input order)."""
    owner = {sample.key: sample for sample in samples}
    return {key: i for i, key in enumerate(sorted(owner, key=sort_key))}, owner


EXPECTED_RECORD_ERRORS = (grids.GridError, loadcases.LoadCaseError)


def score_sample(sample, scorer, fields=None, fields_format="xdmf", sample_scorer=None):
    """The results row of one sample; bad data becomes ``error``, not an exception.

    With ``fields`` (a folder) the completion, the ground truth and the
    yardstick optimum are also written there for ParaView.  ``sample_scorer``:
    the :class:`~sphyr_hpc.scoring.sample_scorer.SampleScorer` of the record's sample, which
    holds what its completions share (made here when not given).
    """
    return score_record(sample, scorer, fields, fields_format, sample_scorer)[0]


def score_record(sample, scorer, fields=None, fields_format="xdmf", sample_scorer=None):
    """``(row, text)``: :func:`score_sample`'s row and its line of results.jsonl
    (:func:`~sphyr_hpc.io.results_log.encode_row` of it), or None for the caller to encode the row.

    The records of one completion of a sample share its metrics and grids and
    their text (:meth:`~sphyr_hpc.scoring.sample_scorer.SampleScorer.record`):
    a record adds only its model, subject and index.
    """
    sample = sample.parsed()  # a completion read with defer_completion is parsed here, by its rank
    row = {"model": sample.model, "subject": sample.subject, "index": sample.index}
    if sample.tools is not None:  # a run with tools (io/inspect_log.py): its tools and this sample's calls
        row["tools"] = sample.tools
    if sample.error:
        row["error"] = sample.error
        if sample.completion_status:
            row["completion_status"] = sample.completion_status  # counts 0 in the model's means
        return row, None
    try:
        if sample_scorer is None:  # a record alone: what it computes goes to the store now
            sample_scorer = SampleScorer(scorer, sample.ground_truth, sample.input_grid, sample.gravity)
            scored = sample_scorer.scored(sample.completion)
            sample_scorer.flush()
        else:
            scored = sample_scorer.scored(sample.completion)
    except EXPECTED_RECORD_ERRORS as err:
        row["error"] = f"{sample.source} record {sample.index}: {err}"
        return row, None
    text = None
    if sample.invalid_reason:  # a completion left unparsed: scored as one with no grid, for this reason
        metrics = dict(scored.metrics, invalid_reason=sample.invalid_reason)
        row.update(json_safe(metrics))
        row["grids"] = sample_scorer.record_grids(sample.completion, scored.case)
    else:
        metrics, record_grids, items = sample_scorer.record(scored, sample.completion)
        text = joined_row(row, items)
        row.update(metrics)
        row["grids"] = dict(record_grids)
    if fields is not None and scored.posed:
        case = scored.case
        masked = None
        if sample.input_grid and grids.grid_shape(sample.input_grid) == case.loadcase.shape:
            masked = grids.mask_of(sample.input_grid, grids.MASK)
        write_record_fields(fields, sample.model, sample.subject, sample.index, case.loadcase,
                            scorer.designs(case), masked=masked, penal=scorer.config.penal,
                            fields_format=fields_format)
    return row, text
