"""Triage over an Agno agent traced by OpenInference's and by OpenLLMetry's Agno instrumentation. The four
faults, the unmarked tool and the filter replay are in test_recorded_frameworks.py (rows
``agno_openinference`` and ``agno_openllmetry``). Fixtures from tests/fixtures/traces/record_agno.py (the
app and its runs: _policy.py); the manifest is the recordings' index with each version's ``content``
(conftest ``policy_manifest``).
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "agno_openllmetry_{run}.pb"


@pytest.mark.parametrize("run", ["ignored", "dropped"])
def test_openllmetry_agno_alone_records_no_model_call_and_the_gap_names_the_client_instrumentation(
    mk: ModuleType, run: str
) -> None:
    # opentelemetry-instrumentation-agno makes agent and tool spans only: without OpenLLMetry's OpenAI
    # instrumentation nothing shows what the model was sent, so neither fault can be told.
    spans = [s for s in mk.recorded_spans(FILE.format(run=run)) if s.name != "openai.chat"]
    record = mk.normalize(spans)
    loc = mk.localize(record, mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
    assert any(
        "opentelemetry-instrumentation-openai" in g.detail for g in record.gaps if g.kind == "no_model_span"
    )


def test_openllmetry_without_content_no_verdict_and_the_gap_names_traceloop_trace_content(
    mk: ModuleType,
) -> None:
    # TRACELOOP_TRACE_CONTENT=false records no entity input/output and no messages.
    spans = mk.recorded_spans(FILE.format(run="dropped"))
    for key in (
        "traceloop.entity.input",
        "traceloop.entity.output",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
    ):
        spans = mk.drop_attribute(spans, key)
    record = mk.normalize(spans)
    loc = mk.localize(record, mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    assert any(
        "TRACELOOP_TRACE_CONTENT" in g.detail for g in record.gaps if g.kind == "model_input_not_recorded"
    )


def test_a_failed_tool_call_returned_no_documents(mk: ModuleType) -> None:
    # A FunctionExecutionResult with status 'failure' has no result: the tool span is no retrieval, and
    # nothing else in the trace recorded the documents the model saw as a retrieval.
    spans = [
        s.model_copy(
            update={
                "attributes": {
                    **s.attributes,
                    "traceloop.entity.output": "status='failure' result=None error='index unavailable'",
                }
            }
        )
        if s.name == "search_documents.tool"
        else s
        for s in mk.recorded_spans(FILE.format(run="rag"))
    ]
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    # the recorded run itself is no fault
    assert mk.triage_framework(FILE.format(run="rag"), mk.policy_manifest("EU")).verdict == "no_fault"
