"""Anonymization: consistent pseudonyms, amounts/dates/versions/relations kept, verdicts identical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracejudge._errors import InputError
from tracejudge.checks import find_numbers
from tracejudge.regress import anonymize_suite, load_suite, sample_verdicts

from .conftest import balanced, sample, write_suite

EXAMPLE_SUITE = Path(__file__).resolve().parents[2] / "examples" / "procurement" / "suite"


def _text(folder: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.yaml")))


def test_the_example_suite_keeps_amounts_relations_and_verdicts(tmp_path: Path) -> None:
    out, mapping = tmp_path / "anon", tmp_path / "private" / "mapping.json"
    report = anonymize_suite(EXAMPLE_SUITE, out, mapping_file=mapping, identifiers=["Eastwind Trading"])
    assert report.ok
    assert report.samples == 11
    assert all(v.identical for v in report.verified)
    assert {v.verdict_before for v in report.verified} >= {"ignored_by_model", "no_fault"}
    text = _text(out)
    for secret in ("C-17", "Huadong Steel", "Eastwind Trading", "finance-ops", "Nordlicht", "POL-4"):
        assert secret not in text
    table = json.loads(mapping.read_text())
    assert table["contract"]["C-17"].startswith("ID-")
    assert not list(out.glob("*mapping*"))
    assert "ID-" in text
    before, after = load_suite(EXAMPLE_SUITE), load_suite(out)
    for b, a in zip(before.samples, after.samples, strict=True):
        sb, sa = b.sample, a.sample
        # Amounts, dates and versions untouched.
        for mb, ma in zip(sb.environment.materials, sa.environment.materials, strict=True):
            amounts_b = [(n.value, n.unit) for n in find_numbers(mb.content) if n.unit]
            assert amounts_b == [(n.value, n.unit) for n in find_numbers(ma.content) if n.unit]
        assert [m.effective_from for m in sb.environment.materials] == [
            m.effective_from for m in sa.environment.materials
        ]
        assert [m.version for m in sb.basis.required] == [m.version for m in sa.basis.required]
        assert sb.basis.required[0].facts == sa.basis.required[0].facts
        # Relations: attachment and contract of one agreement still share the pseudonymized agreement id.
        roots_b = {m.doc_id.split("/")[0] for m in sb.environment.materials}
        roots_a = {m.doc_id.split("/")[0] for m in sa.environment.materials}
        assert len(roots_b) == len(roots_a)
        assert sample_verdicts(sb) == sample_verdicts(sa)
    # One mapping across the whole suite: the same contract gets the same pseudonym in every sample.
    groups = {s.sample.group for s in after.samples}
    assert len(groups) == len({s.sample.group for s in before.samples})


def test_emails_accounts_and_names_in_free_text(tmp_path: Path) -> None:
    s = sample()
    s["source"]["feedback"] = (
        "Reported by li.wei@eastwind.example; pay to account no. 6222-0200-1234 "
        "or IBAN DE89370400440532013000."
    )
    s["observed"]["answer"] = (
        "Huadong Steel may be prepaid 50,000 RMB (C-17/attachment v1); contact li.wei@eastwind.example."
    )
    other = sample("rs-0002")
    other["observed"]["answer"] = "Ask li.wei@eastwind.example about C-17."
    report = anonymize_suite(write_suite(tmp_path / "s", [s, other]), tmp_path / "out")
    assert report.ok
    assert report.replaced == {"contract": 1, "name": 1, "person": 1, "email": 1, "account": 2}
    text = _text(tmp_path / "out")
    for secret in ("li.wei@", "6222-0200-1234", "DE89370400440532013000", "Li Wei", "Huadong"):
        assert secret not in text
    assert text.count("user1@example.invalid") == 3  # consistent across samples
    assert "50,000 RMB" in text
    assert "2026-03-01" in text
    assert "v1" in text


def test_a_changed_verdict_is_reported(tmp_path: Path) -> None:
    # The supplier's name doubles as a version label, so pseudonymizing it breaks the "cites v2" check.
    s = sample()
    for m in s["environment"]["materials"]:
        m["metadata"]["supplier"] = "v2"
    s["observed"]["answer"] = "The cap is 30,000 RMB per order under C-17/attachment v2."
    report = anonymize_suite(write_suite(tmp_path / "s", [s]), tmp_path / "out")
    assert not report.ok
    assert report.verified[0].checks_before != report.verified[0].checks_after


def test_the_mapping_stays_out_of_the_suites(tmp_path: Path) -> None:
    folder = balanced(tmp_path / "s")
    with pytest.raises(InputError, match="keep the mapping out of the suite"):
        anonymize_suite(folder, tmp_path / "out", mapping_file=tmp_path / "out" / "map.json")
    with pytest.raises(InputError, match="overlaps"):
        anonymize_suite(folder, folder / "anon")
    report = anonymize_suite(folder, tmp_path / "out2")
    assert report.mapping_file is None
    assert sorted(p.name for p in (tmp_path / "out2").iterdir()) == sorted(
        p.name for p in folder.glob("*.yaml")
    )
