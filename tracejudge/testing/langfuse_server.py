"""A local Langfuse public API server for tests and benchmarks, checked against the official spec.

It serves, in memory, what tracejudge reads and writes, for both API generations:

* ``generation="v4"``: ``GET /api/public/v2/observations`` (cursor pages, field groups, filters)
  and ``GET /api/public/v3/scores``; the legacy read routes answer 404, as a v4 server in
  ``events_only`` write mode does.
* ``generation="v3"``: ``GET /api/public/traces`` (page/limit, totals), ``GET /api/public/traces/{id}``
  (observations and scores embedded), ``GET /api/public/v2/scores``; ``/v2/observations`` answers
  404 as a self-hosted v3 does. ``scores_v3=True`` adds ``/v3/scores`` (v3.179.0 and later).
* Both: ``POST /api/public/scores`` (upsert on id, name and the UTC date of ``timestamp``),
  ``POST``/``GET /api/public/v2/datasets``, ``POST``/``GET /api/public/dataset-items``,
  ``POST``/``GET /api/public/annotation-queues`` (and ``/{queueId}``, ``/{queueId}/items``) and
  ``GET /api/public/health`` and ``GET /api/public/projects`` (the key pair's project).

Every request and response is validated against the OpenAPI spec (``langfuse-openapi.yml``)
with ``openapi-core``: a request the spec rejects gets a 400 and lands in
:attr:`LangfuseServer.request_errors`; a response that breaks the spec is a bug in this server,
answered 500 and kept in :attr:`LangfuseServer.response_errors`. Auth is HTTP Basic with the
server's key pair. :class:`Fault`\\ s inject 429 with ``Retry-After``, 500, slow answers and
dropped connections. Every request is recorded (:attr:`LangfuseServer.requests`).

Example::

    with LangfuseServer(generation="v4") as server:
        server.add_trace(synthetic_trace(0))
        ...  # point LANGFUSE_BASE_URL at server.base_url, keys server.public_key / server.secret_key
"""

# Route handlers share one signature (request, body, **path params), and the v2 field groups one
# (observation, trace, expand), so one table dispatches each.
# ruff: noqa: ARG001, ARG002

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tracejudge.testing._apiserver import (
    ApiServer,
    Call,
    Fault,
    Handler,
    HandlerError,
    RecordedRequest,
    find_spec_file,
    load_openapi,
)

__all__ = [
    "Fault",
    "LangfuseServer",
    "RecordedRequest",
    "find_spec",
    "synthetic_trace",
]

Generation = Literal["v4", "v3"]

_PREFIX = "/api/public"
_SPEC_ENV = "TRACEJUDGE_LANGFUSE_SPEC"
_SPEC_NAME = "langfuse-openapi.yml"
_META_TRUNCATE = 200


def find_spec() -> Path:
    """Locate Langfuse's OpenAPI spec: ``$TRACEJUDGE_LANGFUSE_SPEC``, the test fixture copy, or
    ``../shared/reference/`` beside the checkout."""
    return find_spec_file(_SPEC_ENV, _SPEC_NAME, "Langfuse")


def _read_yaml(path: Path) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open("rb") as fh:
        return yaml.load(fh, Loader=loader)  # noqa: S506 - a safe loader, chosen for speed


def _iso(value: datetime | str | None) -> str | None:
    if value is None:
        return None
    dt = _parse_dt(value) if isinstance(value, str) else value
    dt = dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _parse_dt(value: str) -> datetime:
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _raw(value: Any) -> str | None:
    """v2 observations return I/O as raw strings."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


# The v2 observations API's field groups beyond ``core``, in the order they are rendered: each
# maps (observation, its trace, metadata keys to expand) to the fields the group adds.


def _v2_basic(o: dict[str, Any], t: dict[str, Any], expand: set[str]) -> dict[str, Any]:
    return {
        "name": o.get("name"),
        "level": o.get("level", "DEFAULT"),
        "statusMessage": o.get("statusMessage"),
        "version": o.get("version"),
        "environment": o.get("environment"),
        "bookmarked": False,
        "public": False,
        "userId": t.get("userId"),
        "sessionId": t.get("sessionId"),
        "isRootObservation": o.get("parentObservationId") is None,
    }


def _v2_time(o: dict[str, Any], t: dict[str, Any], expand: set[str]) -> dict[str, Any]:
    return {
        "completionStartTime": _iso(o.get("completionStartTime")),
        "createdAt": o["startTime"],
        "updatedAt": o["endTime"] or o["startTime"],
    }


def _v2_io(o: dict[str, Any], t: dict[str, Any], expand: set[str]) -> dict[str, Any]:
    inp, outp = o.get("input"), o.get("output")
    if o.get("parentObservationId") is None:  # v4 keeps the trace's I/O on its root observation
        inp = t.get("input") if inp is None else inp
        outp = t.get("output") if outp is None else outp
    return {"input": _raw(inp), "output": _raw(outp)}


def _v2_metadata(o: dict[str, Any], t: dict[str, Any], expand: set[str]) -> dict[str, Any]:
    meta = o.get("metadata")
    if isinstance(meta, dict):
        meta = {
            k: v if k in expand or len(json.dumps(v)) <= _META_TRUNCATE else json.dumps(v)[:_META_TRUNCATE]
            for k, v in meta.items()
        }
    return {"metadata": meta}


def _v2_model(o: dict[str, Any], t: dict[str, Any], expand: set[str]) -> dict[str, Any]:
    return {
        "providedModelName": o.get("model"),
        "internalModelId": None,
        "modelParameters": o.get("modelParameters"),
    }


def _v2_usage(o: dict[str, Any], t: dict[str, Any], expand: set[str]) -> dict[str, Any]:
    return {
        "usageDetails": o.get("usageDetails") or {},
        "costDetails": o.get("costDetails") or {},
        "totalCost": None,
        "usagePricingTierName": None,
    }


def _v2_prompt(o: dict[str, Any], t: dict[str, Any], expand: set[str]) -> dict[str, Any]:
    return {"promptId": None, "promptName": o.get("promptName"), "promptVersion": o.get("promptVersion")}


def _v2_metrics(o: dict[str, Any], t: dict[str, Any], expand: set[str]) -> dict[str, Any]:
    return {"latency": None, "timeToFirstToken": None}


def _v2_trace_context(o: dict[str, Any], t: dict[str, Any], expand: set[str]) -> dict[str, Any]:
    return {"tags": list(t.get("tags") or []), "release": t.get("release"), "traceName": t.get("name")}


_V2_FIELD_GROUPS: dict[str, Callable[[dict[str, Any], dict[str, Any], set[str]], dict[str, Any]]] = {
    "basic": _v2_basic,
    "time": _v2_time,
    "io": _v2_io,
    "metadata": _v2_metadata,
    "model": _v2_model,
    "usage": _v2_usage,
    "prompt": _v2_prompt,
    "metrics": _v2_metrics,
    "trace_context": _v2_trace_context,
}


class _BadRequest(HandlerError):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(status, message)


# Bounds that let a missing time range or cursor compare like a present one: every ISO-8601 UTC
# time sorts after "" and before "~" (all its characters are digits and "-:.TZ").
_EARLIEST = ""
_LATEST = "~"


def _query_time(q: Any, name: str, default: str) -> str:
    """A time query parameter as this server stores times (ISO-8601 UTC), or ``default`` without it."""
    raw = q.get(name)
    return (raw and _iso(raw)) or default


def _where(rows: list[dict[str, Any]], q: Any, fields: Iterable[str]) -> list[dict[str, Any]]:
    """The rows whose ``fields`` equal the query's (those it names) and whose ``timestamp`` lies in
    ``[fromTimestamp, toTimestamp)``: the filters the score and legacy trace lists share."""
    wanted = {k: q[k] for k in fields if q.get(k) is not None}
    lo, hi = _query_time(q, "fromTimestamp", _EARLIEST), _query_time(q, "toTimestamp", _LATEST)
    return [r for r in rows if lo <= r["timestamp"] < hi and all(r.get(k) == v for k, v in wanted.items())]


@dataclass(frozen=True)
class _ObservationFilter:
    """The filters of a v2 observations query, read once from its parameters."""

    before: tuple[str, str]
    """(startTime, id) of the cursor: only observations before it (``(_LATEST, "")`` without one)."""
    lo: str
    """Only observations starting at or after this (``_EARLIEST`` without ``fromStartTime``)."""
    hi: str
    """Only observations starting before this (``_LATEST`` without ``toStartTime``)."""
    environments: frozenset[str]
    """Environments kept; empty keeps all."""
    fields: dict[str, str | None]
    """Observation fields that must equal the query's (a root-only query asks for no parent)."""
    trace_fields: dict[str, str]
    """Fields of the observation's trace that must equal the query's."""

    @classmethod
    def of(cls, q: Any) -> _ObservationFilter:
        fields: dict[str, str | None] = {
            k: q[k] for k in ("name", "type", "level", "version") if q.get(k) is not None
        }
        if q.get("isRootObservation") == "true":
            fields["parentObservationId"] = None
        return cls(
            before=cls._cursor(q.get("cursor")),
            lo=_query_time(q, "fromStartTime", _EARLIEST),
            hi=_query_time(q, "toStartTime", _LATEST),
            environments=frozenset(q.getlist("environment")),
            fields=fields,
            trace_fields={k: q[k] for k in ("userId", "sessionId") if q.get(k) is not None},
        )

    @staticmethod
    def _cursor(raw: str | None) -> tuple[str, str]:
        if not raw:
            return (_LATEST, "")
        try:
            c = json.loads(base64.b64decode(raw))
            return (str(c["t"]), str(c["id"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise _BadRequest("invalid cursor") from exc

    def keeps(self, o: dict[str, Any], traces: Mapping[str, dict[str, Any]]) -> bool:
        start = o["startTime"]
        if not (self.lo <= start < self.hi and (start, o["id"]) < self.before):
            return False
        if self.environments and o.get("environment") not in self.environments:
            return False
        if any(o.get(k) != v for k, v in self.fields.items()):
            return False
        t = traces[o["traceId"]]
        return all(t.get(k) == v for k, v in self.trace_fields.items())


class LangfuseServer(ApiServer):
    """Langfuse's public API on loopback, in a background thread, backed by memory.

    :attr:`base_url` is ``http://127.0.0.1:PORT``; the API lives under ``/api/public``."""

    backend = "Langfuse"

    def __init__(
        self,
        *,
        generation: Generation = "v4",
        scores_v3: bool | None = None,
        public_key: str = "pk-lf-local-test",
        secret_key: str = "sk-lf-local-test",  # noqa: S107 - a test server's own key
        validate: bool = True,
        page_latency: float = 0.0,
        record: bool = True,
        spec_path: Path | None = None,
        project_id: str = "project-local",
    ) -> None:
        super().__init__()
        self.generation: Generation = generation
        self.scores_v3 = generation == "v4" if scores_v3 is None else scores_v3
        self.public_key = public_key
        self.secret_key = secret_key
        self.validate = validate
        self.page_latency = page_latency
        """Seconds every read (GET other than health) waits before answering."""
        self.record = record
        self.project_id = project_id
        self.version = "4.0.0" if generation == "v4" else ("3.179.0" if self.scores_v3 else "3.120.0")
        self._api = load_openapi(spec_path or find_spec(), _read_yaml) if validate else None
        self._traces: dict[str, dict[str, Any]] = {}
        self._obs_by_trace: dict[str, list[dict[str, Any]]] = {}
        self._roots: list[dict[str, Any]] | None = None
        self._scores: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._datasets: dict[str, dict[str, Any]] = {}
        self._items: dict[str, dict[str, Any]] = {}
        self._score_configs: dict[str, dict[str, Any]] = {}
        self._queues: dict[str, dict[str, Any]] = {}
        self._queue_items: dict[str, dict[str, Any]] = {}

    # -- data -------------------------------------------------------------------------------

    def add_trace(self, trace: Mapping[str, Any]) -> None:
        """Add a trace: Langfuse camelCase fields (``id``, ``name``, ``timestamp``, ``tags``, ``userId``,
        ``sessionId``, ``environment``, ``input``, ``output``, ``metadata``) plus ``observations``
        (each with ``id``, ``type``, ``name``, ``startTime``, ``endTime``, ``parentObservationId``,
        ``input``, ``output``, ``metadata``, ``model``, ``usageDetails``, ``level``, ...) and
        optionally ``scores`` (as for :meth:`add_score`)."""
        t = copy.deepcopy(dict(trace))
        observations = t.pop("observations", [])
        scores = t.pop("scores", [])
        t.setdefault("timestamp", _iso(datetime.now(UTC)))
        t["timestamp"] = _iso(t["timestamp"])
        t.setdefault("environment", "default")
        t.setdefault("tags", [])
        obs_list = []
        for o in observations:
            o = dict(o)
            o["traceId"] = t["id"]
            o.setdefault("type", "SPAN")
            o.setdefault("parentObservationId", None)
            o["startTime"] = _iso(o.get("startTime") or t["timestamp"])
            o["endTime"] = _iso(o.get("endTime"))
            o.setdefault("environment", t["environment"])
            obs_list.append(o)
        with self._lock:
            self._traces[t["id"]] = t
            self._obs_by_trace[t["id"]] = obs_list
            self._roots = None
        for s in scores:
            self.add_score({"traceId": t["id"], **s})

    def add_score(self, score: Mapping[str, Any]) -> str:
        """Add a score as if posted (``name``, ``value``, ``traceId``, ``observationId``, ``dataType``,
        ``source``, ``comment``, ``timestamp``, ``queueId``, ...). ``authorUserId`` sets the reviewer, as
        an annotation made in Langfuse's UI carries one (the API never takes it). Returns its id."""
        body = dict(score)
        author = body.pop("authorUserId", None)
        return self._upsert_score(body, source_default=str(score.get("source", "API")), author=author)

    @property
    def traces(self) -> dict[str, dict[str, Any]]:
        """Seeded traces by id (without observations)."""
        with self._lock:
            return dict(self._traces)

    @property
    def scores(self) -> list[dict[str, Any]]:
        """Every stored score row (a re-post with the same id, name and day replaces its row)."""
        with self._lock:
            return [dict(s) for s in self._scores.values()]

    @property
    def score_configs(self) -> list[dict[str, Any]]:
        """Score configs, oldest first."""
        with self._lock:
            return [dict(c) for c in self._score_configs.values()]

    @property
    def datasets(self) -> dict[str, dict[str, Any]]:
        """Datasets by name."""
        with self._lock:
            return dict(self._datasets)

    @property
    def dataset_items(self) -> list[dict[str, Any]]:
        """Every dataset item."""
        with self._lock:
            return [dict(i) for i in self._items.values()]

    def add_annotation_queue(
        self, name: str, *, description: str | None = None, score_config_ids: Iterable[str] = ()
    ) -> str:
        """Create an annotation queue as if posted; returns its id."""
        _, queue = self._queue_post_body(
            {"name": name, "description": description, "scoreConfigIds": list(score_config_ids)}
        )
        return str(queue["id"])

    @property
    def annotation_queues(self) -> dict[str, dict[str, Any]]:
        """Annotation queues by id."""
        with self._lock:
            return dict(self._queues)

    @property
    def annotation_queue_items(self) -> list[dict[str, Any]]:
        """Every annotation queue item, oldest first (a re-post of an object adds another item)."""
        with self._lock:
            return [dict(i) for i in self._queue_items.values()]

    # -- ASGI -------------------------------------------------------------------------------

    def _route_path(self, path: str) -> str:
        return path[len(_PREFIX) :] if path.startswith(_PREFIX) else path

    def _exempt(self, sub: str) -> bool:
        return sub == "/health"

    recorded_statuses = frozenset({400})

    def _fault_response(self, fault: Fault) -> Response | None:
        if fault.kind == "500":
            return self._error(500, "Internal Server Error")
        if fault.kind != "429":
            return None
        if fault.retry_after is None:
            return JSONResponse({"message": "Rate limit exceeded", "code": "rate_limited"}, status_code=429)
        reset = int(time.time()) + fault.retry_after
        return JSONResponse(
            {
                "message": "Rate limit exceeded",
                "code": "rate_limited",
                "details": {
                    "retryAfterSeconds": fault.retry_after,
                    "limit": 30,
                    "remaining": 0,
                    "resetAt": _iso(datetime.fromtimestamp(reset, UTC)),
                },
            },
            status_code=429,
            headers={
                "Retry-After": str(fault.retry_after),
                "X-RateLimit-Limit": "30",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(reset),
            },
        )

    def _error(self, status: int, message: str) -> Response:
        return JSONResponse({"message": message}, status_code=status)

    async def _respond(self, call: Call) -> Response:
        handler, params = self._route(call.method, call.sub)
        if handler is None:
            return self._error(404, f"route {call.method} {_PREFIX}{call.sub} not found")
        openapi_request, problem = self._check_request(call.request, call.body, call.method, call.sub)
        if problem is not None:
            status = 401 if "Security" in type(problem).__name__ else 400
            return self._error(status, f"invalid request: {problem}")
        if call.sub != "/health" and not self._authorized(call.request.headers.get("authorization", "")):
            return self._error(401, "Invalid credentials")
        return self._answer(call, handler, params, openapi_request)

    def _authorized(self, header: str) -> bool:
        if not header.lower().startswith("basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except ValueError:
            return False
        return user == self.public_key and password == self.secret_key

    def _route(self, method: str, sub: str) -> tuple[Handler | None, dict[str, str]]:
        v4 = self.generation == "v4"
        legacy = not v4
        table: list[tuple[str, str, Handler, bool]] = [
            ("GET", r"/health", self._health, True),
            ("GET", r"/projects", self._projects, True),
            ("GET", r"/v2/observations", self._observations_v2, True),
            ("GET", r"/v3/scores", self._scores_v3, self.scores_v3 or v4),
            ("GET", r"/v2/scores", self._scores_v2, legacy),
            ("GET", r"/traces", self._traces_list, legacy),
            ("GET", r"/traces/(?P<trace_id>[^/]+)", self._trace_get, legacy),
            ("POST", r"/scores", self._score_post, True),
            ("POST", r"/v2/datasets", self._dataset_post, True),
            ("GET", r"/v2/datasets/(?P<name>[^/]+)", self._dataset_get, True),
            ("POST", r"/dataset-items", self._item_post, True),
            ("GET", r"/dataset-items", self._items_list, True),
            ("POST", r"/score-configs", self._config_post, True),
            ("GET", r"/score-configs", self._configs_list, True),
            ("GET", r"/score-configs/(?P<config_id>[^/]+)", self._config_get, True),
            ("GET", r"/annotation-queues", self._queues_list, True),
            ("POST", r"/annotation-queues", self._queue_post, True),
            ("GET", r"/annotation-queues/(?P<queue_id>[^/]+)", self._queue_get, True),
            ("GET", r"/annotation-queues/(?P<queue_id>[^/]+)/items", self._queue_items_list, True),
            ("POST", r"/annotation-queues/(?P<queue_id>[^/]+)/items", self._queue_item_post, True),
        ]
        for m, pattern, fn, enabled in table:
            match = re.fullmatch(pattern, sub)
            if m == method and match and enabled:
                return fn, match.groupdict()
        return None, {}

    # -- handlers ---------------------------------------------------------------------------

    def _health(self, request: Request, body: Any) -> tuple[int, Any]:
        return 200, {"version": self.version, "status": "OK"}

    def _projects(self, request: Request, body: Any) -> tuple[int, Any]:
        # The project the key pair belongs to (a project-scoped key sees exactly one).
        org = {"id": "org-local", "name": "Local"}
        project = {"id": self.project_id, "name": self.project_id, "organization": org, "metadata": {}}
        return 200, {"data": [project]}

    @staticmethod
    def _int(request: Request, name: str, default: int, lo: int, hi: int) -> int:
        raw = request.query_params.get(name)
        if raw is None:
            return default
        value = int(raw)
        if not lo <= value <= hi:
            raise _BadRequest(f"{name} must be between {lo} and {hi}, got {value}")
        return value

    def _sorted_roots(self) -> list[dict[str, Any]]:
        with self._lock:
            if self._roots is None:
                roots = [
                    o
                    for obs in self._obs_by_trace.values()
                    for o in obs
                    if o.get("parentObservationId") is None
                ]
                roots.sort(key=lambda o: (o["startTime"], o["id"]), reverse=True)
                self._roots = roots
            return self._roots

    def _observations_v2(self, request: Request, body: Any) -> tuple[int, Any]:
        if self.generation != "v4":
            raise _BadRequest(
                "The v2 observations API is only available in a Langfuse v4 write mode", status=404
            )
        q = request.query_params
        if q.get("parseIoAsJson") == "true":
            raise _BadRequest("parseIoAsJson is not supported")
        limit = self._int(request, "limit", 50, 0, 1000)
        groups = {"core", *(q.get("fields") or "core,basic").split(",")}
        expand = set(filter(None, (q.get("expandMetadata") or "").split(",")))
        keep = _ObservationFilter.of(q)
        # One past the page tells whether another page follows.
        page = list(itertools.islice((o for o in self._pool(q) if keep.keeps(o, self._traces)), limit + 1))
        more, page = len(page) > limit, page[:limit]
        meta: dict[str, Any] = {}
        if more and page:
            last = page[-1]
            meta["cursor"] = base64.b64encode(
                json.dumps({"t": last["startTime"], "id": last["id"]}).encode()
            ).decode()
        return 200, {"data": [self._render_v2(o, groups, expand) for o in page], "meta": meta}

    def _pool(self, q: Any) -> list[dict[str, Any]]:
        """The observations a v2 query walks, newest first: one trace's, the cached roots, or all."""
        trace_id = q.get("traceId")
        if trace_id is None and q.get("isRootObservation") == "true":
            return self._sorted_roots()
        with self._lock:
            if trace_id is not None:
                pool = list(self._obs_by_trace.get(trace_id, []))
            else:
                pool = [o for obs in self._obs_by_trace.values() for o in obs]
        pool.sort(key=lambda o: (o["startTime"], o["id"]), reverse=True)
        return pool

    def _render_v2(self, o: dict[str, Any], groups: set[str], expand: set[str]) -> dict[str, Any]:
        t = self._traces[o["traceId"]]
        out: dict[str, Any] = {
            "id": o["id"],
            "traceId": o["traceId"],
            "startTime": o["startTime"],
            "endTime": o["endTime"],
            "projectId": self.project_id,
            "parentObservationId": o.get("parentObservationId"),
            "type": o["type"],
            "modelId": None,
            "inputPrice": None,
            "outputPrice": None,
            "totalPrice": None,
        }
        for group, fields in _V2_FIELD_GROUPS.items():
            if group in groups:
                out.update(fields(o, t, expand))
        return out

    # scores

    def _upsert_score(
        self, body: dict[str, Any], *, source_default: str = "API", author: str | None = None
    ) -> str:
        checked = _checked_score(body, source_default)
        # Langfuse accepts scores for traces it has not seen yet; this server keeps that.
        now = _iso(datetime.now(UTC))
        timestamp = _iso(body.get("timestamp")) if body.get("timestamp") else now
        assert timestamp is not None
        score_id = body.get("id") or str(uuid.uuid4())
        key = (score_id, checked["name"], timestamp[:10])
        with self._lock:
            previous = self._scores.get(key)
            self._scores[key] = {
                "id": score_id,
                **{k: body.get(k) for k in ("traceId", "observationId", "sessionId", "datasetRunId")},
                **{k: checked[k] for k in ("name", "value", "dataType", "source")},
                **{k: body.get(k) for k in ("comment", "metadata", "configId", "queueId")},
                "authorUserId": author,
                "environment": checked["environment"],
                "timestamp": timestamp,
                "createdAt": previous["createdAt"] if previous else now,
                "updatedAt": now,
            }
        return str(score_id)

    def _score_post(self, request: Request, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict):
            raise _BadRequest("the body must be one score object")
        return 200, {"id": self._upsert_score(body)}

    def _filter_scores(self, request: Request) -> list[dict[str, Any]]:
        q = request.query_params
        rows = _where(self.scores, q, _SCORE_FILTER_FIELDS)
        if q.get("scoreIds"):
            wanted = set(q["scoreIds"].split(","))
            rows = [s for s in rows if s["id"] in wanted]
        rows.sort(key=lambda s: (s["timestamp"], s["id"]), reverse=True)
        return rows

    def _scores_v3(self, request: Request, body: Any) -> tuple[int, Any]:
        q = request.query_params
        if q.get("observationId") and not q.get("traceId"):
            raise _BadRequest("observationId needs traceId")
        limit = self._int(request, "limit", 50, 1, 100)
        offset = _offset_cursor(q.get("cursor"))
        rows = self._filter_scores(request)
        data = [self._score_v3(s) for s in rows[offset : offset + limit]]
        meta: dict[str, Any] = {"limit": limit}
        if offset + limit < len(rows):
            meta["cursor"] = base64.b64encode(str(offset + limit).encode()).decode()
        return 200, {"data": data, "meta": meta}

    def _score_v3(self, s: dict[str, Any]) -> dict[str, Any]:
        as_json = _V3_VALUE_TYPES.get(s["dataType"])
        return {
            **{
                k: s[k]
                for k in ("id", "name", "source", "timestamp", "environment", "createdAt", "updatedAt")
            },
            **{k: s[k] for k in ("comment", "metadata", "configId", "queueId", "authorUserId")},
            "projectId": self.project_id,
            "dataType": s["dataType"],
            "value": s["value"] if as_json is None else as_json(s["value"]),
            "subject": _score_subject(s),
        }

    @staticmethod
    def _score_v1(s: dict[str, Any], *, trace_required: bool) -> dict[str, Any] | None:
        if s["dataType"] == "CORRECTION" and trace_required:
            return None  # ScoreV1 has no CORRECTION variant
        out = {
            k: s.get(k)
            for k in (
                "id",
                "traceId",
                "observationId",
                "name",
                "source",
                "timestamp",
                "createdAt",
                "updatedAt",
                "authorUserId",
                "comment",
                "metadata",
                "configId",
                "queueId",
                "environment",
                "dataType",
            )
        }
        if not trace_required:
            out["sessionId"] = s.get("sessionId")
            out["datasetRunId"] = s.get("datasetRunId")
        if s["dataType"] == "NUMERIC":
            out["value"] = float(s["value"])
        elif s["dataType"] == "BOOLEAN":
            out["value"] = float(s["value"])
            out["stringValue"] = "True" if s["value"] else "False"
        elif s["dataType"] in ("CATEGORICAL", "CORRECTION"):
            out["value"] = 0.0
            out["stringValue"] = s["value"]
        else:
            out["stringValue"] = s["value"]
        return out

    def _scores_v2(self, request: Request, body: Any) -> tuple[int, Any]:
        limit = self._int(request, "limit", 50, 1, 100)
        page = self._int(request, "page", 1, 1, 10**9)
        rows = self._filter_scores(request)
        data = [self._score_v1(s, trace_required=False) for s in rows[(page - 1) * limit : page * limit]]
        return 200, {"data": data, "meta": _page_meta(page, limit, len(rows))}

    # legacy traces

    def _trace_rows(self, request: Request) -> list[dict[str, Any]]:
        q = request.query_params
        with self._lock:
            rows = _where(list(self._traces.values()), q, _TRACE_FILTER_FIELDS)
        tags, envs = set(q.getlist("tags")), set(q.getlist("environment"))
        rows = [
            t for t in rows if tags <= set(t.get("tags") or []) and (not envs or t.get("environment") in envs)
        ]
        order = q.get("orderBy") or "timestamp.desc"
        fieldname, _, direction = order.partition(".")
        if fieldname not in _TRACE_ORDER_FIELDS:
            raise _BadRequest(f"invalid orderBy {order!r}")
        rows.sort(key=lambda t: (str(t.get(fieldname) or ""), t["id"]), reverse=direction != "asc")
        return rows

    def _trace_view(self, t: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": t["id"],
            "timestamp": t["timestamp"],
            "name": t.get("name"),
            "input": t.get("input"),
            "output": t.get("output"),
            "sessionId": t.get("sessionId"),
            "release": t.get("release"),
            "version": t.get("version"),
            "userId": t.get("userId"),
            "metadata": t.get("metadata"),
            "tags": list(t.get("tags") or []),
            "public": bool(t.get("public", False)),
            "environment": t.get("environment", "default"),
            "htmlPath": f"/project/{self.project_id}/traces/{t['id']}",
            "latency": None,
            "totalCost": None,
        }

    def _deprecation(self) -> dict[str, Any]:
        return {
            "message": "This endpoint is deprecated; use the v2 observations API.",
            "replacement": "/api/public/v2/observations",
            "docsUrl": None,
            "sunsetAt": "2026-11-16",
        }

    def _traces_list(self, request: Request, body: Any) -> tuple[int, Any]:
        limit = self._int(request, "limit", 50, 1, 100)
        page = self._int(request, "page", 1, 1, 10**9)
        rows = self._trace_rows(request)
        data = []
        for t in rows[(page - 1) * limit : page * limit]:
            view = self._trace_view(t)
            with self._lock:
                view["observations"] = [o["id"] for o in self._obs_by_trace.get(t["id"], [])]
                view["scores"] = [s["id"] for s in self._scores.values() if s.get("traceId") == t["id"]]
            data.append(view)
        return 200, {
            "data": data,
            "meta": _page_meta(page, limit, len(rows)),
            "_deprecation": self._deprecation(),
        }

    def _trace_get(self, request: Request, body: Any, trace_id: str) -> tuple[int, Any]:
        with self._lock:
            t = self._traces.get(trace_id)
            observations = list(self._obs_by_trace.get(trace_id, []))
            scores = [dict(s) for s in self._scores.values() if s.get("traceId") == trace_id]
        if t is None:
            raise _BadRequest(f"trace {trace_id} not found", status=404)
        view = self._trace_view(t)
        view["observations"] = [self._observation_view(o) for o in observations]
        view["scores"] = [v for s in scores if (v := self._score_v1(s, trace_required=True)) is not None]
        view["_deprecation"] = self._deprecation()
        return 200, view

    @staticmethod
    def _observation_view(o: dict[str, Any]) -> dict[str, Any]:
        usage = o.get("usageDetails") or {}
        return {
            "id": o["id"],
            "traceId": o["traceId"],
            "type": o["type"],
            "name": o.get("name"),
            "startTime": o["startTime"],
            "endTime": o["endTime"],
            "completionStartTime": _iso(o.get("completionStartTime")),
            "model": o.get("model"),
            "modelParameters": o.get("modelParameters"),
            "input": o.get("input"),
            "version": o.get("version"),
            "metadata": o.get("metadata"),
            "output": o.get("output"),
            "usage": {
                "input": int(usage.get("input", 0)),
                "output": int(usage.get("output", 0)),
                "total": int(usage.get("total", 0)),
                "unit": "TOKENS" if usage else None,
            },
            "level": o.get("level", "DEFAULT"),
            "statusMessage": o.get("statusMessage"),
            "parentObservationId": o.get("parentObservationId"),
            "promptId": None,
            "usageDetails": usage,
            "costDetails": o.get("costDetails") or {},
            "environment": o.get("environment", "default"),
            "promptName": o.get("promptName"),
            "promptVersion": o.get("promptVersion"),
            "modelId": None,
            "inputPrice": None,
            "outputPrice": None,
            "totalPrice": None,
            "calculatedInputCost": None,
            "calculatedOutputCost": None,
            "calculatedTotalCost": None,
            "latency": None,
            "timeToFirstToken": None,
        }

    # datasets

    def _dataset_post(self, request: Request, body: Any) -> tuple[int, Any]:
        now = _iso(datetime.now(UTC))
        name = body["name"]
        with self._lock:
            existing = self._datasets.get(name)
            ds = {
                "id": existing["id"] if existing else f"ds-{hashlib.sha256(name.encode()).hexdigest()[:16]}",
                "name": name,
                "description": body.get("description"),
                "metadata": body.get("metadata"),
                "inputSchema": body.get("inputSchema"),
                "expectedOutputSchema": body.get("expectedOutputSchema"),
                "projectId": self.project_id,
                "createdAt": existing["createdAt"] if existing else now,
                "updatedAt": now,
            }
            self._datasets[name] = ds
        return 200, ds

    def _dataset_get(self, request: Request, body: Any, name: str) -> tuple[int, Any]:
        with self._lock:
            ds = self._datasets.get(name)
        if ds is None:
            raise _BadRequest(f"dataset {name} not found", status=404)
        return 200, ds

    def _item_post(self, request: Request, body: Any) -> tuple[int, Any]:
        with self._lock:
            ds = self._datasets.get(body["datasetName"])
        if ds is None:
            raise _BadRequest(f"dataset {body['datasetName']} not found", status=404)
        item_id = body.get("id") or str(uuid.uuid4())
        if len(item_id) > 255:
            raise _BadRequest("dataset item id longer than 255 characters")
        now = _iso(datetime.now(UTC))
        with self._lock:
            existing = self._items.get(item_id)
            if existing is not None and existing["datasetId"] != ds["id"]:
                raise _BadRequest(f"dataset item id {item_id} is used by another dataset", status=409)
            item = {
                "id": item_id,
                "status": body.get("status") or "ACTIVE",
                "input": body.get("input"),
                "expectedOutput": body.get("expectedOutput"),
                "metadata": body.get("metadata"),
                "sourceTraceId": body.get("sourceTraceId"),
                "sourceObservationId": body.get("sourceObservationId"),
                "datasetId": ds["id"],
                "datasetName": ds["name"],
                "createdAt": existing["createdAt"] if existing else now,
                "updatedAt": now,
                "mediaReferences": [],
            }
            self._items[item_id] = item
        return 200, item

    def _items_list(self, request: Request, body: Any) -> tuple[int, Any]:
        q = request.query_params
        limit = self._int(request, "limit", 50, 1, 100)
        page = self._int(request, "page", 1, 1, 10**9)
        rows = self.dataset_items
        for key in ("datasetName", "sourceTraceId", "sourceObservationId"):
            if q.get(key) is not None:
                rows = [i for i in rows if i.get(key) == q[key]]
        rows.sort(key=lambda i: (i["createdAt"], i["id"]))
        return 200, {
            "data": rows[(page - 1) * limit : page * limit],
            "meta": _page_meta(page, limit, len(rows)),
        }

    # Langfuse's own rules beyond the spec: name <= 35 characters of a restricted set; categories only
    # for CATEGORICAL (BOOLEAN gets True/False generated); min <= max.
    _CONFIG_NAME = re.compile(r"[A-Za-z0-9_ .()-]{1,35}")

    def _config_post(self, request: Request, body: Any) -> tuple[int, Any]:
        name, data_type = body["name"], body["dataType"]
        if not self._CONFIG_NAME.fullmatch(name):
            raise _BadRequest(f"invalid score config name {name!r}")
        categories = self._config_categories(data_type, body.get("categories"))
        lo, hi = body.get("minValue"), body.get("maxValue")
        if lo is not None and hi is not None and lo > hi:
            raise _BadRequest("minValue must not exceed maxValue")
        now = _iso(datetime.now(UTC))
        config = {
            "id": str(uuid.uuid4()),
            "name": name,
            "createdAt": now,
            "updatedAt": now,
            "projectId": self.project_id,
            "dataType": data_type,
            "isArchived": False,
            "minValue": lo if data_type == "NUMERIC" else None,
            "maxValue": hi if data_type == "NUMERIC" else None,
            "categories": categories,
            "description": body.get("description"),
        }
        with self._lock:
            self._score_configs[config["id"]] = config
        return 200, config

    @staticmethod
    def _config_categories(data_type: str, categories: list[Any] | None) -> list[Any] | None:
        """A config's categories: generated for BOOLEAN, required for CATEGORICAL, refused otherwise."""
        if data_type == "BOOLEAN":
            if categories:
                raise _BadRequest("categories are generated for BOOLEAN configs and cannot be passed")
            return [{"label": "True", "value": 1}, {"label": "False", "value": 0}]
        if data_type == "CATEGORICAL" and not categories:
            raise _BadRequest("a CATEGORICAL config needs categories")
        if data_type != "CATEGORICAL" and categories:
            raise _BadRequest(f"categories are only for CATEGORICAL configs, not {data_type}")
        return categories if data_type == "CATEGORICAL" else None

    def _configs_list(self, request: Request, body: Any) -> tuple[int, Any]:
        limit = self._int(request, "limit", 50, 1, 100)
        page = self._int(request, "page", 1, 1, 10**9)
        rows = self.score_configs
        return 200, {
            "data": rows[(page - 1) * limit : page * limit],
            "meta": _page_meta(page, limit, len(rows)),
        }

    def _config_get(self, request: Request, body: Any, config_id: str) -> tuple[int, Any]:
        with self._lock:
            config = self._score_configs.get(config_id)
        if config is None:
            raise _BadRequest(f"score config {config_id} not found", status=404)
        return 200, config

    def _queue_post_body(self, body: dict[str, Any]) -> tuple[int, Any]:
        now = _iso(datetime.now(UTC))
        queue = {
            "id": str(uuid.uuid4()),
            "name": body["name"],
            "description": body.get("description"),
            "scoreConfigIds": list(body.get("scoreConfigIds") or []),
            "createdAt": now,
            "updatedAt": now,
        }
        with self._lock:
            self._queues[queue["id"]] = queue
        return 200, queue

    def _queue_post(self, request: Request, body: Any) -> tuple[int, Any]:
        return self._queue_post_body(body)

    def _queues_list(self, request: Request, body: Any) -> tuple[int, Any]:
        limit = self._int(request, "limit", 50, 1, 100)
        page = self._int(request, "page", 1, 1, 10**9)
        rows = list(self.annotation_queues.values())
        return 200, {
            "data": rows[(page - 1) * limit : page * limit],
            "meta": _page_meta(page, limit, len(rows)),
        }

    def _queue(self, queue_id: str) -> dict[str, Any]:
        with self._lock:
            queue = self._queues.get(queue_id)
        if queue is None:
            raise _BadRequest("Annotation queue not found", status=404)
        return queue

    def _queue_get(self, request: Request, body: Any, queue_id: str) -> tuple[int, Any]:
        return 200, self._queue(queue_id)

    def _queue_items_list(self, request: Request, body: Any, queue_id: str) -> tuple[int, Any]:
        self._queue(queue_id)
        limit = self._int(request, "limit", 50, 1, 100)
        page = self._int(request, "page", 1, 1, 10**9)
        status = request.query_params.get("status")
        rows = [
            i
            for i in self.annotation_queue_items
            if i["queueId"] == queue_id and (status is None or i["status"] == status)
        ]
        return 200, {
            "data": rows[(page - 1) * limit : page * limit],
            "meta": _page_meta(page, limit, len(rows)),
        }

    def _queue_item_post(self, request: Request, body: Any, queue_id: str) -> tuple[int, Any]:
        self._queue(queue_id)
        now = _iso(datetime.now(UTC))
        status = body.get("status") or "PENDING"
        item = {
            "id": str(uuid.uuid4()),
            "queueId": queue_id,
            "objectId": body["objectId"],
            "objectType": body["objectType"],
            "status": status,
            "completedAt": now if status == "COMPLETED" else None,
            "createdAt": now,
            "updatedAt": now,
        }
        with self._lock:
            self._queue_items[item["id"]] = item
        return 200, item


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_zero_or_one(value: Any) -> bool:
    return value in (0, 1)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_short_text(value: Any) -> bool:
    return 1 <= len(str(value)) <= 500


# Langfuse's checks of a score value by its data type, in order: (data types, test, message).
_SCORE_VALUE_RULES: tuple[tuple[frozenset[str], Callable[[Any], bool], str], ...] = (
    (frozenset({"NUMERIC", "BOOLEAN"}), _is_number, "{} score value must be a number"),
    (frozenset({"BOOLEAN"}), _is_zero_or_one, "BOOLEAN score value must be 0 or 1"),
    (frozenset({"CATEGORICAL", "TEXT", "CORRECTION"}), _is_str, "{} score value must be a string"),
    (frozenset({"TEXT"}), _is_short_text, "TEXT score value must be 1..500 characters"),
)


def _checked_score_value(value: Any, data_type: str | None) -> str:
    """The score's data type (from its value when not given), once the value suits it."""
    if data_type is None:
        data_type = "CATEGORICAL" if isinstance(value, str) else "NUMERIC"
    for types, passes, message in _SCORE_VALUE_RULES:
        if data_type in types and not passes(value):
            raise _BadRequest(message.format(data_type))
    return data_type


def _checked_score(body: dict[str, Any], source_default: str) -> dict[str, Any]:
    """A posted score's name, value, data type, source and environment, once Langfuse's rules pass."""
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise _BadRequest("name is required")
    data_type = _checked_score_value(body.get("value"), body.get("dataType"))
    env = body.get("environment") or "default"
    if not re.fullmatch(r"[a-z0-9_-]+", env) or env.startswith("langfuse"):
        raise _BadRequest(f"invalid environment {env!r}")
    source = body.get("source") or source_default
    if source not in ("API", "ANNOTATION"):
        raise _BadRequest(f"invalid source {source!r}")
    return {
        "name": name,
        "value": body.get("value"),
        "dataType": data_type,
        "source": source,
        "environment": env,
    }


_V3_VALUE_TYPES: dict[str, Callable[[Any], Any]] = {"BOOLEAN": bool, "NUMERIC": float}
"""How /v3/scores returns a stored value, by data type (others as stored)."""


def _score_subject(s: dict[str, Any]) -> dict[str, Any] | None:
    """What a /v3/scores row scores: its observation, else its trace, else its session."""
    if s.get("observationId"):
        return {"kind": "observation", "id": s["observationId"], "traceId": s.get("traceId")}
    if s.get("traceId"):
        return {"kind": "trace", "id": s["traceId"]}
    if s.get("sessionId"):
        return {"kind": "session", "id": s["sessionId"]}
    return None


def _offset_cursor(raw: str | None) -> int:
    """The row offset a /v3/scores cursor carries (0 without one)."""
    if not raw:
        return 0
    try:
        return int(base64.b64decode(raw).decode())
    except ValueError as exc:
        raise _BadRequest("invalid cursor") from exc


_SCORE_FILTER_FIELDS = (
    "traceId",
    "observationId",
    "name",
    "source",
    "dataType",
    "sessionId",
    "id",
    "queueId",
    "authorUserId",
    "configId",
)
"""Score fields a score list filters on by equality."""
_TRACE_FILTER_FIELDS = ("name", "userId", "sessionId", "version", "release")
"""Trace fields the legacy trace list filters on by equality."""
_TRACE_ORDER_FIELDS = frozenset({"id", "timestamp", "name", "userId", "release", "version", "sessionId"})


def _page_meta(page: int, limit: int, total: int) -> dict[str, int]:
    return {"page": page, "limit": limit, "totalItems": total, "totalPages": (total + limit - 1) // limit}


def synthetic_trace(
    index: int,
    *,
    base_time: datetime | None = None,
    spacing: timedelta = timedelta(seconds=1),
    name: str = "rag-answer",
    tags: Iterable[str] = ("prod",),
    environment: str = "production",
    clause: str = "Prepayment shall not exceed 30,000 RMB",
    answer: str = "The prepayment cap is 30,000 RMB.",
) -> dict[str, Any]:
    """A retrieval-augmented agent trace in Langfuse's shape: an AGENT root, a RETRIEVER returning
    two documents, a GENERATION with the retrieved clause in its input, and a TOOL call.
    Ids are deterministic in ``index`` (32-hex trace id, 16-hex observation ids)."""
    base = base_time or datetime(2026, 3, 1, tzinfo=UTC)
    start = base + spacing * index
    digest = hashlib.sha256(f"trace-{index}".encode()).hexdigest()
    trace_id = digest[:32]

    def oid(n: int) -> str:
        return hashlib.sha256(f"obs-{index}-{n}".encode()).hexdigest()[:16]

    def at(ms: int) -> str | None:
        return _iso(start + timedelta(milliseconds=ms))

    question = f"What is the prepayment cap of contract C-17? (#{index})"
    docs = [
        {"id": "c17-v2", "page_content": clause, "metadata": {"doc_id": "C-17/attachment", "version": "v2"}},
        {
            "id": "c17-v1",
            "page_content": "Prepayment shall not exceed 50,000 RMB",
            "metadata": {"doc_id": "C-17/attachment", "version": "v1"},
        },
    ]
    messages = [
        {"role": "system", "content": "Answer from the context.\n\nContext:\n" + clause},
        {"role": "user", "content": question},
    ]
    return {
        "id": trace_id,
        "name": name,
        "timestamp": _iso(start),
        "tags": list(tags),
        "userId": f"user-{index % 7}",
        "sessionId": f"session-{index % 11}",
        "environment": environment,
        "input": {"question": question},
        "output": answer,
        "metadata": {"app": "procurement-agent"},
        "observations": [
            {
                "id": oid(0),
                "type": "AGENT",
                "name": name,
                "startTime": at(0),
                "endTime": at(900),
                "parentObservationId": None,
                "input": {"question": question},
                "output": answer,
            },
            {
                "id": oid(1),
                "type": "RETRIEVER",
                "name": "vector-search",
                "startTime": at(10),
                "endTime": at(80),
                "parentObservationId": oid(0),
                "input": {"query": question},
                "output": docs,
                "metadata": {"top_k": 2, "tracejudge.retrieval.filter": {"region": "CN"}},
            },
            {
                "id": oid(2),
                "type": "GENERATION",
                "name": "answer",
                "startTime": at(100),
                "endTime": at(800),
                "parentObservationId": oid(0),
                "input": messages,
                "output": {"role": "assistant", "content": answer},
                "model": "gpt-4.1-mini",
                "usageDetails": {"input": 120, "output": 12, "total": 132},
                "modelParameters": {"temperature": 0},
                "promptName": "procurement-agent",
                "promptVersion": 12,
            },
            {
                "id": oid(3),
                "type": "TOOL",
                "name": "lookup_contract",
                "startTime": at(820),
                "endTime": at(850),
                "parentObservationId": oid(0),
                "input": {"contract": "C-17"},
                "output": {"status": "active"},
                "level": "DEFAULT",
            },
        ],
    }
