"""Triage over a CAMEL ``ChatAgent`` (``OpenAICompatibleModel``, a ``FunctionTool`` search) whose model
calls are traced by openinference-instrumentation-openai: CAMEL has no OpenTelemetry tracing of its own, so
the app records the run as a CHAIN root and the search, inside the tool, as a span with the OTel GenAI
retrieval attributes (``gen_ai.retrieval.documents`` as the index's chunk ids and scores, no text; the
manifest's ``ids`` map them). Fixtures from tests/fixtures/traces/record_camel.py (recorded offline with
tiktoken's ``o200k_base`` from LiteLLM's wheel; the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "camel_{run}.pb"
# run -> (verdict, cause, stage statuses) under the recordings' index with the retriever's chunk ids
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(FILE.format(run=run), mk.policy_manifest("EU", ids="chunk"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_never_indexed_is_told_by_the_manifest_not_the_trace(mk: ModuleType) -> None:
    never = FILE.format(run="never_indexed")
    loc = mk.triage_framework(never, mk.never_indexed_manifest(ids="chunk"))
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])
    assert "never indexed" in loc.stages[0].evidence[0].note
    loc = mk.triage_framework(never, mk.policy_manifest("EU", ids="chunk"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])


@pytest.mark.parametrize("run", list(RUNS))
def test_chunk_ids_alone_identify_nothing_without_the_manifests_ids(mk: ModuleType, run: str) -> None:
    loc = mk.triage_framework(FILE.format(run=run), mk.policy_manifest("EU"))
    if run == "filtered":
        # v2 is not among the returned ids and the filter excludes it: the filter is the cause either way
        assert (loc.verdict, loc.cause) == ("filtered", "filter")
    else:
        assert loc.verdict == "unconfirmed"
        assert any("chunk-042" in item for item in loc.stages[1].missing)


def test_the_question_the_tool_call_and_the_answer(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans(FILE.format(run="rag")))
    assert record.input == "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
    [retrieval] = record.retrievals
    assert [d.doc_id for d in retrieval.documents] == ["chunk-042", "chunk-041"]
    first, last = record.model_calls
    assert [c["name"] for m in first.output_messages for c in m.tool_calls] == ["search_documents"]
    assert record.final_answer == last.output_text
    assert "Prepayment shall not exceed 30,000 RMB per order." in last.input_text
