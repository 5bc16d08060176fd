"""Triage over one LangChain RAG chain recorded under two instrumentations (OpenInference's and
OpenLLMetry's): OTLP file -> decoder -> normalizer -> the four checks, with and without a manifest.

Runs (tests/fixtures/traces/record_langchain.py): ``rag`` returned v2 and stuffed it into the
prompt; ``dropped`` returned v2 but the context builder kept only v1; ``filtered`` ran with
``region = CN`` (recorded as run metadata ``tracejudge.retrieval.filter``) and never saw v2.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import Localization, ManifestEntry, Material, Ticket
from tracejudge_collectors.otel import read_otlp_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
INSTRUMENTATIONS = ["openinference", "openllmetry"]

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


def triage(instrumentation: str, run: str, entries: list[ManifestEntry] | None) -> Localization:
    spans = list(read_otlp_file(FIXTURES / f"langchain_{instrumentation}_{run}.pb"))
    return localize(normalize(spans), TICKET, entries)


def statuses(loc: Localization) -> list[str]:
    return [s.status for s in loc.stages]


@pytest.mark.parametrize("region", [None, "CN", "EU"])
@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_v2_retrieved_stuffed_and_used_is_no_fault(instrumentation: str, region: str | None) -> None:
    loc = triage(instrumentation, "rag", None if region is None else manifest(region))
    assert loc.verdict == "no_fault"
    assert statuses(loc) == ["pass", "pass", "pass", "pass"]
    assert all(stage.evidence for stage in loc.stages)
    assert all(ev.span_id for ev in loc.stages[1].evidence)


@pytest.mark.parametrize("region", [None, "CN", "EU"])
@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_v2_retrieved_but_left_out_of_the_prompt_is_dropped_in_context(
    instrumentation: str, region: str | None
) -> None:
    loc = triage(instrumentation, "dropped", None if region is None else manifest(region))
    assert loc.verdict == "dropped_in_context"
    assert statuses(loc) == ["pass", "pass", "fail", "skipped"]
    [retrieved] = [ev for ev in loc.stages[1].evidence if "C-17/attachment@v2" in ev.note]
    assert "rank 0" in retrieved.note
    assert any("not in this model input" in ev.note for ev in loc.stages[2].evidence)


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_filtered_run_without_manifest_is_unconfirmed_and_asks_for_it(instrumentation: str) -> None:
    loc = triage(instrumentation, "filtered", None)
    assert loc.verdict == "unconfirmed"
    assert loc.stages[0].status == "unconfirmed"
    assert any("manifest" in m and "C-17/attachment@v2" in m for m in loc.stages[0].missing)


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_filter_from_run_metadata_tells_filter_from_rank(instrumentation: str) -> None:
    # v2 is EU in the manifest and the run's metadata filter was region = CN: the filter excluded it.
    filtered = triage(instrumentation, "filtered", manifest("EU"))
    assert (filtered.verdict, filtered.cause) == ("filtered", "filter")
    assert statuses(filtered)[:2] == ["pass", "fail"]
    assert any('{"region": "CN"}' in ev.note and "excludes" in ev.note for ev in filtered.stages[1].evidence)
    # Were v2 CN, the filter would have let it through: it lost on rank.
    ranked = triage(instrumentation, "filtered", manifest("CN"))
    assert (ranked.verdict, ranked.cause) == ("not_retrieved", "rank")
