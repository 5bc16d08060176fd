"""Triage on a LangChain RAG chain traced by OpenLIT (record_openlit_langchain.py): its retriever span
lists only the first 3 documents in ``gen_ai.retrieval.documents`` beside
``gen_ai.retrieval.document_count``. A list shorter than the count does not settle what was returned — the
material may be among the unlisted ones — so a material missing from it is ``unconfirmed`` asking for the
documents, never ``not_retrieved``. The recordings (2 documents each) are in test_recorded_five_runs.py's
table; here the rag run's retriever span is changed as a longer result would have left it.
"""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from tracejudge.schema import RawSpan


def with_retriever(spans: list[RawSpan], count: int, *, keep_v2: bool) -> list[RawSpan]:
    """The spans with the retriever's document count set, and attachment v2 (chunk-042) listed or not."""
    out = []
    for span in spans:
        if span.attributes.get("gen_ai.operation.name") == "retrieval":
            listed = json.loads(span.attributes["gen_ai.retrieval.documents"])
            if not keep_v2:
                listed = [d for d in listed if d["id"] != "chunk-042"]
            attributes = {
                **span.attributes,
                "gen_ai.retrieval.document_count": count,
                "gen_ai.retrieval.documents": json.dumps(listed),
            }
            span = span.model_copy(update={"attributes": attributes})
        out.append(span)
    return out


def triage(mk: ModuleType, spans: list[RawSpan]) -> tuple[str, list[str], tuple[str, ...]]:
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU", ids="chunk"))
    return loc.verdict, mk.statuses(loc), loc.stages[1].missing


def test_the_recorded_list_is_whole(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("openlit_langchain_rag.pb"))
    [retrieval] = [r for r in record.retrievals if r.documents]
    assert [d.raw_id for d in retrieval.documents] == ["chunk-042", "chunk-041"]
    assert retrieval.documents_recorded


@pytest.mark.parametrize("count", [3, 5])
def test_a_material_missing_from_a_cut_list_is_unconfirmed(mk: ModuleType, count: int) -> None:
    spans = mk.recorded_spans("openlit_langchain_rag.pb")
    verdict, statuses, missing = triage(mk, with_retriever(spans, count, keep_v2=False))
    assert (verdict, statuses[:2]) == ("unconfirmed", ["pass", "unconfirmed"])
    assert any(item.startswith("the documents returned by retrieval span") for item in missing)
    gaps = mk.normalize(with_retriever(spans, count, keep_v2=False)).gaps
    assert any(f"lists 1 of the {count} documents" in g.detail for g in gaps)


def test_a_whole_list_without_the_material_asks_only_for_the_filter(mk: ModuleType) -> None:
    # the same list with a count that says it is whole: the documents settle that v2 was not returned, and
    # only the filter (a ranking loss or a filter) is left to record
    spans = mk.recorded_spans("openlit_langchain_rag.pb")
    verdict, statuses, missing = triage(mk, with_retriever(spans, 1, keep_v2=False))
    assert (verdict, statuses[:2]) == ("unconfirmed", ["pass", "unconfirmed"])
    assert not any(item.startswith("the documents returned by") for item in missing)
    assert any("tracejudge.retrieval.filter" in item for item in missing)


def test_a_material_in_a_cut_list_was_returned(mk: ModuleType) -> None:
    spans = mk.recorded_spans("openlit_langchain_rag.pb")
    verdict, statuses, _ = triage(mk, with_retriever(spans, 5, keep_v2=True))
    assert (verdict, statuses) == ("no_fault", ["pass", "pass", "pass", "pass"])
