"""Triage on record_crewai.py's crew under OpenLLMetry (record_crewai_openllmetry.py:
opentelemetry-instrumentation-crewai and -openai 0.62.4). The instrumentation records the crew, the task and
the agent, the OpenAI one each model request — and nothing records the tool: the search's result reaches the
model as a tool message, but no span says what the search returned. So no run gets a retrieval verdict: every
one is ``unconfirmed``, the gap naming the retrieval span to record (where the same crew under OpenInference,
whose CrewAI instrumentation records tool spans, gets each fault: test_recorded_frameworks.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

RUNS = ("rag", "ignored", "filtered", "dropped")


@pytest.mark.parametrize("run", RUNS)
def test_no_span_records_the_search_so_no_verdict(mk: ModuleType, run: str) -> None:
    spans = mk.recorded_spans(f"crewai_openllmetry_{run}.pb")
    record = mk.normalize(spans)
    # the model asked for the tool and was sent its result, but no span is the tool's
    assert record.tool_calls == ()
    assert any('"tool_call"' in str(s.attributes.get("gen_ai.output.messages", "")) for s in spans)
    assert [g.kind for g in record.gaps] == ["no_retrieval_span"]
    loc = mk.triage_framework(f"crewai_openllmetry_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    [missing] = loc.stages[1].missing
    assert missing.startswith("a retrieval span")
