"""The store protocol: every backend (SQLite, PostgreSQL, in-memory) answers these calls."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from tracejudge.schema import ItemResult, Localization, RawSpan, RunRecord, StoredReport, TuningMark


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


class Store(Protocol):
    """Where raw spans and run state live."""

    def put_spans(self, spans: Iterable[RawSpan]) -> int:
        """Store spans in one transaction; a span already stored is kept as it was.

        Returns how many were new."""
        ...

    def get_spans(self, trace_id: str) -> list[RawSpan]:
        """Every stored span of one trace, in start order (empty when unknown)."""
        ...

    def list_traces(self, *, limit: int | None = None, since: datetime | None = None) -> list[TraceSummary]:
        """Traces, newest first."""
        ...

    def iter_trace_ids(self) -> Iterator[str]:
        """Every trace id, oldest first, streamed."""
        ...

    def get_meta(self, key: str) -> str | None:
        """A small piece of state (watermarks, cursors)."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Set a piece of state."""
        ...

    def put_run(self, run: RunRecord) -> None:
        """Record a scoring run, or update the same run's status and summary (never another run)."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """One scoring run (None when unknown)."""
        ...

    def list_runs(self, *, series: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """Scoring runs, newest first, optionally of one series."""
        ...

    def put_score_item(self, item: ItemResult) -> None:
        """Record one item's result within its run."""
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
