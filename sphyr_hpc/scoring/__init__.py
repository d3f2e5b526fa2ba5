"""Scoring a completion: the Scorer, the per-sample scorer, yardstick pieces over ranks, diagnosis,
summaries, certified metrics, validate probes, a record's fields.  Imports the optimiser and below."""
