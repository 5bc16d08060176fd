"""What writers take and what they report: scores, dataset items, and per-item failures."""

from __future__ import annotations

import uuid
from collections.abc import Callable
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


COMMENT_LIMIT = 4000
"""Longest score comment written back (characters); a longer one is cut with an ellipsis."""


def clip_comment(text: str) -> str:
    """``text`` within :data:`COMMENT_LIMIT`, its end replaced by ``…`` when cut."""
    return text if len(text) <= COMMENT_LIMIT else text[: COMMENT_LIMIT - 1] + "…"


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


def _is_flag(value: Any) -> bool:
    return isinstance(value, bool | int | float) and value in (0, 1)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_label(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


# What each data type takes, how the error says so, and the value as the type carries it.
_VALUE_RULES: dict[ScoreDataType, tuple[Callable[[Any], bool], str, Callable[[Any], float | bool | str]]] = {
    "NUMERIC": (_is_number, "needs a number", float),
    "BOOLEAN": (_is_flag, "needs True/False", bool),
    "CATEGORICAL": (_is_label, "needs a non-empty label", str),
}


def checked_value(score: ScoreRecord) -> float | bool | str:
    """The score's value as its data type carries it: a float, a bool, or a label. Raises
    ``ValueError`` naming the score when the value does not fit the type (the writer reports it)."""
    fits, needs, typed = _VALUE_RULES[score.data_type]
    if not fits(score.value):
        raise ValueError(f"{score.data_type} score {score.name!r} {needs}, got {score.value!r}")
    return typed(score.value)


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
