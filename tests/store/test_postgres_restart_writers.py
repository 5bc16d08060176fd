"""Receivers and ``score --run`` workers across a real PostgreSQL restart: the server stopped
(``pg_ctl stop -m fast``: sessions ended, then connections refused, "the database system is shutting
down" / "starting up" on the way) and started again, on a PostgreSQL of the test's own. The other
restart tests end the sessions of one database of the shared server (which must keep serving the
other tests); this one is what a user's restart does."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import cast

import psycopg
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.cli import score_workers as sw
from tests.cli.score_workers import judge  # noqa: F401 - the slow scripted judge
from tests.store.conftest import private_postgres  # noqa: F401 - the private server fixture
from tests.store.private_postgres import PrivatePostgres
from tracejudge.store import open_store
from tracejudge.testing.openai_server import ScriptedOpenAIServer


class _Receiver:
    """``tracejudge collect otlp`` as a user starts it, its stderr read as it comes."""

    def __init__(self, store_url: str) -> None:
        command = [sys.executable, "-m", "tracejudge", "--store", store_url, "collect", "otlp"]
        self.proc = subprocess.Popen(
            [*command, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("listening on "), line
        self.url = line.split()[-1]
        self.err: list[str] = []
        self.refused = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line)
            if "answered 503" in line:
                self.refused.set()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


@pytest.fixture
def receiver(private_postgres: PrivatePostgres) -> Iterator[_Receiver]:  # noqa: F811
    r = _Receiver(private_postgres.url)
    try:
        yield r
    finally:
        if r.proc.poll() is None:
            r.proc.kill()
            r.proc.wait(timeout=60)


def _spans(n: int, trace: int) -> list[ReadableSpan]:
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    tracer = provider.get_tracer("t")
    out: list[ReadableSpan] = []
    for i in range(n):
        span = tracer.start_span(f"trace {trace} span {i}")
        span.end()
        out.append(cast(ReadableSpan, span))  # an ended SDK span is one
    return out


def test_a_receiver_refuses_while_postgresql_restarts_and_the_sdks_retry_is_stored(
    private_postgres: PrivatePostgres,  # noqa: F811
    receiver: _Receiver,
) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces")  # the default 10 s timeout
    assert exporter.export(_spans(3, 1)) == SpanExportResult.SUCCESS
    private_postgres.stop()
    results: list[SpanExportResult] = []
    sending = threading.Thread(target=lambda: results.append(exporter.export(_spans(4, 2))))
    sending.start()
    assert receiver.refused.wait(timeout=60), "".join(receiver.err)
    private_postgres.start()
    sending.join(timeout=60)
    assert results == [SpanExportResult.SUCCESS], "".join(receiver.err)
    exporter.shutdown()
    receiver.stop()
    err = "".join(receiver.err)
    assert "Traceback" not in err, err
    assert "stopped: 7 span(s) taken" in err, err
    store = open_store(private_postgres.url)
    try:
        assert sum(t.span_count for t in store.list_traces()) == 7
    finally:
        store.close()


def test_workers_ride_out_a_real_restart_and_store_each_item_once(
    private_postgres: PrivatePostgres,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    url = private_postgres.url
    spans = sw.put_copies(url, 4)
    everything = sorted({s.trace_id for s in spans})
    args = ("--run", "restarted", "--lease", "2", "--concurrency", "2")
    workers = [sw.start_worker(url, judge, *args) for _ in range(2)]
    with sw.reaped(*workers):
        for w in workers:
            sw.wait_stored(url, "restarted", w, 1)
        private_postgres.stop()
        time.sleep(2)  # down for as long as the lease: the workers' claims run out meanwhile
        assert all(w.poll() is None for w in workers), "a worker exited while the store was down"
        private_postgres.start()
        done = [sw.finish(w) for w in workers]
    assert sorted(sw.stored_ids(url, "restarted")) == everything
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT done FROM run_totals WHERE run_id = 'restarted'").fetchone()
    assert row == (len(everything),)  # each result counted once
    theirs = [{i["trace_id"] for i in data["items"]} for data in done]
    assert not theirs[0] & theirs[1]
    assert sorted(theirs[0] | theirs[1]) == everything
    assert {d["status"] for d in done} == {"complete"}
