"""Scoring runs: selection (ids, filter, deterministic sample), the concurrent runner with cache,
repeats and budget, run records with provenance, and the JSON report (DESIGN 5.6)."""

from tracejudge.runs._command import ScoreOutcome, resume_store_arg, score_traces
from tracejudge.runs._report import item_json, run_json
from tracejudge.runs._run import (
    STILL_ARRIVING_REASON,
    Loader,
    ScoreOptions,
    is_still_arriving,
    left_waiting,
    new_run_id,
    provenance,
    score_run,
    score_run_async,
    score_source,
    score_task,
    series_key,
    still_arriving_reason,
    store_loader,
)
from tracejudge.runs._select import in_sample, sample_bucket, select_trace_ids
from tracejudge.runs._summary import SummaryBuilder
from tracejudge.runs._writeback import evaluation_events, score_records, write_back

__all__ = [
    "STILL_ARRIVING_REASON",
    "Loader",
    "ScoreOptions",
    "ScoreOutcome",
    "SummaryBuilder",
    "evaluation_events",
    "in_sample",
    "is_still_arriving",
    "item_json",
    "left_waiting",
    "new_run_id",
    "provenance",
    "resume_store_arg",
    "run_json",
    "sample_bucket",
    "score_records",
    "score_run",
    "score_run_async",
    "score_source",
    "score_task",
    "score_traces",
    "select_trace_ids",
    "series_key",
    "still_arriving_reason",
    "store_loader",
    "write_back",
]
