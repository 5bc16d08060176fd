"""Draft tickets: what they settle from the trace and the feedback, and what they leave for a person."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tests.sweep.sweep_data import recorded_manifest
from tracejudge.localize import fact_value, load_ticket
from tracejudge.schema import Document, ManifestEntry, RetrievalCall, TaskRecord
from tracejudge.sweep import VersionIndex, draft_ticket

T = datetime(2026, 11, 18, tzinfo=UTC)
POLICY_V1 = (
    "Expense policy. Hotel costs are reimbursed up to 180 EUR per night. "
    "Claims must be filed within 45 days of the trip. Taxis are reimbursed with a receipt."
)
POLICY_V2 = (
    "Expense policy. Hotel costs are reimbursed up to 150 EUR per night. "
    "Claims must be filed within 30 days of the trip. Taxis are reimbursed with a receipt."
)


def _policy() -> list[ManifestEntry]:
    common: dict[str, Any] = {"doc_id": "HR-2/expenses"}
    y2025, y2026 = datetime(2025, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)
    return [
        ManifestEntry(version="2025", effective_from=y2025, effective_to=y2026, content=POLICY_V1, **common),
        ManifestEntry(version="2026", effective_from=y2026, content=POLICY_V2, **common),
    ]


def _task(answer: str, docs: tuple[Document, ...] = (), start: datetime | None = T) -> TaskRecord:
    return TaskRecord(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        start_time=start,
        input="How long do I have to file my travel claim?",
        final_answer=answer,
        retrievals=(RetrievalCall(span_id="a" * 16, documents=docs),) if docs else (),
        metadata={"session_id": "conv-8812"},
    )


def test_feedback_naming_the_old_value_picks_its_clause() -> None:
    task = _task("Sure, send it when you can.", (Document(doc_id="HR-2/expenses", version="2025"),))
    draft = draft_ticket(task, VersionIndex.build(_policy()), "it said 45 days, that's no longer true")
    (req,) = draft.ticket["required"]
    assert (req["doc_id"], req["version"]) == ("HR-2/expenses", "2026")
    assert req["clause"] == "Claims must be filed within 30 days of the trip."
    assert req["facts"] == {"claims_days": "30 days"}
    assert draft.ticket["superseded"] == [
        {"doc_id": "HR-2/expenses", "version": "2025", "facts": {"claims_days": "45 days"}}
    ]
    assert draft.ticket["session_id"] == "conv-8812"
    assert draft.ambiguous == ()


def test_an_answer_resting_on_the_old_version_settles_the_clause_without_feedback() -> None:
    draft = draft_ticket(_task("Hotels are covered up to 180 EUR per night."), VersionIndex.build(_policy()))
    (req,) = draft.ticket["required"]
    assert req["clause"] == "Hotel costs are reimbursed up to 150 EUR per night."
    assert req["facts"] == {"hotel_eur": 150}
    assert draft.ticket["superseded"][0]["facts"] == {"hotel_eur": 180}
    assert any('"180 EUR"' in e.note for e in draft.evidence)


def test_when_the_feedback_fits_two_changed_clauses_the_clause_is_left_for_a_person(tmp_path: Path) -> None:
    task = _task("Sure.", (Document(doc_id="HR-2/expenses", version="2025"),))
    draft = draft_ticket(task, VersionIndex.build(_policy()), "the policy changed and the bot missed it")
    (req,) = draft.ticket["required"]
    assert req["clause"] is None
    assert "facts" not in req
    (a,) = draft.ambiguous
    assert a.field == "required[0].clause"
    assert set(a.options) == {
        "Hotel costs are reimbursed up to 150 EUR per night.",
        "Claims must be filed within 30 days of the trip.",
    }
    assert "# TO DECIDE" in draft.yaml
    # The YAML is a ticket the loader reads; the clause stays empty until a person writes it.
    path = tmp_path / "draft.yaml"
    path.write_text(draft.yaml)
    loaded = load_ticket(path)
    assert loaded.status == "draft"
    assert loaded.required[0].clause is None
    assert yaml.safe_load(draft.yaml)["required"][0]["version"] == "2026"


def test_no_document_to_go_on_leaves_required_empty_and_says_so() -> None:
    draft = draft_ticket(_task("I don't know."), VersionIndex.build(_policy()), "wrong answer")
    assert draft.ticket["required"] == []
    assert [a.field for a in draft.ambiguous] == ["required[0].doc_id"]
    assert "# TO DECIDE" in draft.yaml


def test_a_trace_without_a_start_time_cannot_say_what_applied() -> None:
    draft = draft_ticket(_task("The cap is 50,000 RMB.", start=None), VersionIndex.build(recorded_manifest()))
    assert draft.ticket["required"] == []
    assert [a.field for a in draft.ambiguous] == ["task_time"]


def test_the_yaml_keeps_every_character() -> None:
    feedback = 'Er sagte "45 Tage" — das stimmt nicht mehr: 30 Tage. # kein Kommentar'
    task = _task("Sure.", (Document(doc_id="HR-2/expenses", version="2025"),))
    draft = draft_ticket(task, VersionIndex.build(_policy()), feedback)
    assert yaml.safe_load(draft.yaml)["feedback"] == feedback


def _prices(old: str, new: str) -> list[ManifestEntry]:
    y2025, y2026 = datetime(2025, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)
    return [
        ManifestEntry(
            doc_id="P-1/terms", version="v1", effective_from=y2025, effective_to=y2026, content=old
        ),
        ManifestEntry(doc_id="P-1/terms", version="v2", effective_from=y2026, content=new),
    ]


def test_fact_names_carry_the_currency_as_the_document_writes_it_and_triage_reads_it_back() -> None:
    # "RMB" in the document: the key says rmb (not the ISO code cny the reader canonicalises to), as a
    # person writes it (DESIGN 5.2: prepayment_cap_rmb); triage reads the currency back from the key.
    manifest = _prices(
        "Terms. Prepayment shall not exceed 50,000 RMB per order.",
        "Terms. Prepayment shall not exceed 30,000 RMB per order.",
    )
    task = _task("You may prepay up to 50,000 RMB.", (Document(doc_id="P-1/terms", version="v1"),))
    draft = draft_ticket(task, VersionIndex.build(manifest), "it said 50,000 RMB")
    (req,) = draft.ticket["required"]
    assert req["facts"] == {"prepayment_rmb": 30000}
    assert draft.ticket["superseded"][0]["facts"] == {"prepayment_rmb": 50000}
    read = fact_value("prepayment_rmb", 30000)
    assert read is not None
    assert read.units == {"CNY"}


def test_fact_names_stay_shared_when_the_versions_spell_the_currency_differently() -> None:
    # v1 writes "RMB", v2 the ISO code: one fact that changed, one key on both sides (v2's spelling);
    # a sign no key can carry ("¥" is yuan or yen) leaves the key without a currency.
    manifest = _prices("Terms. Deposits are 8,000 RMB.", "Terms. Deposits are 6,000 CNY.")
    task = _task("The deposit is 8,000 RMB.", (Document(doc_id="P-1/terms", version="v1"),))
    draft = draft_ticket(task, VersionIndex.build(manifest), "it said 8,000 RMB")
    assert draft.ticket["required"][0]["facts"] == {"deposits_cny": 6000}
    assert draft.ticket["superseded"][0]["facts"] == {"deposits_cny": 8000}
    yen_or_yuan = _prices("Terms. Deposits are ¥8,000.", "Terms. Deposits are ¥6,000.")
    draft = draft_ticket(task, VersionIndex.build(yen_or_yuan), "it said ¥8,000")
    assert draft.ticket["required"][0]["facts"] == {"deposits_amount": 6000}
