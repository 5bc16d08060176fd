"""What changed between document versions, draft tickets, and sweeps for answers resting on a
version not in effect at the task time (DESIGN 5.5, **Sweep** and **Draft tickets**).

``version_diff``, ``draft_ticket`` and ``flag_trace`` are pure; ``sweep`` and ``draft_ticket_for`` read
the store and return the records whose JSON ``triage --sweep --json`` and ``ticket draft --json`` print.
"""

from tracejudge.sweep._api import (
    draft_ticket_for,
    flag_trace,
    iter_sweep,
    latest_sweep,
    record_sweep,
    summarize,
    sweep,
)
from tracejudge.sweep._diff import version_diff
from tracejudge.sweep._draft import draft_ticket, facts_of, render_yaml
from tracejudge.sweep._index import VersionIndex
from tracejudge.sweep._writeback import SWEEP_SCORE_NAME, sweep_scores, write_sweep

__all__ = [
    "SWEEP_SCORE_NAME",
    "VersionIndex",
    "draft_ticket",
    "draft_ticket_for",
    "facts_of",
    "flag_trace",
    "iter_sweep",
    "latest_sweep",
    "record_sweep",
    "render_yaml",
    "summarize",
    "sweep",
    "sweep_scores",
    "version_diff",
    "write_sweep",
]
