"""The watermark two pullers of one scope leave: advanced by compare-and-set, never moved back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracejudge.store import SqliteStore
from tracejudge_collectors._pull_common import Window, parse_watermark

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _iso(dt: datetime) -> str:
    return dt.isoformat()


def test_a_puller_finishing_later_with_an_older_window_keeps_the_newer_watermark(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    try:
        # Both start from the same (absent) watermark; the one that reached further finishes first.
        slow = Window(store, "p.watermark:x", None, timedelta(minutes=5))
        fast = Window(store, "p.watermark:x", None, timedelta(minutes=5))
        assert fast.advance(complete=True, latest=T0 + timedelta(hours=2), iso=_iso) == T0 + timedelta(
            hours=2
        )
        assert slow.advance(complete=True, latest=T0 + timedelta(hours=1), iso=_iso) == T0 + timedelta(
            hours=2
        )
        assert parse_watermark(store.get_meta("p.watermark:x")) == (None, T0 + timedelta(hours=2))
        # A run asked to start later continues a watermark that covers its start, and extends it.
        late_start = Window(store, "p.watermark:x", T0 + timedelta(days=1), timedelta(minutes=5))
        assert late_start.advance(complete=True, latest=T0 + timedelta(days=2), iso=_iso) == T0 + timedelta(
            days=2
        )
        assert parse_watermark(store.get_meta("p.watermark:x")) == (None, T0 + timedelta(days=2))
    finally:
        store.close()
