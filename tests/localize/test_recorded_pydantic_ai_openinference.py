"""Triage over the pydantic-ai agent of test_recorded_pydantic_ai.py with
openinference-instrumentation-pydantic-ai's ``OpenInferenceSpanProcessor`` on the provider: every span
carries OpenInference attributes (AGENT / LLM / TOOL kinds, ``llm.*_messages``, ``input.value`` /
``output.value``) beside pydantic-ai's own GenAI ones, as Phoenix receives them. The search is a TOOL
span, not a RETRIEVER: its result is read as a retrieval because it names documents of the manifest.
Fixtures from tests/fixtures/traces/record_pydantic_ai_openinference.py (the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "pydantic_ai_openinference_{run}.pb"


@pytest.mark.parametrize("run", ["rag", "ignored", "filtered", "dropped"])
def test_the_openinference_attributes_read_as_the_genai_ones_do(mk: ModuleType, run: str) -> None:
    # The processor adds attributes and takes none away: each convention alone gives the same record.
    spans = mk.recorded_spans(FILE.format(run=run))
    genai_only = [
        s.model_copy(update={"attributes": {k: v for k, v in s.attributes.items() if not _openinference(k)}})
        for s in spans
    ]
    both, genai = mk.normalize(spans), mk.normalize(genai_only)
    assert both.final_answer == genai.final_answer
    assert [[(d.doc_id, d.version) for d in r.documents] for r in both.retrievals] == [
        [(d.doc_id, d.version) for d in r.documents] for r in genai.retrievals
    ]
    manifest = mk.policy_manifest("EU")
    assert (
        mk.localize(both, mk.ticket(), manifest).verdict == mk.localize(genai, mk.ticket(), manifest).verdict
    )


def _openinference(key: str) -> bool:
    return key.startswith(("llm.", "input.", "output.", "tool.", "tool_call.", "openinference.", "session."))


def test_the_tool_span_is_unmarked_so_without_a_manifest_no_verdict(mk: ModuleType) -> None:
    rag = FILE.format(run="rag")
    record = mk.normalize(mk.recorded_spans(rag))
    assert record.retrievals == ()
    [gap] = [g for g in record.gaps if g.kind == "no_retrieval_span"]
    assert "search_documents" in gap.detail
    assert mk.triage_framework(rag, None).verdict == "unconfirmed"
