"""What changed between two versions' content: the sentences that differ and the values that changed."""

from __future__ import annotations

import json

from tests.sweep.sweep_data import EXAMPLE
from tracejudge.schema import VersionDiff
from tracejudge.sweep import version_diff


def _values(diff: VersionDiff) -> tuple[list[str], list[str]]:
    return [v.value for v in diff.old_values], [v.value for v in diff.new_values]


def _manifest_content(doc_id: str) -> dict[str, str]:
    rows = [json.loads(line) for line in (EXAMPLE / "manifest.jsonl").read_text().splitlines() if line]
    return {r["version"]: r["content"] for r in rows if r["doc_id"] == doc_id}


def test_procurement_attachment_v1_to_v2() -> None:
    v = _manifest_content("C-17/attachment")
    diff = version_diff(v["v1"], v["v2"])
    changed = [c for c in diff.changes if c.kind == "changed"]
    assert [(c.old, c.new) for c in changed] == [
        (
            "Prepayment shall not exceed 50,000 RMB per order.",
            "Prepayment shall not exceed 30,000 RMB per order.",
        )
    ]
    assert [v.value for v in changed[0].old_values] == ["50000 CNY"]
    assert [v.text for v in changed[0].new_values] == ["30,000 RMB"]
    # v2 dropped the balance's sixty days and added the claim period and its effective date.
    removed = [c for c in diff.changes if c.kind == "removed"]
    assert "The balance is due within sixty days of delivery." in [c.old for c in removed]
    old, new = _values(diff)
    assert old == ["50000 CNY", "60 day"]
    assert sorted(new) == ["14 day", "2026-03-01", "30000 CNY"]
    # "C-17" is in both and an identifier: never a value.
    assert not any("17" in v for v in old + new)


def test_a_moved_clause_and_formatting_are_not_changes() -> None:
    old = (
        "Invoices are payable within 30 days. Prepayment shall not exceed RMB 30,000 per order.\n"
        "Quality claims must be raised within 14 days."
    )
    new = (
        "Quality claims must be raised within fourteen days.  "
        "prepayment shall NOT exceed 30000 RMB per order. Invoices are payable within 30 days."
    )
    diff = version_diff(old, new)
    # "14 days" -> "fourteen days" is a rewording (same value), not a value change.
    assert diff.old_values == diff.new_values == ()
    assert [c.kind for c in diff.changes] == ["changed"]
    assert diff.changes[0].old_values == diff.changes[0].new_values == ()


def test_several_values_changed_in_one_sentence() -> None:
    old = "Late payment: a fee of 1.5% per month applies after 30 days, capped at EUR 5,000 per invoice."
    new = "Late payment: a fee of 2% per month applies after 45 days, capped at EUR 7,500 per invoice."
    diff = version_diff(old, new)
    (c,) = diff.changes
    assert c.kind == "changed"
    assert [v.value for v in c.old_values] == ["1.5 %", "30 day", "5000 EUR"]
    assert [v.value for v in c.new_values] == ["2 %", "45 day", "7500 EUR"]
    assert [v.kind for v in c.new_values] == ["percent", "duration", "amount"]


def test_reworded_sentence_pairs_with_its_rewording() -> None:
    old = "The supplier must deliver within 10 business days. Returns are accepted."
    new = (
        "Delivery by the supplier must take place within 10 business days of the order. Returns are accepted."
    )
    (c,) = version_diff(old, new).changes
    assert (c.kind, c.old, c.new) == (
        "changed",
        "The supplier must deliver within 10 business days.",
        "Delivery by the supplier must take place within 10 business days of the order.",
    )
    assert c.old_values == c.new_values == ()


def test_a_version_that_only_adds_a_clause() -> None:
    old = "Travel policy. Economy class is booked for flights under 6 hours."
    new = old + " Orders above 100 units need the controller's written approval."
    diff = version_diff(old, new)
    (c,) = diff.changes
    assert (c.kind, c.old, c.new) == (
        "added",
        None,
        "Orders above 100 units need the controller's written approval.",
    )
    assert [(v.kind, v.value) for v in c.new_values] == [("count", "100 unit")]
    assert diff.old_values == ()


def test_removed_clause_is_listed_with_its_values() -> None:
    old = "Refunds within 30 days. A restocking fee of 15% applies."
    new = "Refunds within 30 days."
    diff = version_diff(old, new)
    assert [(c.kind, c.old) for c in diff.changes] == [("removed", "A restocking fee of 15% applies.")]
    assert _values(diff) == (["15 %"], [])


def test_unrelated_sentences_are_added_and_removed_not_paired() -> None:
    diff = version_diff("Payment is due on delivery.", "All disputes go to the courts of Zurich.")
    assert sorted(c.kind for c in diff.changes) == ["added", "removed"]


def test_german_contract() -> None:
    old = "Die Zahlung ist innerhalb von 30 Tagen fällig. Skonto: 2 % bei Zahlung bis 01.03.2026."
    new = "Die Zahlung ist innerhalb von vierzehn Tagen fällig. Skonto: 3 % bei Zahlung bis 15.04.2026."
    diff = version_diff(old, new)
    assert [c.kind for c in diff.changes] == ["changed", "changed"]
    assert _values(diff) == (["30 day", "2 %", "2026-03-01"], ["14 day", "3 %", "2026-04-15"])


def test_french_policy() -> None:
    old = "Le paiement est dû sous trente jours. Le montant maximal est de 10 000 € par commande."
    new = "Le paiement est dû sous 45 jours. Le montant maximal est de 12 000 € par commande."
    assert _values(version_diff(old, new)) == (["30 day", "10000 EUR"], ["45 day", "12000 EUR"])


def test_chinese_contract() -> None:
    old = "预付款不得超过5万元。付款期限为三十天。本附件自2026年3月1日起生效。"
    new = "预付款不得超过3万元。付款期限为十五天。本附件自2026年4月1日起生效。"
    diff = version_diff(old, new)
    assert [c.kind for c in diff.changes] == ["changed", "changed", "changed"]
    assert _values(diff) == (["50000 CNY", "30 day", "2026-03-01"], ["30000 CNY", "15 day", "2026-04-01"])


def test_a_value_that_moved_to_another_sentence_did_not_change() -> None:
    old = "The cap is 30,000 RMB. Orders ship weekly."
    new = "Orders ship weekly and each is capped at 30,000 RMB."
    diff = version_diff(old, new)
    assert diff.old_values == diff.new_values == ()
    assert diff.changes  # the sentences themselves differ


def test_identifiers_are_not_values() -> None:
    diff = version_diff("See annex A-4 of contract C-17, v1.", "See annex A-5 of contract C-17, v2.")
    assert _values(diff) == ([], [])


def test_spelled_out_durations_in_french_and_english() -> None:
    diff = version_diff("La garantie est de un an.", "La garantie est de deux ans.")
    assert _values(diff) == (["1 year"], ["2 year"])
    diff = version_diff("Notice is due forty-five days ahead.", "Notice is due sixty days ahead.")
    assert _values(diff) == (["45 day"], ["60 day"])


def test_a_hyphenated_duration_is_a_duration() -> None:
    diff = version_diff("A 30-day payment term applies.", "A 45-day payment term applies.")
    assert _values(diff) == (["30 day"], ["45 day"])
