"""One trace from two services, sent minutes apart (issue 12.2): the real opentelemetry-sdk of each
service exports to the receiver; after the first part the trace says it may be incomplete and triage
gives no definite wrong verdict; after the second every span is stored once and the fault is found."""

from __future__ import annotations

import json
import time
from pathlib import Path

from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tracejudge.localize import localize
from tracejudge.normalize import incompleteness, normalize
from tracejudge.schema import Material, Ticket
from tracejudge.store import SqliteStore
from tracejudge_collectors.otel import serve_in_thread

CLAUSE = "Prepayment shall not exceed 30,000 RMB"
TICKET = Ticket(
    ticket="SPLIT-1",
    required=(
        Material(doc_id="C-17/attachment", version="v2", clause=CLAUSE, facts={"prepayment_cap_rmb": 30000}),
    ),
    superseded=(Material(doc_id="C-17/attachment", version="v1", facts={"prepayment_cap_rmb": 50000}),),
)


def _provider(url: str, service: str) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
    return provider


def _wait(store: SqliteStore, trace_id: str, n: int) -> None:
    deadline = time.monotonic() + 20
    while len(store.get_spans(trace_id)) < n and time.monotonic() < deadline:
        time.sleep(0.05)


def test_the_model_service_first_then_the_agent(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "t.db")
    with serve_in_thread(store) as url:
        agent, model = _provider(url, "agent"), _provider(url, "model-service")
        tracer_a, tracer_b = agent.get_tracer("agent"), model.get_tracer("model-service")
        root = tracer_a.start_span("procurement-agent", attributes={"openinference.span.kind": "AGENT"})
        ctx = otel_trace.set_span_in_context(root)
        retriever = tracer_a.start_span(
            "retrieve",
            context=ctx,
            attributes={
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.id": "C-17/attachment@v2",
                "retrieval.documents.0.document.content": CLAUSE + " per order.",
                "retrieval.documents.0.document.metadata": json.dumps(
                    {"doc_id": "C-17/attachment", "version": "v2"}
                ),
            },
        )
        # The model service answers (wrongly) under the agent's root and exports at once...
        llm = tracer_b.start_span(
            "chat",
            context=ctx,
            attributes={
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": f"Context: {CLAUSE} per order. Cap?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "The cap is 50,000 RMB.",
            },
        )
        llm.end()
        trace_id = format(root.get_span_context().trace_id, "032x")
        _wait(store, trace_id, 1)
        early = normalize(store.get_spans(trace_id))
        assert any("parent span" in n and "not received" in n for n in incompleteness(early))
        assert any("root span has not been received" in n for n in incompleteness(early))
        assert localize(early, TICKET).verdict == "unconfirmed"  # no retrieval yet: not a definite one
        # ...the agent's spans (its root ends last) arrive later.
        retriever.end()
        root.set_attribute("output.value", "The cap is 50,000 RMB.")
        root.end()
        _wait(store, trace_id, 3)
        agent.shutdown()
        model.shutdown()
    spans = store.get_spans(trace_id)
    store.close()
    assert len(spans) == len({s.span_id for s in spans}) == 3
    whole = normalize(spans)
    assert incompleteness(whole) == []
    assert localize(whole, TICKET).verdict == "ignored_by_model"
