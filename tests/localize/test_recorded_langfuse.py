"""Triage on the Langfuse Python SDK's own tracing, as the SDK exports it to Langfuse's OTLP endpoint — every
span a Langfuse observation (``langfuse.observation.type``, ``.input``, ``.output``, ``.metadata.*``), no
OpenInference or GenAI attribute: ``@observe`` functions and Langfuse's drop-in OpenAI client
(record_langfuse.py), and a LangChain ``create_agent`` traced by Langfuse's LangChain ``CallbackHandler``
(record_langfuse_langchain.py). The five runs' verdicts are in test_recorded_five_runs.py's table; here what
is particular to them.
"""

from __future__ import annotations

import json
from types import ModuleType

from tracejudge.normalize import normalize


def test_the_retriever_observation_is_a_retrieval_without_a_manifest(mk: ModuleType) -> None:
    # ``@observe(as_type="retriever")`` types the search: its output's doc_id/version are documents even
    # when no manifest says which documents exist, and v2 came first.
    loc = mk.triage_framework("langfuse_rag.pb", None)
    assert (loc.verdict, mk.statuses(loc)) == ("no_fault", ["pass", "pass", "pass", "pass"])
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)


def test_the_generation_input_with_tools_is_what_the_model_was_sent(mk: ModuleType) -> None:
    # Langfuse's OpenAI client records the request as {"tools": [...], "messages": [...]}: the last model
    # call's input holds the search's result (v1 only after the budget cut), so the cut is found in context.
    spans = mk.recorded_spans("langfuse_dropped.pb")
    inputs = [s.attributes["langfuse.observation.input"] for s in spans if s.name == "OpenAI-generation"]
    assert all('"tools"' in text and '"messages"' in text for text in inputs)
    loc = mk.triage_framework("langfuse_dropped.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("dropped_in_context", ["pass", "pass", "fail", "skipped"])


def test_the_filter_in_the_observation_metadata_is_replayed(mk: ModuleType) -> None:
    # The search set its filter with ``langfuse.update_current_span(metadata=...)``: read from
    # ``langfuse.observation.metadata.tracejudge.retrieval.filter``. Had v2 been in the CN index, the filter
    # would have let it through: then it was lost on rank.
    loc = mk.triage_framework("langfuse_filtered.pb", mk.policy_manifest("CN"))
    assert (loc.verdict, loc.cause) == ("not_retrieved", "rank")


def test_the_handlers_tool_observation_result_is_the_tool_messages_content(mk: ModuleType) -> None:
    # The CallbackHandler's tool observation holds the ToolMessage's fields: its ``content`` (the documents as
    # JSON text) is the tool's result, which names the manifest's documents: the search is the retrieval.
    spans = mk.recorded_spans("langfuse_langchain_rag.pb")
    [tool] = [s for s in spans if s.attributes.get("langfuse.observation.type") == "tool"]
    output = json.loads(tool.attributes["langfuse.observation.output"])
    call_id = json.loads(tool.attributes["langfuse.observation.metadata.tool_call_id"])
    assert (output["type"], output["tool_call_id"]) == ("tool", call_id)
    loc = mk.triage_framework("langfuse_langchain_rag.pb", mk.policy_manifest("EU"))
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)
    # Untyped, a tool is a retrieval only by what its result names: without a manifest, no verdict.
    assert mk.triage_framework("langfuse_langchain_rag.pb", None).verdict == "unconfirmed"


def test_the_handlers_tool_declarations_are_not_messages_without_content(mk: ModuleType) -> None:
    # The handler appends the request's tool definitions to each generation's input as role "tool" items whose
    # content is the definition: not messages, so the input is not partly recorded and the cut is found.
    spans = mk.recorded_spans("langfuse_langchain_dropped.pb")
    generations = [s for s in spans if s.attributes.get("langfuse.observation.type") == "generation"]
    for span in generations:
        declared = [
            m for m in json.loads(span.attributes["langfuse.observation.input"]) if m["role"] == "tool"
        ]
        assert any(isinstance(m["content"], dict) and m["content"]["type"] == "function" for m in declared)
    calls = normalize(spans).model_calls
    assert len(calls) == 2
    assert not any(call.input_partial for call in calls)
    loc = mk.triage_framework("langfuse_langchain_dropped.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("dropped_in_context", ["pass", "pass", "fail", "skipped"])
