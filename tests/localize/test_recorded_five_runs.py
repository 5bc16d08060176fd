"""The recordings with five runs — the four faults of _policy.py and ``never_indexed`` (an index without
attachment v2) — in one table, a row per recording; what is particular to a framework (how it records the
search, the answer, the filter) stays in its own ``test_recorded_<framework>.py``. The manifest is the
recordings' index (conftest ``policy_manifest``), with the retriever's chunk ids where a recording identifies
documents by them alone.
"""

from __future__ import annotations

from types import ModuleType

import pytest

# recording -> (file pattern, the manifest's retriever ids: "chunk" where the trace records chunk ids only)
RECORDINGS = {
    "langroid": ("langroid_{run}.pb", None),
    "camel": ("camel_{run}.pb", "chunk"),
    "pydantic_ai_openinference": ("pydantic_ai_openinference_{run}.pb", None),
    "instructor": ("instructor_{run}.pb", "chunk"),
    "langchain_agent": ("langchain_agent_{run}.pb", None),
    "burr": ("burr_{run}.pb", None),
    "qwen_agent": ("qwen_agent_{run}.pb", None),
    "atomic_agents": ("atomic_agents_{run}.pb", None),
    "mlflow": ("mlflow_{run}.pb", None),
    "openai_agents_openllmetry": ("openai_agents_openllmetry_{run}.pb", None),
    "openlit": ("openlit_{run}.pb", None),
    "agentops": ("agentops_{run}.pb", None),
    "openlit_agents": ("openlit_agents_{run}.pb", None),
    "openlit_langchain": ("openlit_langchain_{run}.pb", "chunk"),
    "langfuse": ("langfuse_{run}.pb", None),
    "langfuse_langchain": ("langfuse_langchain_{run}.pb", None),
    "llamaindex_agent": ("llamaindex_agent_{run}.pb", None),
    "langchain_agent_openllmetry": ("langchain_agent_openllmetry_{run}.pb", None),
    "chroma": ("chroma_{run}.pb", None),
    "milvus": ("milvus_{run}.pb", None),
    "langchain_chroma": ("langchain_chroma_{run}.pb", None),
    "llamaindex_chroma": ("llamaindex_chroma_{run}.pb", None),
}
# recording -> where it records the filter, where not the ``tracejudge.retrieval.filter`` span attribute
FILTER_KEYS = {
    "langfuse": "langfuse.observation.metadata.tracejudge.retrieval.filter",
    "langfuse_langchain": "langfuse.observation.metadata.tracejudge.retrieval.filter",
    "chroma": "db.chroma.query.where",
    "milvus": "db.milvus.search.filter",
    "langchain_chroma": "db.chroma.query.where",
    "llamaindex_chroma": "db.chroma.query.where",
}
# run -> (verdict, cause, stage statuses) under the recordings' index (v2 indexed, in the EU)
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("recording", list(RECORDINGS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, recording: str, run: str) -> None:
    pattern, ids = RECORDINGS[recording]
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(pattern.format(run=run), mk.policy_manifest("EU", ids=ids))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


@pytest.mark.parametrize("recording", list(RECORDINGS))
def test_never_indexed_is_told_by_the_manifest_not_the_trace(mk: ModuleType, recording: str) -> None:
    pattern, ids = RECORDINGS[recording]
    never = pattern.format(run="never_indexed")
    # The index never held v2: the search returned v1 and the main terms, with no filter.
    loc = mk.triage_framework(never, mk.never_indexed_manifest(ids=ids))
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])
    assert "never indexed" in loc.stages[0].evidence[0].note
    # Under a manifest that says v2 was indexed, the trace cannot tell rank from a filter nobody recorded.
    loc = mk.triage_framework(never, mk.policy_manifest("EU", ids=ids))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)


@pytest.mark.parametrize("recording", list(RECORDINGS))
def test_the_recorded_filter_is_needed(mk: ModuleType, recording: str) -> None:
    pattern, ids = RECORDINGS[recording]
    spans = mk.recorded_spans(pattern.format(run="filtered"))
    key = FILTER_KEYS.get(recording, "tracejudge.retrieval.filter")
    assert any(key in s.attributes for s in spans)
    loc = mk.localize(
        mk.normalize(mk.drop_attribute(spans, key)),
        mk.ticket(),
        mk.policy_manifest("EU", ids=ids),
    )
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)
