"""Triage over an Atomic Agents 2 ``AtomicAgent`` with its retrieved documents in a context provider, traced
by its own ``AtomicAgentsInstrumentor`` (TOOL, AGENT and model-attempt spans with GenAI and OpenInference
attributes, no messages) with openinference-instrumentation-instructor and -openai (the structured call and
the model call with its messages). The answering model call sits below Atomic's own model-attempt span under
``instructor.create``; its one tool call is the object Instructor returned (``_instructor.py``). The search
is an Atomic ``BaseTool``: a TOOL span whose result names manifest documents. Fixtures from
tests/fixtures/traces/record_atomic_agents.py (the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "atomic_agents_{run}.pb"
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(FILE.format(run=run), mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_never_indexed_is_told_by_the_manifest_not_the_trace(mk: ModuleType) -> None:
    never = FILE.format(run="never_indexed")
    loc = mk.triage_framework(never, mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])
    loc = mk.triage_framework(never, mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])


def test_the_model_call_below_atomics_attempt_span_wrote_the_answer(mk: ModuleType) -> None:
    spans = mk.recorded_spans(FILE.format(run="dropped"))
    record = mk.normalize(spans)
    [call] = record.model_calls
    assert call.name == "ChatCompletion"
    assert record.final_answer_span_id == call.span_id
    # Atomic's own spans alone record no model input: the context stage cannot be decided
    own = [s for s in spans if s.scope_name == "atomic_agents" or s.name == "answer question"]
    loc = mk.localize(mk.normalize(own), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])


def test_the_filter_recorded_on_the_tool_span_is_needed(mk: ModuleType) -> None:
    spans = mk.recorded_spans(FILE.format(run="filtered"))
    loc = mk.localize(
        mk.normalize(mk.drop_attribute(spans, "tracejudge.retrieval.filter")),
        mk.ticket(),
        mk.policy_manifest("EU"),
    )
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)
