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


@pytest.mark.parametrize("run", ["rag", "ignored", "filtered", "dropped"])
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
