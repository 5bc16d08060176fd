"""What every stage check reads: :class:`CheckContext` (one task, its ticket and manifest, the task
time, the usage judge) and the matching helpers the stages share.

A stage check is ``check(ctx, material) -> StageResult`` (see ``_localize.PIPELINE``): pure, it
reads the context and one required :class:`~tracejudge.schema.Material` and returns the stage's
status with the evidence it rests on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from tracejudge.localize._facts import FactValue, extract_values
from tracejudge.localize._judge import UsageJudge
from tracejudge.localize._text import _Haystack, find_clause, prepare
from tracejudge.schema import (
    Candidate,
    Document,
    Evidence,
    ManifestEntry,
    Material,
    ModelCall,
    RetrievalCall,
    StageName,
    StageResult,
    StageStatus,
    TaskRecord,
    Ticket,
)

DocMatch = Literal["exact", "other", "unknown"]


def utc(value: datetime | None) -> datetime | None:
    """``value`` with UTC assumed when it carries no zone."""
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def iso(value: datetime | None) -> str:
    """``value`` as ISO 8601 with a ``Z``, or ``-`` when unknown (for notes)."""
    return value.isoformat().replace("+00:00", "Z") if value is not None else "-"


def norm_version(version: str | None) -> str | None:
    """A version compared loosely: case folded, a leading ``v``/``ver``/``version`` dropped."""
    if version is None:
        return None
    return re.sub(r"^(?:v|ver|version)\.?\s*(?=\d)", "", version.strip().casefold())


def material_label(doc_id: str, version: str | None) -> str:
    """``doc@version`` (or just the id) as notes name a material."""
    return f"{doc_id}@{version}" if version else doc_id


def task_time(task: TaskRecord, ticket: Ticket) -> datetime | None:
    """The time the checks are judged at: the ticket's ``task_time``, else the trace's start (UTC)."""
    return utc(ticket.task_time) or utc(task.start_time)


def is_effective(e: ManifestEntry, t: datetime) -> bool:
    """Whether the manifest entry was in effect (its effective_from..effective_to) at ``t``."""
    start, end = utc(e.effective_from), utc(e.effective_to)
    return (start is None or start <= t) and (end is None or end > t)


@dataclass
class Hits:
    """Where the material shows up among returned documents."""

    exact: list[tuple[RetrievalCall, Document]] = field(default_factory=list)
    """Returned as the version required (or any version, when the ticket names none)."""
    other: list[tuple[RetrievalCall, Document]] = field(default_factory=list)
    """Returned as another version."""
    unknown: list[tuple[RetrievalCall, Document]] = field(default_factory=list)
    """Returned with no version recorded (and without the required clause)."""


@dataclass
class CheckContext:
    """What the four checks of one localization read, with caches of what several stages compute.

    Built once per :func:`~tracejudge.localize.localize` call; the stage checks only read it (the
    caches fill on first use).
    """

    task: TaskRecord
    """The task record (one trace) being triaged."""
    ticket: Ticket
    """The ticket: the required material, superseded material, the task time if known."""
    manifest: Sequence[ManifestEntry]
    """The index manifest (empty when none was given)."""
    task_time: datetime | None
    """The time the checks are judged at (:func:`task_time`): the ticket's, else the trace start;
    None when neither is known."""
    judge: UsageJudge | None
    """The usage judge the used_by_model stage may ask, or None for deterministic checks only."""
    session_missing: str | None = None
    """In a conversation: the earlier turns that are not stored (as ``missing`` names them), or None
    when every turn the history shows is stored (or the trace is no turn of a session)."""
    incomplete: str | None = None
    """What says the trace may still be arriving (its root span, or a span's parent, not received, and its
    last span ended a short while ago: ``_localize.still_arriving``), or None: what it does not hold is then
    not concluded absent."""
    _hay: dict[int, _Haystack] = field(default_factory=dict)
    _hits: dict[int, Hits] = field(default_factory=dict)
    _answer_values: list[FactValue] | None = None
    _question_values: list[FactValue] | None = None

    def hay(self, index: int, call: ModelCall) -> _Haystack:
        """The prepared input text of model call ``index`` (tokenized once for every clause search)."""
        if index not in self._hay:
            self._hay[index] = prepare(call.input_text)
        return self._hay[index]

    def hits(self, m: Material) -> Hits:
        """Where ``m`` is among the documents the retrievals returned (computed once per material)."""
        # Keyed by identity: the materials are the ticket's own objects, alive as long as this context.
        key = id(m)
        if key not in self._hits:
            self._hits[key] = _find_hits(self.task, m)
        return self._hits[key]

    def answer_values(self) -> list[FactValue]:
        """The fact values (numbers, dates, amounts) the final answer states."""
        if self._answer_values is None:
            self._answer_values = extract_values(self.task.final_answer or "")
        return self._answer_values

    def question_values(self) -> list[FactValue]:
        """The fact values the user's request states (an answer repeating them is an echo)."""
        if self._question_values is None:
            self._question_values = extract_values(self.task.input or "")
        return self._question_values

    def entries(self, m: Material) -> list[ManifestEntry]:
        """The manifest entries for ``m``: its version, or for "any version" the one in effect."""
        want = norm_version(m.version)
        found = [
            e
            for e in self.manifest
            if e.doc_id == m.doc_id and (want is None or norm_version(e.version) == want)
        ]
        if m.version is None and self.task_time is not None:
            # "Any version" means the one in effect at task time, when the manifest says which.
            t = self.task_time
            in_effect = [e for e in found if is_effective(e, t)]
            if in_effect:
                return in_effect
        return found


def doc_match(doc: Document, m: Material) -> DocMatch | None:
    """exact, other (another version), unknown (version not recorded), or None (another document)."""
    hit, version = _names_document(doc, m.doc_id)
    if not hit:
        return None
    if m.version is None:
        return "exact"
    if version is None:
        return "unknown"
    return "exact" if norm_version(version) == norm_version(m.version) else "other"


def _names_document(doc: Document, doc_id: str) -> tuple[bool, str | None]:
    """Whether the document's ids name ``doc_id`` (itself, or ``doc_id@version``), and its version:
    the recorded one, else the one such an id gives."""
    hit, version = False, doc.version
    for ident in (doc.doc_id, doc.raw_id):
        if ident is None:
            continue
        base, at, tail = ident.rpartition("@")
        if ident == doc_id:
            hit = True
        elif at and base == doc_id:
            hit = True
            version = version or tail
    return hit, version


def _find_hits(task: TaskRecord, m: Material) -> Hits:
    hits = Hits()
    for call in task.retrievals:
        for doc in call.documents:
            kind = doc_match(doc, m)
            if kind == "unknown" and m.clause and doc.content and find_clause(doc.content, m.clause).found:
                kind = "exact"  # version not recorded, but it carries the required clause
            if kind is not None:
                getattr(hits, kind).append((call, doc))
    return hits


def rank(doc: Document) -> int:
    """A returned document's rank as people count it, the first 1: what every note shows. The
    record's ``position`` (its JSON field too) stays zero-based."""
    return doc.position + 1


def doc_note(call: RetrievalCall, doc: Document, what: str) -> Evidence:
    """Evidence naming a returned document, its rank and score."""
    score = f", score {doc.score:g}" if doc.score is not None else ""
    ver = f"@{doc.version}" if doc.version else ""
    return Evidence(span_id=call.span_id, note=f"{what} {doc.doc_id}{ver} at rank {rank(doc)}{score}")


def other_version_notes(hits: Hits, m: Material) -> list[Evidence]:
    """Evidence for each returned document that is another version of ``m``."""
    return [
        doc_note(call, doc, f"returned a different version instead of {material_label(m.doc_id, m.version)}:")
        for call, doc in hits.other
    ]


def candidate(call: RetrievalCall, m: Material) -> Candidate | None:
    """``m`` among the retriever's recorded candidates of ``call``, if it is there."""
    for c in call.candidates or ():
        if c.doc_id == m.doc_id and (
            m.version is None or c.version is None or norm_version(c.version) == norm_version(m.version)
        ):
            return c
    return None


def recording_switch(task: TaskRecord, kind: str, span_id: str | None = None) -> str:
    """``"; to record it: …"``: the switch the trace's gap of ``kind`` names (normalize names the one
    of the instrumentation that produced the span), or "" when it names none."""
    for gap in task.gaps:
        if gap.kind == kind and (span_id is None or gap.span_id == span_id) and gap.switch:
            return f"; to record it: {gap.switch}"
    return ""


def stage_result(name: StageName, status: StageStatus, detail: str, **kw: Any) -> StageResult:
    """A :class:`StageResult` whose evidence and missing lists keep their order without duplicates."""
    for key in ("evidence", "missing"):
        if key in kw:
            kw[key] = tuple(dict.fromkeys(kw[key]))  # order kept, duplicates dropped
    return StageResult(name=name, status=status, detail=detail, **kw)
