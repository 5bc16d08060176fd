"""The store protocol: every backend (SQLite, PostgreSQL, in-memory) answers these calls."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from tracejudge.schema import (
    ItemResult,
    Localization,
    RawSpan,
    RunRecord,
    SpanEvent,
)
from tracejudge.store._encoded import EncodedSpan

if TYPE_CHECKING:
    # Audit's records, imported where used: a command that stores no report (score) does not build them.
    from tracejudge.schema import StoredReport, TuningMark


class TraceSummary(BaseModel):
    """A line of ``traces list``."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    """Trace id."""
    name: str | None
    """Root span name, if the root arrived."""
    span_count: int
    """Spans stored for the trace."""
    start_time: datetime | None
    """Earliest span start."""
    end_time: datetime | None
    """Latest span end."""
    sources: tuple[str, ...]
    """Collectors the spans came from."""


class TriageEntry(BaseModel):
    """One stored triage: the report, which ticket asked, and when (a rerun adds an entry)."""

    model_config = ConfigDict(frozen=True)

    triage_id: str
    """Id of the entry."""
    triaged_at: datetime
    """When the triage ran."""
    ticket: str | None
    """Ticket id (None when the ticket had none)."""
    trace_id: str
    """The trace triaged."""
    result: Localization
    """The triage report."""


class LogEvent(BaseModel):
    """A log record correlated with a span (an OTLP LogRecord carrying the span's trace and span id),
    such as the GenAI message events ``gen_ai.user.message`` or ``gen_ai.choice``.

    Stored apart from spans (it may arrive before its span) and merged into the span's events when
    the span is read.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    trace_id: str
    """Trace id of the span the record belongs to, 32 lowercase hex characters."""
    span_id: str
    """Span id of the span the record belongs to, 16 lowercase hex characters."""
    name: str
    """Event name: the record's ``event_name``, else its ``event.name`` attribute, else ``log``."""
    time_unix_nano: int = 0
    """When it happened (the record's time, else its observed time), nanoseconds since the epoch."""
    severity_number: int = 0
    """OTLP severity number (0 unspecified)."""
    body: Any = None
    """The record's body decoded to a JSON value (None when absent)."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """The record's attributes, decoded to plain JSON values."""
    dropped_attributes_count: int = 0
    """Attributes the SDK dropped from the record at its limit (OTLP ``LogRecord.dropped_attributes_count``,
    ``LogRecordLimits``: 128 by default): what they held is not in ``attributes``. Not part of
    :attr:`event_id` (the same record carries the same count)."""

    @property
    def event_id(self) -> str:
        """Content key: the same record received twice has the same id, so it is stored once."""
        canonical = json.dumps(
            [self.trace_id, self.span_id, self.name, self.time_unix_nano, self.body, self.attributes],
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
            default=str,
        )
        return "le-" + hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()[:32]

    def to_span_event(self) -> SpanEvent:
        """The record as a span event: its attributes, plus the body's keys when the body is a map
        (where the GenAI events keep ``content``, ``message``, ``tool_calls``; an attribute of the same
        name wins), or the body under ``body`` otherwise."""
        attributes = dict(self.attributes)
        if isinstance(self.body, dict):
            for key, value in self.body.items():
                attributes.setdefault(key, value)
        elif self.body is not None:
            attributes.setdefault("body", self.body)
        return SpanEvent(
            name=self.name,
            time_unix_nano=self.time_unix_nano,
            attributes=attributes,
            dropped_attributes_count=self.dropped_attributes_count,
            log_record=True,
        )


class RunProgress(BaseModel):
    """Where a shared scoring run stands, over all its workers."""

    model_config = ConfigDict(frozen=True)

    pending: int = 0
    """Items no live worker holds: never claimed, claimed by a worker whose lease ran out, or kept as not
    final whose wait is over."""
    claimed: int = 0
    """Items a live worker holds (being scored, or claimed next)."""
    waiting: int = 0
    """Items kept as not final, their trace still arriving, that no worker may claim yet."""
    waiting_s: float | None = None
    """Seconds until the first of them may be claimed (None: none wait)."""
    done: int = 0
    """Items whose result is stored."""
    usd: float = 0.0
    """Judge cost of the stored results."""
    tokens: int = 0
    """Judge tokens (prompt + completion) of the stored results."""
    stopped: bool = False
    """Whether the run's budget stopped it: no worker claims more."""


MetaSwap: TypeAlias = tuple[str, str | None, str]
"""(key, expected, value): set ``key`` to ``value`` only if it still holds ``expected`` (None:
only if unset), as :meth:`Store.compare_and_set_meta` does."""


class Store(Protocol):
    """Where raw spans and run state live."""

    def put_spans(
        self,
        spans: Iterable[RawSpan | EncodedSpan],
        *,
        meta: Mapping[str, str] | None = None,
        swaps: Sequence[MetaSwap] = (),
    ) -> int:
        """Store spans in one transaction; a span already stored is kept as it was. ``meta`` keys
        are set in the same transaction (a pull's markers: set if and only if the spans are stored).
        ``swaps`` are compare-and-sets (:meth:`compare_and_set_meta`'s, in order) after them in that
        transaction, so a pull's last batch and its watermark share one commit: one that finds its
        key changed is not made, nor any after it, and the spans and ``meta`` commit all the same;
        what each left shows in the key (a writer reads it back, as after a failed compare-and-set).
        An :class:`EncodedSpan` (the OTLP receiver's) is stored in its own bytes and read back as the
        :class:`RawSpan` its :meth:`EncodedSpan.decode` gives.

        Returns how many were new."""
        ...

    def get_spans(self, trace_id: str) -> list[RawSpan]:
        """Every stored span of one trace, in start order (empty when unknown); the log events of
        each span (:meth:`put_log_events`) are merged into its ``events`` in time order."""
        ...

    def put_log_events(self, events: Iterable[LogEvent]) -> int:
        """Store log events in one transaction; an event already stored (same content) is kept once.

        Its span need not be stored yet. Returns how many were new."""
        ...

    def list_traces(self, *, limit: int | None = None, since: datetime | None = None) -> list[TraceSummary]:
        """Traces, newest first."""
        ...

    def iter_trace_ids(self) -> Iterator[str]:
        """Every trace id, oldest first, streamed."""
        ...

    def session_traces(self, session_id: str) -> list[TraceSummary]:
        """The stored traces (turns) of one session, oldest first."""
        ...

    def trace_session(self, trace_id: str) -> str | None:
        """The session a stored trace belongs to, or None."""
        ...

    def get_meta(self, key: str) -> str | None:
        """A small piece of state (watermarks, cursors)."""
        ...

    def get_metas(self, keys: Sequence[str]) -> dict[str, str]:
        """Several pieces of state in one read: the keys that are set, with their values."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Set a piece of state."""
        ...

    def set_metas(self, values: Mapping[str, str]) -> None:
        """Set several pieces of state in one transaction."""
        ...

    def compare_and_set_meta(self, key: str, expected: str | None, value: str) -> bool:
        """Set ``key`` to ``value`` only if it still holds ``expected`` (None: only if unset); whether
        it did. Writers that read, merge and write back retry on False instead of losing an update."""
        ...

    def put_run(self, run: RunRecord) -> None:
        """Record a scoring run, or update the same run's status and summary (never another run); a run
        stored as ended (any status but ``running``) is not put back to ``running``."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """One scoring run (None when unknown)."""
        ...

    def list_runs(self, *, series: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """Scoring runs, newest first, optionally of one series."""
        ...

    shared_runs: bool
    """Whether several workers may share one scoring run at once (PostgreSQL; SQLite: one at a time)."""

    def join_run(
        self, run: RunRecord, trace_ids: Iterable[str] | None, *, worker: str, lease_s: float
    ) -> RunRecord:
        """Join the shared run ``run.run_id`` as ``worker``, creating it with ``run`` and its items
        ``trace_ids`` (in order) if no worker has; the stored run (the first worker's). A store that
        does not share runs refuses while another live worker is on the run."""
        ...

    def claim_run_items(self, run_id: str, *, worker: str, n: int, lease_s: float) -> list[str]:
        """Claim up to ``n`` items no live worker holds, in order, for ``lease_s`` seconds; none
        once the run is stopped."""
        ...

    def renew_run_lease(
        self, run_id: str, *, worker: str, lease_s: float, items: Collection[str] | None = None
    ) -> None:
        """The worker is alive: extend its heartbeat and the leases of the items it holds — of
        ``items`` only, when given: an item claimed in a transaction whose answer the worker never got
        (the connection dropped as it committed) is the store's alone, and its lease runs out."""
        ...

    def finish_run_item(self, item: ItemResult, *, worker: str) -> bool:
        """Store a shared run's item result unless one is stored already (then False, unless this
        worker stored it: a repeat of a write whose commit went through as the connection dropped),
        and add it to the run's totals. It replaces a result kept as not final (:meth:`defer_run_item`)."""
        ...

    def defer_run_item(self, item: ItemResult, *, worker: str, after_s: float) -> bool:
        """Keep a shared run's item that ``worker`` holds as not final (its trace may still be arriving:
        ``item`` is indeterminate and says why) and hand it back to be claimed again, by any worker of
        the run, once ``after_s`` seconds have passed. ``item`` is stored until its final result
        replaces it; the run's totals are not touched. False when the worker no longer holds it
        (another took it over, or stored its final result), unless it deferred it already (a repeat).
        In a run the budget stopped (:meth:`stop_run`) the item is final as it is: done, and counted."""
        ...

    def keep_run_items(
        self,
        run_id: str,
        *,
        done: Sequence[str],
        usd: float,
        tokens: int,
        waiting: Mapping[str, float],
    ) -> None:
        """A local run (stored, its items stored) left ``waiting`` items kept as not final (trace id ->
        seconds until its wait is over): it becomes a run that ``score --run RUN_ID`` resumes as a shared
        run's later worker does — its ``done`` items final (to write back) and counted in its totals
        (``usd``, ``tokens``: their judge cost), the kept ones claimed once their wait is over."""
        ...

    def run_waiting(self, run_id: str) -> list[str]:
        """The shared run's items kept as not final whose wait is not over, in the run's order."""
        ...

    def wake_run_items(self, run_id: str, trace_ids: Sequence[str]) -> None:
        """End the wait of those of ``trace_ids`` kept as not final: their trace has arrived, so any worker
        of the run may claim them now."""
        ...

    def run_progress(self, run_id: str) -> RunProgress:
        """Counts and totals of a shared run over all workers."""
        ...

    def stop_run(self, run_id: str) -> None:
        """The run's budget is spent: no worker claims more items, and those kept as not final
        (:meth:`defer_run_item`, :meth:`keep_run_items`) are final as they are."""
        ...

    def leave_run(self, run_id: str, *, worker: str) -> None:
        """The worker is done: items it claimed and did not start go back to the others."""
        ...

    def take_run_write_backs(self, run_id: str, *, worker: str, n: int, lease_s: float) -> list[str]:
        """Up to ``n`` of the shared run's stored items that no one has written back and no live
        worker is about to — the ones ``worker`` stored, those of workers that stopped or died, and
        those whose writer died mid-write — held by ``worker`` for ``lease_s`` seconds. A worker
        finishes each take (:meth:`finish_run_write_backs`) before the next: items it took and did
        not finish are a take whose answer it never got (the connection dropped as it committed),
        and are among those taken again."""
        ...

    def finish_run_write_backs(self, run_id: str, trace_ids: Sequence[str], *, written: bool) -> None:
        """The items taken with :meth:`take_run_write_backs` were written back (they are done
        with), or not (any worker may take them again)."""
        ...

    def run_unwritten(self, run_id: str) -> int:
        """How many of the shared run's stored items are not written back yet: waiting for a
        writer, or being written by one."""
        ...

    def put_score_item(self, item: ItemResult) -> None:
        """Record one item's result within its run."""
        ...

    def put_score_items(self, items: Sequence[ItemResult], *, cached_replies: Mapping[str, str]) -> None:
        """Record several items' results and cache judge replies (key -> JSON text, an existing entry
        kept) in one transaction: all of them or, on failure, none."""
        ...

    def iter_score_items(self, run_id: str) -> Iterator[ItemResult]:
        """A run's item results, by trace id, streamed."""
        ...

    def get_cached_reply(self, key: str) -> str | None:
        """A cached judge reply (JSON text) for an exact judge configuration and prompt."""
        ...

    def put_cached_reply(self, key: str, payload: str) -> None:
        """Cache a judge reply; an existing entry is kept."""
        ...

    def put_report(self, report: StoredReport) -> None:
        """Keep a calibration, audit, probe or sample report (an existing id is kept as it was)."""
        ...

    def list_reports(
        self,
        kind: str,
        *,
        run_id: str | None = None,
        rubric_name: str | None = None,
        limit: int | None = None,
    ) -> list[StoredReport]:
        """Reports of one kind, newest first, optionally of one run or rubric."""
        ...

    def put_tuning_marks(self, marks: Iterable[TuningMark]) -> None:
        """Record that labelled items were used while a rubric was tuned (or seen as held out)."""
        ...

    def tuning_marks(self, rubric_name: str) -> list[TuningMark]:
        """Every mark of one rubric name, oldest first."""
        ...

    def put_triage_result(
        self, result: Localization, *, ticket: str | None = None, triaged_at: datetime | None = None
    ) -> TriageEntry:
        """Keep a triage report (a rerun is a new entry; the same entry stored twice is kept once)."""
        ...

    def list_triage_results(
        self, *, trace_id: str | None = None, since: datetime | None = None, limit: int | None = None
    ) -> list[TriageEntry]:
        """Stored triages, newest first, optionally of one trace or since a time."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...
