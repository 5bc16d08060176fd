"""Langfuse writer: scores (upserted on a deterministic id and a stable timestamp) and dataset items."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

from tracejudge import __version__
from tracejudge.write._langfuse_api import LangfuseApi, LangfuseApiError, LangfuseCredentials
from tracejudge.write._records import (
    DatasetItemRecord,
    ScoreRecord,
    WriteFailure,
    WriteReport,
    checked_value,
)

_T = TypeVar("_T")


def _iso(dt: datetime) -> str:
    dt = dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def score_body(score: ScoreRecord, *, timestamp: datetime, environment: str | None = None) -> dict[str, Any]:
    """The ``POST /api/public/scores`` body for a score (one object, as the server's spec takes)."""
    value = checked_value(score)
    provenance: dict[str, Any] = {
        "tracejudge_version": __version__,
        "rubric": score.rubric_name,
        "rubric_version": None if score.rubric_version is None else str(score.rubric_version),
        "judge_model": score.judge_model,
        "prompt_hash": score.prompt_hash,
        "temperature": score.temperature,
    }
    body: dict[str, Any] = {
        "id": score.score_id,
        "traceId": score.trace_id,
        "name": score.name,
        # Langfuse takes a BOOLEAN as 1 or 0.
        "value": int(value) if isinstance(value, bool) else value,
        "dataType": score.data_type,
        "metadata": {**score.metadata, **{k: v for k, v in provenance.items() if v is not None}},
        # Langfuse replaces a score only when id, name and the UTC day of timestamp all match.
        "timestamp": _iso(timestamp),
    }
    optional = {"observationId": score.observation_id, "comment": score.comment, "environment": environment}
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


DEFAULT_SCORE_CONCURRENCY = 8
"""Scores in flight at once: each is one or two round trips, so one after another a run's 2,100
scores took ~2.5 min against the local Langfuse stand-in; a few in flight overlap the waits while
staying well inside Langfuse's rate limits (a 429 pauses them all: see ``RetryingJsonClient``)."""


class LangfuseWriter:
    """Writes scores and dataset items through Langfuse's public API, reporting failures per item;
    up to ``concurrency`` scores (or dataset items) are written at once (1: one after another)."""

    def __init__(
        self,
        api: LangfuseApi,
        *,
        environment: str | None = None,
        concurrency: int = DEFAULT_SCORE_CONCURRENCY,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.api = api
        self.environment = environment
        self.concurrency = concurrency
        self._scores_path: str | None = None
        # The first lookup finds which scores route the server has; the others wait for its answer
        # rather than each probing.
        self._probe_lock = threading.Lock()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> LangfuseWriter:
        """A writer for the Langfuse named by ``LANGFUSE_BASE_URL``/``LANGFUSE_HOST`` and the key pair."""
        return cls(LangfuseApi(LangfuseCredentials.from_env(env)), **kwargs)

    def close(self) -> None:
        """Close the HTTP client."""
        self.api.close()

    def __enter__(self) -> LangfuseWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _existing_timestamp(self, score_id: str) -> datetime | None:
        """The timestamp of a score already written with this id (so a rerun replaces it)."""
        if self._scores_path is None:
            with self._probe_lock:
                if self._scores_path is None:
                    probe = self.api.get("/v3/scores", {"id": score_id, "limit": 1}, allow_404=True)
                    self._scores_path = "/v3/scores" if probe is not None else "/v2/scores"
                    if probe is not None:
                        return _first_timestamp(probe)
        if self._scores_path == "/v3/scores":
            return _first_timestamp(self.api.get("/v3/scores", {"id": score_id, "limit": 1}))
        return _first_timestamp(self.api.get("/v2/scores", {"scoreIds": score_id, "limit": 1}))

    def _write_score(self, score: ScoreRecord) -> WriteFailure | None:
        """Write one score; its failure, or None once written."""
        sid = score.score_id
        try:
            # A score that carries its timestamp needs no lookup: the rerun sends the same one.
            timestamp = score.timestamp or self._existing_timestamp(sid) or datetime.now(UTC)
            body = score_body(score, timestamp=timestamp, environment=self.environment)
            self.api.post("/scores", body)
        except ValueError as exc:
            return WriteFailure(key=sid, reason=str(exc))
        except LangfuseApiError as exc:
            return WriteFailure(key=sid, reason=exc.message, status=exc.status)
        return None

    def _each(
        self, write: Callable[[_T], WriteFailure | None], items: Sequence[_T], name: str
    ) -> list[WriteFailure | None]:
        """``write(item)`` for every item, up to ``concurrency`` at once; the outcomes in input order."""
        if self.concurrency == 1 or len(items) <= 1:
            return [write(item) for item in items]
        with ThreadPoolExecutor(
            max_workers=min(self.concurrency, len(items)), thread_name_prefix=f"langfuse-{name}"
        ) as pool:
            # map keeps the input order, so the report reads as it did one after another; on
            # Ctrl-C (or an unexpected error) it cancels the items not yet started, so only
            # those in flight finish, as the loop one after another stopped.
            return list(pool.map(write, items))

    def write_scores(self, scores: Sequence[ScoreRecord]) -> WriteReport:
        outcomes = self._each(self._write_score, scores, "scores")
        written = tuple(s.score_id for s, failure in zip(scores, outcomes, strict=True) if failure is None)
        failed = tuple(failure for failure in outcomes if failure is not None)
        return WriteReport(target="langfuse", written=len(written), ids=written, failed=failed)

    def write_dataset_items(
        self, dataset: str, items: Sequence[DatasetItemRecord], *, description: str | None = None
    ) -> WriteReport:
        body: dict[str, Any] = {"name": dataset}
        if description is not None:
            body["description"] = description
        try:
            self.api.post("/v2/datasets", body)
        except LangfuseApiError as exc:
            return WriteReport(
                target="langfuse",
                failed=tuple(
                    WriteFailure(key=i.key, reason=f"dataset {dataset!r}: {exc.message}", status=exc.status)
                    for i in items
                ),
            )

        def write(item: DatasetItemRecord) -> WriteFailure | None:
            try:
                self.api.post("/dataset-items", _dataset_item_body(dataset, item))
            except LangfuseApiError as exc:
                return WriteFailure(key=item.key, reason=exc.message, status=exc.status)
            return None

        # The dataset exists now: its items go up to ``concurrency`` at once, as scores do.
        outcomes = self._each(write, items, "items")
        written = tuple(
            i.item_id(dataset) for i, failure in zip(items, outcomes, strict=True) if failure is None
        )
        failed = tuple(failure for failure in outcomes if failure is not None)
        return WriteReport(target="langfuse", written=len(written), ids=written, failed=failed)


def _dataset_item_body(dataset: str, item: DatasetItemRecord) -> dict[str, Any]:
    """The ``POST /api/public/dataset-items`` body for an item of ``dataset``."""
    body: dict[str, Any] = {
        "id": item.item_id(dataset),
        "datasetName": dataset,
        "input": item.input,
        "expectedOutput": item.expected_output,
        "metadata": {**item.metadata, "tracejudge_version": __version__, "key": item.key},
        "status": item.status,
    }
    if item.source_trace_id is not None:
        body["sourceTraceId"] = item.source_trace_id
    if item.source_observation_id is not None:
        body["sourceObservationId"] = item.source_observation_id
    return body


def _first_timestamp(page: Any) -> datetime | None:
    data = page.get("data") if isinstance(page, dict) else None
    if not data:
        return None
    raw = data[0].get("timestamp")
    if not isinstance(raw, str):
        return None
    return datetime.fromisoformat(raw.replace("Z", "+00:00"))
