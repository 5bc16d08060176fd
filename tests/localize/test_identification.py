"""Which returned document is which (DESIGN 5.4) and the retrieved rule for unidentified documents
(DESIGN 5.5): spans shaped as openinference-instrumentation-dspy records a ``dspy.Retrieve`` over a
retriever client (reference/frameworks.md), built with the real opentelemetry-sdk and read back
through the OTLP encoder and our decoder."""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracejudge.localize import localize
from tracejudge.localize._identify import identify
from tracejudge.normalize import normalize
from tracejudge.schema import Localization, ManifestEntry, RawSpan, TaskRecord
from tracejudge_collectors.otel import decode_protobuf

OTHER_TEXT = "Supply agreement C-12 with Baosteel. Invoices are payable within thirty days of delivery."
KIND = "openinference.span.kind"


def _documents(prefix: str, docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, doc in enumerate(docs):
        for key, value in doc.items():
            out[f"{prefix}.{i}.document.{key}"] = value
    return out


def dspy_trace(
    mk: ModuleType, outer: Sequence[dict[str, Any]], inner: Sequence[dict[str, Any]] | None
) -> TaskRecord:
    return normalize(dspy_spans(mk, outer, inner))


def dspy_spans(
    mk: ModuleType, outer: Sequence[dict[str, Any]], inner: Sequence[dict[str, Any]] | None
) -> list[RawSpan]:
    """A DSPy RAG run: ``RAG.forward`` > ``Retrieve.forward`` (> ``ColBERTv2.__call__``), ``LM.__call__``.

    The filter and principal are attached as a user does with ``using_metadata`` (OpenInference's
    ``metadata`` JSON), so they are recorded and only the documents' identity can be in doubt.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("openinference.instrumentation.dspy")
    metadata = json.dumps(
        {"tracejudge.retrieval.filter": {"region": "CN"}, "tracejudge.retrieval.principal": "procurement"}
    )
    with tracer.start_as_current_span(
        "RAG.forward",
        attributes={
            KIND: "CHAIN",
            "input.value": json.dumps({"question": mk.QUESTION}),
            "output.value": json.dumps({"answer": mk.GOOD}),
        },
    ):
        with tracer.start_as_current_span(
            "Retrieve.forward",
            attributes={
                KIND: "RETRIEVER",
                "input.value": json.dumps({"query_or_queries": mk.QUESTION}),
                "metadata": metadata,
                **_documents("retrieval.documents", outer),
            },
        ):
            if inner is not None:
                with tracer.start_as_current_span(
                    "ColBERTv2.__call__",
                    attributes={
                        KIND: "RETRIEVER",
                        "input.value": json.dumps({"query": mk.QUESTION, "k": 2}),
                        "metadata": metadata,
                        **_documents("retrieval.documents", inner),
                    },
                ):
                    pass
        context = "\n\n".join(d["content"] for d in outer if "content" in d)
        with tracer.start_as_current_span(
            "LM.__call__",
            attributes={
                KIND: "LLM",
                "llm.model_name": "gpt-4.1-mini",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "Answer from the context.",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": f"Context:\n{context}\n\nQuestion: {mk.QUESTION}",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": mk.GOOD,
            },
        ):
            pass
    provider.shutdown()
    return list(decode_protobuf(encode_spans(exporter.get_finished_spans()).SerializeToString()).spans)


def manifest(mk: ModuleType, **v2: Any) -> list[ManifestEntry]:
    return [
        mk.v1_entry(content=mk.V1_TEXT),
        mk.entry(**v2),
        mk.entry(doc_id="C-12/contract", version="v1", content=OTHER_TEXT),
    ]


def triage(mk: ModuleType, record: TaskRecord, entries: list[ManifestEntry]) -> Localization:
    return localize(record, mk.ticket(), entries)


def test_dspy_outer_retrieve_with_text_and_inner_client_with_ids_is_one_retrieval(mk: ModuleType) -> None:
    # The confident wrong verdict: the outer span's documents (text, no ids) hid the inner
    # span's ids, and with the filter and principal recorded triage said not_retrieved (rank) for
    # the document ranked first. The two levels are one retrieval, joined by text.
    record = dspy_trace(
        mk,
        outer=[{"content": mk.V2_TEXT}, {"content": OTHER_TEXT}],
        inner=[
            {"id": "C-17/attachment@v2", "content": mk.V2_TEXT, "score": 23.1},
            {"id": "C-12/contract@v1", "content": OTHER_TEXT, "score": 11.4},
        ],
    )
    (call,) = record.retrievals
    assert [(d.doc_id, d.score, d.position) for d in call.documents] == [
        ("C-17/attachment@v2", 23.1, 0),
        ("C-12/contract@v1", 11.4, 1),
    ]
    loc = triage(mk, record, manifest(mk))
    assert loc.verdict == "no_fault"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "pass"]
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)


def test_retriever_ids_are_mapped_to_versions_by_the_manifest_ids(mk: ModuleType) -> None:
    record = dspy_trace(
        mk,
        outer=[{"content": mk.V2_TEXT}, {"content": OTHER_TEXT}],
        inner=[{"id": 88, "content": mk.V2_TEXT, "score": 23.1}, {"id": 12, "content": OTHER_TEXT}],
    )
    entries = [mk.v1_entry(ids=[87]), mk.entry(ids=[88, 89]), mk.entry(doc_id="C-12/contract", ids=[12])]
    loc = triage(mk, record, entries)
    assert loc.verdict == "no_fault"
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)


def test_unidentified_returned_documents_leave_retrieved_unconfirmed_never_rank(mk: ModuleType) -> None:
    # Passage ids the manifest does not list, text the manifest does not hold: the first document
    # may be the material, so "not returned" is not concluded although filter and ACL pass.
    record = dspy_trace(
        mk,
        outer=[{"content": mk.V2_TEXT}, {"content": OTHER_TEXT}],
        inner=[{"id": 88, "content": mk.V2_TEXT}, {"id": 12, "content": OTHER_TEXT}],
    )
    loc = triage(mk, record, [mk.v1_entry(), mk.entry()])
    assert loc.verdict == "unconfirmed"
    retrieved = loc.stages[1]
    assert retrieved.status == "unconfirmed"
    assert retrieved.cause is None
    assert "could not be identified" in retrieved.detail
    # missing names each unidentified document and what would identify it — not the filter/principal.
    assert len(retrieved.missing) == 2
    assert "rank 1" in retrieved.missing[0]
    assert "'88'" in retrieved.missing[0]
    assert "ids" in retrieved.missing[0]
    assert "content" in retrieved.missing[0]
    assert not any("filter" in item or "principal" in item for item in retrieved.missing)


@pytest.mark.parametrize("with_content", [True, False])
def test_returned_text_without_ids_is_identified_by_manifest_content(
    mk: ModuleType, with_content: bool
) -> None:
    # A custom retrieval function: text only, no inner span, no ids anywhere.
    record = dspy_trace(mk, outer=[{"content": mk.V2_TEXT}, {"content": OTHER_TEXT}], inner=None)
    entries = manifest(mk, content=mk.V2_TEXT) if with_content else [mk.v1_entry(), mk.entry()]
    loc = triage(mk, record, entries)
    if with_content:
        assert loc.verdict == "no_fault"
        assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)
    else:
        assert loc.verdict == "unconfirmed"
        assert loc.stages[1].status == "unconfirmed"
        assert all("content" in item for item in loc.stages[1].missing)


def test_text_held_by_two_versions_names_the_document_not_the_version(mk: ModuleType) -> None:
    shared = "Prepayment terms are set out per order in the payment schedule of this attachment."
    record = dspy_trace(mk, outer=[{"content": shared}], inner=None)
    entries = [
        mk.v1_entry(content=f"{mk.V1_TEXT} {shared}"),
        mk.entry(content=f"{mk.V2_TEXT} {shared}"),
    ]
    loc = triage(mk, record, entries)
    assert loc.verdict == "unconfirmed"
    assert "version was not recorded" in loc.stages[1].detail


@pytest.mark.parametrize(
    ("records", "is_retrieval"),
    [
        ([{"doc_id": "C-17/attachment", "version": "v2", "text": "…"}], True),
        ([{"id": "C-17/attachment@v2"}], True),
        ([{"id": "chunk-88", "text": "…"}], True),  # an id the manifest entry's ids list
        ([{"doc_id": "C-17/attachment", "status": "open"}], False),  # no version: could be an order
        ([{"id": "ORD-7", "total": 40000}], False),
    ],
)
def test_a_tool_is_a_retrieval_when_its_result_names_manifest_document_versions(
    mk: ModuleType, records: list[dict[str, Any]], is_retrieval: bool
) -> None:
    from tests.normalize.test_conventions import root, span

    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.result": json.dumps(records),
    }
    record = normalize([root(), span("b1", tool)])
    assert record.retrievals == ()
    identified = identify(record, [mk.v1_entry(), mk.entry(ids=["chunk-88"])])
    assert bool(identified.retrievals) is is_retrieval
    if is_retrieval:
        assert [(d.doc_id, d.version) for d in identified.retrievals[0].documents] in (
            [("C-17/attachment", "v2")],
            [("C-17/attachment@v2", None)],
        )


# The policy index of tests/fixtures/traces/record_llamaindex.py (CORPUS), as a manifest with content.
POLICY = [
    ("C-17/attachment", "v1", "CN", "Contract C-17 with supplier Hengda, attachment v1 (2025). {v1}"),
    ("C-17/attachment", "v2", "EU", "Attachment v2, effective 2026-03-01, replaces v1. {v2}"),
    ("C-17/main", "v3", "CN", "Contract C-17 main terms. Payment terms: net 30 days after delivery."),
    (
        "C-09/framework",
        "v1",
        "CN",
        "Framework agreement C-09 with Lianfa: deliveries are due within ten days.",
    ),
]


@pytest.mark.parametrize(
    ("run", "verdict"),
    [
        ("rag", "no_fault"),
        ("ignored", "ignored_by_model"),
        ("dropped", "dropped_in_context"),
        ("filtered", "filtered"),
    ],
)
def test_recorded_dspy_passages_are_identified_by_manifest_content(
    mk: ModuleType, run: str, verdict: str
) -> None:
    # openinference-instrumentation-dspy: the outer Retrieve records passage text, the inner client
    # span ColBERT-style passage ids (42, 41) that no manifest lists: the text identifies the versions.
    from tracejudge_collectors.otel import read_otlp_file

    v1, v2 = (
        "Prepayment shall not exceed 50,000 RMB per order.",
        "Prepayment shall not exceed 30,000 RMB per order.",
    )
    base = {(e.doc_id, e.version): e for e in mk.recorded_manifest("EU")}
    entries = [
        (
            base.get((doc_id, version))
            or mk.entry(doc_id=doc_id, version=version, metadata={"region": region})
        ).model_copy(update={"content": text.format(v1=v1, v2=v2)})
        for doc_id, version, region, text in POLICY
    ]
    record = normalize(list(read_otlp_file(mk.RECORDED / f"dspy_{run}.pb")))
    loc = localize(record, mk.ticket(), entries)
    assert loc.verdict == verdict
    without_content = localize(record, mk.ticket(), [e.model_copy(update={"content": None}) for e in entries])
    # Without the text the passages cannot be identified: never "not returned", at most unconfirmed.
    assert without_content.verdict in (verdict, "unconfirmed")
