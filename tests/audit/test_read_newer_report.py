"""A report a later tracejudge stored: its additive fields set aside, a later layout named (what to do).

AuditReport gained ``still_arriving`` (and ``Drift.still_arriving``) since 0.1.0; a reader that forbids
unknown fields skips such a report unsaid and shows the rubric's older audit as its latest (0.1.0 itself
refuses this version's store by its schema version before reading any). Within one store schema records
only gain fields: this version reads a record carrying fields it does not know, and names one of a later
layout instead of skipping it silently.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from tracejudge.cli import cli
from tracejudge.report import build_report
from tracejudge.schema import SCHEMA_VERSION, AuditReport, Drift, StoredReport
from tracejudge.store import UnreadableRecordError, open_store, read_record

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def _audit(report_id: str, at: datetime, **extra: Any) -> dict[str, Any]:
    drift = Drift(previous_run_id="r0", pass_rate=0.8, previous_pass_rate=0.7, shared_traces=3)
    report = AuditReport(
        report_id=report_id,
        run_id=f"run-{report_id}",
        created_at=at,
        rubric_name="support",
        rubric_version="1",
        judge_model="m",
        items=4,
        drift=drift,
    )
    data = report.model_dump(mode="json")
    # What a later version adds: a field of the report and one of a record inside it.
    data.update(extra.get("top", {}))
    data["drift"].update(extra.get("drift", {}))
    return data


LATER = {"top": {"answer_drafts": ["t1"]}, "drift": {"answer_drafts": [1, 0]}}


def test_a_report_with_fields_this_version_does_not_know_is_read_without_them() -> None:
    data = _audit("a2", T0, **LATER)
    with pytest.raises(ValidationError):
        AuditReport.model_validate(data)  # how it was read: skipped
    got = read_record(AuditReport, data)
    assert got.report_id == "a2"
    assert got.drift is not None
    assert got.drift.shared_traces == 3
    assert got == AuditReport.model_validate(_audit("a2", T0))


def test_a_report_of_a_later_layout_says_to_upgrade() -> None:
    data = {**_audit("a3", T0), "schema_version": SCHEMA_VERSION + 1}
    with pytest.raises(UnreadableRecordError) as exc:
        read_record(AuditReport, data, what="audit report a3")
    assert "audit report a3 has schema_version" in str(exc.value)
    assert "pip install -U tracejudge" in str(exc.value)


def test_a_report_that_is_not_valid_says_so_naming_the_field() -> None:
    data = {**_audit("a4", T0), "items": "many"}
    with pytest.raises(UnreadableRecordError) as exc:
        read_record(AuditReport, data, what="audit report a4")
    assert "audit report a4 does not validate: items:" in str(exc.value)


def _store_with(tmp_path: Path, *payloads: dict[str, Any]) -> str:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    try:
        for p in payloads:
            store.put_report(
                StoredReport(
                    report_id=p["report_id"],
                    kind="audit",
                    created_at=datetime.fromisoformat(p["created_at"]),
                    run_id=p["run_id"],
                    rubric_name=p["rubric_name"],
                    payload=p,
                )
            )
    finally:
        store.close()
    return url


def test_the_report_shows_a_later_versions_audit_as_the_latest(tmp_path: Path) -> None:
    url = _store_with(tmp_path, _audit("old", T0), _audit("new", T0 + timedelta(days=1), **LATER))
    store = open_store(url)
    try:
        data = build_report(store, now=T0 + timedelta(days=2))
    finally:
        store.close()
    # It was the older one: the newer, unreadable with its unknown fields, was skipped unsaid.
    assert [a.report_id for a in data.audits] == ["new"]
    assert data.unread_reports == ()


def test_the_report_names_an_audit_it_cannot_read(tmp_path: Path) -> None:
    later = {**_audit("new", T0 + timedelta(days=1)), "schema_version": SCHEMA_VERSION + 1}
    url = _store_with(tmp_path, _audit("old", T0), later)
    result = CliRunner().invoke(cli, ["--store", url, "report", "--out", str(tmp_path / "r.html"), "--json"])
    assert result.exit_code == 0, result.output
    assert "warning: audit report new has schema_version" in result.stderr
    assert "pip install -U tracejudge" in result.stderr
