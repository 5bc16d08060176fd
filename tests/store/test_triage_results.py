"""Stored triage results: what `tracejudge report` and `serve` read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tracejudge.schema import Localization, StageResult
from tracejudge.store import SqliteStore


def _loc(trace_id: str, verdict: str = "dropped_in_context", ticket: str | None = "EXP-1") -> Localization:
    return Localization(
        ticket=ticket,
        trace_id=trace_id,
        task_time=datetime(2026, 1, 1, tzinfo=UTC),
        verdict=verdict,  # type: ignore[arg-type]
        stages=(StageResult(name="indexed", status="pass"), StageResult(name="in_context", status="fail")),
    )


def test_put_and_list_newest_first(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    t0 = datetime(2026, 2, 1, tzinfo=UTC)
    store.put_triage_result(_loc("a"), triaged_at=t0)
    store.put_triage_result(_loc("b", "no_fault", None), ticket="file-b", triaged_at=t0 + timedelta(hours=1))
    rows = store.list_triage_results()
    assert [r.trace_id for r in rows] == ["b", "a"]
    assert rows[0].ticket == "file-b"
    assert rows[1].ticket == "EXP-1"
    assert rows[1].result == _loc("a")
    assert [r.trace_id for r in store.list_triage_results(trace_id="a")] == ["a"]
    assert [r.trace_id for r in store.list_triage_results(since=t0 + timedelta(minutes=1))] == ["b"]
    assert len(store.list_triage_results(limit=1)) == 1


def test_same_entry_twice_is_kept_once_and_rerun_adds(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    t0 = datetime(2026, 2, 1, tzinfo=UTC)
    first = store.put_triage_result(_loc("a"), triaged_at=t0)
    again = store.put_triage_result(_loc("a"), triaged_at=t0)
    assert first.triage_id == again.triage_id
    assert len(store.list_triage_results()) == 1
    store.put_triage_result(_loc("a", "ignored_by_model"), triaged_at=t0 + timedelta(days=1))
    rows = store.list_triage_results()
    assert [r.result.verdict for r in rows] == ["ignored_by_model", "dropped_in_context"]
    store.close()
    reopened = SqliteStore(tmp_path / "s.db")
    assert len(reopened.list_triage_results()) == 2
