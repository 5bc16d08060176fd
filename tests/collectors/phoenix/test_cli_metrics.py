"""``collect phoenix`` with OTEL_EXPORTER_OTLP_ENDPOINT set pushes trace and span counts over OTLP
(the real opentelemetry-sdk exporter, a local endpoint)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.otlp_metrics_sink import metrics_sink, series
from tracejudge.cli import cli
from tracejudge.testing.phoenix_server import PhoenixServer, synthetic_spans

from .conftest import KEY


def test_collect_phoenix_pushes_trace_and_span_counts(server: PhoenixServer, tmp_path: Path) -> None:
    for i in range(3):
        for span in synthetic_spans(i):
            server.add_span("default", span)
    db = tmp_path / "t.db"
    with metrics_sink() as (endpoint, seen):
        env = {"PHOENIX_COLLECTOR_ENDPOINT": server.base_url, "PHOENIX_API_KEY": KEY}
        env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] = f"{endpoint}/v1/metrics"
        first = CliRunner().invoke(cli, ["--store", str(db), "collect", "phoenix", "--json"], env=env)
        assert first.exit_code == 0, first.output
        after_first = seen.points()
        # A second run: every trace already stored, so only "skipped" grows (a new provider: fresh sums).
        second = CliRunner().invoke(cli, ["--store", str(db), "collect", "phoenix", "--json"], env=env)
        assert second.exit_code == 0, second.output
        after_second = seen.points()
    report = json.loads(first.output)
    assert report["spans_new"] == 12
    src = ("source", "phoenix")
    assert series(after_first, "tracejudge.collect.spans") == {(src,): 12}
    assert series(after_first, "tracejudge.collect.traces") == {(("outcome", "fetched"), src): 3}
    assert series(after_second, "tracejudge.collect.traces")[(("outcome", "skipped"), src)] == 3
    assert KEY not in repr(seen.requests)
    assert set(seen.paths) == {"/v1/metrics"}
