"""examples/deploy/otel-collector.yaml: a Collector config whose every pipeline part is defined, that
tail-samples whole traces and forwards them to tracejudge receivers over OTLP/HTTP with the token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "deploy" / "otel-collector.yaml"
KINDS = ("receivers", "processors", "exporters")


def _config() -> dict[str, Any]:
    data = yaml.safe_load(CONFIG.read_text())
    assert isinstance(data, dict)
    return data


def test_every_pipeline_component_is_defined_and_every_defined_one_used() -> None:
    config = _config()
    pipelines = config["service"]["pipelines"]
    assert set(pipelines) == {"traces"}
    used: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for pipeline in pipelines.values():
        for kind in KINDS:
            assert pipeline[kind], f"the pipeline has no {kind}"
            used[kind].update(pipeline[kind])
    for kind in KINDS:
        assert used[kind] == set(config[kind]), kind


def test_tail_sampling_comes_before_batching_and_each_policy_is_configured() -> None:
    config = _config()
    processors = config["service"]["pipelines"]["traces"]["processors"]
    assert processors[0] == "memory_limiter"  # first, as the Collector's docs require
    assert processors.index("tail_sampling") < processors.index("batch")
    policies = config["processors"]["tail_sampling"]["policies"]
    assert {p["type"] for p in policies} >= {"status_code", "probabilistic"}
    for policy in policies:
        assert set(policy) == {"name", "type", policy["type"]}, policy["name"]
    share = next(p for p in policies if p["type"] == "probabilistic")
    assert 0 < share["probabilistic"]["sampling_percentage"] <= 100


def test_it_forwards_to_tracejudge_receivers_over_otlp_http_with_the_token() -> None:
    exporters = _config()["exporters"]
    (name,) = exporters
    # tracejudge's receiver speaks OTLP/HTTP (protobuf, gzip); otlp_http is the exporter's name since
    # Collector v0.144 (otlphttp, its old name, is a deprecated alias there)
    assert name.split("/")[0] == "otlp_http"
    exporter = exporters[name]
    assert exporter["endpoint"].startswith("http")
    assert not exporter["endpoint"].rstrip("/").endswith("/v1/traces")  # otlphttp appends the path
    assert exporter["compression"] == "gzip"
    # The token comes from the environment, never written into the file.
    assert exporter["headers"]["Authorization"] == "Bearer ${env:TRACEJUDGE_OTLP_TOKEN}"
