"""Triage over a LlamaIndex query engine recorded under OpenLLMetry (opentelemetry-instrumentation-llamaindex
with opentelemetry-instrumentation-openai): OTLP file -> decoder -> normalizer -> the four checks.

Runs (tests/fixtures/traces/record_llamaindex.py openllmetry): ``rag`` retrieved v1 and v2, both in the
prompt; ``dropped`` retrieved both and a ``SimilarityPostprocessor`` cut v2; ``topk`` retrieved only v1;
``filtered`` ran with ``MetadataFilters`` region = CN, which neither instrumentation records.
``llamaindex_openllmetry_nollm_rag.pb`` is ``rag`` without the openai instrumentation.
Before the OpenLLMetry llama-index reader every one of them stopped at ``retrieved``: no retrieval step.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from tracejudge.schema import Localization

REGIONS = [None, "CN", "EU"]


def _triage(mk: ModuleType, name: str, region: str | None) -> Localization:
    return mk.triage_recorded(name, None if region is None else mk.recorded_manifest(region))


@pytest.mark.parametrize("region", REGIONS)
def test_both_versions_in_the_openai_chat_input_is_no_fault(mk: ModuleType, region: str | None) -> None:
    loc = _triage(mk, "llamaindex_openllmetry_rag.pb", region)
    assert loc.verdict == "no_fault"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "pass"]
    stages = loc.stages
    assert any("C-17/attachment@v2 at rank 2" in ev.note for ev in stages[1].evidence)
    assert len([ev for ev in stages[2].evidence if "in the model input" in ev.note]) == 1


@pytest.mark.parametrize("region", REGIONS)
def test_postprocessor_task_cut_is_dropped_in_context_and_names_it(
    mk: ModuleType, region: str | None
) -> None:
    loc = _triage(mk, "llamaindex_openllmetry_dropped.pb", region)
    assert loc.verdict == "dropped_in_context"
    assert mk.statuses(loc) == ["pass", "pass", "fail", "skipped"]
    in_context = loc.stages[2]
    [cut] = [ev for ev in in_context.evidence if "reranker received C-17/attachment" in ev.note]
    record = mk.normalize(list(mk.read_otlp_file(mk.RECORDED / "llamaindex_openllmetry_dropped.pb")))
    names = {n.span_id: n.name for n in record.spans}
    assert names[cut.span_id] == "SimilarityPostprocessor.task"
    [absent] = [ev for ev in in_context.evidence if "not in this model input" in ev.note]
    assert names[absent.span_id] == "openai.chat"


@pytest.mark.parametrize("run", ["topk", "filtered"])
def test_v2_not_returned_and_no_filter_recorded_is_unconfirmed_asking_for_the_filter(
    mk: ModuleType, run: str
) -> None:
    for region in ("CN", "EU"):
        loc = _triage(mk, f"llamaindex_openllmetry_{run}.pb", region)
        assert loc.verdict == "unconfirmed"
        assert mk.statuses(loc)[:2] == ["pass", "unconfirmed"]
        retrieved = loc.stages[1]
        assert any("C-17/attachment@v1 at rank 1" in ev.note for ev in retrieved.evidence)
        assert any("tracejudge.retrieval.filter" in m for m in retrieved.missing)
    unknown = _triage(mk, f"llamaindex_openllmetry_{run}.pb", None)
    assert unknown.stages[0].status == "unconfirmed"
    assert any("manifest" in m for m in unknown.stages[0].missing)


@pytest.mark.parametrize("region", REGIONS)
def test_without_the_openai_instrumentation_in_context_is_unconfirmed_for_want_of_a_model_span(
    mk: ModuleType, region: str | None
) -> None:
    loc = _triage(mk, "llamaindex_openllmetry_nollm_rag.pb", region)
    assert loc.verdict == "unconfirmed"
    # Retrieval is read from the task spans; only the prompt is missing.
    assert mk.statuses(loc) == ["pass", "pass", "unconfirmed", "skipped"]
    in_context = loc.stages[2]
    assert in_context.missing
    assert any("model" in m for m in in_context.missing)
