"""Triage over an agent traced with opentelemetry-util-genai (OTel GenAI latest experimental conventions):
retrieval ids ``doc_id@version`` with scores and no content, chat spans with structured parts, a tool
call between two model calls. Fixtures from tests/fixtures/traces/record_genai_latest.py.
"""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_v2_in_the_prompt_and_the_right_answer_is_no_fault(mk: ModuleType, region: str | None) -> None:
    loc = mk.triage_recorded("genai_latest_rag.pb", None if region is None else mk.recorded_manifest(region))
    assert loc.verdict == "no_fault"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "pass"]
    # The version comes from the "doc_id@version" id: the convention records no metadata.
    assert any("C-17/attachment@v2 at rank 2" in ev.note for ev in loc.stages[1].evidence)
    # Both chat inputs carried the clause.
    assert len([ev for ev in loc.stages[2].evidence if "in the model input" in ev.note]) == 2


@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_v2_in_the_prompt_and_the_stale_answer_is_ignored_by_model(
    mk: ModuleType, region: str | None
) -> None:
    loc = mk.triage_recorded(
        "genai_latest_ignored.pb", None if region is None else mk.recorded_manifest(region)
    )
    assert loc.verdict == "ignored_by_model"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "fail"]
    record = mk.normalize(list(mk.read_otlp_file(mk.RECORDED / "genai_latest_ignored.pb")))
    assert any(ev.span_id == record.final_answer_span_id for ev in loc.stages[3].evidence)
