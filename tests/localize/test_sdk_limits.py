"""Attributes and events an SDK dropped at its count limits (``SpanLimits``; OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT,
OTEL_SPAN_EVENT_COUNT_LIMIT, 128 by default): the span says how many (OTLP ``dropped_*_count``) and no more.
A retrieval or a model input that lost records that way is not read as all it held — the verdict a whole
record gives becomes ``unconfirmed`` with a gap naming the count and the variable to raise — through the
real SDK, its OTLP encoder, tracejudge's decoder, and the receiver's stored form read back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import SpanLimits, Tracer, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.localize import conftest as mk
from tracejudge.localize import UsageJudge, localize
from tracejudge.normalize import normalize
from tracejudge.schema import Evidence, Localization, RawSpan, StageResult, TaskRecord, UsageQuestion
from tracejudge.store import EncodedSpan, open_store
from tracejudge_collectors.otel import decode_protobuf, encode_protobuf

# Documents the retriever returned besides the required one: enough that a limit can drop it alone.
_DOCS = [
    *((f"C-{i:02d}/memo", "v1", f"Memo {i}: deliveries are inspected on arrival.") for i in range(3)),
    (mk.DOC, "v2", mk.V2_TEXT),
]


def _trace(
    *,
    retriever: SpanLimits | None = None,
    chat: SpanLimits | None = None,
    events: bool = False,
    parts: tuple[str, ...] = (),
) -> bytes:
    """An OpenInference RAG trace (retriever, then chat; the retriever's documents as OpenLLMetry's
    ``db.query.result`` events when ``events``) exported by the real SDK, the retriever and the chat
    span each made by a provider under its ``SpanLimits``, as the OTLP protobuf request the exporter
    sends. The SDK drops a span's oldest attributes and events at its limit: the required document and
    the message carrying it are recorded first. With ``parts`` the answer is the chat span's output
    message in those content parts, its last recorded first, and the root records no output."""
    exporter = InMemorySpanExporter()

    def tracer(limits: SpanLimits | None) -> Tracer:
        provider = TracerProvider(span_limits=limits or SpanLimits())
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        return provider.get_tracer("test")

    with tracer(None).start_as_current_span("agent") as root:
        root.set_attribute("openinference.span.kind", "CHAIN")
        root.set_attribute("input.value", mk.QUESTION)
        with tracer(retriever).start_as_current_span("retrieve") as span:
            # The required document is the list's last, its attributes set first: the Python SDK drops the
            # oldest attribute at its limit (the Java and JavaScript SDKs the newest), so the list left is
            # whole positions 0-2, as a list cut at the end would be.
            for i, (doc_id, version, text) in reversed(list(enumerate(_DOCS))):
                metadata = f'{{"doc_id": "{doc_id}", "version": "{version}"}}'
                if events:
                    r = "db.query.result"
                    span.add_event(
                        r,
                        {f"{r}.id": f"{doc_id}@{version}", f"{r}.document": text, f"{r}.metadata": metadata},
                    )
                    continue
                prefix = f"retrieval.documents.{i}.document"
                span.set_attribute(f"{prefix}.id", f"{doc_id}@{version}")
                span.set_attribute(f"{prefix}.content", text)
                span.set_attribute(f"{prefix}.metadata", metadata)
            if events:
                span.set_attribute("db.system", "chroma")
                span.set_attribute("db.operation", "query")
            else:
                span.set_attribute("openinference.span.kind", "RETRIEVER")
            span.set_attribute("input.value", "prepayment cap")
            # A filter and a principal the required document passes: not among the returned documents, it
            # would read as ranked out.
            span.set_attribute("tracejudge.retrieval.filter", '{"region": "CN"}')
            span.set_attribute("tracejudge.retrieval.principal", "procurement")
        with tracer(chat).start_as_current_span("chat") as span:
            for i, text in reversed(list(enumerate(parts))):
                span.set_attribute(f"llm.output_messages.0.message.contents.{i}.message_content.text", text)
            messages = [
                ("system", f"Context:\n{mk.V2_TEXT}"),
                ("system", "You answer procurement questions."),
                ("user", mk.QUESTION),
            ]
            for i, (role, content) in enumerate(messages):
                span.set_attribute(f"llm.input_messages.{i}.message.role", role)
                span.set_attribute(f"llm.input_messages.{i}.message.content", content)
            span.set_attribute("llm.output_messages.0.message.role", "assistant")
            if not parts:
                span.set_attribute("llm.output_messages.0.message.content", mk.GOOD)
            span.set_attribute("llm.model_name", "gpt-4.1-mini")
            span.set_attribute("openinference.span.kind", "LLM")
        if not parts:
            root.set_attribute("output.value", mk.GOOD)
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


def _triage(spans: list[RawSpan], judge: UsageJudge | None = None) -> Localization:
    # Every returned document is in the index: a trace read as whole identifies them all.
    memos = [mk.entry(version, doc_id=doc_id, content=text) for doc_id, version, text in _DOCS[:-1]]
    return localize(normalize(spans), mk.ticket(), [mk.entry(), mk.v1_entry(), *memos], judge=judge)


def _decoded(body: bytes, _tmp: Path) -> list[RawSpan]:
    return decode_protobuf(body).spans


def _stored(body: bytes, tmp_path: Path) -> list[RawSpan]:
    """The spans as the receiver stores them (each in its own OTLP bytes) and a store reads them back."""
    encoded = encode_protobuf(body)
    assert all(isinstance(s, EncodedSpan) for s in encoded.spans)
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        store.put_spans(encoded.spans)
        return store.get_spans(encoded.spans[0].trace_id)
    finally:
        store.close()


Read = Callable[[bytes, Path], list[RawSpan]]
READS = [pytest.param(_decoded, id="decoded"), pytest.param(_stored, id="stored")]


def _gap(task: TaskRecord, span_id: str, kind: str) -> str:
    return next(g.detail for g in task.gaps if g.span_id == span_id and g.kind == kind)


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("events", [False, True], ids=["attributes", "events"])
def test_without_a_limit_the_trace_reads_whole_and_the_verdict_is_definite(
    read: Read, events: bool, tmp_path: Path
) -> None:
    spans = read(_trace(events=events), tmp_path)
    assert all(s.dropped_attributes_count == s.dropped_events_count == 0 for s in spans)
    task = normalize(spans)
    assert task.retrievals[0].documents_recorded
    assert not task.model_calls[0].input_partial
    assert not [g for g in task.gaps if "dropped" in g.detail]
    assert _triage(spans).verdict == "no_fault"


def _read_as_cut(
    spans: list[RawSpan], name: str, gap: str, dropped: str, limit: str
) -> tuple[RawSpan, TaskRecord]:
    """The span ``name``, which the SDK cut at its limits, and the trace's task: the span's gap of kind
    ``gap`` says what was dropped (``dropped``: "3 attributes") and the ``limit`` to raise, and the
    verdict stays unconfirmed."""
    span = next(s for s in spans if s.name == name)
    task = normalize(spans)
    detail = _gap(task, span.span_id, gap)
    assert dropped in detail
    assert limit in detail
    assert _triage(spans).verdict == "unconfirmed"
    return span, task


@pytest.mark.parametrize("read", READS)
def test_a_retrieval_whose_documents_the_sdk_dropped_leaves_the_verdict_unconfirmed(
    read: Read, tmp_path: Path
) -> None:
    # 16 attributes: a limit of 13 drops the required document's three, the oldest, and nothing else.
    spans = read(_trace(retriever=SpanLimits(max_attributes=13)), tmp_path)
    # Read as whole, the call returned all but the required document, which passed its filter:
    # not_retrieved (rank).
    retriever, task = _read_as_cut(
        spans,
        "retrieve",
        "retrieval_documents_not_recorded",
        "3 attributes",
        "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
    )
    assert retriever.dropped_attributes_count == 3
    assert not any(mk.DOC in str(v) for v in retriever.attributes.values())
    (call,) = task.retrievals
    assert call.span_id == retriever.span_id
    assert not call.documents_recorded


@pytest.mark.parametrize("read", READS)
def test_a_retrieval_whose_result_events_the_sdk_dropped_leaves_the_verdict_unconfirmed(
    read: Read, tmp_path: Path
) -> None:
    spans = read(_trace(retriever=SpanLimits(max_events=3), events=True), tmp_path)
    # Read as whole: not_retrieved (rank), as above.
    retriever, task = _read_as_cut(
        spans, "retrieve", "retrieval_documents_not_recorded", "1 event ", "OTEL_SPAN_EVENT_COUNT_LIMIT"
    )
    assert retriever.dropped_events_count == 1
    (call,) = task.retrievals
    assert call.span_id == retriever.span_id
    assert not call.documents_recorded
    assert all(d.doc_id != mk.DOC for d in call.documents)


@pytest.mark.parametrize("read", READS)
def test_a_model_input_whose_message_the_sdk_dropped_leaves_the_verdict_unconfirmed(
    read: Read, tmp_path: Path
) -> None:
    # 10 attributes: a limit of 8 drops the context message (role and content), the oldest.
    spans = read(_trace(chat=SpanLimits(max_attributes=8)), tmp_path)
    # Read as whole, the input held no clause: dropped_in_context.
    chat, task = _read_as_cut(
        spans, "chat", "model_input_truncated", "2 attributes", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"
    )
    assert chat.dropped_attributes_count == 2
    assert not any(mk.CLAUSE in str(v) for v in chat.attributes.values())
    (call,) = task.model_calls
    assert call.span_id == chat.span_id
    assert call.input_partial


# The answer in two content parts: the superseded cap, then the cap in effect. Whole, it states both and a
# usage judge reads it as resting on v2.
PARTS = (
    "Attachment v1 of contract C-17 capped prepayment at 50,000 RMB per order.",
    "Attachment v2, in effect since 2026-03-01, lowers the cap to 30,000 RMB, so 40,000 RMB is too much.",
)


class _Judge:
    """A usage judge that reads the answer as resting on v2 when it states v2's cap, and as not when it
    does not, citing it."""

    def __init__(self) -> None:
        self.questions: list[UsageQuestion] = []

    def judge_usage(self, question: UsageQuestion) -> StageResult:
        self.questions.append(question)
        if "30,000" in question.answer:
            status, note = "pass", "states v2's 30,000 RMB cap"
        else:
            status, note = "fail", "the answer does not state the cap in effect"
        evidence = Evidence(span_id=question.answer_span_id or "", note=note)
        return StageResult(name="used_by_model", status=status, detail=note, evidence=(evidence,))


@pytest.mark.parametrize("read", READS)
def test_an_answer_whose_part_the_sdk_dropped_is_not_read_as_all_it_said(read: Read, tmp_path: Path) -> None:
    whole = read(_trace(parts=PARTS), tmp_path)
    task = normalize(whole)
    (call,) = task.model_calls
    assert task.final_answer_span_id == call.span_id
    assert "30,000" in (task.final_answer or "")
    assert not [g for g in task.gaps if g.kind == "model_output_truncated"]
    judge = _Judge()
    assert _triage(whole, judge).verdict == "no_fault"
    assert judge.questions
    # 11 attributes: a limit of 10 drops the part stating v2's cap, the oldest, and nothing else.
    spans = read(_trace(chat=SpanLimits(max_attributes=10), parts=PARTS), tmp_path / "limited")
    chat = next(s for s in spans if s.name == "chat")
    assert chat.dropped_attributes_count == 1
    task = normalize(spans)
    assert task.final_answer == PARTS[0]
    assert task.final_answer_span_id == chat.span_id
    detail = _gap(task, chat.span_id, "model_output_truncated")
    assert "1 attribute " in detail
    assert "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT" in detail
    # The limit to raise is on the gap's record, and its detail ends with it.
    (gap,) = [g for g in task.gaps if g.kind == "model_output_truncated"]
    assert gap.switch == "raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT (128 by default)"
    assert (
        gap.note
        == "the output may be incomplete: the SDK dropped 1 attribute at its limits (dropped_*_count)"
    )
    assert gap.detail == f"{gap.note}; to record it: {gap.switch}"
    # Read as all it said, the answer states only v1's cap: ignored_by_model, the judge not asked.
    loc = _triage(spans, _Judge())
    assert loc.verdict == "unconfirmed"
    (used,) = [s for s in loc.stages if s.name == "used_by_model"]
    assert used.status == "unconfirmed"
    assert used.detail.startswith(f"the answer may be incomplete (span {chat.span_id}: {gap.note}): what it")
    assert "the whole answer (raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT (128 by default))" in used.missing


@pytest.mark.parametrize("read", READS)
def test_a_judge_is_not_asked_to_read_an_answer_the_sdk_dropped_part_of(read: Read, tmp_path: Path) -> None:
    parts = ("No.", PARTS[1])
    # Whole, the answer states v2's cap: no_fault.
    assert _triage(read(_trace(parts=parts), tmp_path), _Judge()).verdict == "no_fault"
    spans = read(_trace(chat=SpanLimits(max_attributes=10), parts=parts), tmp_path / "limited")
    assert normalize(spans).final_answer == "No."
    # "No." states no fact; asked, the judge reads it as not stating the cap in effect: ignored_by_model.
    judge = _Judge()
    loc = _triage(spans, judge)
    assert loc.verdict == "unconfirmed"
    assert judge.questions == []
    (used,) = [s for s in loc.stages if s.name == "used_by_model"]
    assert "may be incomplete" in used.detail
