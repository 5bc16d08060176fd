"""Triage over traces recorded by real instrumentation, one per convention (tests/fixtures/traces):
OTLP file -> decoder -> normalizer -> the four checks, with and without an index manifest."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import Localization, ManifestEntry, Material, Ticket
from tracejudge_collectors.otel import read_otlp_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"

TICKET = Ticket(
    ticket="EXP-311",
    required=(
        Material(
            doc_id="C-17/attachment",
            version="v2",
            clause="Prepayment shall not exceed 30,000 RMB",
            facts={"prepayment_cap_rmb": 30000},
        ),
    ),
    superseded=(Material(doc_id="C-17/attachment", version="v1", facts={"prepayment_cap_rmb": 50000}),),
)


def manifest(v2_region: str) -> list[ManifestEntry]:
    return [
        ManifestEntry(
            doc_id="C-17/attachment",
            version="v1",
            effective_from=datetime(2025, 1, 1, tzinfo=UTC),
            effective_to=datetime(2026, 3, 1, tzinfo=UTC),
            indexed_at=datetime(2025, 1, 2, tzinfo=UTC),
            metadata={"region": "CN"},
        ),
        ManifestEntry(
            doc_id="C-17/attachment",
            version="v2",
            effective_from=datetime(2026, 3, 1, tzinfo=UTC),
            indexed_at=datetime(2026, 3, 2, tzinfo=UTC),
            metadata={"region": v2_region},
        ),
    ]


def triage(fixture: str, entries: list[ManifestEntry] | None) -> Localization:
    return localize(normalize(list(read_otlp_file(FIXTURES / fixture))), TICKET, entries)


def statuses(loc: Localization) -> list[str]:
    return [s.status for s in loc.stages]


@pytest.mark.parametrize("fixture", ["genai_agent.json", "langfuse_sdk.pb"])
@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_answers_resting_on_v2_are_no_fault_in_genai_and_langfuse_traces(
    fixture: str, region: str | None
) -> None:
    # v2 was returned, its clause reached the model and the answer states 30,000: whatever the
    # manifest says about metadata, the retrieval evidently happened.
    loc = triage(fixture, None if region is None else manifest(region))
    assert loc.verdict == "no_fault"
    assert statuses(loc) == ["pass", "pass", "pass", "pass"]
    assert all(stage.evidence for stage in loc.stages)
    assert all(ev.span_id for ev in loc.stages[1].evidence)


def test_openllmetry_chroma_trace_without_manifest_is_unconfirmed_and_says_what_would_settle_it() -> None:
    loc = triage("openllmetry_chroma.pb", None)
    assert loc.verdict == "unconfirmed"
    assert loc.stages[0].status == "unconfirmed"
    assert any("manifest" in m and "C-17/attachment@v2" in m for m in loc.stages[0].missing)
    assert statuses(loc)[1:] == ["skipped", "skipped", "skipped"]


def test_openllmetry_chroma_filter_replay_tells_rank_from_filter() -> None:
    # The Chroma span's where-filter (a Python literal) is {"region": "CN"}; v2 was not returned.
    ranked = triage("openllmetry_chroma.pb", manifest("CN"))
    assert (ranked.verdict, ranked.cause) == ("not_retrieved", "rank")
    filtered = triage("openllmetry_chroma.pb", manifest("EU"))
    assert (filtered.verdict, filtered.cause) == ("filtered", "filter")
    assert filtered.stages[1].status == "fail"
    assert any("region" in ev.note for ev in filtered.stages[1].evidence)


def test_openinference_rag_trace_recorded_candidates_prove_the_filter() -> None:
    # The retriever recorded its candidates: v2 was excluded by the filter, manifest or not.
    for entries in (None, manifest("CN")):
        loc = triage("openinference_rag.pb", entries)
        assert (loc.verdict, loc.cause) == ("filtered", "filter")
        assert loc.stages[1].evidence


@pytest.mark.parametrize("fixture", ["openai_chat.pb", "openai_hidden_inputs.pb"])
def test_a_bare_llm_trace_has_no_retrieval_to_judge(fixture: str) -> None:
    loc = triage(fixture, manifest("CN"))
    assert loc.verdict == "unconfirmed"
    assert statuses(loc) == ["pass", "unconfirmed", "skipped", "skipped"]
    assert any("retrieval span" in m for m in loc.stages[1].missing)
