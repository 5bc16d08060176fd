"""A local Phoenix REST server for tests and benchmarks, checked against Phoenix's OpenAPI spec.

It serves, in memory, what tracejudge reads and writes:

* ``GET /v1/projects`` (cursor pages);
* ``GET /v1/projects/{project}/spans`` (by name or id): cursor pages (``limit`` <= 1000),
  ``sort`` ``id``/``start_time``, ``order``, ``start_time`` (inclusive) / ``end_time`` (exclusive)
  on the span start, repeatable ``trace_id``, ``span_id``, ``name``, ``span_kind``, ``status_code``,
  ``parent_id`` (``null`` for roots) and ``attribute=key:value`` (value JSON-parsed);
* ``POST /v1/span_annotations`` and ``POST /v1/trace_annotations``: upsert on (name, span or trace,
  identifier); with ``sync=true`` an unknown span or trace fails the whole request with 404, without
  it unknown targets are silently dropped and the answer is ``{"data": []}``; the name ``note`` is
  reserved (400);
* ``GET /v1/projects/{project}/span_annotations`` / ``trace_annotations`` (``span_ids`` /
  ``trace_ids`` and/or ``identifier``, name filters, cursor pages, default limit 10).

Spans are added as a sender exports them (flat OpenInference attributes, JSON strings in
``metadata``, ``document.metadata``, ``llm.prompt_template.variables`` and ``tool.parameters``)
and read back as Phoenix returns them: those JSON strings parsed and every structured value
flattened to dotted keys (lists of objects indexed), ``openinference.span.kind`` moved out of the
attributes into ``span_kind``, links dropped.

Every request and response is validated against ``phoenix-openapi.json`` with ``openapi-core``: a
request the spec rejects gets a 422 (as FastAPI answers) and lands in
:attr:`PhoenixServer.request_errors`; a response that breaks the spec is a bug in this server,
answered 500 and kept in :attr:`PhoenixServer.response_errors`. Auth is an optional bearer API key.
:class:`~tracejudge.testing.langfuse_server.Fault`\\ s inject 429 with ``Retry-After``, 500, slow
answers and dropped connections (``path`` is matched against the full path, e.g. ``/v1/projects``).

Example::

    with PhoenixServer(api_key="phx-key") as server:
        for span in synthetic_spans(0):
            server.add_span("default", span)
        ...  # PHOENIX_COLLECTOR_ENDPOINT=server.base_url, PHOENIX_API_KEY=server.api_key
"""

# Route handlers share one signature (request, body, **path params) so one table dispatches them.
# ruff: noqa: ARG002

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

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
    "PhoenixServer",
    "RecordedRequest",
    "find_spec",
    "synthetic_spans",
]

_SPEC_ENV = "TRACEJUDGE_PHOENIX_SPEC"
_SPEC_NAME = "phoenix-openapi.json"
_JSON_STRING_ATTRIBUTES = (
    "document.metadata",
    "llm.prompt_template.variables",
    "metadata",
    "tool.parameters",
)
_KIND = "openinference.span.kind"
_SPAN_KINDS = frozenset(
    {"LLM", "CHAIN", "TOOL", "RETRIEVER", "EMBEDDING", "AGENT", "RERANKER", "GUARDRAIL", "EVALUATOR"}
    | {"DECISION", "UNKNOWN"}
)
_STATUS_CODES = frozenset({"OK", "ERROR", "UNSET"})


def find_spec() -> Path:
    """Locate Phoenix's OpenAPI spec: ``$TRACEJUDGE_PHOENIX_SPEC``, the test fixture copy, or
    ``../shared/reference/`` beside the checkout."""
    return find_spec_file(_SPEC_ENV, _SPEC_NAME, "Phoenix")


def _read_spec(path: Path) -> dict[str, Any]:
    """Phoenix's spec (OpenAPI 3.1) with its optional list query parameters made arrays."""
    return _array_query_params(json.loads(path.read_text(encoding="utf-8")))


def _array_query_params(spec: dict[str, Any]) -> dict[str, Any]:
    """Rewrite query parameters typed ``anyOf: [array, null]`` (FastAPI's ``Optional[list[str]]``)
    as plain arrays: openapi-core only reads repeated query keys into a list for an ``array``
    schema, and a query string cannot carry a null anyway."""
    for param in _query_params(spec):
        schema = param.get("schema") or {}
        array = _optional_array(schema.get("anyOf"))
        if array is not None:
            rest = {k: v for k, v in schema.items() if k != "anyOf"}
            param["schema"] = {**rest, **array}
    return spec


def _query_params(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every query parameter of every operation in the spec."""
    for item in spec.get("paths", {}).values():
        operations = (op for op in item.values() if isinstance(op, dict))
        yield from (p for op in operations for p in op.get("parameters", []) if p.get("in") == "query")


def _optional_array(variants: Any) -> dict[str, Any] | None:
    """The array schema of an ``anyOf`` that is one array or null, else None."""
    if not isinstance(variants, list):
        return None
    arrays: list[dict[str, Any]] = [v for v in variants if v.get("type") == "array"]
    if len(arrays) == 1 and all(v is arrays[0] or v.get("type") == "null" for v in variants):
        return arrays[0]
    return None


def global_id(node: str, rowid: int) -> str:
    """Phoenix's GlobalID: base64 of ``<Type>:<rowid>``."""
    return base64.b64encode(f"{node}:{rowid}".encode()).decode()


def _rowid(value: str, node: str) -> int:
    try:
        kind, _, raw = base64.b64decode(value, validate=True).decode().partition(":")
        if kind != node:
            raise ValueError(kind)
        return int(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Fail(422, "Invalid cursor") from exc


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat()


def _parse_dt(value: Any) -> datetime:
    dt = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


class _Fail(HandlerError):
    """A refusal answered as FastAPI does: ``{"detail": ...}``."""


def _ingest_attributes(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """As Phoenix stores a span's attributes: JSON strings of the known keys parsed."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if key.endswith(_JSON_STRING_ATTRIBUTES) and isinstance(value, str):
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = value
            if parsed is not None:
                out[key] = parsed
            continue
        out[key] = value
    return out


def _flatten(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    """Phoenix's ``flatten(..., recurse_on_sequence=True)``: mappings to dotted keys, lists of
    mappings indexed, lists of scalars kept, None dropped."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _flatten(f"{prefix}.{key}" if prefix else str(key), inner)
    elif isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
        for index, inner in enumerate(value):
            if isinstance(inner, Mapping):
                yield from _flatten(f"{prefix}.{index}", inner)
    elif value is not None:
        yield prefix, value


def _span_row(s: dict[str, Any], *, rowid: int, project: int) -> dict[str, Any]:
    """A span as exported, stored as Phoenix keeps it (ids lower-case, times parsed, kind read out)."""
    attrs = _ingest_attributes(s.get("attributes") or {})
    return {
        "rowid": rowid,
        "project": project,
        "name": str(s.get("name") or ""),
        "trace_id": str(s["trace_id"]).lower(),
        "span_id": str(s["span_id"]).lower(),
        "parent_id": str(s["parent_id"]).lower() if s.get("parent_id") else None,
        "start": _parse_dt(s["start_time"]),
        "end": _parse_dt(s.get("end_time") or s["start_time"]),
        "status_code": str(s.get("status_code") or "UNSET"),
        "status_message": str(s.get("status_message") or ""),
        "span_kind": str(attrs.get(_KIND) or "UNKNOWN").upper(),
        "attributes": attrs,
        "events": [_event_row(e, s["start_time"]) for e in s.get("events") or []],
    }


def _event_row(e: Mapping[str, Any], span_start: Any) -> dict[str, Any]:
    return {
        "name": str(e.get("name") or ""),
        "timestamp": _parse_dt(e.get("timestamp") or span_start),
        "attributes": dict(e.get("attributes") or {}),
    }


_FIRST = datetime.min.replace(tzinfo=UTC)
_LAST = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class _SpanQuery:
    """The filters, order and cursor of a span list, read once from its query."""

    project: int
    """Row id of the project listed."""
    lower: datetime
    """Spans starting at or after this (``start_time``)."""
    upper: datetime
    """Spans starting before this (``end_time``)."""
    allowed: dict[str, set[str]]
    """Column -> the values asked for; an empty set asks nothing of the column."""
    equal: dict[str, str | None]
    """Columns that must equal a value (``parent_id``; ``null`` asks for roots)."""
    attributes: list[tuple[str, Any]]
    """``attribute=key:value`` filters on the flattened attributes."""
    sort: str
    """``id`` or ``start_time``."""
    desc: bool
    cursor: tuple[Any, ...] | None
    """Sort key of the first span of the page asked for."""

    @classmethod
    def of(cls, q: Any, project: int) -> _SpanQuery:
        sort = q.get("sort") or "id"
        parent = q.get("parent_id")
        return cls(
            project=project,
            lower=_parse_dt(q["start_time"]) if q.get("start_time") else _FIRST,
            upper=_parse_dt(q["end_time"]) if q.get("end_time") else _LAST,
            allowed=_set_filters(q),
            equal={} if parent is None else {"parent_id": None if parent == "null" else parent},
            attributes=[_attribute_filter(a) for a in q.getlist("attribute")],
            sort=sort,
            desc=(q.get("order") or "desc") == "desc",
            cursor=_cursor_key(q["cursor"], sort) if q.get("cursor") else None,
        )

    def keeps(self, row: dict[str, Any]) -> bool:
        return (
            row["project"] == self.project
            and self.lower <= row["start"] < self.upper
            and self._columns_match(row)
            and self._attributes_match(row)
            and self._within_cursor(row)
        )

    def _columns_match(self, row: dict[str, Any]) -> bool:
        if any(values and row[column] not in values for column, values in self.allowed.items()):
            return False
        return all(row[column] == value for column, value in self.equal.items())

    def _attributes_match(self, row: dict[str, Any]) -> bool:
        if not self.attributes:
            return True  # spares flattening every span's attributes
        flat = dict(_flatten("", row["attributes"]))
        return all(flat.get(k) == v for k, v in self.attributes)

    def _within_cursor(self, row: dict[str, Any]) -> bool:
        """The page asked for starts at the cursor's span, in the query's order."""
        if self.cursor is None:
            return True
        key = self.sort_key(row)
        return key <= self.cursor if self.desc else key >= self.cursor

    def sort_key(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["start"], row["rowid"]) if self.sort == "start_time" else (row["rowid"],)

    def cursor_for(self, row: dict[str, Any]) -> str:
        if self.sort == "start_time":
            raw = f"{row['start'].isoformat()}|{row['rowid']}"
            return base64.urlsafe_b64encode(raw.encode()).decode()
        return global_id("Span", row["rowid"])


_SPAN_SET_FILTERS = ("trace_id", "span_id", "name", "span_kind", "status_code")
"""Span columns a repeatable query parameter of the same name filters on."""
_SPAN_ENUMS = {"span_kind": _SPAN_KINDS, "status_code": _STATUS_CODES}


def _set_filters(q: Any) -> dict[str, set[str]]:
    """Column -> the values the query asks for (the enumerated ones checked)."""
    allowed = {column: set(q.getlist(column)) for column in _SPAN_SET_FILTERS}
    for column, known in _SPAN_ENUMS.items():
        if allowed[column] - known:
            raise _Fail(422, f"invalid {column}: {sorted(allowed[column] - known)}")
    return allowed


def _cursor_key(cursor: str, sort: str) -> tuple[Any, ...]:
    if sort == "start_time":
        try:
            when, _, rowid = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
            return (_parse_dt(when), int(rowid))
        except ValueError as exc:
            raise _Fail(422, "Invalid cursor") from exc
    return (_rowid(cursor, "Span"),)


def _attribute_filter(raw: str) -> tuple[str, Any]:
    key, sep, value = raw.partition(":")
    if not sep or not key:
        raise _Fail(422, f"attribute filter {raw!r} must be key:value")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


@dataclass(frozen=True)
class _AnnotationTarget:
    """What span and trace annotations differ in: the id they annotate and where they are kept."""

    key: str
    """The annotated id's field (``span_id`` / ``trace_id``); its query parameter adds an ``s``."""
    node: str
    """GlobalID type of an annotation."""
    noun: str
    """What a missing target is called in a 404 (``Spans`` / ``Traces``)."""
    store: dict[tuple[str, str, str], dict[str, Any]]
    """Annotations by (name, target id, identifier)."""
    known: Callable[[str], bool]
    """Whether a target id exists."""
    in_project: Callable[[str, int], bool]
    """Whether a target id belongs to a project (by row id)."""

    def split(self, data: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
        """The annotations whose target exists, and the ids (sorted, once each) of those whose does not."""
        known = [d for d in data if self.known(d[self.key].lower())]
        missing = {d[self.key].lower() for d in data} - {d[self.key].lower() for d in known}
        return known, sorted(missing)

    def filter(self, q: Any) -> _AnnotationFilter:
        """The filters of an annotation list for this target, read once from its query."""
        allowed = {
            self.key: set(q.getlist(self.key + "s")),
            "identifier": set(q.getlist("identifier")),
            "name": set(q.getlist("include_annotation_names")),
        }
        if not allowed[self.key] and not allowed["identifier"]:
            raise _Fail(422, f"At least one of {self.key}s or identifier must be supplied")
        return _AnnotationFilter(
            allowed=allowed,
            exclude=frozenset(q.getlist("exclude_annotation_names")),
            cursor=_rowid(q["cursor"], self.node) if q.get("cursor") else sys.maxsize,
        )


@dataclass(frozen=True)
class _AnnotationFilter:
    """What an annotation list asks of each annotation."""

    allowed: dict[str, set[str]]
    """Column -> the values asked for; an empty set asks nothing of the column."""
    exclude: frozenset[str]
    """Annotation names left out."""
    cursor: int
    """Row id of the first annotation of the page (newest first)."""

    def keeps(self, a: dict[str, Any]) -> bool:
        if a["name"] in self.exclude or a["rowid"] > self.cursor:
            return False
        return all(not values or a[column] in values for column, values in self.allowed.items())


def _annotation_fields(d: Mapping[str, Any], target_key: str) -> dict[str, Any]:
    """An annotation as posted, stored as Phoenix returns it."""
    result = d.get("result") or {}
    return {
        "source": "API",
        "user_id": None,
        "name": d["name"],
        "annotator_kind": d["annotator_kind"],
        "result": {k: result.get(k) for k in ("label", "score", "explanation")},
        "metadata": d.get("metadata") or {},
        "identifier": d.get("identifier") or "",
        target_key: d[target_key].lower(),
    }


class PhoenixServer(ApiServer):
    """Phoenix's REST API on loopback, in a background thread, backed by memory."""

    backend = "Phoenix"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        validate: bool = True,
        record: bool = True,
        spec_path: Path | None = None,
        page_latency: float = 0.0,
    ) -> None:
        super().__init__()
        self.api_key = api_key
        """Bearer API key every request must carry; None: auth off (Phoenix's default)."""
        self.validate = validate
        self.record = record
        self.page_latency = page_latency
        """Seconds every GET waits before answering."""
        self._api = load_openapi(spec_path or find_spec(), _read_spec) if validate else None
        self._projects: dict[int, dict[str, Any]] = {}
        self._spans: list[dict[str, Any]] = []
        self._span_index: dict[str, dict[str, Any]] = {}
        self._trace_ids: set[str] = set()
        self._span_annotations: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._trace_annotations: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._next_annotation = 1
        self._targets = {
            "span": _AnnotationTarget(
                "span_id",
                "SpanAnnotation",
                "Spans",
                self._span_annotations,
                self._span_index.__contains__,
                self._span_in_project,
            ),
            "trace": _AnnotationTarget(
                "trace_id",
                "TraceAnnotation",
                "Traces",
                self._trace_annotations,
                self._trace_ids.__contains__,
                self._trace_in_project,
            ),
        }
        self.add_project("default")

    # -- data -------------------------------------------------------------------------------

    def add_project(self, name: str, description: str | None = None) -> str:
        """Create a project (or return the existing one's id)."""
        with self._lock:
            for rowid, p in self._projects.items():
                if p["name"] == name:
                    return global_id("Project", rowid)
            rowid = len(self._projects) + 1
            self._projects[rowid] = {"name": name, "description": description}
            return global_id("Project", rowid)

    def add_span(self, project: str, span: Mapping[str, Any]) -> str:
        """Add a span as exported: ``name``, ``trace_id``, ``span_id``, ``parent_id``, ``start_time``,
        ``end_time`` (ISO or datetime), ``status_code`` (OK/ERROR/UNSET), ``status_message``,
        ``attributes`` (flat, as sent), ``events`` (``name``, ``timestamp``, ``attributes``).
        The project is created if needed. Returns the span's global id."""
        self.add_project(project)
        s = copy.deepcopy(dict(span))
        with self._lock:
            project_rowid = next(r for r, p in self._projects.items() if p["name"] == project)
            row = _span_row(s, rowid=len(self._spans) + 1, project=project_rowid)
            self._spans.append(row)
            self._span_index[row["span_id"]] = row
            self._trace_ids.add(row["trace_id"])
        return global_id("Span", row["rowid"])

    @property
    def span_annotations(self) -> list[dict[str, Any]]:
        """Every stored span annotation (an upsert replaces its row)."""
        with self._lock:
            return [copy.deepcopy(a) for a in self._span_annotations.values()]

    @property
    def trace_annotations(self) -> list[dict[str, Any]]:
        """Every stored trace annotation (an upsert replaces its row)."""
        with self._lock:
            return [copy.deepcopy(a) for a in self._trace_annotations.values()]

    recorded_statuses = frozenset({400, 422})

    def _fault_response(self, fault: Fault) -> Response | None:
        if fault.kind == "429":
            wait = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            return Response("Too Many Requests", status_code=429, headers=wait)
        if fault.kind == "500":
            return Response("Internal Server Error", status_code=500)
        return None

    def _error(self, status: int, message: str) -> Response:
        return JSONResponse({"detail": message}, status_code=status)

    async def _respond(self, call: Call) -> Response:
        if self.api_key is not None and call.request.headers.get("authorization") != f"Bearer {self.api_key}":
            return Response("Invalid token", status_code=401)
        handler, params = self._route(call.method, call.sub)
        if handler is None:
            return self._error(404, "Not Found")
        openapi_request, problem = self._check_request(call.request, call.body, call.method, call.sub)
        if problem is not None:
            return self._error(422, f"invalid request: {problem}")
        return self._answer(call, handler, params, openapi_request)

    def _route(self, method: str, path: str) -> tuple[Handler | None, dict[str, str]]:
        table: list[tuple[str, str, Handler]] = [
            ("GET", r"/v1/projects", self._projects_list),
            ("GET", r"/v1/projects/(?P<project>[^/]+)/spans", self._spans_list),
            ("POST", r"/v1/span_annotations", self._annotate_spans),
            ("POST", r"/v1/trace_annotations", self._annotate_traces),
            ("GET", r"/v1/projects/(?P<project>[^/]+)/span_annotations", self._span_annotations_list),
            ("GET", r"/v1/projects/(?P<project>[^/]+)/trace_annotations", self._trace_annotations_list),
        ]
        for m, pattern, fn in table:
            match = re.fullmatch(pattern, path)
            if m == method and match:
                return fn, match.groupdict()
        return None, {}

    # -- handlers ---------------------------------------------------------------------------

    @staticmethod
    def _int(request: Request, name: str, default: int) -> int:
        raw = request.query_params.get(name)
        return default if raw is None else int(raw)

    def _project(self, identifier: str) -> int:
        with self._lock:
            for rowid, p in self._projects.items():
                if p["name"] == identifier or global_id("Project", rowid) == identifier:
                    return rowid
        raise _Fail(404, f"Project with identifier {identifier} not found")

    def _projects_list(self, request: Request, body: Any) -> tuple[int, Any]:
        limit = self._int(request, "limit", 100)
        cursor = request.query_params.get("cursor")
        start = _rowid(cursor, "Project") if cursor else 1
        with self._lock:
            rows = [(r, p) for r, p in sorted(self._projects.items()) if r >= start]
        page, extra = rows[:limit], rows[limit : limit + 1]
        return 200, {
            "data": [
                {"name": p["name"], "description": p["description"], "id": global_id("Project", r)}
                for r, p in page
            ],
            "next_cursor": global_id("Project", extra[0][0]) if extra else None,
        }

    def _spans_list(self, request: Request, body: Any, project: str) -> tuple[int, Any]:
        query = _SpanQuery.of(request.query_params, self._project(project))
        limit = self._int(request, "limit", 100)
        with self._lock:
            rows = [r for r in self._spans if query.keeps(r)]
        rows.sort(key=query.sort_key, reverse=query.desc)
        page, extra = rows[:limit], rows[limit : limit + 1]
        return 200, {
            "data": [self._render_span(r) for r in page],
            "next_cursor": query.cursor_for(extra[0]) if extra else None,
        }

    @staticmethod
    def _render_span(row: dict[str, Any]) -> dict[str, Any]:
        attributes = dict(_flatten("", row["attributes"]))
        kind = attributes.pop(_KIND, "UNKNOWN")
        return {
            "id": global_id("Span", row["rowid"]),
            "name": row["name"],
            "context": {"trace_id": row["trace_id"], "span_id": row["span_id"]},
            "span_kind": str(kind),
            "parent_id": row["parent_id"],
            "start_time": _iso(row["start"]),
            "end_time": _iso(row["end"]),
            "status_code": row["status_code"],
            "status_message": row["status_message"],
            "attributes": attributes,
            "events": [
                {"name": e["name"], "timestamp": _iso(e["timestamp"]), "attributes": e["attributes"]}
                for e in row["events"]
            ],
        }

    def _upsert(self, target: _AnnotationTarget, data: list[dict[str, Any]]) -> list[str]:
        now = _iso(datetime.now(UTC))
        ids: list[str] = []
        with self._lock:
            for d in data:
                key = (d["name"], d[target.key].lower(), d.get("identifier") or "")
                existing = target.store.get(key)
                if existing is None:
                    rowid = self._next_annotation
                    self._next_annotation += 1
                    existing = {"rowid": rowid, "id": global_id(target.node, rowid), "created_at": now}
                target.store[key] = {**existing, "updated_at": now, **_annotation_fields(d, target.key)}
                ids.append(existing["id"])
        return ids

    def _annotate(self, request: Request, body: Any, target: _AnnotationTarget) -> tuple[int, Any]:
        data = list(body.get("data") or [])
        if any(d["name"] == "note" for d in data):
            raise _Fail(400, "The name 'note' is reserved for trace and span notes.")
        sync = (request.query_params.get("sync") or "false").lower() == "true"
        known, missing = target.split(data)
        # With sync an unknown target fails the whole request; without, unknown ones are dropped.
        if sync and missing:
            raise _Fail(404, f"{target.noun} with IDs {', '.join(missing)} do not exist.")
        ids = self._upsert(target, known)
        return 200, {"data": [{"id": i} for i in ids] if sync else []}

    def _annotate_spans(self, request: Request, body: Any) -> tuple[int, Any]:
        return self._annotate(request, body, self._targets["span"])

    def _annotate_traces(self, request: Request, body: Any) -> tuple[int, Any]:
        return self._annotate(request, body, self._targets["trace"])

    def _list_annotations(self, request: Request, project: str, target: _AnnotationTarget) -> tuple[int, Any]:
        project_rowid = self._project(project)
        keep = target.filter(request.query_params)
        limit = self._int(request, "limit", 10)
        with self._lock:
            rows = [
                a
                for a in target.store.values()
                if keep.keeps(a) and target.in_project(a[target.key], project_rowid)
            ]
        rows.sort(key=lambda a: a["rowid"], reverse=True)
        page, extra = rows[:limit], rows[limit : limit + 1]
        return 200, {
            "data": [{k: v for k, v in a.items() if k != "rowid"} for a in page],
            "next_cursor": global_id(target.node, extra[0]["rowid"]) if extra else None,
        }

    def _span_in_project(self, span_id: str, project: int) -> bool:
        row = self._span_index.get(span_id)
        return row is not None and row["project"] == project

    def _trace_in_project(self, trace_id: str, project: int) -> bool:
        return any(r["trace_id"] == trace_id and r["project"] == project for r in self._spans)

    def _span_annotations_list(self, request: Request, body: Any, project: str) -> tuple[int, Any]:
        return self._list_annotations(request, project, self._targets["span"])

    def _trace_annotations_list(self, request: Request, body: Any, project: str) -> tuple[int, Any]:
        return self._list_annotations(request, project, self._targets["trace"])


def synthetic_spans(
    index: int,
    *,
    base_time: datetime | None = None,
    spacing: timedelta = timedelta(seconds=1),
    name: str = "rag-answer",
    clause: str = "Prepayment shall not exceed 30,000 RMB",
    answer: str = "The prepayment cap is 30,000 RMB.",
) -> list[dict[str, Any]]:
    """A retrieval-augmented agent trace as OpenInference spans (for :meth:`PhoenixServer.add_span`):
    an AGENT root, a RETRIEVER returning two versions of a document (metadata as a JSON string), an
    LLM span with the retrieved clause in its input messages, and a TOOL span with an event.
    Ids are deterministic in ``index`` (32-hex trace id, 16-hex span ids)."""
    base = base_time or datetime(2026, 3, 1, tzinfo=UTC)
    start = base + spacing * index
    trace_id = hashlib.sha256(f"phoenix-trace-{index}".encode()).hexdigest()[:32]

    def sid(n: int) -> str:
        return hashlib.sha256(f"phoenix-span-{index}-{n}".encode()).hexdigest()[:16]

    def at(ms: int) -> str:
        return _iso(start + timedelta(milliseconds=ms))

    question = f"What is the prepayment cap of contract C-17? (#{index})"
    system = "Answer from the context.\n\nContext:\n" + clause

    def span(
        n: int, span_name: str, parent: int | None, begin: int, end: int, attrs: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "name": span_name,
            "trace_id": trace_id,
            "span_id": sid(n),
            "parent_id": sid(parent) if parent is not None else None,
            "start_time": at(begin),
            "end_time": at(end),
            "status_code": "OK",
            "attributes": attrs,
        }

    tool = span(
        3,
        "lookup_contract",
        0,
        820,
        850,
        {
            _KIND: "TOOL",
            "tool.name": "lookup_contract",
            "tool.parameters": json.dumps({"contract": "C-17"}),
            "input.value": json.dumps({"contract": "C-17"}),
            "output.value": json.dumps({"status": "active"}),
        },
    )
    tool["events"] = [{"name": "cache.miss", "timestamp": at(830), "attributes": {"cache.key": "C-17"}}]
    return [
        span(
            0,
            name,
            None,
            0,
            900,
            {
                _KIND: "AGENT",
                "input.value": question,
                "output.value": answer,
                "session.id": f"session-{index % 11}",
                "user.id": f"user-{index % 7}",
                "tag.tags": ["prod"],
                "metadata": json.dumps({"app": "procurement-agent", "tenant": {"region": "CN"}}),
            },
        ),
        span(
            1,
            "vector-search",
            0,
            10,
            80,
            {
                _KIND: "RETRIEVER",
                "input.value": question,
                "retrieval.documents.0.document.id": "c17-v2",
                "retrieval.documents.0.document.content": clause,
                "retrieval.documents.0.document.score": 0.91,
                "retrieval.documents.0.document.metadata": json.dumps(
                    {"doc_id": "C-17/attachment", "version": "v2", "region": "CN"}
                ),
                "retrieval.documents.1.document.id": "c17-v1",
                "retrieval.documents.1.document.content": "Prepayment shall not exceed 50,000 RMB",
                "retrieval.documents.1.document.score": 0.62,
                "retrieval.documents.1.document.metadata": json.dumps(
                    {"doc_id": "C-17/attachment", "version": "v1", "region": "CN"}
                ),
                "tracejudge.retrieval.filter": json.dumps({"region": "CN"}),
            },
        ),
        span(
            2,
            "answer",
            0,
            100,
            800,
            {
                _KIND: "LLM",
                "llm.model_name": "gpt-4.1-mini",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": system,
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": question,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": answer,
                "llm.prompt_template.variables": json.dumps({"question": question}),
                "llm.token_count.prompt": 120,
                "llm.token_count.completion": 12,
                "llm.token_count.total": 132,
                "input.value": question,
                "output.value": answer,
            },
        ),
        tool,
    ]
