"""What changed between two versions of a document, draft tickets, and sweep results (DESIGN 5.5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from tracejudge.schema._spans import SCHEMA_VERSION, _Frozen
from tracejudge.schema._triage import Evidence

ValueKind = Literal["amount", "percent", "date", "duration", "count", "number"]
ChangeKind = Literal["changed", "added", "removed"]


class ChangedValue(_Frozen):
    """A value (amount, percent, date, duration, count) one version states and the other does not."""

    kind: ValueKind
    """What it is."""
    text: str
    """As the version writes it, e.g. "50,000 RMB", "sixty days", "1 March 2026"."""
    value: str
    """Canonical reading, e.g. "50000 CNY", "60 day", "2026-03-01"."""


class SentenceChange(_Frozen):
    """One sentence that differs between two versions: reworded or with other values, added, or removed."""

    kind: ChangeKind
    """changed (a sentence of each version pairs up), added (only the new one), removed (only the old one)."""
    old: str | None = None
    """The old version's sentence (None when added)."""
    new: str | None = None
    """The new version's sentence (None when removed)."""
    old_values: tuple[ChangedValue, ...] = ()
    """Values of the old sentence the new version does not state anywhere."""
    new_values: tuple[ChangedValue, ...] = ()
    """Values of the new sentence the old version does not state anywhere."""


class VersionDiff(_Frozen):
    """What changed between two versions' ``content``; sentences present in both (wherever they sit) are
    unchanged and not listed."""

    changes: tuple[SentenceChange, ...] = ()
    """The sentences that differ, in the new version's order (removed ones after)."""
    old_values: tuple[ChangedValue, ...] = ()
    """Every value only the old version states."""
    new_values: tuple[ChangedValue, ...] = ()
    """Every value only the new version states."""


class Ambiguity(_Frozen):
    """A field of a draft ticket that ``ticket draft`` could not settle and left for a person."""

    field: str
    """Which field, e.g. ``required[0].clause``."""
    reason: str
    """What is ambiguous and what the person should decide."""
    options: tuple[str, ...] = ()
    """The candidates it could not choose between."""


class DraftTicket(_Frozen):
    """What ``ticket draft`` produced: the ticket (status draft) and what it could not settle."""

    schema_version: int = SCHEMA_VERSION
    """Version of this record's layout."""
    trace_id: str
    """The trace the ticket is about."""
    ticket: dict[str, Any]
    """The ticket as written (DESIGN 5.2), ``status: draft``; a field it could not settle is null."""
    ambiguous: tuple[Ambiguity, ...] = ()
    """Fields left for a person, and why."""
    evidence: tuple[Evidence, ...] = ()
    """What the choices rest on (the answer's values, the retrieval, the feedback)."""
    yaml: str = ""
    """The ticket as YAML, with a comment on each field left for a person."""
    out: str | None = None
    """The file it was written to, if any."""
    still_arriving: str | None = None
    """Why the answer was not read: the trace may still be arriving and the answer was read from a model
    call, not the root — maybe a draft the user never got (DESIGN 5.5). The basis then rests on the
    feedback and what the trace retrieved; draft again once the rest of the trace has arrived."""


class SweepFlag(_Frozen):
    """A trace whose answer rests on a version not in effect at its task time (DESIGN 5.5, Sweep)."""

    trace_id: str
    """The trace."""
    task_time: datetime | None
    """When the task ran (the trace's start)."""
    doc_id: str
    """The document."""
    in_effect: str | None
    """The version in effect at the task time (None when several were)."""
    used: str
    """The version not in effect whose values the answer states, or that it cites."""
    evidence: tuple[Evidence, ...] = ()
    """The answer's values and citations, and what the trace retrieved and put in the model input."""
    ticket: dict[str, Any] = Field(default_factory=dict)
    """A draft ticket (status draft): the version in effect as required, the used one as superseded."""


class SweepReport(_Frozen):
    """``triage --sweep --json``: ``{"flagged": [...], "scanned": N, "still_arriving": [...], "unreadable":
    [...]}``."""

    flagged: tuple[SweepFlag, ...] = ()
    """Flagged traces, in the order scanned."""
    scanned: int = 0
    """Traces read in the window."""
    still_arriving: tuple[str, ...] = ()
    """Traces read but not judged (counted in ``scanned``): they may still be arriving and their answer was
    read from a model call, not the root — maybe a draft the user never got (DESIGN 5.5). A sweep after the
    rest has arrived (or ``STILL_ARRIVING`` after their last span ended) reads them."""
    unreadable: tuple[str, ...] = ()
    """Stored traces that do not read back (a damaged store: ``tracejudge doctor --deep`` lists them and
    says what to do), not counted in ``scanned``: the sweep read the rest."""


class SweepCount(_Frozen):
    """Flagged traces of one document version used while another was in effect."""

    doc_id: str
    """The document."""
    used: str
    """The version the answers rested on."""
    in_effect: str | None
    """The version in effect then (None when several were)."""
    flagged: int
    """How many flagged traces."""


class SweepSummary(_Frozen):
    """The latest sweep as the report and ``/metrics`` show it (kept in the store, bounded in size)."""

    schema_version: int = SCHEMA_VERSION
    """Version of this record's layout."""
    created_at: datetime
    """When the sweep ran."""
    since: datetime | None = None
    """Start of the window (None: from the first trace)."""
    until: datetime | None = None
    """End of the window (None: to the last trace)."""
    scanned: int
    """Traces read."""
    flagged_total: int
    """Traces flagged (per document)."""
    by_version: tuple[SweepCount, ...] = ()
    """Flagged traces per document version."""
    flagged: tuple[SweepFlag, ...] = ()
    """The first flags (at most a few hundred), evidence cut to its first note, without tickets."""
    still_arriving: int | None = None
    """Traces scanned but not judged because they may still have been arriving, their answer maybe a draft
    (``SweepReport.still_arriving``); None: not counted (a sweep recorded by a tracejudge before the count).
    Stored beside the summary (:class:`SweepArriving`), not in it: a tracejudge before the count forbids
    fields it does not know, and would skip the summary for an older one."""
    still_arriving_traces: tuple[str, ...] = ()
    """The first of those traces (at most a few hundred)."""


class SweepArriving(_Frozen):
    """What a recorded sweep did not judge because it may still have been arriving: the stored companion of
    its :class:`SweepSummary` (``StoredReport`` kind ``sweep_arriving``), read back into it."""

    sweep_report_id: str
    """The stored sweep summary it belongs to."""
    still_arriving: int
    """Traces scanned but not judged."""
    traces: tuple[str, ...] = ()
    """The first of them (at most a few hundred)."""
