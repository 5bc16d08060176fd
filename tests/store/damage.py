"""Damage a SQLite store as a bad disk or a copy taken without its WAL would: for the tests of what a loop
over the store does with a trace that no longer reads back."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def cut_chunks(db: Path, trace_id: str) -> None:
    """Cut the stored chunks of ``trace_id`` short (their first 20 bytes kept)."""
    with sqlite3.connect(db) as conn:
        changed = conn.execute(
            "UPDATE span_chunks SET data = substr(data, 1, 20)"
            " WHERE trace_seq = (SELECT seq FROM traces WHERE trace_id = ?)",
            (trace_id,),
        ).rowcount
    conn.close()
    assert changed, f"no chunk stored for trace {trace_id}"
