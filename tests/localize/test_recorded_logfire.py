"""Triage over a hand-written RAG app on the OpenAI SDK instrumented by Pydantic Logfire
(``logfire.instrument_openai``): the retrieval is a ``logfire.span`` carrying the OTel GenAI retrieval
attributes (chunk ids and scores; the manifest's ``ids`` map them), the excerpts are in the system message
and the question is the user message. Fixtures from tests/fixtures/traces/record_logfire.py (the app and its
runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(f"logfire_{run}.pb", mk.policy_manifest("EU", ids="chunk"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_the_question_is_the_user_message_and_the_answer_the_completion(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("logfire_rag.pb"))
    assert record.input == "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
    [call] = record.model_calls
    assert record.final_answer == call.output_text
    assert "Prepayment shall not exceed 30,000 RMB" in (call.system_instructions or call.input_text)
