"""Triage over searches recorded by OpenLLMetry's vector-store instrumentations (real clients in-process:
tests/fixtures/traces/record_{qdrant,lancedb,llamaindex_qdrant}.py; Chroma's and Milvus' recordings, whose
spans record what the search returned and its filter, are rows of test_recorded_five_runs.py).

Qdrant's and LanceDB's instrumentations record neither the filter nor what a search returned. With the app's
``retrieve`` function traced as a traceloop task, its output (the texts) says what came back: the faults the
texts settle get their verdicts, the filter fault stays ``unconfirmed`` (no record says a filter ran). Without
that task nothing says what came back, and every verdict past *indexed* is ``unconfirmed``. Under LlamaIndex
(its OpenLLMetry instrumentation) the Qdrant span sits inside the retriever's, whose nodes say what came back.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.normalize.test_vectorstores import without_task
from tracejudge.schema import Localization

STORES = ("qdrant", "lancedb")
# recordings whose search a span around the store's records: the app's traceloop task, LlamaIndex's retriever
RECORDINGS = (*STORES, "lancedb_text", "llamaindex_qdrant")
UNCONFIRMED = ("unconfirmed", None, ["pass", "unconfirmed", "skipped", "skipped"])
# run -> (verdict, cause, stage statuses) under the recordings' index, with the app's retrieve task
WITH_TASK = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": UNCONFIRMED,
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
    "never_indexed": UNCONFIRMED,
}


def _triage(
    mk: ModuleType, store: str, run: str, *, task: bool = True, never_indexed: bool = False
) -> Localization:
    spans = mk.recorded_spans(f"{store}_{run}.pb")
    manifest = mk.never_indexed_manifest() if never_indexed else mk.policy_manifest("EU")
    return mk.localize(mk.normalize(spans if task else without_task(spans)), mk.ticket(), manifest)


@pytest.mark.parametrize("run", list(WITH_TASK))
@pytest.mark.parametrize("store", RECORDINGS)
def test_the_tasks_output_settles_what_it_holds(mk: ModuleType, store: str, run: str) -> None:
    loc = _triage(mk, store, run)
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == WITH_TASK[run]


@pytest.mark.parametrize("store", RECORDINGS)
def test_the_filter_fault_is_unconfirmed_and_says_the_filter_is_missing(mk: ModuleType, store: str) -> None:
    loc = _triage(mk, store, "filtered")
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)


@pytest.mark.parametrize("store", STORES)
def test_the_region_the_task_was_given_is_no_filter_record(mk: ModuleType, store: str) -> None:
    # The task's own input names the region it was given; that is no record of a filter the store ran.
    assert '"region": "CN"' in str(mk.recorded_spans(f"{store}_filtered.pb"))
    assert _triage(mk, store, "filtered").verdict == "unconfirmed"


@pytest.mark.parametrize("run", list(WITH_TASK))
@pytest.mark.parametrize("store", STORES)
def test_without_the_task_every_verdict_past_indexed_is_unconfirmed(
    mk: ModuleType, store: str, run: str
) -> None:
    loc = _triage(mk, store, run, task=False)
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == UNCONFIRMED
    (documents,) = [item for item in loc.stages[1].missing if item.startswith("the documents returned")]
    assert f"opentelemetry-instrumentation-{store}" in documents


@pytest.mark.parametrize(
    ("store", "task"), [*((s, t) for s in STORES for t in (True, False)), ("llamaindex_qdrant", True)]
)
def test_never_indexed_is_told_by_the_manifest(mk: ModuleType, store: str, task: bool) -> None:
    loc = _triage(mk, store, "never_indexed", task=task, never_indexed=True)
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])


@pytest.mark.parametrize("store", STORES)
def test_the_filter_the_gap_asks_for_settles_the_filter_fault(mk: ModuleType, store: str) -> None:
    # What the gap says to do: the app sets tracejudge.retrieval.filter on its retrieve task's span.
    spans = [
        s.model_copy(
            update={"attributes": {**s.attributes, "tracejudge.retrieval.filter": '{"region": "CN"}'}}
        )
        if s.name == "retrieve.task"
        else s
        for s in mk.recorded_spans(f"{store}_filtered.pb")
    ]
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (
        "filtered",
        "filter",
        ["pass", "fail", "skipped", "skipped"],
    )


def test_llamaindex_over_qdrant_settles_the_filter_given_as_an_association_property(mk: ModuleType) -> None:
    # Traceloop.set_association_properties({"tracejudge.retrieval.filter": ...}) stamps every span after it.
    key = "traceloop.association.properties.tracejudge.retrieval.filter"
    spans = [
        s.model_copy(update={"attributes": {**s.attributes, key: '{"region": "CN"}'}})
        if s.scope_name != "traceloop.tracer"
        else s
        for s in mk.recorded_spans("llamaindex_qdrant_filtered.pb")
    ]
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (
        "filtered",
        "filter",
        ["pass", "fail", "skipped", "skipped"],
    )


@pytest.mark.parametrize(
    ("run", "verdict"),
    [
        ("rag", "no_fault"),
        ("ignored", "ignored_by_model"),
        ("filtered", "filtered"),
        ("dropped", "dropped_in_context"),
    ],
)
def test_a_store_query_under_another_instrumentations_tool_is_that_tools_search(
    mk: ModuleType, run: str, verdict: str
) -> None:
    # A LlamaIndex agent traced by OpenInference (its FunctionTool span records the result and, in filtered,
    # tracejudge.retrieval.filter) whose tool queries Qdrant under OpenLLMetry's Qdrant instrumentation: the
    # recorded qdrant.query_points span, put under the tool's span: one search, not a second one.
    spans = mk.recorded_spans(f"llamaindex_agent_{run}.pb")
    tool = next(s for s in spans if s.name == "FunctionTool.acall")
    (store,) = [s for s in mk.recorded_spans("qdrant_rag.pb") if s.name == "qdrant.query_points"]
    inside = store.model_copy(
        update={
            "trace_id": tool.trace_id,
            "parent_span_id": tool.span_id,
            "start_time_unix_nano": tool.start_time_unix_nano + 1,
            "end_time_unix_nano": tool.end_time_unix_nano - 1,
        }
    )
    before = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    task = mk.normalize([*spans, inside])
    (call,) = task.retrievals
    assert (call.span_ids, call.top_k) == ((inside.span_id, tool.span_id), 2)
    assert not [g for g in task.gaps if g.kind.startswith("retrieval")]
    after = mk.localize(task, mk.ticket(), mk.policy_manifest("EU"))
    assert (after.verdict, after.cause, mk.statuses(after)) == (
        before.verdict,
        before.cause,
        mk.statuses(before),
    )
    assert after.verdict == verdict
