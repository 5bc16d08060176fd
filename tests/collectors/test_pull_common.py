"""What the pulling collectors share: the watermark two pullers of one scope leave (advanced by
compare-and-set, never moved back), and the tally of a listing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracejudge.store import SqliteStore
from tracejudge_collectors._pull_common import ListingTally, Window, parse_watermark

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


def test_a_listing_tally_keeps_the_latest_start_and_counts_skips():
    told: list[tuple[str, bool]] = []

    class Run(ListingTally):
        def __init__(self) -> None:
            self.skipped = 0
            self.latest = datetime(2026, 3, 1, tzinfo=UTC)
            self.on_trace = lambda trace_id, fetched: told.append((trace_id, fetched))

    run = Run()
    for started in (datetime(2026, 2, 1, tzinfo=UTC), None, datetime(2026, 3, 2, tzinfo=UTC)):
        run.note_start(started)
    run.skip("a" * 32)
    assert run.latest == datetime(2026, 3, 2, tzinfo=UTC)
    assert (run.skipped, told) == (1, [("a" * 32, False)])
