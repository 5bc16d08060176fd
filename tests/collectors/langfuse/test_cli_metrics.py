"""``collect langfuse`` with OTEL_EXPORTER_OTLP_ENDPOINT set pushes trace and span counts over OTLP
(the real opentelemetry-sdk exporter, a local endpoint)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.otlp_metrics_sink import metrics_sink, series
from tracejudge.cli import cli
from tracejudge.testing.langfuse_server import LangfuseServer, synthetic_trace


def test_collect_langfuse_pushes_trace_and_span_counts(server: LangfuseServer, tmp_path: Path) -> None:
    for i in range(4):
        server.add_trace(synthetic_trace(i))
    db = tmp_path / "t.db"
    with metrics_sink() as (endpoint, seen):
        env = {
            "LANGFUSE_BASE_URL": server.base_url,
            "LANGFUSE_PUBLIC_KEY": server.public_key,
            "LANGFUSE_SECRET_KEY": server.secret_key,
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        }
        args = ["--store", str(db), "collect", "langfuse", "--limit", "3", "--json"]
        result = CliRunner().invoke(cli, args, env=env)
        assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["fetched"] == 3
    points = seen.points()
    src = ("source", "langfuse")
    assert series(points, "tracejudge.collect.spans") == {(src,): report["spans_new"]}
    assert report["spans_new"] == 12
    assert series(points, "tracejudge.collect.traces") == {(("outcome", "fetched"), src): 3}
    assert server.secret_key not in repr(seen.requests)
    assert set(seen.paths) == {"/v1/metrics"}
