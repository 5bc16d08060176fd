"""Anonymization: consistent pseudonyms, amounts/dates/versions/relations kept, verdicts identical."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracejudge._errors import InputError
from tracejudge.checks import find_numbers
from tracejudge.cli import cli
from tracejudge.regress import (
    anonymize_samples,
    anonymize_suite,
    iter_samples,
    load_suite,
    plan_anonymization,
    sample_verdicts,
)
from tracejudge.regress._anonymize import company_names, contract_ids, person_names, phone_numbers

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
    # The ticket id EXP-1 is a contract-like id in free text too.
    assert report.replaced == {"contract": 2, "name": 1, "person": 1, "email": 1, "account": 2}
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


# Amounts with their currency, ISO dates and times, versions: what must survive anonymization verbatim.
_KEPT = re.compile(r"\d[\d,.]*\s?(?:RMB|EUR|USD|%|kg)|\d{4}-\d{2}-\d{2}(?:T[\d:]+Z)?|(?<![A-Za-z])v\d+\b")


def test_the_example_suite_leaves_no_identifier_in_any_file_without_hints(tmp_path: Path) -> None:
    out, mapping = tmp_path / "anon", tmp_path / "private" / "mapping.json"
    report = anonymize_suite(EXAMPLE_SUITE, out, mapping_file=mapping)  # no --identifier
    assert report.ok
    assert report.samples == 11
    table = json.loads(mapping.read_text())
    # Eastwind Trading occurs only in free text (no metadata names it): found as a company name.
    assert "Eastwind Trading" in table["name"]
    assert {"Huadong Steel", "Nordlicht Components"} <= set(table["name"])
    assert {"C-17", "C-30", "POL-4", "EXP-309", "EXP-401"} <= set(table["contract"])
    files = "\n".join(p.read_text(encoding="utf-8") for p in sorted(out.iterdir()))
    # The samples as data too: YAML folds long lines, so a phrase may straddle two lines of a file.
    after = json.dumps([s.sample.model_dump(mode="json") for s in load_suite(out).samples])
    originals = [o for kind in table.values() for o in kind]
    for original in [*originals, "Eastwind", "Huadong", "Nordlicht", "finance-ops", "c_17", "pol_4"]:
        assert original not in files, original
        assert original not in after, original
    before = json.dumps([s.sample.model_dump(mode="json") for s in load_suite(EXAMPLE_SUITE).samples])
    assert Counter(_KEPT.findall(before)) == Counter(_KEPT.findall(after))
    assert len(_KEPT.findall(before)) > 100
    assert "GmbH" in files  # a legal form identifies nobody and stays
    # One pseudonym per company in every sample, whatever its legal form in the text.
    c17 = table["contract"]["C-17"]
    assert f"{c17}/attachment" in files
    assert f"{table['name']['Nordlicht Components']} GmbH" in files
    assert all(v.identical for v in report.verified)


def test_free_text_detectors_find_identifiers_and_leave_amounts_dates_versions() -> None:
    text = (
        "Per PO-2231 and EXP-311 (C-17/attachment v2, UTF-8, ISO-8601) Acme Supplies Ltd owes 45,000 RMB "
        "on 2026-03-01; The Baltic Freight GmbH team and Mr John Smith agreed. Contact Jane Doe "
        "<jane.doe@acme.example> or Dr Ana Lima, tel: 0171 2345678, +49 30 1234567; EUR 30 kg."
    )
    assert contract_ids(text) == ["PO-2231", "EXP-311", "C-17"]
    assert company_names(text) == ["Acme Supplies", "Baltic Freight"]
    assert person_names(text) == ["John Smith", "Ana Lima", "Jane Doe"]
    assert sorted(phone_numbers(text)) == ["+49 30 1234567", "0171 2345678"]
    plain = "The cap is 30,000 RMB from 2026-03-01 per attachment v2; Revised Payment Schedule, GPT-4 model."
    assert (contract_ids(plain), company_names(plain), person_names(plain), phone_numbers(plain)) == (
        [],
        [],
        [],
        [],
    )


def test_free_text_identifiers_get_one_pseudonym_across_samples(tmp_path: Path) -> None:
    first = sample("rs-0001")
    first["source"]["feedback"] = (
        "Mr John Smith of Baltic Freight GmbH (tel: 0171 2345678) says PO-2231 was paid 12,500 EUR on "
        "2026-02-01 under v2."
    )
    second = sample("rs-0002")
    second["observed"]["answer"] = (
        "Ask Mr John Smith; Baltic Freight handles PO-2231. The cap is 50,000 RMB per order under "
        "C-17/attachment v1."
    )
    suite = write_suite(tmp_path / "s", [first, second])
    samples = list(iter_samples(suite))
    out, table = anonymize_samples(samples)
    assert table["name"]["Baltic Freight"] == "Party B"
    assert set(table["person"]) == {"Li Wei", "John Smith"}
    assert table["phone"] == {"0171 2345678": "+00 000 0000001"}
    fb = out[0].source.feedback or ""
    answer = out[1].observed.answer or ""
    pseudo = table["contract"]["PO-2231"]
    assert f"Mr {table['person']['John Smith']} of Party B GmbH" in fb
    assert pseudo in fb
    assert pseudo in answer
    assert "Party B handles" in answer
    assert "12,500 EUR on 2026-02-01 under v2" in fb
    for secret in ("John", "Smith", "Baltic", "2345678", "PO-2231"):
        assert secret not in fb + answer
    report = anonymize_suite(suite, tmp_path / "out")
    assert report.ok


def test_dry_run_lists_replacements_and_writes_nothing(tmp_path: Path) -> None:
    plan = plan_anonymization(list(iter_samples(EXAMPLE_SUITE)))
    by_original = {p.original: p for p in plan}
    assert by_original["Eastwind Trading"].kind == "name"
    assert by_original["C-17"].occurrences > 11
    assert len(by_original["C-17"].samples) == 11
    assert by_original["EXP-309"].samples == ("rs-1be3a40e",)
    _, mapping = anonymize_samples([s.sample for s in load_suite(EXAMPLE_SUITE).samples])
    assert {p.original: p.pseudonym for p in plan if p.kind != "contract" or "_" not in p.original} == {
        o: f for table in mapping.values() for o, f in table.items()
    }
    runner = CliRunner()
    out = tmp_path / "anon"
    result = runner.invoke(cli, ["regress", "anonymize", str(EXAMPLE_SUITE), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    assert {"kind": "name", "original": "Eastwind Trading"}.items() <= next(
        p for p in listed if p["original"] == "Eastwind Trading"
    ).items()
    human = runner.invoke(cli, ["regress", "anonymize", str(EXAMPLE_SUITE), "--dry-run", "--out", str(out)])
    assert human.exit_code == 0, human.output
    assert "nothing written" in human.output
    assert not out.exists()
    missing = runner.invoke(cli, ["regress", "anonymize", str(EXAMPLE_SUITE)])
    assert missing.exit_code == 2
    assert "--out" in missing.output
