"""SQLite durability: the synchronous level is chosen on the store URL, committed spans survive a
SIGKILL of the writing process at either level, and the background checkpointer stops with the store."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tracejudge._errors import InputError
from tracejudge.schema import RawSpan
from tracejudge.store import SqliteStore, open_store
from tracejudge.store._chunks import chunk_span_ids
from tracejudge.store._sqlite import copy_wait

T = "4bf92f3577b34da6a3ce929d0e0e4736"
_LEVEL = {"normal": 1, "full": 2}


def _pragma(store: SqliteStore) -> int:
    return int(store._conn.execute("PRAGMA synchronous").fetchone()[0])


@pytest.mark.parametrize(
    ("suffix", "level"), [("", "full"), ("?synchronous=normal", "normal"), ("?synchronous=FULL", "full")]
)
def test_synchronous_comes_from_the_url(tmp_path: Path, suffix: str, level: str) -> None:
    store = open_store(f"sqlite:///{tmp_path}/s.db{suffix}")
    try:
        assert isinstance(store, SqliteStore)
        assert store.synchronous == level
        assert _pragma(store) == _LEVEL[level]
        assert store.path == f"{tmp_path}/s.db"  # the option is not part of the file name
    finally:
        store.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("s.db")) == ["s.db"]


def test_synchronous_keyword_wins_over_the_url(tmp_path: Path) -> None:
    store = SqliteStore(f"{tmp_path}/s.db?synchronous=full", synchronous="normal")
    try:
        assert _pragma(store) == _LEVEL["normal"]
    finally:
        store.close()


@pytest.mark.parametrize("suffix", ["?synchronous=off", "?journal_mode=delete", "?synchronous"])
def test_unknown_options_are_refused_with_a_hint(tmp_path: Path, suffix: str) -> None:
    with pytest.raises(InputError) as err:
        open_store(f"sqlite:///{tmp_path}/s.db{suffix}")
    assert "synchronous=normal" in (err.value.hint or "")
    assert not (tmp_path / "s.db").exists()


def test_checkpointer_copies_commits_into_the_database_and_stops_with_the_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    store.put_spans([RawSpan(trace_id=T, span_id=f"{i + 1:016x}", name="x" * 5000) for i in range(200)])
    checkpointer = store._checkpointer
    assert checkpointer is not None
    assert checkpointer._thread is not None
    thread = checkpointer._thread
    # Another connection (a `traces list` while receiving) sees every committed span.
    other = sqlite3.connect(tmp_path / "s.db")
    try:
        rows = other.execute("SELECT data FROM span_chunks").fetchall()
        assert sum(len(chunk_span_ids(data)) for (data,) in rows) == 200
    finally:
        other.close()
    store.close()
    assert not thread.is_alive()
    assert len(SqliteStore(tmp_path / "s.db").get_spans(T)) == 200


def _checkpointed_spans(db: Path, tmp: Path) -> int:
    """Spans in the database file itself: what checkpoints copied there (the WAL left out)."""
    copy = tmp / "main-only.db"
    copy.write_bytes(db.read_bytes())
    conn = sqlite3.connect(copy)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "span_chunks" not in tables:
            return 0
        return sum(len(chunk_span_ids(data)) for (data,) in conn.execute("SELECT data FROM span_chunks"))
    except sqlite3.DatabaseError:
        return -1  # copied while a checkpoint was writing it: look again
    finally:
        conn.close()


@pytest.mark.parametrize(("level", "coalesced"), [("full", True), ("normal", False)])
def test_a_burst_of_commits_is_copied_into_the_database_while_the_store_stays_open(
    tmp_path: Path, level: str, coalesced: bool
) -> None:
    # At synchronous=normal a commit reaches the disk with its checkpoint, so each is copied at once;
    # at full (the commit itself synced) a burst's checkpoints are coalesced -- and still all done.
    store = SqliteStore(tmp_path / "s.db", synchronous=level)  # type: ignore[arg-type]
    checkpointer = store._checkpointer
    assert checkpointer is not None
    assert (checkpointer._pause_s > 0) is coalesced
    try:
        for batch in range(5):
            store.put_spans(
                [
                    RawSpan(trace_id=f"{batch + 1:032x}", span_id=f"{i + 1:016x}", name="x" * 3000)
                    for i in range(40)
                ]
            )
        deadline = time.monotonic() + 60
        while _checkpointed_spans(tmp_path / "s.db", tmp_path) < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _checkpointed_spans(tmp_path / "s.db", tmp_path) == 200
        assert 1 <= checkpointer.checkpoints <= 5
    finally:
        store.close()


def test_at_full_the_copy_waits_for_a_pause_in_the_commits_up_to_a_bound() -> None:
    """The checkpointer's policy at synchronous=full (pause 0.05 s, at most 0.5 s): while commits keep
    coming it waits, so its writes do not compete with their syncs; after a pause, or once the first
    commit not copied is 0.5 s old, it copies. At normal (both 0) it copies at once."""
    # A commit just now: wait for the pause.
    assert copy_wait(first=10.0, last=10.0, now=10.0, pause=0.05, max_defer=0.5) == pytest.approx(0.05)
    # Commits keep coming (the last 0.01 s ago): wait on.
    assert copy_wait(first=10.0, last=10.2, now=10.21, pause=0.05, max_defer=0.5) == pytest.approx(0.04)
    # They paused: copy.
    assert copy_wait(first=10.0, last=10.2, now=10.26, pause=0.05, max_defer=0.5) == 0
    # They never pause: copy at the bound.
    assert copy_wait(first=10.0, last=10.49, now=10.495, pause=0.05, max_defer=0.5) == pytest.approx(0.005)
    assert copy_wait(first=10.0, last=10.6, now=10.6, pause=0.05, max_defer=0.5) == 0
    assert copy_wait(first=10.0, last=10.0, now=10.0, pause=0.0, max_defer=0.0) == 0


_WRITER = textwrap.dedent(
    """
    import sys
    from tracejudge.schema import RawSpan
    from tracejudge.store import open_store

    store = open_store(sys.argv[1])
    for batch in range(10_000):
        spans = [
            RawSpan(
                trace_id=f"{batch + 1:032x}", span_id=f"{i + 1:016x}", name="s", attributes={"pad": "x" * 999}
            )
            for i in range(50)
        ]
        store.put_spans(spans)
        print(batch, flush=True)  # acknowledged: put_spans returned, the transaction committed
    """
)


@pytest.mark.parametrize("level", ["normal", "full"])
def test_sigkill_mid_write_loses_no_committed_batch(tmp_path: Path, level: str) -> None:
    db = tmp_path / "s.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, f"sqlite:///{db}?synchronous={level}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acked = -1
    try:
        for line in proc.stdout:
            acked = int(line)
            if acked >= 30:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert acked >= 30
    store = SqliteStore(db)
    try:
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        summaries = {t.trace_id: t.span_count for t in store.list_traces()}
        for batch in range(acked + 1):
            assert len(store.get_spans(f"{batch + 1:032x}")) == 50
        # Whatever else landed landed whole: one transaction per batch.
        assert set(summaries.values()) == {50}
        assert len(summaries) >= acked + 1
    finally:
        store.close()
