"""Triage on the Langfuse Python SDK's own tracing (record_langfuse.py): ``@observe`` functions and Langfuse's
drop-in OpenAI client, as the SDK exports them to Langfuse's OTLP endpoint — every span a Langfuse observation
(``langfuse.observation.type``, ``.input``, ``.output``, ``.metadata.*``), no OpenInference or GenAI
attribute. The five runs' verdicts are in test_recorded_five_runs.py's table; here what is particular to it.
"""

from __future__ import annotations

from types import ModuleType


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
