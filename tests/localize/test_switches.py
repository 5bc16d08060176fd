"""What triage's ``missing`` asks for names the switch that records it, for the instrumentation that
produced the trace (from the gap normalize wrote for that span)."""

from __future__ import annotations

from types import ModuleType

from tests.normalize.test_conventions import root, span
from tracejudge.localize import localize
from tracejudge.normalize import normalize

OI = "openinference.instrumentation.dspy"


def test_a_hidden_model_input_asks_for_the_instrumentations_switch(mk: ModuleType) -> None:
    retriever = {
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.id": "C-17/attachment@v2",
        "retrieval.documents.0.document.content": mk.V2_TEXT,
    }
    llm = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "__REDACTED__",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": mk.GOOD,
    }
    record = normalize([root(), span("b1", retriever, scope_name=OI), span("b2", llm, scope_name=OI)])
    loc = localize(record, mk.ticket(), [mk.v1_entry(), mk.entry(acl=None)])
    in_context = loc.stages[2]
    assert in_context.status == "unconfirmed"
    (wanted,) = in_context.missing
    assert wanted.startswith("model input of span 00000000000000b2 (redacted; to record it:")
    assert "OPENINFERENCE_HIDE_INPUTS" in wanted


def test_no_retrieval_asks_for_a_marked_retrieval(mk: ModuleType) -> None:
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.messages": '[{"role": "assistant", "content": "x"}]',
    }
    record = normalize([root(), span("b1", chat, scope_name="pydantic-ai")])
    loc = localize(record, mk.ticket(), [mk.v1_entry(), mk.entry()])
    (wanted,) = loc.stages[1].missing
    assert "gen_ai.tool.type = datastore" in wanted
    assert "tracejudge.step = retrieval" in wanted


def test_a_retrieval_that_recorded_no_documents_asks_for_the_instrumentations_switch(mk: ModuleType) -> None:
    search = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_policies",
        "gen_ai.tool.type": "datastore",
    }
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.messages": '[{"role": "assistant", "content": "x"}]',
    }
    scope = "pydantic-ai"
    record = normalize([root(), span("b1", search, scope_name=scope), span("b2", chat, scope_name=scope)])
    loc = localize(record, mk.ticket(), [mk.v1_entry(), mk.entry(acl=None)])
    retrieved = loc.stages[1]
    assert retrieved.status == "unconfirmed"
    wanted = [w for w in retrieved.missing if "documents returned by retrieval span 00000000000000b1" in w]
    assert wanted, retrieved.missing
    assert "; to record it: pass InstrumentationSettings(include_content=True)" in wanted[0]
