"""Tickets, the index manifest, and the triage report (DESIGN 5.2, 5.3, 5.5)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from tracejudge.schema._spans import SCHEMA_VERSION, IdText, MaybeIdText, Time, _Frozen, _id_text

Verdict = Literal[
    "not_indexed",
    "filtered",
    "not_retrieved",
    "dropped_in_context",
    "ignored_by_model",
    "no_fault",
    "unconfirmed",
    "basis_not_in_effect",
]
StageName = Literal["indexed", "retrieved", "in_context", "used_by_model"]
StageStatus = Literal["pass", "fail", "unconfirmed", "skipped"]
Cause = Literal["filter", "permission", "rank"]


class Material(_Frozen):
    """A piece of applicable (or superseded) material named by a ticket."""

    doc_id: IdText
    """Document identity."""
    version: MaybeIdText = None
    """Version; None matches any version."""
    clause: str | None = None
    """Text that must reach the model."""
    facts: dict[str, Any] = Field(default_factory=dict)
    """Values the answer must agree with (required) or would show the stale material was used (superseded)."""

    @field_validator("clause", mode="before")
    @classmethod
    def _clause_text(cls, value: Any) -> Any:
        # `clause: 30000` or `clause: 2026-03-01` arrive from YAML as a number or a date; the
        # clause is still the text the user wrote, and the search tolerates its format.
        if isinstance(value, date):
            return value.isoformat()
        return _id_text(value)


class Ticket(_Frozen):
    """Verified feedback on one trace: what should have been used."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    ticket: MaybeIdText = None
    """Ticket id."""
    trace_id: MaybeIdText = None
    """The trace the ticket is about (may be given on the command line instead)."""
    task_time: Time | None = None
    """When the task ran; default: the trace's start."""
    status: Literal["verified", "draft"] = "verified"
    """verified (confirmed by a person), or draft (written by ``ticket draft``, not yet confirmed)."""
    feedback: str = ""
    """Free text of the verified report."""
    verified_by: str | None = None
    """Who verified it."""
    session_id: str | None = None
    """The conversation the trace is one turn of: the checks then read its earlier turns too."""
    required: tuple[Material, ...]
    """The applicable basis."""
    superseded: tuple[Material, ...] = ()
    """Stale material the agent may have used."""


class ManifestEntry(_Frozen):
    """One document version in the index manifest."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    doc_id: IdText
    """Document identity."""
    version: MaybeIdText = None
    """Version."""
    effective_from: Time | None = None
    """When the material took effect."""
    effective_to: Time | None = None
    """When it stopped applying (None: still applies)."""
    indexed_at: Time | None = None
    """When it was indexed (None: never)."""
    removed_at: Time | None = None
    """When it was removed from the index (None: never)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Metadata the retriever filters on."""
    acl: tuple[str, ...] | None = None
    """Principals allowed to retrieve it (None: unrestricted)."""
    content: str | None = None
    """The document text, when the manifest carries it (identifies returned text that has no id)."""
    ids: tuple[IdText, ...] = ()
    """The retriever's own ids (chunk or node ids) of this version."""


class Evidence(_Frozen):
    """A pointer into the trace backing a stage's status."""

    span_id: str | None = None
    """The span, if the evidence is in the trace (None for manifest or ticket evidence)."""
    note: str
    """What the span (or record) shows, with a short excerpt."""


class StageResult(_Frozen):
    """One of the four checks for one material."""

    name: StageName
    """Which check."""
    status: StageStatus
    """pass, fail, unconfirmed or skipped."""
    detail: str = ""
    """One-line explanation."""
    cause: Cause | None = None
    """For a failed ``retrieved`` stage: filter, permission or rank."""
    evidence: tuple[Evidence, ...] = ()
    """What the status rests on."""
    missing: tuple[str, ...] = ()
    """Records that would settle an unconfirmed stage."""


class MaterialResult(_Frozen):
    """The four checks for one required material."""

    doc_id: str
    """Document identity."""
    version: str | None
    """Version."""
    verdict: Verdict
    """Verdict for this material alone."""
    cause: Cause | None = None
    """Cause of a filtered / not_retrieved verdict."""
    stages: tuple[StageResult, ...]
    """The four stages in pipeline order."""


class SessionTurn(_Frozen):
    """One turn of a conversation, as a session-aware triage read it."""

    trace_id: str
    """The turn's trace."""
    start_time: datetime | None = None
    """When the turn started."""


class Localization(_Frozen):
    """The triage report (DESIGN 5.5)."""

    schema_version: int = SCHEMA_VERSION
    """Version of this report's layout."""
    ticket: str | None = None
    """Ticket id."""
    trace_id: str
    """The trace triaged."""
    task_time: datetime | None
    """The time the checks were judged at."""
    verdict: Verdict
    """Overall verdict: the earliest fault in pipeline order across materials."""
    cause: Cause | None = None
    """Cause of a filtered / not_retrieved verdict."""
    summary: str = ""
    """One-line explanation for people."""
    basis: Literal["verified", "draft"] = "verified"
    """draft when the ticket was a draft (``ticket draft``): the verdict rests on an unverified basis."""
    stages: tuple[StageResult, ...]
    """Stages of the material that decided the verdict."""
    materials: tuple[MaterialResult, ...] = ()
    """Per-material results when the ticket names several."""
    session_id: str | None = None
    """The conversation whose earlier turns were read too (DESIGN 5.5 Sessions), or None."""
    turns: tuple[SessionTurn, ...] = ()
    """The session's stored turns that were read, oldest first, ending with this trace."""
    notes: tuple[str, ...] = ()
    """Things to know beside the verdict: the trace may be incomplete (a parent span or the root not
    received), the basis is an unverified draft."""


class UsageQuestion(_Frozen):
    """What a usage judge is asked: did this answer use the required material (DESIGN 5.5, used_by_model)?"""

    answer: str
    """The final answer as recorded."""
    answer_span_id: str | None = None
    """The span the answer was read from."""
    question: str | None = None
    """The user's request, if recorded."""
    material: Material
    """The required material: its clause and facts."""
    superseded: tuple[Material, ...] = ()
    """Stale material the answer must not rest on."""
    context_excerpt: str | None = None
    """Where the clause sits in the model input (an excerpt), when found."""
