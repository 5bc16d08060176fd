"""PostgreSQL restarted under a running receiver: the export that finds the store's connection gone is
answered 503 with Retry-After (which OTLP senders retry), not 500 (which they drop), and the receiver
stores the retried and every later export on a new connection — before, it answered 500 to every
export for as long as it ran."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import httpx
import psycopg
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

from tests.collectors.otel.conftest import build_request
from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tracejudge import StoreUnreachableError
from tracejudge.store import Store, open_store
from tracejudge_collectors.otel import serve_in_thread


def _end_every_session(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def _body(span_id: int) -> bytes:
    span = {"trace_id": (7).to_bytes(16, "big"), "span_id": span_id.to_bytes(8, "big"), "name": "s"}
    return build_request([span]).SerializeToString()


def test_a_restart_answers_503_then_the_receiver_stores_again(
    postgres_url: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = open_store(postgres_url)
    headers = {"Content-Type": "application/x-protobuf"}
    try:
        with serve_in_thread(store) as url:
            assert httpx.post(f"{url}/v1/traces", content=_body(1), headers=headers).status_code == 200
            _end_every_session(postgres_url)
            refused = httpx.post(f"{url}/v1/traces", content=_body(2), headers=headers)
            assert refused.status_code == 503, refused.text
            assert refused.headers["Retry-After"]
            # The real SDK exporter retries the 503 and its span is stored; so is the refused one, sent again.
            _end_every_session(postgres_url)
            provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
            provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
            provider.get_tracer("t").start_span("from the sdk").end()
            provider.shutdown()
            assert httpx.post(f"{url}/v1/traces", content=_body(2), headers=headers).status_code == 200
        # Each refused export is one line saying why (not a traceback apiece while the outage lasts).
        refusals = [r for r in caplog.records if "storing spans failed" in r.getMessage()]
        assert refusals
        assert all(r.levelno == logging.WARNING and r.exc_info is None for r in refusals)
        assert all("lost its connection" in r.getMessage() for r in refusals)
        names = sorted(t.name for t in store.list_traces())
        assert names == ["from the sdk", "s"]
        assert len(store.get_spans((7).to_bytes(16, "big").hex())) == 2
    finally:
        store.close()


class _DownFor:
    """A store whose server is down for its first ``refusals`` writes (as during a restart)."""

    def __init__(self, inner: Any, refusals: int) -> None:
        self._inner = inner
        self.refusals = refusals

    def put_spans(self, *args: Any, **kwargs: Any) -> int:
        if self.refusals > 0:
            self.refusals -= 1
            raise StoreUnreachableError("the store lost its connection: server closed the connection")
        return int(self._inner.put_spans(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_an_sdk_exporter_with_its_default_timeout_rides_out_three_refused_exports(tmp_path: Path) -> None:
    """The OpenTelemetry SDK's exporter honours Retry-After within its export timeout (10 s by
    default), after which it drops the batch. With Retry-After: 5 it tried twice (at 0 and 5 s) and
    dropped the spans of a store down for three tries; a shorter wait lets it try at 0, 2, 4 and 6 s."""
    inner = open_store(f"sqlite:///{tmp_path}/s.db")
    store = _DownFor(inner, refusals=3)
    try:
        with serve_in_thread(cast(Store, store)) as url:
            exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces")  # the default timeout
            provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
            tracer = provider.get_tracer("t")
            span = tracer.start_span("during a restart")
            span.end()
            result = exporter.export([cast(ReadableSpan, span)])
            exporter.shutdown()
        assert store.refusals == 0
        assert result == SpanExportResult.SUCCESS
        assert [t.name for t in inner.list_traces()] == ["during a restart"]
    finally:
        inner.close()
