"""What writers take and what they report: scores, dataset items, and per-item failures."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from tracejudge._redact import redact

# Fixed namespace: ids derived from it must never change, or a rerun would duplicate scores.
_NAMESPACE = uuid.UUID("5b0c7d3e-8f1a-4c2b-9d6e-7a1f2e3c4b5d")

ScoreDataType = Literal["NUMERIC", "BOOLEAN", "CATEGORICAL"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def stable_id(*parts: str | int | None) -> str:
    """A deterministic UUID from the parts (None and "" are the same part)."""
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join("" if p is None else str(p) for p in parts)))


class ScoreRecord(_Frozen):
    """One verdict to attach to a trace or an observation."""

    trace_id: str
    """The trace the score is about."""
    observation_id: str | None = None
    """The observation (span) it is about; None scores the whole trace."""
    name: str
    """Score name, stable across runs (for example ``answer-correctness.correctness``)."""
    value: float | bool | str
    """A number (NUMERIC), True/False (BOOLEAN) or a label (CATEGORICAL)."""
    data_type: ScoreDataType
    """NUMERIC, BOOLEAN or CATEGORICAL."""
    comment: str | None = None
    """The reasoning, for people reading the trace."""
    timestamp: datetime | None = None
    """A stable time for the score (for example the trace start): a rerun must send the same one to
    replace rather than add. None: reuse the time of the score already written, else now."""
    rubric_name: str | None = None
    """Rubric (or check) that produced the score."""
    rubric_version: str | int | None = None
    """Rubric version; part of the score id, so versions never overwrite each other."""
    judge_model: str | None = None
    """Judge model, when a model judged."""
    prompt_hash: str | None = None
    """Hash of the exact judge prompt."""
    temperature: float | None = None
    """Judge temperature."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Extra provenance, merged into the score's metadata."""

    @property
    def score_id(self) -> str:
        """Deterministic id: hash of the target, the score name and the rubric version."""
        return stable_id("score", self.trace_id, self.observation_id, self.name, self.rubric_version)


class DatasetItemRecord(_Frozen):
    """One dataset item (for example a regression sample) to upsert."""

    key: str
    """Stable identity within the dataset (for example the regression sample id)."""
    input: Any = None
    """Item input."""
    expected_output: Any = None
    """Expected output, if any."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Item metadata."""
    source_trace_id: str | None = None
    """The trace the item came from."""
    source_observation_id: str | None = None
    """The observation the item came from."""
    status: Literal["ACTIVE", "ARCHIVED"] = "ACTIVE"
    """ACTIVE or ARCHIVED."""

    def item_id(self, dataset: str) -> str:
        """Deterministic id; Langfuse item ids are unique per project, so the dataset is part of it."""
        return stable_id("dataset-item", dataset, self.key)


class WriteFailure(_Frozen):
    """An item a writer could not write, and why."""

    key: str
    """Which item: a score id, or a dataset item key."""
    reason: Annotated[str, AfterValidator(redact)]
    """What went wrong; redacted as the failure is made (a backend's words may echo credentials)."""
    status: int | None = None
    """HTTP status, when the backend answered."""


class WriteReport(_Frozen):
    """What a write did: how many items landed, and each one that did not."""

    target: str
    """Where it wrote (``langfuse``, ``recording``, ...)."""
    written: int = 0
    """Items written (created or replaced)."""
    ids: tuple[str, ...] = ()
    """Ids of the written items, in order."""
    failed: tuple[WriteFailure, ...] = ()
    """Items that could not be written."""

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.failed
