"""A new SQLite store uses 16 KiB pages (a span's JSON fits in its page); a store written with the
4 KiB pages of earlier versions opens, keeps its page size and takes and returns spans as before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tracejudge.schema import RawSpan
from tracejudge.store import SqliteStore

T1 = "0af7651916cd43dd8448eb211c80319c"


def _span(n: int) -> RawSpan:
    return RawSpan(
        trace_id=T1,
        span_id=f"{n:016x}",
        name=f"s{n}",
        start_time_unix_nano=n,
        end_time_unix_nano=n + 1,
        attributes={"input.value": "context " * 600},
    )


def _page_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def test_a_new_store_uses_16k_pages(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "new.db")
    store.put_spans([_span(1)])
    store.close()
    assert _page_size(tmp_path / "new.db") == 16384


def test_a_store_with_4k_pages_keeps_them_and_works(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size=4096")
    conn.execute("CREATE TABLE earlier (x)")  # the file now exists with 4 KiB pages, as before
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    store.put_spans([_span(1), _span(2)])
    store.close()
    again = SqliteStore(path)
    try:
        assert [s.span_id for s in again.get_spans(T1)] == [f"{1:016x}", f"{2:016x}"]
        assert again.list_traces()[0].span_count == 2
    finally:
        again.close()
    assert _page_size(path) == 4096
