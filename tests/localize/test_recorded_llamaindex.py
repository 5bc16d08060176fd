"""Triage over a LlamaIndex query engine recorded under openinference-instrumentation-llama-index:
OTLP file -> decoder -> normalizer -> the four checks, with and without a manifest.

Runs (tests/fixtures/traces/record_llamaindex.py): ``rag`` retrieved v1 and v2 and both reached the
prompt; ``dropped`` retrieved both but a ``SimilarityPostprocessor`` cut v2 before synthesis;
``topk`` retrieved only v1 (``similarity_top_k=1``, no filter or candidates recorded);
``filtered`` ran with ``MetadataFilters`` region = CN, recorded as ``tracejudge.retrieval.filter``
through OpenInference's ``using_metadata``.
"""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_both_versions_in_the_prompt_and_the_right_answer_is_no_fault(
    mk: ModuleType, region: str | None
) -> None:
    loc = mk.triage_recorded(
        "llamaindex_openinference_rag.pb", None if region is None else mk.recorded_manifest(region)
    )
    assert loc.verdict == "no_fault"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "pass"]
    assert any("C-17/attachment@v2 at rank 2" in ev.note for ev in loc.stages[1].evidence)
    # One model call: the predict wrapper around the chat span is not counted twice.
    assert len([ev for ev in loc.stages[2].evidence if "in the model input" in ev.note]) == 1


@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_postprocessor_cut_is_dropped_in_context_and_names_the_postprocessor(
    mk: ModuleType, region: str | None
) -> None:
    loc = mk.triage_recorded(
        "llamaindex_openinference_dropped.pb", None if region is None else mk.recorded_manifest(region)
    )
    assert loc.verdict == "dropped_in_context"
    assert mk.statuses(loc) == ["pass", "pass", "fail", "skipped"]
    [cut] = [ev for ev in loc.stages[2].evidence if "reranker received C-17/attachment" in ev.note]
    record = mk.normalize(list(mk.read_otlp_file(mk.RECORDED / "llamaindex_openinference_dropped.pb")))
    names = {n.span_id: n.name for n in record.spans}
    assert names[cut.span_id] == "SimilarityPostprocessor._postprocess_nodes"
    assert len([ev for ev in loc.stages[2].evidence if "not in this model input" in ev.note]) == 1


@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_top_k_too_small_without_filter_or_candidates_is_unconfirmed(
    mk: ModuleType, region: str | None
) -> None:
    # Only v1 came back, and nothing in the trace says whether a filter or the rank left v2 out.
    loc = mk.triage_recorded(
        "llamaindex_openinference_topk.pb", None if region is None else mk.recorded_manifest(region)
    )
    assert loc.verdict == "unconfirmed"
    if region is None:
        assert loc.stages[0].status == "unconfirmed"
        assert any("manifest" in m for m in loc.stages[0].missing)
    else:
        assert mk.statuses(loc)[:2] == ["pass", "unconfirmed"]
        assert any("C-17/attachment@v1 at rank 1" in ev.note for ev in loc.stages[1].evidence)
        assert any("tracejudge.retrieval.filter" in m for m in loc.stages[1].missing)


def test_metadata_filter_recorded_with_using_metadata_tells_filter_from_rank(mk: ModuleType) -> None:
    filtered = mk.triage_recorded("llamaindex_openinference_filtered.pb", mk.recorded_manifest("EU"))
    assert (filtered.verdict, filtered.cause) == ("filtered", "filter")
    assert mk.statuses(filtered)[:2] == ["pass", "fail"]
    assert any('{"region": "CN"}' in ev.note and "excludes" in ev.note for ev in filtered.stages[1].evidence)
    ranked = mk.triage_recorded("llamaindex_openinference_filtered.pb", mk.recorded_manifest("CN"))
    assert (ranked.verdict, ranked.cause) == ("not_retrieved", "rank")
    unknown = mk.triage_recorded("llamaindex_openinference_filtered.pb", None)
    assert unknown.verdict == "unconfirmed"
    assert any("manifest" in m and "C-17/attachment@v2" in m for m in unknown.stages[0].missing)
