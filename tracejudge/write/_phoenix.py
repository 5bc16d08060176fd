"""Phoenix: a small REST client (bearer API key, retries) and the writer of span and trace annotations.

A score on a span becomes a span annotation (``POST /v1/span_annotations?sync=true``); a score on a
whole trace becomes a trace annotation (``POST /v1/trace_annotations?sync=true``). Phoenix upserts
on (name, span or trace, identifier), so each annotation carries a deterministic ``identifier``
(``tracejudge:<name>:<rubric version>``): writing again updates it in place, and rubric versions
never overwrite each other. ``annotator_kind`` is ``LLM`` for criteria the judge scored and ``CODE``
for everything decided by code (checks, overall verdicts derived from thresholds, triage verdicts).

The Phoenix collector reads spans through the same client.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr
from pydantic_core import to_jsonable_python

from tracejudge import __version__
from tracejudge._errors import InputError
from tracejudge.write._http import ApiError, RetryingJsonClient
from tracejudge.write._records import ScoreRecord, WriteFailure, WriteReport, checked_value

__all__ = [
    "PhoenixApi",
    "PhoenixApiError",
    "PhoenixCredentials",
    "PhoenixWriter",
    "annotation_for",
    "annotation_identifier",
    "annotator_kind",
]

AnnotatorKind = Literal["LLM", "CODE", "HUMAN"]
# Phoenix's OTLP endpoint is often configured with its path; the REST API lives beside it.
_OTLP_SUFFIXES = ("/v1/traces", "/v1/traces/")


class PhoenixApiError(ApiError):
    """Phoenix answered with an error, or could not be reached, after the retries."""


class PhoenixCredentials(BaseModel):
    """Where Phoenix is and its API key; the key never shows in ``repr`` or dumps."""

    model_config = ConfigDict(frozen=True)

    base_url: str
    """Scheme, host and port (and any path prefix) of the Phoenix server, without ``/v1``."""
    api_key: SecretStr | None = None
    """Bearer API key when the server has auth enabled; read only to authenticate."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PhoenixCredentials:
        """Read ``PHOENIX_COLLECTOR_ENDPOINT`` (or ``PHOENIX_BASE_URL``) and ``PHOENIX_API_KEY``."""
        env = os.environ if env is None else env
        base_url = env.get("PHOENIX_COLLECTOR_ENDPOINT") or env.get("PHOENIX_BASE_URL")
        if not base_url:
            raise InputError(
                "Phoenix is not configured: PHOENIX_COLLECTOR_ENDPOINT not set",
                hint="export PHOENIX_COLLECTOR_ENDPOINT=http://127.0.0.1:6006 (and PHOENIX_API_KEY"
                " when the server has auth enabled)",
            )
        if not base_url.startswith(("http://", "https://")):
            raise InputError(
                f"PHOENIX_COLLECTOR_ENDPOINT must be an http(s) URL, got {base_url!r}",
                hint="for example http://127.0.0.1:6006",
            )
        for suffix in _OTLP_SUFFIXES:
            if base_url.endswith(suffix):
                base_url = base_url[: -len(suffix)]
        key = env.get("PHOENIX_API_KEY")
        return cls(base_url=base_url.rstrip("/"), api_key=SecretStr(key) if key else None)


class PhoenixApi(RetryingJsonClient):
    """Calls Phoenix's REST API (``/v1/…``) with retries: 429 honours ``Retry-After``; 5xx, 408 and
    connection errors back off exponentially with jitter. Thread-safe (one ``httpx.Client``)."""

    name = "Phoenix"
    error_type = PhoenixApiError
    retry_status = frozenset({408, 429, 500, 502, 503, 504})
    unreachable_hint = "check PHOENIX_COLLECTOR_ENDPOINT and that the server runs; rerun to resume"
    auth_hint = "set PHOENIX_API_KEY to an API key of the Phoenix at PHOENIX_COLLECTOR_ENDPOINT"

    def __init__(
        self,
        credentials: PhoenixCredentials,
        *,
        timeout: float = 30.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.credentials = credentials
        headers = {"User-Agent": f"tracejudge/{__version__}"}
        if credentials.api_key is not None:
            headers["Authorization"] = f"Bearer {credentials.api_key.get_secret_value()}"
        super().__init__(
            httpx.Client(base_url=credentials.base_url, timeout=timeout, headers=headers),
            credentials.base_url,
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            sleep=sleep,
        )

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """GET and parse JSON. List values repeat the query parameter."""
        return self._call("GET", path, params=params)

    def post(self, path: str, body: Any, params: Mapping[str, Any] | None = None) -> Any:
        """POST a JSON body and parse the JSON answer."""
        return self._call("POST", path, params=params, json_body=body)

    def _detail(self, body: dict[str, Any]) -> str | None:
        # FastAPI puts the reason in ``detail`` (a list of problems for a 422).
        detail = body.get("detail", body.get("message"))
        return None if detail is None else str(detail)


# ---------------------------------------------------------------- annotations


def annotation_identifier(score: ScoreRecord) -> str:
    """``tracejudge:<name>:<rubric version>``: Phoenix's upsert key together with name and target."""
    version = "" if score.rubric_version is None else str(score.rubric_version)
    return f"tracejudge:{score.name}:{version}"


def annotator_kind(score: ScoreRecord) -> AnnotatorKind:
    """LLM for a criterion the judge scored; CODE for checks and for verdicts code derived."""
    return "LLM" if score.metadata.get("decided_by") == "judge" else "CODE"


def _result(score: ScoreRecord) -> dict[str, Any]:
    value = checked_value(score)
    result: dict[str, Any]
    if isinstance(value, bool):
        result = {"score": float(value), "label": "true" if value else "false"}
    elif isinstance(value, float):
        # A number carries the verdict it was judged to as its label.
        label = score.metadata.get("verdict")
        result = {"score": value, "label": label} if isinstance(label, str) and label else {"score": value}
    else:
        result = {"label": value}
    if score.comment:
        result["explanation"] = score.comment
    return result


def annotation_for(score: ScoreRecord) -> tuple[Literal["span", "trace"], dict[str, Any]]:
    """The annotation for a score: ("span", span annotation) when it is about an observation, else
    ("trace", trace annotation). Raises ValueError for a value its data type cannot carry."""
    if score.name == "note":
        raise ValueError("the annotation name 'note' is reserved by Phoenix for notes")
    provenance = {
        "source": "tracejudge",
        "tracejudge_version": __version__,
        "score_id": score.score_id,
        "rubric": score.rubric_name,
        "rubric_version": None if score.rubric_version is None else str(score.rubric_version),
        "judge_model": score.judge_model,
        "prompt_hash": score.prompt_hash,
        "temperature": score.temperature,
        "timestamp": score.timestamp.isoformat() if score.timestamp else None,
    }
    metadata = to_jsonable_python(
        {**score.metadata, **{k: v for k, v in provenance.items() if v is not None}}, fallback=str
    )
    body: dict[str, Any] = {
        "name": score.name,
        "annotator_kind": annotator_kind(score),
        "result": _result(score),
        "metadata": metadata,
        "identifier": annotation_identifier(score),
    }
    if score.observation_id:
        return "span", {**body, "span_id": score.observation_id.lower()}
    return "trace", {**body, "trace_id": score.trace_id.lower()}


_PATHS = {"span": "/v1/span_annotations", "trace": "/v1/trace_annotations"}


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class PhoenixWriter:
    """Writes scores as Phoenix span or trace annotations, in batches, reporting each failure. A
    :class:`ScoreWriter` only: Phoenix dataset uploads are not idempotent per item (a rerun would
    duplicate), so ``write.TARGETS`` offers no Phoenix dataset writer.

    A batch that Phoenix refuses as a whole (an unknown span or trace fails the batch with 404) is
    retried item by item, so only the items that cannot land are reported failed.
    """

    def __init__(self, api: PhoenixApi, *, batch_size: int = 100) -> None:
        self.api = api
        self.batch_size = max(1, batch_size)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> PhoenixWriter:
        """A writer for the Phoenix named by ``PHOENIX_COLLECTOR_ENDPOINT`` / ``PHOENIX_API_KEY``."""
        return cls(PhoenixApi(PhoenixCredentials.from_env(env)), **kwargs)

    def close(self) -> None:
        """Close the HTTP client."""
        self.api.close()

    def __enter__(self) -> PhoenixWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, kind: Literal["span", "trace"], bodies: Sequence[dict[str, Any]]) -> list[str]:
        answer = self.api.post(_PATHS[kind], {"data": list(bodies)}, {"sync": "true"})
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != len(bodies):
            raise PhoenixApiError(
                f"Phoenix answered POST {_PATHS[kind]} with {len(data) if isinstance(data, list) else 'no'}"
                f" ids for {len(bodies)} annotations"
            )
        return [str(d.get("id")) if isinstance(d, dict) else "" for d in data]

    def _write_batch(
        self, kind: Literal["span", "trace"], batch: Sequence[tuple[str, dict[str, Any]]]
    ) -> tuple[list[str], list[WriteFailure]]:
        """One batch: the ids written and the items that failed. A batch refused as a whole for an
        item it cannot place (400, 404, 422) is sent again item by item."""
        try:
            return self._post(kind, [body for _, body in batch]), []
        except PhoenixApiError as exc:
            if len(batch) == 1 or exc.status not in (400, 404, 422):
                return [], [WriteFailure(key=key, reason=exc.message, status=exc.status) for key, _ in batch]
        written: list[str] = []
        failed: list[WriteFailure] = []
        for key, body in batch:
            try:
                written.extend(self._post(kind, [body]))
            except PhoenixApiError as exc:
                failed.append(WriteFailure(key=key, reason=exc.message, status=exc.status))
        return written, failed

    def write_scores(self, scores: Sequence[ScoreRecord]) -> WriteReport:
        failed: list[WriteFailure] = []
        grouped: dict[Literal["span", "trace"], list[tuple[str, dict[str, Any]]]] = {"span": [], "trace": []}
        for score in scores:
            try:
                kind, body = annotation_for(score)
            except ValueError as exc:
                failed.append(WriteFailure(key=score.score_id, reason=str(exc)))
                continue
            grouped[kind].append((score.score_id, body))
        written: list[str] = []
        for kind, rows in grouped.items():
            for batch in _batches(rows, self.batch_size):
                ids, lost = self._write_batch(kind, batch)
                written.extend(ids)
                failed.extend(lost)
        return WriteReport(target="phoenix", written=len(written), ids=tuple(written), failed=tuple(failed))
