"""Shared fixtures: a store on a temp file, the receiver on a free loopback port, OTLP request builders."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tracejudge.store import SqliteStore
from tracejudge_collectors.otel import serve_in_thread

TRACE_ID = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "tracejudge.db"


@pytest.fixture
def store(store_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(store_path)
    yield s
    s.close()


@pytest.fixture
def receiver(store: SqliteStore) -> Iterator[str]:
    """Base URL of a receiver (default limits, no token) running in this process."""
    with serve_in_thread(store) as url:
        yield url


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # Exporters use requests/httpx, which honour proxy variables; the receiver is on loopback.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def any_value(value: Any) -> AnyValue:
    """A Python value as an OTLP AnyValue (bytes → bytes_value, dict → kvlist, list → array)."""
    v = AnyValue()
    if value is None:
        return v
    if isinstance(value, bool):
        v.bool_value = value
    elif isinstance(value, int):
        v.int_value = value
    elif isinstance(value, float):
        v.double_value = value
    elif isinstance(value, str):
        v.string_value = value
    elif isinstance(value, bytes):
        v.bytes_value = value
    elif isinstance(value, list):
        v.array_value.SetInParent()  # an empty list is an empty array, not an unset value
        v.array_value.values.extend(any_value(x) for x in value)
    elif isinstance(value, dict):
        v.kvlist_value.SetInParent()
        v.kvlist_value.values.extend(KeyValue(key=k, value=any_value(x)) for k, x in value.items())
    else:
        raise TypeError(type(value))
    return v


def build_request(
    spans: list[dict[str, Any]], resource: dict[str, Any] | None = None
) -> ExportTraceServiceRequest:
    """An ExportTraceServiceRequest with one resource and one scope; each span is a dict of Span fields
    (``attributes`` as a plain dict)."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    for k, x in (resource or {"service.name": "agent"}).items():
        rs.resource.attributes.add(key=k, value=any_value(x))
    ss = rs.scope_spans.add()
    ss.scope.name = "tests"
    ss.scope.version = "1.0"
    for fields in spans:
        sp = ss.spans.add()
        attrs = fields.get("attributes", {})
        for k, x in attrs.items():
            sp.attributes.add(key=k, value=any_value(x))
        for name, x in fields.items():
            if name != "attributes":
                setattr(sp, name, x)
    return req


@pytest.fixture
def make_request() -> Callable[..., ExportTraceServiceRequest]:
    return build_request


@pytest.fixture
def good_span() -> Callable[[int], dict[str, Any]]:
    """A valid span of TRACE_ID with span id ``n``."""

    def make(n: int, parent: int | None = None, **extra: Any) -> dict[str, Any]:
        span: dict[str, Any] = {
            "trace_id": TRACE_ID,
            "span_id": n.to_bytes(8, "big"),
            "name": f"span-{n}",
            "start_time_unix_nano": 1_700_000_000_000_000_000 + n,
            "end_time_unix_nano": 1_700_000_000_000_000_000 + n + 1000,
            "attributes": {"n": n},
        }
        if parent is not None:
            span["parent_span_id"] = parent.to_bytes(8, "big")
        span.update(extra)
        return span

    return make
