"""SQLite store, the embedded default."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tracejudge._errors import StoreError
from tracejudge.store._sql import SqlStore


class SqliteStore(SqlStore):
    """Store on a SQLite file (or ``:memory:``)."""

    _begin = "BEGIN IMMEDIATE"

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=30000")
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
            # FULL: a span is on disk before the receiver acknowledges it.
            conn.execute("PRAGMA synchronous=FULL")
            super().__init__(conn, self.path)
            self._setup()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"cannot open the store {self.path}: {exc}",
                hint="check the path given with --store / TRACEJUDGE_STORE is a tracejudge SQLite file",
            ) from exc
