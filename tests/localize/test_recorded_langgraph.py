"""Triage over a LangGraph retrieve/generate graph traced by openinference-instrumentation-langchain.
Fixtures from tests/fixtures/traces/record_langgraph.py (the app and its runs: _policy.py). The retriever
span records the documents' content and metadata (``doc_id``, ``version``, ``region``); the filter and the
principal reach it through the invoke config's metadata; the graph root's output is the whole final
state (question, documents, messages), which is not the answer.
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "langgraph_{run}.pb"
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
    "permission": ("filtered", "permission", ["pass", "fail", "skipped", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(FILE.format(run=run), mk.policy_manifest("EU", acl=run == "permission"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


@pytest.mark.parametrize("run", ["rag", "ignored"])
def test_the_answer_is_the_models_reply_not_the_graph_state(mk: ModuleType, run: str) -> None:
    # The root's output holds both versions' text (the retrieved documents) and the messages: read as
    # the answer it would state both values, and a right answer could not be told from a stale one.
    record = mk.normalize(mk.recorded_spans(FILE.format(run=run)))
    root = next(s for s in record.spans if s.parent_span_id is None)
    assert root.name == "LangGraph"
    assert record.final_answer == record.model_calls[-1].output_text
    assert record.final_answer is not None
    assert record.final_answer.startswith("No:" if run == "rag" else "Yes:")


def test_the_principal_is_replayed_against_the_acl(mk: ModuleType) -> None:
    # Without ACLs in the manifest nothing shows why v2 is missing: no verdict, and the ACL is asked for.
    loc = mk.triage_framework(FILE.format(run="permission"), mk.policy_manifest("EU"))
    assert loc.verdict == "unconfirmed"
    # v2 readable by the principal: the ACL did not exclude it, but the retrieval recorded no filter, so
    # an unrecorded filter cannot be told from rank.
    entries = [
        e.model_copy(update={"acl": ("buyer-cn", "buyer-eu")}) for e in mk.policy_manifest("EU", acl=True)
    ]
    loc = mk.triage_framework(FILE.format(run="permission"), entries)
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)
