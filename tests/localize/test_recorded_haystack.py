"""Triage over a Haystack RAG pipeline traced with openinference-instrumentation-haystack. Fixtures from
tests/fixtures/traces/record_haystack.py (BM25 ranks v1 first; v2 third of three) and
record_haystack_websearch.py (SerperDevWebSearch against a stand-in of Serper: the pages' snippets, identified
by their text; the site the search was limited to is recorded nowhere).
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


UNCONFIRMED_RETRIEVED = ("unconfirmed", None, ["pass", "unconfirmed", "skipped", "skipped"])
# run -> (verdict, cause, stage statuses) of the web-search recordings under the policy index (v2 in the EU)
WEBSEARCH = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    # allowed_domains became "site:cn.…" in the request: no attribute records it, so a filter is not known
    "filtered": UNCONFIRMED_RETRIEVED,
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
    # a web without v2's page, under a manifest that says v2 is there: rank or an unrecorded filter
    "never_indexed": UNCONFIRMED_RETRIEVED,
}


@pytest.mark.parametrize("run", list(WEBSEARCH))
def test_a_web_search_component_is_a_retrieval_of_the_pages_found(mk: ModuleType, run: str) -> None:
    loc = mk.triage_framework(f"haystack_websearch_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == WEBSEARCH[run]


def test_the_web_search_never_indexed_is_told_by_the_manifest(mk: ModuleType) -> None:
    loc = mk.triage_framework("haystack_websearch_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])


def test_the_pages_are_identified_by_their_text_and_the_site_limit_is_missing(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("haystack_websearch_filtered.pb"))
    [call] = record.retrievals
    assert (call.name, call.query, call.filter) == ("SerperDevWebSearch.run", "prepayment per order", None)
    # Haystack's document ids are hashes of the content: nothing but the text names the contract
    assert all(d.doc_id == d.raw_id and d.version is None for d in call.documents)
    assert [d.metadata["link"] for d in call.documents] == [
        "https://cn.contracts.acme.example/C-17/attachment/v1",
        "https://cn.contracts.acme.example/C-09/framework/v1",
    ]
    loc = mk.triage_framework("haystack_websearch_filtered.pb", mk.policy_manifest("EU"))
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)
