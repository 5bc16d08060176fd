"""``collect otlp`` with OTEL_EXPORTER_OTLP_ENDPOINT set: the real opentelemetry-sdk exporter pushes
request and span counts to a local OTLP endpoint while the receiver runs, and the rest on shutdown."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from tests.otlp_metrics_sink import MetricsSink, metrics_sink, series
from tracejudge_collectors.otel._metered import rejected_spans
from tracejudge_collectors.otel._proto import export_response_body

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture
def sink() -> Iterator[tuple[str, MetricsSink]]:
    with metrics_sink() as s:
        yield s


@pytest.fixture
def receiver(sink: tuple[str, MetricsSink], store_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    endpoint, _ = sink
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_METRIC_EXPORT_INTERVAL": "200"}
    args = ["--store", f"sqlite:///{store_path}", "collect", "otlp", "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracejudge", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(60):
            pytest.fail("the receiver did not print its listening line")
        yield proc, proc.stdout.readline().split()[-1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_receiver_pushes_requests_and_span_counts_while_running_and_on_shutdown(
    receiver: tuple[subprocess.Popen[str], str],
    sink: tuple[str, MetricsSink],
    make_request: Callable[..., Any],
    good_span: Callable[..., dict[str, Any]],
) -> None:
    proc, url = receiver
    _, seen = sink
    bad = good_span(9, span_id=b"\x01\x02")  # 2-byte span id: rejected, the rest kept
    with httpx.Client(trust_env=False, timeout=30) as client:
        ok = client.post(
            f"{url}/v1/traces",
            content=make_request([good_span(1), good_span(2), good_span(3)]).SerializeToString(),
            headers=PROTOBUF,
        )
        partial = client.post(
            f"{url}/v1/traces",
            content=make_request([good_span(4), bad]).SerializeToString(),
            headers=PROTOBUF,
        )
        # The same spans again: accepted (acknowledged) but not new.
        again = client.post(
            f"{url}/v1/traces", content=make_request([good_span(1)]).SerializeToString(), headers=PROTOBUF
        )
        broken = client.post(f"{url}/v1/traces", content=b"\xff\xff not protobuf", headers=PROTOBUF)
        logs = client.post(
            f"{url}/v1/logs", content=ExportLogsServiceRequest().SerializeToString(), headers=PROTOBUF
        )
    assert [r.status_code for r in (ok, partial, again, broken, logs)] == [200, 200, 200, 400, 200]

    def complete(points: dict[Any, float]) -> bool:
        return sum(series(points, "tracejudge.collect.requests").values()) == 5

    # Pushed while the receiver still runs: the periodic reader, not only the final flush.
    running = seen.wait_for(complete)
    assert proc.poll() is None
    assert series(running, "tracejudge.collect.spans.received") == {(("source", "otlp"),): 6}

    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    final = seen.points()
    src = (("source", "otlp"),)
    assert series(final, "tracejudge.collect.spans.received") == {src: 6}
    assert series(final, "tracejudge.collect.spans.accepted") == {src: 5}
    assert series(final, "tracejudge.collect.spans.rejected") == {src: 1}
    assert series(final, "tracejudge.collect.spans") == {src: 4}
    requests = {
        (dict(attrs)["signal"], dict(attrs)["status"]): v
        for attrs, v in series(final, "tracejudge.collect.requests").items()
    }
    assert requests == {("traces", "200"): 3, ("traces", "400"): 1, ("logs", "200"): 1}
    assert set(seen.paths) == {"/v1/metrics"}


def test_rejected_spans_read_from_both_response_encodings() -> None:
    for as_json in (False, True):
        assert rejected_spans(export_response_body(3, "bad ids", as_json=as_json), as_json=as_json) == 3
        assert rejected_spans(export_response_body(0, "", as_json=as_json), as_json=as_json) == 0
    assert rejected_spans(b"not json", as_json=True) == 0
    assert json.loads(export_response_body(2, "x", as_json=True))["partialSuccess"]["rejectedSpans"] == "2"
