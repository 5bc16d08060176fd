"""Triage over a Haystack RAG pipeline traced with openinference-instrumentation-haystack. Fixtures from
tests/fixtures/traces/record_haystack.py (BM25 ranks v1 first; v2 third of three).
"""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_v2_in_the_prompt_and_the_right_answer_is_no_fault(mk: ModuleType, region: str | None) -> None:
    loc = mk.triage_recorded("haystack_rag.pb", None if region is None else mk.recorded_manifest(region))
    assert loc.verdict == "no_fault"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "pass"]


def test_v2_in_the_prompt_and_the_stale_answer_is_ignored_by_model(mk: ModuleType) -> None:
    loc = mk.triage_recorded("haystack_ignored.pb", mk.recorded_manifest("EU"))
    assert loc.verdict == "ignored_by_model"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "fail"]


@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_a_template_that_renders_two_of_three_documents_drops_v2(mk: ModuleType, region: str | None) -> None:
    loc = mk.triage_recorded("haystack_dropped.pb", None if region is None else mk.recorded_manifest(region))
    assert loc.verdict == "dropped_in_context"
    assert mk.statuses(loc) == ["pass", "pass", "fail", "skipped"]


def test_the_haystack_region_filter_is_replayed_against_the_manifest(mk: ModuleType) -> None:
    # v2 is indexed in the EU; the retriever ran with meta.region == CN: the filter excluded it.
    loc = mk.triage_recorded("haystack_filtered.pb", mk.recorded_manifest("EU"))
    assert loc.verdict == "filtered"
    assert mk.statuses(loc) == ["pass", "fail", "skipped", "skipped"]
    # v2 in the CN index would have passed the filter: then it was lost on rank, not filtered.
    assert mk.triage_recorded("haystack_filtered.pb", mk.recorded_manifest("CN")).verdict == "not_retrieved"
