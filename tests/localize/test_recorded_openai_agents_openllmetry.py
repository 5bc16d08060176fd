"""Triage on the OpenAI Agents SDK traced by OpenLLMetry's opentelemetry-instrumentation-openai-agents alone
(record_openai_agents_openllmetry.py, ``alone``): with the chat-completions model it records each model call's
input but not its output, and no span holds the answer. Whether the model used the clause is then not in the
trace — ``unconfirmed``, naming the last model call's output — while the faults the model's input or the
search settle stay definite. With opentelemetry-instrumentation-openai beside it (the table of
test_recorded_five_runs.py) every fault gets its verdict.
"""

from __future__ import annotations

from types import ModuleType

import pytest

# run -> (verdict, cause, stage statuses) under the recordings' index (v2 indexed, in the EU)
RUNS = {
    "rag": ("unconfirmed", None, ["pass", "pass", "pass", "unconfirmed"]),
    "ignored": ("unconfirmed", None, ["pass", "pass", "pass", "unconfirmed"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
    "never_indexed": ("unconfirmed", None, ["pass", "unconfirmed", "skipped", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_without_the_model_output_the_answer_is_unconfirmed(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(f"openai_agents_openllmetry_alone_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)
    if statuses[3] == "unconfirmed":
        assert any(item.startswith("output of model span") for item in loc.stages[3].missing)


def test_never_indexed_is_told_by_the_manifest(mk: ModuleType) -> None:
    loc = mk.triage_framework("openai_agents_openllmetry_alone_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])


@pytest.mark.parametrize("run", ["rag", "ignored"])
def test_a_search_after_the_last_recorded_model_call_leaves_in_context_unconfirmed(
    mk: ModuleType, run: str
) -> None:
    # Without the call that read the tool's result, the one model call left started before the search: its
    # input never could have held the documents, so "not in the model input" would be a wrong verdict.
    spans = mk.recorded_spans(f"openai_agents_openllmetry_alone_{run}.pb")
    last = max((s for s in spans if s.name == "openai.response"), key=lambda s: s.start_time_unix_nano)
    loc = mk.localize(
        mk.normalize([s for s in spans if s is not last]), mk.ticket(), mk.policy_manifest("EU")
    )
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
    assert any("started after the last recorded model call" in item for item in loc.stages[2].missing)
