"""The procurement example run once per session into a store, and the convention fixtures' manifest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.sweep.sweep_data import EXAMPLE
from tracejudge._demo import load_example
from tracejudge.localize import load_manifest
from tracejudge.schema import ManifestEntry
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import ScriptedOpenAIServer
from tracejudge_collectors.otel import decode_protobuf


@pytest.fixture(scope="session")
def procurement(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqliteStore, dict[str, str]]]:
    """A store holding one trace per scenario of the procurement example (recorded at each scenario's
    task time), and the answer of each trace."""
    ex = load_example(EXAMPLE)
    exporter = InMemorySpanExporter()
    with ScriptedOpenAIServer(ex.model_rules()) as model:
        runs = ex.run_scenarios(ex.load_scenarios(), openai_base_url=model.base_url, exporter=exporter)
    payload = encode_spans(exporter.get_finished_spans()).SerializeToString()
    store = SqliteStore(tmp_path_factory.mktemp("procurement") / "store.db")
    store.put_spans(decode_protobuf(payload).spans)
    try:
        yield store, {r.scenario.trace_id: r.answer for r in runs}
    finally:
        store.close()


@pytest.fixture(scope="session")
def procurement_manifest() -> list[ManifestEntry]:
    return load_manifest(EXAMPLE / "manifest.jsonl")
