"""What the pulling collectors share: the per-trace markers and the watermark that make a pull resumable.

A collector names its markers and watermarks with its own prefix (``langfuse``, ``phoenix``):
* ``<prefix>.trace:<id>`` is set only after a trace's spans are stored, and records what was seen
  (:class:`Seen`: span count, latest end or update, whether the trace is settled); a listed trace
  whose marker says settled is not fetched again, an unsettled one is, and only its new spans are
  stored (the store dedups);
* ``<prefix>.unsettled:<scope hash>`` lists the traces still unsettled, so that a later run fetches
  them again even once the listing window has moved past them;
* ``<prefix>.watermark:<scope hash>`` holds ``{"from", "upto"}``: the window a complete run covered.

A trace is settled when nothing more is expected: it has a root, no span's parent is missing, and
it started longer ago than the look-back (spans of one trace arrive minutes apart when two services
export it, or one exporter flushes late). A trace that stays incomplete is given up on after
:data:`MAX_ATTEMPTS` fetches; its missing parent stays visible as a gap in ``traces show`` and triage.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tracejudge.schema import RawSpan
from tracejudge.store import MetaSwap, Store
from tracejudge_collectors._time import parse_time


def scope_key(prefix: str, scope: Sequence[Any]) -> str:
    """The meta key of the watermark of one scope (server and whatever selects the traces)."""
    text = json.dumps(list(scope), separators=(",", ":"))
    return f"{prefix}.watermark:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def marker_key(prefix: str, trace_id: str) -> str:
    """The meta key marking a trace as stored."""
    return f"{prefix}.trace:{trace_id.lower()}"


MAX_ATTEMPTS = 6
"""Fetches of a trace that stays incomplete (a parent never sent) before a pull stops asking."""


class Seen(BaseModel):
    """What a pull saw of one trace (kept in its marker beside the collector's own fields)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    spans: int = 0
    """Spans the backend returned for the trace."""
    latest: str | None = None
    """The latest span end, or the backend's last update of the trace (Langfuse ``updatedAt``)."""
    settled: bool = True
    """Nothing more is expected (markers written before this field existed count as settled)."""
    attempts: int = 1
    """Fetches so far."""
    missing_parents: tuple[str, ...] = ()
    """Parent span ids the spans name that were not received (a root missing is ``"<root>"``)."""


def missing_parents(spans: Sequence[RawSpan]) -> tuple[str, ...]:
    """Parent span ids the spans name that are not among them; ``<root>`` when no span is a root."""
    ids = {s.span_id for s in spans}
    missing = sorted({s.parent_span_id for s in spans if s.parent_span_id and s.parent_span_id not in ids})
    if spans and all(s.parent_span_id for s in spans):
        missing.append("<root>")
    return tuple(missing)


def seen(
    spans: Sequence[RawSpan],
    *,
    before: Seen | None,
    now: datetime,
    lag: timedelta,
    updated: str | None = None,
) -> Seen:
    """What this fetch saw of a trace, and whether it is settled (see the module docstring)."""
    started = _first_start(spans)
    latest = updated or _last_end(spans)
    missing = missing_parents(spans)
    recent = started is None or started > now - lag
    attempts = (before.attempts + 1) if before is not None else 1
    # Nothing more is expected once it is old enough and whole, or was fetched incomplete too often.
    settled = not recent and (not missing or attempts >= MAX_ATTEMPTS)
    return Seen(spans=len(spans), latest=latest, settled=settled, attempts=attempts, missing_parents=missing)


def _first_start(spans: Sequence[RawSpan]) -> datetime | None:
    """When the earliest span started (spans without a start time aside)."""
    start = min((s.start_time_unix_nano for s in spans if s.start_time_unix_nano > 0), default=None)
    return None if start is None else datetime.fromtimestamp(start / 1e9, tz=UTC)


def _last_end(spans: Sequence[RawSpan]) -> str | None:
    """When the latest span ended, ISO (spans without an end time aside)."""
    end = max((s.end_time_unix_nano for s in spans if s.end_time_unix_nano > 0), default=None)
    return None if end is None else datetime.fromtimestamp(end / 1e9, tz=UTC).isoformat()


def read_seen(raw: str | None) -> Seen | None:
    """The :class:`Seen` in a marker's JSON, or None when there is no marker."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return Seen()
    return Seen.model_validate(data) if isinstance(data, dict) else Seen()


def needs_fetch(marker: Seen | None, *, updated: str | None = None) -> bool:
    """Whether a listed trace is fetched: never stored, not settled, or updated since (Langfuse)."""
    if marker is None or not marker.settled:
        return True
    if not updated or not marker.latest:
        return False
    new, old = parse_time(updated), parse_time(marker.latest)
    return new is not None and old is not None and new > old


def unsettled_key(prefix: str, scope_key_value: str) -> str:
    """The meta key listing the still-unsettled traces of one scope."""
    return f"{prefix}.unsettled:" + scope_key_value.rpartition(":")[2]


def _unsettled(raw: str | None) -> list[str]:
    try:
        data = json.loads(raw) if raw else []
    except ValueError:
        return []
    return [str(t) for t in data] if isinstance(data, list) else []


def read_unsettled(store: Store, key: str) -> list[str]:
    """The trace ids an earlier run left unsettled in this scope."""
    return _unsettled(store.get_meta(key))


def write_unsettled(store: Store, key: str, add: Sequence[str], remove: Sequence[str]) -> None:
    """Add and remove trace ids in the unsettled list (compare-and-set: concurrent pulls lose nothing)."""
    while (swap := unsettled_swap(store, key, add, remove)) is not None:
        if store.compare_and_set_meta(*swap):
            return


def unsettled_swap(store: Store, key: str, add: Sequence[str], remove: Sequence[str]) -> MetaSwap | None:
    """The compare-and-set that adds and removes these trace ids in the unsettled list as it is now
    (None: nothing to change)."""
    if not add and not remove:
        return None
    gone = set(remove)
    raw = store.get_meta(key)
    current = _unsettled(raw)
    kept = [t for t in current if t not in gone]
    kept += [t for t in dict.fromkeys(add) if t not in set(kept)]
    return None if kept == current else (key, raw, json.dumps(kept))


def parse_watermark(raw: str | None) -> tuple[datetime | None, datetime] | None:
    """(start of the covered window or None for "from the beginning", latest covered trace start)."""
    if not raw:
        return None
    try:
        data = json.loads(raw)
        upto = parse_time(data["upto"])
    except (ValueError, KeyError, TypeError):
        return None
    if upto is None:
        return None
    return parse_time(data.get("from")), upto


class Window:
    """Where a run lists from, given the watermark an earlier run left for the same scope."""

    def __init__(self, store: Store, key: str, from_time: datetime | None, lag: timedelta) -> None:
        self.store = store
        self.key = key
        covered = parse_watermark(store.get_meta(key))
        self.lower = from_time
        """List traces that started at or after this (None: from the beginning)."""
        self.coverage_from = from_time
        self.watermark: datetime | None = None
        """The latest trace start an earlier complete run covered, when it helps this run."""
        # The watermark only helps when the window it covers starts no later than the one asked for.
        if covered is not None and (
            covered[0] is None or (from_time is not None and from_time >= covered[0])
        ):
            self.coverage_from, self.watermark = covered
            resume = self.watermark - lag
            self.lower = resume if self.lower is None or resume > self.lower else self.lower

    def advance(
        self, *, complete: bool, latest: datetime | None, iso: Callable[[datetime], str]
    ) -> datetime | None:
        """Store the new watermark when the run covered its whole window; the watermark after the run."""
        if not (complete and latest is not None):
            return self.watermark
        # Compare-and-set: a puller of the same scope that finished meanwhile with a watermark at
        # least as good (starting no later, reaching no earlier) keeps it; otherwise this one wins.
        while True:
            swap, theirs = self._swap(latest, iso)
            if swap is None:
                return theirs
            if self.store.compare_and_set_meta(*swap):
                return latest

    def swap(
        self, *, complete: bool, latest: datetime | None, iso: Callable[[datetime], str]
    ) -> MetaSwap | None:
        """The compare-and-set :meth:`advance` would make now (None: none), for a run's last write to
        make in its own transaction; :meth:`advance` after it then finds the watermark set."""
        if not (complete and latest is not None):
            return None
        return self._swap(latest, iso)[0]

    def _swap(
        self, latest: datetime, iso: Callable[[datetime], str]
    ) -> tuple[MetaSwap | None, datetime | None]:
        """(the compare-and-set that moves the watermark to ``latest``, or None when the stored one
        covers as much; the watermark stored now)."""
        raw = self.store.get_meta(self.key)
        theirs = parse_watermark(raw)
        if theirs is not None and _covers(theirs, self.coverage_from, latest):
            return None, theirs[1]
        value = json.dumps(
            {"from": iso(self.coverage_from) if self.coverage_from else None, "upto": iso(latest)}
        )
        return (self.key, raw, value), None if theirs is None else theirs[1]


def _covers(theirs: tuple[datetime | None, datetime], start: datetime | None, upto: datetime) -> bool:
    """Whether a watermark covering ``theirs`` covers the window ``start``..``upto`` too."""
    starts_earlier = theirs[0] is None or (start is not None and theirs[0] <= start)
    return starts_earlier and theirs[1] >= upto


class ListingTally:
    """What a pull's run counts alike whatever the backend, as its listing goes: traces skipped
    (stored and settled), the latest trace start seen (where the watermark may advance to), and the
    progress callback told of each skipped trace. A collector's run sets the three attributes."""

    skipped: int
    """Listed traces not fetched: stored and settled by an earlier run."""
    latest: datetime | None
    """The latest trace start seen so far (the watermark's, before any is seen)."""
    on_trace: Callable[[str, bool], None] | None
    """``on_trace(trace_id, fetched)``, once per listed trace (progress bars)."""

    def note_start(self, started: datetime | None) -> None:
        """A listed trace started then (None: unknown)."""
        if started is not None and (self.latest is None or started > self.latest):
            self.latest = started

    def skip(self, trace_id: str) -> None:
        """A listed trace is not fetched."""
        self.skipped += 1
        if self.on_trace is not None:
            self.on_trace(trace_id, False)


class PullCounts(BaseModel):
    """What every pull reports, whatever the backend; each collector's ``PullReport`` adds its own."""

    model_config = ConfigDict(frozen=True)

    base_url: str
    """The server pulled from."""
    listed: int = 0
    """Traces listed in the window."""
    fetched: int = 0
    """Traces fetched and stored in this run."""
    skipped: int = 0
    """Listed traces already stored (and settled) by an earlier run."""
    refetched: int = 0
    """Traces fetched again because their spans may still have been arriving (of ``fetched``)."""
    unsettled: int = 0
    """Traces still incomplete or recent after this run: the next run fetches them again."""
    spans_new: int = 0
    """Spans newly stored."""
    retries: int = 0
    """Requests retried (rate limits, server errors, dropped connections)."""
    complete: bool = True
    """False when ``--limit`` stopped the run before the window was done."""
    watermark: str | None = None
    """Latest trace start covered; the next run continues from here."""
    warnings: tuple[str, ...] = Field(default_factory=tuple)
    """Things worth knowing: deprecation notices, nothing matched, and the like."""


def summary_tail(report: PullCounts) -> list[str]:
    """The lines every pull summary ends with: counts, retries, an unfinished window, warnings."""
    lines = [
        f"listed {report.listed} traces: fetched {report.fetched}, already stored {report.skipped};"
        f" {report.spans_new} new spans"
    ]
    if report.refetched:
        lines.append(f"{report.refetched} trace(s) fetched again: their spans may still have been arriving")
    if report.unsettled:
        lines.append(
            f"{report.unsettled} trace(s) may still be incomplete (recent, or a parent span not received):"
            " the next run fetches them again"
        )
    if report.retries:
        lines.append(f"{report.retries} requests retried (rate limits, server errors, dropped connections)")
    if not report.complete:
        lines.append("stopped at --limit: run again to continue")
    lines.extend(f"warning: {w}" for w in report.warnings)
    return lines
