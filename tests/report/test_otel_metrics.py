"""`score` pushes OpenTelemetry metrics over OTLP/HTTP while it runs when an OTLP endpoint is set:
the real SDK exporter sending to a local receiver that decodes ExportMetricsServiceRequest."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from tests.otlp_metrics_sink import MetricsSink, last_points, metrics_sink
from tracejudge.cli import cli
from tracejudge.report import RunMetrics
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import ScriptedOpenAIServer

if TYPE_CHECKING:
    from tests.conftest import Restaurant


@pytest.fixture
def metrics_receiver() -> Iterator[tuple[str, MetricsSink]]:
    with metrics_sink() as sink:
        yield sink


def test_no_endpoint_means_no_metrics() -> None:
    assert RunMetrics.from_env({}) is None


def test_score_pushes_item_criterion_and_judge_metrics(
    metrics_receiver: tuple[str, MetricsSink],
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
    points = last_points(seen.requests)
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
    metrics_receiver: tuple[str, MetricsSink], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    assert last_points(seen.requests)[("tracejudge.collect.spans", (("source", "file"),))] == new
