"""The example agent: its retriever, context builder, ids and the trace it writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracejudge._demo import load_example
from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan
from tracejudge.testing.openai_server import ScriptedOpenAIServer
from tracejudge_collectors.otel import decode_protobuf

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "procurement"
NOV = datetime(2026, 11, 18, 9, 30, tzinfo=UTC)
QUESTION = "What is the prepayment cap for Huadong Steel under contract C-17?"


@pytest.fixture(scope="module")
def ex() -> ModuleType:
    return load_example(EXAMPLE)


@pytest.fixture(scope="module")
def agent(ex: ModuleType) -> ModuleType:
    return ex.agent  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def docs(agent: ModuleType) -> list[Any]:
    return agent.load_documents(EXAMPLE / "manifest.jsonl")  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def model(ex: ModuleType) -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(ex.model_rules()) as server:
        yield server


def _keys(hits: Any) -> list[str]:
    return [h.doc.key for h in hits]


def test_index_holds_what_was_ingested_by_the_task_time(agent: ModuleType, docs: list[Any]) -> None:
    before = agent.Retriever(docs, as_of=datetime(2026, 3, 1, 15, tzinfo=UTC))
    after = agent.Retriever(docs, as_of=NOV)
    assert "C-17/attachment@v2" not in [d.key for d in before.documents]
    assert "C-17/attachment@v2" in [d.key for d in after.documents]


def test_candidates_record_why_each_document_was_not_returned(agent: ModuleType, docs: list[Any]) -> None:
    r = agent.Retriever(docs, as_of=NOV)
    by_filter = r.retrieve(QUESTION, principal="procurement", flt={"region": "EU"}, top_k=4)
    assert _keys(by_filter.hits) == ["C-30/attachment@v1"]
    why = {(c["doc_id"], c["version"]): c["excluded_by"] for c in by_filter.candidates}
    assert why[("C-17/attachment", "v2")] == "filter"
    assert why[("C-30/attachment", "v1")] is None

    by_acl = r.retrieve(QUESTION, principal="sales", flt={"region": "CN"}, top_k=4)
    why = {(c["doc_id"], c["version"]): c["excluded_by"] for c in by_acl.candidates}
    assert why[("C-17/attachment", "v2")] == "permission"
    assert "C-17/attachment@v1" in _keys(by_acl.hits)

    by_rank = r.retrieve(QUESTION, principal="procurement", flt={"region": "CN"}, top_k=2)
    assert _keys(by_rank.hits) == ["C-17/attachment@v1", "C-17/contract@v1"]
    why = {(c["doc_id"], c["version"]): c["excluded_by"] for c in by_rank.candidates}
    assert why[("C-17/attachment", "v2")] == "rank"


def test_filter_operators(agent: ModuleType) -> None:
    meta = {"region": "CN", "type": "attachment"}
    assert agent.matches_filter(meta, {"region": {"$in": ["CN", "HK"]}})
    assert not agent.matches_filter(meta, {"region": {"$ne": "CN"}})
    assert not agent.matches_filter(meta, {"type": "contract"})
    assert agent.matches_filter(meta, None)


def test_context_builder_drops_what_does_not_fit_and_cuts_the_overflowing_document(
    agent: ModuleType, docs: list[Any]
) -> None:
    r = agent.Retriever(docs, as_of=NOV)
    hits = r.retrieve(QUESTION, principal="procurement", flt={"region": "CN"}, top_k=4).hits
    full = agent.build_context(hits, 4000)
    assert full.dropped == ()
    assert "Prepayment shall not exceed 30,000 RMB" in full.text

    tight = agent.build_context(hits, 700)
    assert tight.included == ("C-17/attachment@v1", "C-17/contract@v1")
    assert tight.dropped == ("C-17/attachment@v2", "POL-4/policy@v3")
    assert "30,000" not in tight.text
    assert len(tight.text) <= 700

    cut = agent.build_context(hits, 900)
    assert "C-17/attachment@v2" in cut.cut
    assert "C-17/attachment@v2" in cut.included
    assert len(cut.text) <= 900 + len(cut.included)


def test_fixed_trace_ids_repeat_across_runs(agent: ModuleType) -> None:
    ids = agent.FixedTraceIds()
    with ids.use("4bf92f3577b34da6a3ce929d0e0e4736"):
        first = [ids.generate_trace_id(), ids.generate_span_id(), ids.generate_span_id()]
    with ids.use("4bf92f3577b34da6a3ce929d0e0e4736"):
        second = [ids.generate_trace_id(), ids.generate_span_id(), ids.generate_span_id()]
    assert first == second
    assert first[0] == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert first[1] != first[2]
    assert ids.generate_trace_id() != first[0]


def _run(
    ex: ModuleType, model: ScriptedOpenAIServer, name: str, **kw: Any
) -> tuple[str, list[ReadableSpan], list[RawSpan]]:
    (sc,) = [s for s in ex.load_scenarios(EXAMPLE) if s.name == name]
    exporter = InMemorySpanExporter()
    (run,) = ex.run_scenarios([sc], openai_base_url=model.base_url, exporter=exporter, **kw)
    spans = list(exporter.get_finished_spans())
    assert run.span_count == len(spans)
    raw = decode_protobuf(encode_spans(spans).SerializeToString()).spans
    return run.answer, spans, list(raw)


def _by_kind(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {str((s.attributes or {}).get("openinference.span.kind")): s for s in spans}


def test_trace_carries_what_tracejudge_reads(ex: ModuleType, model: ScriptedOpenAIServer) -> None:
    answer, spans, raw = _run(ex, model, "dropped-in-context")
    assert "50,000" in answer
    kinds = _by_kind(spans)
    assert set(kinds) == {"AGENT", "RETRIEVER", "CHAIN", "LLM"}
    assert {f"{s.context.trace_id:032x}" for s in spans} == {"5f02b3133bd703c82292085da976fb50"}

    ret = kinds["RETRIEVER"].attributes or {}
    assert json.loads(str(ret["tracejudge.retrieval.filter"])) == {"region": "CN"}
    assert ret["tracejudge.retrieval.principal"] == "procurement"
    candidates = json.loads(str(ret["tracejudge.retrieval.candidates"]))
    assert {"doc_id", "version", "score", "excluded_by"} <= set(candidates[0])
    meta = json.loads(str(ret["retrieval.documents.2.document.metadata"]))
    assert (meta["doc_id"], meta["version"]) == ("C-17/attachment", "v2")

    ctx = kinds["CHAIN"].attributes or {}
    assert json.loads(str(ctx["tracejudge.context.dropped"])) == ["C-17/attachment@v2", "POL-4/policy@v3"]
    assert ctx["tracejudge.context.budget"] == 700

    task = normalize(raw)
    assert task.final_answer == answer
    assert [d.version for d in task.retrievals[0].documents if d.doc_id == "C-17/attachment"] == ["v1", "v2"]
    assert task.context_assemblies[0].dropped == ("C-17/attachment@v2", "POL-4/policy@v3")
    (call,) = task.model_calls
    assert call.input_recorded
    assert "shall not exceed 50,000" in call.input_text
    assert "shall not exceed 30,000" not in call.input_text


def test_capture_off_records_no_model_input(ex: ModuleType, model: ScriptedOpenAIServer) -> None:
    _, spans, raw = _run(ex, model, "capture-off")
    llm = _by_kind(spans)["LLM"].attributes or {}
    assert not any(k.startswith("llm.input_messages") for k in llm)
    assert "output.value" not in (_by_kind(spans)["CHAIN"].attributes or {})
    (call,) = normalize(raw).model_calls
    assert not call.input_recorded
    assert "30,000" not in call.input_text


def test_hand_written_llm_span_without_the_instrumentor(ex: ModuleType, model: ScriptedOpenAIServer) -> None:
    answer, spans, raw = _run(ex, model, "ignored-by-model", use_instrumentor=False)
    llm = _by_kind(spans)["LLM"]
    assert llm.instrumentation_scope is not None
    assert llm.instrumentation_scope.name == "procurement-agent"
    (call,) = normalize(raw).model_calls
    assert call.model == "gpt-4.1-nano"
    assert "shall not exceed 30,000" in call.input_text
    assert call.output_text == answer


def test_reruns_send_identical_span_ids(ex: ModuleType, model: ScriptedOpenAIServer) -> None:
    _, first, _ = _run(ex, model, "no-fault")
    _, second, _ = _run(ex, model, "no-fault")
    assert sorted(s.context.span_id for s in first) == sorted(s.context.span_id for s in second)


def test_the_scripted_model_answers_from_its_input(ex: ModuleType, model: ScriptedOpenAIServer) -> None:
    answers = {}
    for name in ("no-fault", "filtered-region", "ignored-by-model"):
        answers[name], _, _ = _run(ex, model, name)
    assert "30,000" in answers["no-fault"]
    assert "do not state" in answers["filtered-region"]
    assert "50,000" in answers["ignored-by-model"]
