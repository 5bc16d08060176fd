"""`score` pushes OpenTelemetry metrics over OTLP/HTTP while it runs when an OTLP endpoint is set:
the real SDK exporter sending to a local receiver that decodes ExportMetricsServiceRequest."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from tracejudge.cli import cli
from tracejudge.report import RunMetrics
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import ScriptedOpenAIServer

if TYPE_CHECKING:
    from tests.conftest import Restaurant


class _Collector:
    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.paths: list[str] = []


@pytest.fixture
def metrics_receiver() -> Iterator[tuple[str, _Collector]]:
    seen = _Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            msg = ExportMetricsServiceRequest()
            msg.ParseFromString(body)
            seen.requests.append(msg)
            seen.paths.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _last_points(requests: list[ExportMetricsServiceRequest]) -> dict[tuple[str, tuple[Any, ...]], float]:
    """Cumulative sums: the last exported value of each (metric, attributes) series."""
    out: dict[tuple[str, tuple[Any, ...]], float] = {}
    for req in requests:
        for rm in req.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    points = (
                        metric.sum.data_points if metric.HasField("sum") else metric.histogram.data_points
                    )
                    for p in points:
                        attrs = tuple(sorted((a.key, a.value.string_value) for a in p.attributes))
                        value = p.count if metric.HasField("histogram") else (p.as_int or p.as_double)
                        out[(metric.name, attrs)] = value
    return out


def test_no_endpoint_means_no_metrics() -> None:
    assert RunMetrics.from_env({}) is None


def test_score_pushes_item_criterion_and_judge_metrics(
    metrics_receiver: tuple[str, _Collector],
    restaurant: Restaurant,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint, seen = metrics_receiver
    db = tmp_path / "t.db"
    store = SqliteStore(db)
    store.put_spans(restaurant.spans)
    store.close()
    with ScriptedOpenAIServer(restaurant.rules) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        result = CliRunner().invoke(cli, restaurant.score_args(f"sqlite:///{db}", "--json"))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)["summary"]
    assert seen.requests, "no OTLP metrics request arrived"
    assert set(seen.paths) == {"/v1/metrics"}
    points = _last_points(seen.requests)
    rubric = "restaurant-assistant"
    by_verdict = {
        v: sum(
            val
            for (name, attrs), val in points.items()
            if name == "tracejudge.score.items" and ("verdict", v) in attrs
        )
        for v in ("pass", "fail", "indeterminate")
    }
    assert by_verdict == {v: summary[v] for v in ("pass", "fail", "indeterminate")}
    assert sum(by_verdict.values()) == 14
    tokens = {
        dict(attrs)["direction"]: val
        for (name, attrs), val in points.items()
        if name == "tracejudge.judge.tokens"
    }
    assert tokens == {"input": summary["tokens"]["input"], "output": summary["tokens"]["output"]}
    criteria = {
        dict(attrs)["criterion"] for (name, attrs), _ in points.items() if name == "tracejudge.score.criteria"
    }
    assert {"relevance", "accuracy", "completeness", "tone", "actionability"} <= criteria
    latency = [val for (name, attrs), val in points.items() if name == "tracejudge.judge.latency"]
    assert latency
    assert sum(latency) > 0
    assert all(("rubric", rubric) in attrs for (name, attrs) in points if name.startswith("tracejudge.score"))


def test_collect_file_pushes_span_counts(
    metrics_receiver: tuple[str, _Collector], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, seen = metrics_receiver
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    files = [str(fixtures / "openinference_rag.pb"), str(fixtures / "genai_agent.json")]
    args = ["--store", f"sqlite:///{tmp_path}/t.db", "collect", "file", *files, "--json"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    new = json.loads(first.output)["new"]
    assert new > 0
    assert _last_points(seen.requests)[("tracejudge.collect.spans", (("source", "file"),))] == new
