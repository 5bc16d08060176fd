"""Builders for task records, tickets and manifests: ``mk.task(...)`` etc. through the ``mk`` fixture."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import (
    Candidate,
    Document,
    Localization,
    ManifestEntry,
    Material,
    Message,
    ModelCall,
    RawSpan,
    RetrievalCall,
    SpanEvent,
    TaskRecord,
    Ticket,
)
from tracejudge_collectors.otel import iter_otlp_file, read_otlp_file

if TYPE_CHECKING:
    import openai

    from tracejudge.testing.openai_server import Rule

T0 = datetime(2026, 11, 18, 9, 30, tzinfo=UTC)
DOC = "C-17/attachment"
CLAUSE = "Prepayment shall not exceed 30,000 RMB"
V2_TEXT = "Attachment v2. Payment terms.\nPrepayment shall not exceed 30,000 RMB per order. Net 30."
V1_TEXT = "Attachment v1. Payment terms.\nPrepayment shall not exceed 50,000 RMB per order. Net 30."
QUESTION = "Can supplier Acme get a prepayment of 40,000 RMB on order 7?"
GOOD = "No. Under attachment v2 prepayment is capped at 30,000 RMB, so 40,000 RMB is over the limit."
BAD = "Yes. Attachment v1 allows prepayment up to 50,000 RMB, so 40,000 RMB is fine."


def doc(
    doc_id: str = DOC, version: str | None = "v2", content: str | None = V2_TEXT, position: int = 0
) -> Document:
    return Document(
        doc_id=doc_id, version=version, content=content, score=0.9 - position / 10, position=position
    )


def retrieval(
    span_id: str = "r1",
    docs: tuple[Document, ...] | None = None,
    filter: Any = None,
    principal: str | None = None,
    candidates: list[Candidate] | None = None,
    documents_recorded: bool = True,
) -> RetrievalCall:
    return RetrievalCall(
        span_id=span_id,
        span_ids=(span_id,),
        name="retrieve",
        query="prepayment cap",
        documents=(doc(),) if docs is None else docs,
        documents_recorded=documents_recorded,
        filter=filter,
        principal=principal,
        candidates=tuple(candidates) if candidates is not None else None,
    )


def model(
    span_id: str = "m1",
    context: str = V2_TEXT,
    output: str | None = GOOD,
    input_recorded: bool = True,
    redacted: bool = False,
) -> ModelCall:
    text = (
        f"You answer procurement questions.\nContext:\n{context}\nQuestion: {QUESTION}"
        if input_recorded
        else ""
    )
    return ModelCall(
        span_id=span_id,
        name="chat",
        model="gpt-4.1-mini",
        input_messages=(Message(role="user", content=text if input_recorded else None, redacted=redacted),),
        input_recorded=input_recorded,
        input_redacted=redacted,
        output_recorded=output is not None,
        input_text=text,
        output_text=output,
    )


def task(
    retrievals: tuple[RetrievalCall, ...] | None = None,
    model_calls: tuple[ModelCall, ...] | None = None,
    answer: str | None = GOOD,
    question: str | None = QUESTION,
    start: datetime | None = T0,
    **kw: Any,
) -> TaskRecord:
    calls = (model(output=answer),) if model_calls is None else model_calls
    return TaskRecord(
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        start_time=start,
        input=question,
        final_answer=answer,
        final_answer_span_id=calls[-1].span_id if calls else None,
        retrievals=(retrieval(),) if retrievals is None else retrievals,
        model_calls=calls,
        **kw,
    )


def material(**kw: Any) -> Material:
    base: dict[str, Any] = {
        "doc_id": DOC,
        "version": "v2",
        "clause": CLAUSE,
        "facts": {"prepayment_cap_rmb": 30000},
    }
    base.update(kw)
    return Material(**base)


def ticket(
    required: list[Material] | None = None, superseded: list[Material] | None = None, **kw: Any
) -> Ticket:
    return Ticket(
        ticket="EXP-311",
        required=tuple(required) if required is not None else (material(),),
        superseded=tuple(superseded)
        if superseded is not None
        else (Material(doc_id=DOC, version="v1", facts={"prepayment_cap_rmb": 50000}),),
        **kw,
    )


def entry(version: str = "v2", **kw: Any) -> ManifestEntry:
    base: dict[str, Any] = {
        "doc_id": DOC,
        "version": version,
        "effective_from": datetime(2026, 3, 1, tzinfo=UTC),
        "indexed_at": datetime(2026, 3, 2, 3, tzinfo=UTC),
        "metadata": {"region": "CN"},
        "acl": ["procurement"],
    }
    base.update(kw)
    return ManifestEntry(**base)


def v1_entry(**kw: Any) -> ManifestEntry:
    base: dict[str, Any] = {
        "effective_from": datetime(2025, 1, 1, tzinfo=UTC),
        "effective_to": datetime(2026, 3, 1, tzinfo=UTC),
        "indexed_at": datetime(2025, 1, 2, tzinfo=UTC),
    }
    base.update(kw)
    return entry("v1", **base)


RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def recorded_manifest(v2_region: str) -> list[ManifestEntry]:
    """The index behind the recorded traces: v1 until 2026-03-01, v2 after it in ``v2_region``; no ACL,
    since their retrievals record no principal."""
    return [
        v1_entry(metadata={"region": "CN"}, acl=None),
        entry(indexed_at=datetime(2026, 3, 2, tzinfo=UTC), metadata={"region": v2_region}, acl=None),
    ]


def triage_recorded(name: str, entries: list[ManifestEntry] | None) -> Localization:
    """The default ticket triaged over a trace file in tests/fixtures/traces, through the real decoder."""
    return localize(normalize(list(read_otlp_file(RECORDED / name))), ticket(), entries)


def statuses(loc: Localization) -> list[str]:
    return [s.status for s in loc.stages]


@pytest.fixture
def mk() -> ModuleType:
    return sys.modules[__name__]


# The index of the agent-framework recordings (tests/fixtures/traces/_policy.py, record_<framework>.py):
# the four documents with their text, so returned text without an id is identified by its content.
POLICY_TEXTS = {
    ("C-17/attachment", "v1"): (
        "Contract C-17 with supplier Hengda, attachment v1 (2025). "
        "Prepayment shall not exceed 50,000 RMB per order."
    ),
    ("C-17/attachment", "v2"): (
        "Attachment v2, effective 2026-03-01, replaces v1. Prepayment shall not exceed 30,000 RMB per order."
    ),
    ("C-17/main", "v3"): "Contract C-17 main terms. Payment terms: net 30 days after delivery.",
    ("C-09/framework", "v1"): "Framework agreement C-09 with Lianfa: deliveries are due within ten days.",
}


# the retriever's own id of each document: _policy.CHUNK_IDS ("chunk-041"...), a ColBERTv2 pid (41...)
POLICY_CHUNKS = {key: 41 + n for n, key in enumerate(POLICY_TEXTS)}


def policy_manifest(
    v2_region: str = "EU", *, acl: bool = False, ids: str | None = None
) -> list[ManifestEntry]:
    """The recordings' index: attachment v1 (CN, until 2026-03-01) and v2 (``v2_region``, after it), the
    main terms and an unrelated agreement (CN), each with its ``content``. With ``acl``, the EU attachment
    is readable by ``buyer-eu`` only and the CN documents by both buyers (the permission runs run as
    ``buyer-cn``). ``ids``: the retriever ids each version lists, ``"chunk"`` (``chunk-041``) or ``"pid"``
    (``41``)."""
    both = ["buyer-cn", "buyer-eu"]
    v1 = v1_entry(metadata={"region": "CN"}, acl=both if acl else None)
    v2 = entry(
        indexed_at=datetime(2026, 3, 2, tzinfo=UTC),
        metadata={"region": v2_region},
        acl=(["buyer-eu"] if v2_region == "EU" else both) if acl else None,
    )
    others = [
        ManifestEntry(
            doc_id=doc_id,
            version=version,
            effective_from=datetime(2025, 1, 1, tzinfo=UTC),
            indexed_at=datetime(2025, 1, 2, tzinfo=UTC),
            metadata={"region": "CN"},
            acl=tuple(both) if acl else None,
        )
        for doc_id, version in (("C-17/main", "v3"), ("C-09/framework", "v1"))
    ]

    def retriever_ids(key: tuple[str, str]) -> tuple[str, ...]:
        number = POLICY_CHUNKS[key]
        return {"chunk": (f"chunk-{number:03d}",), "pid": (str(number),)}.get(ids or "", ())

    return [
        e.model_copy(
            update={
                "content": POLICY_TEXTS[(e.doc_id, e.version or "")],
                "ids": retriever_ids((e.doc_id, e.version or "")),
            }
        )
        for e in [v1, v2, *others]
    ]


def never_indexed_manifest(*, ids: str | None = None) -> list[ManifestEntry]:
    """``policy_manifest`` with attachment v2 never indexed (``indexed_at`` null): the recordings'
    ``never_indexed`` runs searched an index without it."""
    return [
        e.model_copy(update={"indexed_at": None}) if (e.doc_id, e.version) == (DOC, "v2") else e
        for e in policy_manifest("EU", ids=ids)
    ]


def recorded_spans(name: str) -> list[RawSpan]:
    """A recorded file's spans; in an OTLP/JSON file with a log request too (Semantic Kernel), the log
    records merged into their spans' events as the store merges them."""
    results = list(iter_otlp_file(RECORDED / name))
    events: dict[str, list[SpanEvent]] = {}
    for result in results:
        for event in result.log_events:
            events.setdefault(event.span_id, []).append(event.to_span_event())
    spans = [span for result in results for span in result.spans]
    return [
        s.model_copy(
            update={"events": tuple(sorted((*s.events, *events[s.span_id]), key=lambda e: e.time_unix_nano))}
        )
        if s.span_id in events
        else s
        for s in spans
    ]


def triage_framework(name: str, entries: list[ManifestEntry] | None) -> Localization:
    """The default ticket triaged over an agent-framework recording (see ``recorded_spans``)."""
    return localize(normalize(recorded_spans(name)), ticket(), entries)


def drop_attribute(spans: list[RawSpan], key: str) -> list[RawSpan]:
    """The spans with one attribute removed wherever it is."""
    return [
        s.model_copy(update={"attributes": {k: v for k, v in s.attributes.items() if k != key}})
        for s in spans
    ]


def sourced_only(spans: list[RawSpan], content: str | None = None) -> list[RawSpan]:
    """The spans with each chunk as a knowledge base without ``.metadata.json`` ids returns it: its source
    URI, chunk id and the sidecar's other fields, no ``doc_id`` or ``version``; its text replaced by
    ``content`` when given."""
    out: list[RawSpan] = []
    for span in spans:
        attributes = dict(span.attributes)
        for key, value in span.attributes.items():
            if not key.startswith("retrieval.documents."):
                continue
            if key.endswith(".document.metadata"):
                md = json.loads(value)
                own = {k: v for k, v in md["metadata"].items() if k not in ("doc_id", "version")}
                attributes[key] = json.dumps({**md, "metadata": own})
            if content is not None and key.endswith(".document.content"):
                attributes[key] = content
        out.append(span.model_copy(update={"attributes": attributes}))
    return out


def located_only(spans: list[RawSpan], content: str | None = None) -> list[RawSpan]:
    """The spans with each chunk as a source without metadata returns it: no chunk id and no metadata of its
    own, only its location (its S3 uri); its text replaced by ``content`` when given."""
    out: list[RawSpan] = []
    for span in spans:
        attributes = {k: v for k, v in span.attributes.items() if not k.endswith(".document.id")}
        for key, value in span.attributes.items():
            if not key.startswith("retrieval.documents."):
                continue
            if key.endswith(".document.metadata"):
                attributes[key] = json.dumps({**json.loads(value), "metadata": {}})
            if content is not None and key.endswith(".document.content"):
                attributes[key] = content
        out.append(span.model_copy(update={"attributes": attributes}))
    return out


def source_uri_ids(entries: list[ManifestEntry]) -> list[ManifestEntry]:
    """The manifest with each version's S3 file (the source URI record_bedrock's knowledge base gives its
    chunk) as its ids: a manifest that names the files the knowledge base was built from."""
    return [
        e.model_copy(update={"ids": (f"s3://acme-contracts/{e.doc_id}/{e.version}.txt",)}) for e in entries
    ]


def agent_and_retrieval(trace_id: str) -> tuple[RawSpan, RawSpan, int]:
    """An OpenInference agent root answering with v2's cap (``GOOD``) and a retriever under it returning
    v2, and the root's start in nanoseconds (a model call of the test's own goes after ``t0 + 2``)."""
    t0 = int(T0.timestamp()) * 10**9
    root = RawSpan(
        trace_id=trace_id,
        span_id="a" * 16,
        name="agent",
        start_time_unix_nano=t0,
        end_time_unix_nano=t0 + 10**9,
        attributes={"openinference.span.kind": "AGENT", "input.value": QUESTION, "output.value": GOOD},
    )
    retrieval = RawSpan(
        trace_id=trace_id,
        span_id="b" * 16,
        parent_span_id="a" * 16,
        name="retrieve",
        start_time_unix_nano=t0 + 1,
        end_time_unix_nano=t0 + 2,
        attributes={
            "openinference.span.kind": "RETRIEVER",
            "input.value": "prepayment",
            "retrieval.documents.0.document.id": f"{DOC}@v2",
            "retrieval.documents.0.document.content": V2_TEXT,
        },
    )
    return root, retrieval, t0


# What the RAG apps below send the model: v2's clause as the context, and the question.
RAG_MESSAGES: list[dict[str, str]] = [
    {"role": "system", "content": f"Context:\n{V2_TEXT}"},
    {"role": "user", "content": QUESTION},
]


def ask_each(client: openai.OpenAI, times: int) -> None:
    """``times`` chat calls, each sending ``RAG_MESSAGES``."""
    for _ in range(times):
        client.chat.completions.create(model="scripted-model", messages=RAG_MESSAGES)


def genai_rag_trace(replies: list[Rule], ask: Callable[[openai.OpenAI], None] | None = None) -> list[RawSpan]:
    """A RAG app (root ``invoke_agent`` span, its own GenAI retrieval span returning v2) whose chat calls
    ``ask`` makes (by default one per reply, ``ask_each``) through the real ``openai`` client against the
    scripted OpenAI stand-in serving ``replies``, recorded by the OTel GenAI instrumentation
    (opentelemetry-instrumentation-openai-v2, the latest conventions with the content on the span:
    ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON text, GenAI parts) and the real SDK's
    OTLP encoder, decoded by tracejudge's decoder."""
    import openai
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as GenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.fixtures.outside._formats import genai_content_on_span
    from tracejudge.testing.openai_server import ScriptedOpenAIServer
    from tracejudge_collectors.otel import decode_protobuf

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag-app")
    with genai_content_on_span():
        instrumentor = GenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            with ScriptedOpenAIServer(replies) as server:
                client = openai.OpenAI(
                    base_url=server.base_url, api_key="sk-test-not-a-secret", max_retries=0
                )
                with tracer.start_as_current_span("invoke_agent") as root:
                    root.set_attribute("gen_ai.operation.name", "invoke_agent")
                    with tracer.start_as_current_span("retrieval") as span:
                        span.set_attribute("gen_ai.operation.name", "retrieval")
                        span.set_attribute(
                            "gen_ai.retrieval.documents", f'[{{"id": "{DOC}@v2", "score": 0.9}}]'
                        )
                    if ask is None:
                        ask_each(client, len(replies))
                    else:
                        ask(client)
        finally:
            instrumentor.uninstrument()
    return decode_protobuf(encode_spans(exporter.get_finished_spans()).SerializeToString()).spans
