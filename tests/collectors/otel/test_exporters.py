"""The real OpenTelemetry SDK exporters (protobuf, gzip, JSON) sending to the receiver, then the CLI
reading the stored traces back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtoSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge_collectors.otel import serve_in_thread


def record_agent_run() -> tuple[str, list[ReadableSpan]]:
    """A small RAG agent run recorded with the SDK: agent → retriever, LLM (OpenInference + GenAI)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "procurement-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.agent", "0.1")
    with tracer.start_as_current_span(
        "agent.run",
        attributes={"openinference.span.kind": "AGENT", "input.value": "What is the prepayment cap?"},
    ) as root:
        with tracer.start_as_current_span(
            "retrieve",
            attributes={
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.id": "C-17/attachment",
                "retrieval.documents.0.document.content": "Prepayment shall not exceed 30,000 RMB",
                "retrieval.documents.0.document.score": 0.91,
                "retrieval.documents.0.document.metadata": json.dumps({"version": "v2"}),
            },
        ) as retriever:
            retriever.add_event("db.query.result", {"id": "C-17/attachment", "score": 0.91})
        with tracer.start_as_current_span(
            "chat gpt-4.1-mini",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": [
                    json.dumps({"role": "user", "parts": [{"type": "text", "content": "cap?"}]})
                ],
                "gen_ai.output.messages": [
                    {"role": "assistant", "parts": [{"type": "text", "content": "30,000"}]}
                ],
                "gen_ai.usage.input_tokens": 812,
                "llm.token_count.total": 900,
            },
        ):
            pass
    provider.shutdown()
    spans = list(memory.get_finished_spans())
    return format(root.get_span_context().trace_id, "032x"), spans


def _send(exporter: SpanExporter, batches: Sequence[Sequence[ReadableSpan]]) -> None:
    for batch in batches:
        assert exporter.export(batch) == SpanExportResult.SUCCESS
    exporter.shutdown()


def _cli_json(store_path: Path, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{store_path}", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


EXPORTERS = {
    "protobuf": lambda url, **kw: ProtoSpanExporter(endpoint=f"{url}/v1/traces", **kw),
    "protobuf-gzip": lambda url, **kw: ProtoSpanExporter(
        endpoint=f"{url}/v1/traces", compression=Compression.Gzip, **kw
    ),
    "json": lambda url, **kw: JsonSpanExporter(endpoint=f"{url}/v1/traces", **kw),
}


@pytest.mark.parametrize("kind", sorted(EXPORTERS))
def test_sdk_exporter_to_receiver_to_cli(
    kind: str, receiver: str, store: SqliteStore, store_path: Path
) -> None:
    trace_id, spans = record_agent_run()
    # One trace over three requests, children before the root.
    _send(EXPORTERS[kind](receiver), [[spans[1]], [spans[2]], [spans[0]]])

    stored = store.get_spans(trace_id)
    assert len(stored) == 3
    by_name = {s.name: s for s in stored}
    root = by_name["agent.run"]
    assert root.parent_span_id is None
    assert by_name["retrieve"].parent_span_id == root.span_id
    assert by_name["retrieve"].attributes["retrieval.documents.0.document.score"] == 0.91
    assert by_name["retrieve"].events[0].attributes == {"id": "C-17/attachment", "score": 0.91}
    llm = by_name["chat gpt-4.1-mini"]
    assert llm.attributes["gen_ai.usage.input_tokens"] == 812
    assert json.loads(llm.attributes["gen_ai.input.messages"][0])["role"] == "user"
    # Structured values arrive as arrayValue/kvlistValue and decode to lists and dicts.
    assert llm.attributes["gen_ai.output.messages"] == [
        {"role": "assistant", "parts": [{"type": "text", "content": "30,000"}]}
    ]
    assert root.resource["service.name"] == "procurement-agent"
    assert (root.scope_name, root.scope_version) == ("tests.agent", "0.1")
    assert all(s.source == "otlp" for s in stored)

    listed = _cli_json(store_path, "traces", "list", "--json")
    assert [(t["trace_id"], t["span_count"], t["name"]) for t in listed] == [(trace_id, 3, "agent.run")]
    task = _cli_json(store_path, "traces", "show", trace_id, "--json")
    assert task["trace_id"] == trace_id
    assert task["input"] == "What is the prepayment cap?"
    assert task["final_answer"] == "30,000"
    [retrieval] = task["retrievals"]
    assert [(d["doc_id"], d["version"], d["content"]) for d in retrieval["documents"]] == [
        ("C-17/attachment", "v2", "Prepayment shall not exceed 30,000 RMB")
    ]
    [model] = task["model_calls"]
    assert [(m["role"], m["content"]) for m in model["input_messages"]] == [("user", "cap?")]
    assert model["output_text"] == "30,000"
    assert model["usage"]["input"] == 812
    assert task["gaps"] == []


def test_resending_the_same_spans_stores_them_once(receiver: str, store: SqliteStore) -> None:
    trace_id, spans = record_agent_run()
    _send(EXPORTERS["protobuf"](receiver), [spans, spans[:2]])
    _send(EXPORTERS["json"](receiver), [spans])
    assert len(store.get_spans(trace_id)) == 3
    (summary,) = store.list_traces()
    assert summary.span_count == 3


def test_sdk_exporter_with_bearer_token(store: SqliteStore) -> None:
    trace_id, spans = record_agent_run()
    with serve_in_thread(store, token="tok-123") as url:
        refused = EXPORTERS["protobuf"](url)
        assert refused.export(spans) == SpanExportResult.FAILURE
        refused.shutdown()
        assert store.get_spans(trace_id) == []
        _send(EXPORTERS["protobuf-gzip"](url, headers={"Authorization": "Bearer tok-123"}), [spans])
        _send(EXPORTERS["json"](url, headers={"Authorization": "Bearer tok-123"}), [spans])
    assert len(store.get_spans(trace_id)) == 3
