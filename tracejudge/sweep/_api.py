"""The library functions behind ``triage --sweep`` and ``ticket draft``: they read the store, call the
pure stages and return the records whose JSON the CLI (and the MCP server) print."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tracejudge._errors import InputError, StoreDamageError
from tracejudge.localize import answer_still_arriving, identify
from tracejudge.normalize import normalize
from tracejudge.schema import (
    DraftTicket,
    ManifestEntry,
    RawSpan,
    StoredReport,
    SweepArriving,
    SweepCount,
    SweepFlag,
    SweepReport,
    SweepSummary,
    TaskRecord,
)
from tracejudge.store import Store, UnreadableRecordError, read_record
from tracejudge.sweep._draft import _ticket, draft_from_finding, draft_ticket
from tracejudge.sweep._index import VersionIndex, utc
from tracejudge.sweep._sweep import analyse, retrieved_versions, task_time_of

__all__ = [
    "draft_ticket_for",
    "flag_trace",
    "iter_sweep",
    "latest_sweep",
    "record_sweep",
    "summarize",
    "sweep",
]

# Flags kept with a stored summary: enough for the report's table, bounded whatever the sweep found.
_KEPT_FLAGS = 200

_NOT_STORED_HINT = "run `tracejudge traces list` to see stored traces, or collect the trace first"


def _need_content(index: VersionIndex) -> None:
    if not index.docs:
        raise InputError(
            "the manifest has no document with two or more versions carrying `content`",
            hint="add each version's text as `content` to the manifest lines (DESIGN 5.3): what changed"
            " between versions is read from it",
        )


def flag_trace(task: TaskRecord, index: VersionIndex, now: datetime | None = None) -> list[SweepFlag]:
    """The sweep's verdict on one trace: a flag per document its answer states stale values of, or cites
    a stale version of, each with evidence and a draft ticket. Empty when nothing rests on stale material,
    or when the answer may be a draft of a trace still arriving at ``now`` (or at any time, when None:
    :func:`~tracejudge.localize.answer_still_arriving`)."""
    t = task_time_of(task)
    if t is None or answer_still_arriving(task, now) is not None:
        return []
    flags = []
    got = set(retrieved_versions(task, index))
    for f in analyse(task, index, t):
        if not f.flagged:
            continue
        used = f.used(got)
        d, ev = draft_from_finding(task, index, f, used)
        flags.append(
            SweepFlag(
                trace_id=task.trace_id,
                task_time=t,
                doc_id=f.doc_id,
                in_effect=f.in_effect[0].version if len(f.in_effect) == 1 else None,
                used=used,
                evidence=tuple(ev),
                ticket=_ticket(task, d, "", t),
            )
        )
    return flags


def _start(spans: Sequence[RawSpan]) -> datetime | None:
    starts = [s.start_time_unix_nano for s in spans if s.start_time_unix_nano > 0]
    if not starts:
        return None
    return datetime.fromtimestamp(min(starts) / 1e9, tz=UTC)


@dataclass(frozen=True)
class _Window:
    """The traces a sweep reads: those starting in [since, until); with either bound, a trace that
    records no start is outside."""

    since: datetime | None
    until: datetime | None

    def holds(self, start: datetime | None) -> bool:
        if start is None:
            return self.since is None and self.until is None
        return (self.since is None or start >= self.since) and (self.until is None or start < self.until)


def iter_sweep(
    store: Store,
    manifest: Sequence[ManifestEntry],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
    arriving: Callable[[str], None] | None = None,
    unreadable: Callable[[str], None] | None = None,
    now: datetime | None = None,
) -> Iterator[SweepFlag | int]:
    """Stream the sweep: every flag as found, then the number of traces scanned (one trace in memory at
    a time). ``progress(scanned, flagged)`` is called after each trace; ``arriving(trace_id)`` for each
    trace not judged because, at ``now`` (None: when it is read), it may still be arriving and its answer
    may be a draft (:func:`~tracejudge.localize.answer_still_arriving`); ``unreadable(trace_id)`` for each
    stored trace that does not read back (a damaged store), which without it stops the sweep."""
    index = VersionIndex.build(manifest)
    _need_content(index)
    window = _Window(utc(since), utc(until))
    scanned = flagged = 0
    for trace_id in store.iter_trace_ids():
        try:
            spans = store.get_spans(trace_id)
        except StoreDamageError:
            if unreadable is None:
                raise
            unreadable(trace_id)  # only this trace is lost: the sweep reads the rest
            continue
        if not window.holds(_start(spans)):
            continue
        scanned += 1
        # Returned documents are identified as triage identifies them: by id, manifest ids or content.
        task = identify(normalize(spans), manifest)
        at = now or datetime.now(UTC)
        if arriving is not None and answer_still_arriving(task, at) is not None:
            arriving(trace_id)
        for flag in flag_trace(task, index, at):
            flagged += 1
            yield flag
        if progress is not None:
            progress(scanned, flagged)
    yield scanned


def sweep(
    store: Store,
    manifest: Sequence[ManifestEntry],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
    now: datetime | None = None,
) -> SweepReport:
    """``triage --sweep``: every stored trace in the window (start in [since, until)) whose answer rests on
    a document version not in effect at its task time (DESIGN 5.5, Sweep); those that may still be
    arriving at ``now`` (None: when read) with an answer that may be a draft are listed, not judged."""
    flags: list[SweepFlag] = []
    late: list[str] = []
    lost: list[str] = []
    scanned = 0
    items = iter_sweep(
        store,
        manifest,
        since=since,
        until=until,
        progress=progress,
        arriving=late.append,
        unreadable=lost.append,
        now=now,
    )
    for item in items:
        if isinstance(item, int):
            scanned = item
        else:
            flags.append(item)
    return SweepReport(
        flagged=tuple(flags), scanned=scanned, still_arriving=tuple(late), unreadable=tuple(lost)
    )


def summarize(
    report: SweepReport, *, since: datetime | None, until: datetime | None, now: datetime | None = None
) -> SweepSummary:
    """What the report and ``/metrics`` show of a sweep: counts per document version and the first flags."""
    counts: Counter[tuple[str, str, str | None]] = Counter(
        (f.doc_id, f.used, f.in_effect) for f in report.flagged
    )
    kept = tuple(
        f.model_copy(update={"evidence": f.evidence[:1], "ticket": {}}) for f in report.flagged[:_KEPT_FLAGS]
    )
    return SweepSummary(
        created_at=now or datetime.now(UTC),
        since=utc(since),
        until=utc(until),
        scanned=report.scanned,
        flagged_total=len(report.flagged),
        by_version=tuple(
            SweepCount(doc_id=d, used=u, in_effect=e, flagged=n)
            for (d, u, e), n in sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or ""))
        ),
        flagged=kept,
        still_arriving=len(report.still_arriving),
        still_arriving_traces=report.still_arriving[:_KEPT_FLAGS],
    )


# The summary's fields kept beside it (SweepArriving), not in its stored payload: a tracejudge from before
# them forbids fields it does not know, so it would pass over the latest sweep and show an older one.
_BESIDE = frozenset({"still_arriving", "still_arriving_traces"})


def record_sweep(
    store: Store, report: SweepReport, *, since: datetime | None = None, until: datetime | None = None
) -> SweepSummary:
    """Keep a sweep's summary in the store, for ``tracejudge report`` and ``serve``'s ``/metrics``: the
    summary as every tracejudge reads it, and beside it what it did not judge (:class:`SweepArriving`)."""
    summary = summarize(report, since=since, until=until)
    report_id = uuid.uuid4().hex
    store.put_report(
        StoredReport(
            report_id=report_id,
            kind="sweep",
            created_at=summary.created_at,
            payload=summary.model_dump(mode="json", exclude=set(_BESIDE)),
        )
    )
    beside = SweepArriving(
        sweep_report_id=report_id,
        still_arriving=summary.still_arriving or 0,
        traces=summary.still_arriving_traces,
    )
    store.put_report(
        StoredReport(
            report_id=f"{report_id}-arriving",
            kind="sweep_arriving",
            created_at=summary.created_at,
            payload=beside.model_dump(mode="json"),
        )
    )
    return summary


def latest_sweep(store: Store) -> SweepSummary | None:
    """The summary of the latest recorded sweep, if any (one that no longer validates is skipped), with
    what it did not judge (None when that is not stored: recorded by a tracejudge before the count)."""
    for stored in store.list_reports("sweep", limit=5):
        try:
            summary = read_record(SweepSummary, stored.payload)
        except UnreadableRecordError:
            continue
        beside = _arriving(store, stored.report_id)
        if beside is None:
            return summary
        return summary.model_copy(
            update={"still_arriving": beside.still_arriving, "still_arriving_traces": beside.traces}
        )
    return None


def _arriving(store: Store, sweep_report_id: str) -> SweepArriving | None:
    """The stored companion of a sweep summary; recorded with it, so among the latest few."""
    for stored in store.list_reports("sweep_arriving", limit=5):
        if stored.payload.get("sweep_report_id") == sweep_report_id:
            try:
                return read_record(SweepArriving, stored.payload)
            except UnreadableRecordError:
                return None
    return None


def draft_ticket_for(
    store: Store,
    trace_id: str,
    manifest: Sequence[ManifestEntry],
    feedback: str = "",
    *,
    langfuse_score: str | None = None,
    out: Path | None = None,
) -> DraftTicket:
    """``ticket draft``: a draft ticket for a stored trace (DESIGN 5.5, Draft tickets), from ``feedback``
    or the comment of the Langfuse score ``langfuse_score`` on the trace; written to ``out`` as YAML
    when given. The record is what ``ticket draft --json`` prints."""
    index = VersionIndex.build(manifest)
    _need_content(index)
    trace_id = trace_id.strip().lower()
    spans = store.get_spans(trace_id)
    if not spans:
        raise InputError(f"no spans stored for trace {trace_id}", hint=_NOT_STORED_HINT)
    if langfuse_score is not None:
        from tracejudge.sweep._langfuse import langfuse_feedback

        feedback = langfuse_feedback(trace_id, langfuse_score)
    draft = draft_ticket(identify(normalize(spans), manifest), index, feedback, datetime.now(UTC))
    if out is None:
        return draft
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(draft.yaml, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{out}: cannot be written: {exc}", hint="give --out a writable file path") from None
    return draft.model_copy(update={"out": str(out)})
