"""Runs, items and reports a later tracejudge stored (in the same store schema) are read: records only
gain fields within one schema, and one forbidding the fields it does not know failed every ``list_runs``
of a worker one version behind the fleet (a RunRecord gaining ``left_waiting`` is such a field)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tracejudge.schema import ItemResult, Localization, Provenance, RunRecord, StageResult
from tracejudge.store import TriageEntry, UnreadableRecordError, open_store

PROVENANCE = Provenance(
    rubric_name="r",
    rubric_version="1",
    rubric_hash="h",
    prompt_hash="p",
    judge_model=None,
    judge_base_url=None,
    temperature=0.0,
    repeat=1,
    tracejudge_version="0",
)


def _with_later_fields(db: Path, table: str) -> None:
    """Every payload of ``table`` as a later version writes it: a field at its top (a run's: and one in its
    provenance)."""
    with sqlite3.connect(db) as conn:
        for rowid, payload in conn.execute(f"SELECT rowid, payload FROM {table}").fetchall():
            data = json.loads(payload)
            data["added_later"] = {"x": 1}
            if table == "score_runs":
                data["provenance"]["added_later"] = 2
            conn.execute(f"UPDATE {table} SET payload = ? WHERE rowid = ?", (json.dumps(data), rowid))


def test_a_run_and_its_items_a_later_version_stored_are_read(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = open_store(f"sqlite:///{db}")
    run = RunRecord(
        run_id="r1", series="s", created_at=datetime(2026, 12, 1, tzinfo=UTC), provenance=PROVENANCE
    )
    store.put_run(run)
    store.put_score_item(ItemResult(run_id="r1", trace_id="t1", verdict="pass"))
    store.close()
    _with_later_fields(db, "score_runs")
    _with_later_fields(db, "score_items")
    store = open_store(f"sqlite:///{db}")
    try:
        assert store.get_run("r1") == run  # was a ValidationError: extra fields not permitted
        assert store.list_runs() == [run]
        assert [i.trace_id for i in store.iter_score_items("r1")] == ["t1"]
    finally:
        store.close()


def test_a_run_of_a_later_layout_is_named_with_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = open_store(f"sqlite:///{db}")
    store.put_run(
        RunRecord(
            run_id="r1", series="s", created_at=datetime(2026, 12, 1, tzinfo=UTC), provenance=PROVENANCE
        )
    )
    store.close()
    with sqlite3.connect(db) as conn:
        (payload,) = conn.execute("SELECT payload FROM score_runs").fetchone()
        later = json.dumps({**json.loads(payload), "schema_version": 99})
        conn.execute("UPDATE score_runs SET payload = ?", (later,))
    store = open_store(f"sqlite:///{db}")
    try:
        with pytest.raises(
            UnreadableRecordError, match=r"(?s)run r1 has schema_version 99.*pip install -U tracejudge"
        ):
            store.get_run("r1")
    finally:
        store.close()


def _triage_stored_then(db: Path, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> TriageEntry:
    """A triage result stored (and read back, returned), then its payload as ``edit`` makes it (what a later
    version would have written)."""
    store = open_store(f"sqlite:///{db}")
    store.put_triage_result(
        Localization(
            ticket="EXP-1",
            trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
            task_time=None,
            verdict="unconfirmed",
            stages=(StageResult(name="indexed", status="unconfirmed", missing=("manifest",)),),
        )
    )
    (entry,) = store.list_triage_results()
    store.close()
    with sqlite3.connect(db) as conn:
        (payload,) = conn.execute("SELECT payload FROM triage_results").fetchone()
        conn.execute("UPDATE triage_results SET payload = ?", (json.dumps(edit(json.loads(payload))),))
    return entry


def test_a_triage_result_a_later_version_stored_is_read(tmp_path: Path) -> None:
    """A Localization gaining a field (at its top and in a stage) failed every ``list_triage_results``
    (``report``, ``serve``'s history) of a tracejudge one version behind with a ValidationError."""
    db = tmp_path / "s.db"

    def later(data: dict[str, Any]) -> dict[str, Any]:
        data["added_later"] = [1]
        data["stages"][0]["added_later"] = "x"
        return data

    before = _triage_stored_then(db, later)
    store = open_store(f"sqlite:///{db}")
    try:
        (after,) = store.list_triage_results()
        assert after.result == before.result
    finally:
        store.close()


def test_a_triage_result_of_a_later_layout_is_named_with_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    entry = _triage_stored_then(db, lambda data: {**data, "schema_version": 99})
    store = open_store(f"sqlite:///{db}")
    try:
        with pytest.raises(
            UnreadableRecordError,
            match=rf"(?s)triage result {entry.triage_id} has schema_version 99.*pip install -U tracejudge",
        ):
            store.list_triage_results()
    finally:
        store.close()
