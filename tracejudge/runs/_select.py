"""Which stored traces a run scores: ids, a filter, a deterministic sample, a limit."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime

from tracejudge.store import Store, TraceSummary

_SAMPLE_PREFIX = b"tracejudge:sample:v1\0"


def sample_bucket(trace_id: str) -> float:
    """A trace's place in [0, 1): sha256 of the id, so every rubric at the same rate picks the same traces."""
    digest = hashlib.sha256(_SAMPLE_PREFIX + trace_id.lower().encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def in_sample(trace_id: str, fraction: float) -> bool:
    """Whether a trace falls in a sample of the given fraction (nested: a 5% sample is inside 10%)."""
    return sample_bucket(trace_id) < fraction


def _matches(row: TraceSummary, name: str | None, until: datetime | None) -> bool:
    """Whether a stored trace passes the name glob and started before ``until`` (unset tests pass)."""
    if name is not None and not fnmatch.fnmatchcase(row.name or "", name):
        return False
    return until is None or (row.start_time is not None and row.start_time < until)


def _filtered(
    store: Store, name: str | None, since: datetime | None, until: datetime | None
) -> Iterator[str]:
    """Stored traces matching the filter, in trace id order."""
    rows = store.list_traces(since=since)
    return (r.trace_id for r in sorted(rows, key=lambda r: r.trace_id) if _matches(r, name, until))


def _thinned(source: Iterable[str], sample: float | None, limit: int | None) -> Iterator[str]:
    """The ids in the sample, cut at the limit."""
    n = 0
    for trace_id in source:
        if limit is not None and n >= limit:
            return
        if sample is not None and not in_sample(trace_id, sample):
            continue
        n += 1
        yield trace_id


def select_trace_ids(
    store: Store,
    *,
    trace_ids: Sequence[str] = (),
    name: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    sample: float | None = None,
    limit: int | None = None,
) -> Iterator[str]:
    """Trace ids to score, streamed: the given ids (in order), else every stored trace matching the
    filter, thinned by the sample and cut at the limit."""
    source: Iterable[str]
    if trace_ids:
        source = dict.fromkeys(t.lower() for t in trace_ids)
    elif name is not None or since is not None or until is not None:
        source = _filtered(store, name, since, until)
    else:
        source = store.iter_trace_ids()
    yield from _thinned(source, sample, limit)
