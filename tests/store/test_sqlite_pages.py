"""A new SQLite store uses 4 KiB pages (schema 6: a commit's random leaves of the trace-id index cost a
quarter of 16 KiB ones); a store written with the 16 KiB pages of schemas 1 to 5, or the 4 KiB ones
before them, opens, keeps its page size and takes and returns spans as before -- a chunk of spans
larger than a page included."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

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


def test_a_new_store_uses_4k_pages(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "new.db")
    store.put_spans([_span(1)])
    store.close()
    assert _page_size(tmp_path / "new.db") == 4096


@pytest.mark.parametrize("page_size", [4096, 16384])
def test_a_store_with_earlier_pages_keeps_them_and_works(tmp_path: Path, page_size: int) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size={page_size}")
    conn.execute("CREATE TABLE earlier (x)")  # the file now exists with 4 KiB pages, as before
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    store.put_spans([_span(1), _span(2)])
    # One chunk of 40 spans of ~5 KB that compress little: larger than either page size.
    noisy = [
        _span(n).model_copy(update={"attributes": {"input.value": random.Random(n).randbytes(2500).hex()}})
        for n in range(3, 43)
    ]
    assert store.put_spans(noisy) == 40
    store.close()
    again = SqliteStore(path)
    try:
        assert [s.span_id for s in again.get_spans(T1)] == [f"{n:016x}" for n in range(1, 43)]
        assert again.get_spans(T1)[5].attributes == noisy[3].attributes
        assert again.list_traces()[0].span_count == 42
    finally:
        again.close()
    assert _page_size(path) == page_size
