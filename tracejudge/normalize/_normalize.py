"""Placeholder normalizer: replaced by the convention tables."""

from __future__ import annotations

from collections.abc import Sequence

from tracejudge.schema import RawSpan, TaskRecord


def normalize(spans: Sequence[RawSpan]) -> TaskRecord:
    """Rebuild the task record of one trace from its spans (any order, any convention)."""
    if not spans:
        raise ValueError("normalize() needs at least one span")
    return TaskRecord(trace_id=spans[0].trace_id)
