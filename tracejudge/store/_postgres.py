"""PostgreSQL store, for several workers sharing one store. psycopg is imported here only, lazily."""

from __future__ import annotations

import re
from typing import Any

from tracejudge._errors import MissingDependencyError, StoreError
from tracejudge.store._sql import SqlStore

# One advisory lock key for span writes: the dedup lookup and the trace summary update must not
# interleave between two receivers writing spans of the same trace.
_SPAN_WRITE_LOCK = 0x7472_6A64  # "trjd"


def redact_url(url: str) -> str:
    """The URL with any password replaced, for messages."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


class PostgresStore(SqlStore):
    """Store on a PostgreSQL database (``postgresql://user:pass@host/db``)."""

    _placeholder = "%s"
    _begin = "BEGIN"

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise MissingDependencyError("psycopg", "postgres") from exc
        self.url = redact_url(url)
        try:
            conn: Any = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to the store {self.url}: {str(exc).strip().splitlines()[0]}",
                hint="check that PostgreSQL is running and the URL's user, password and database are right",
            ) from None
        super().__init__(conn, self.url)
        try:
            self._setup()
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(
                f"cannot prepare the store {self.url}: {exc}",
                hint="the user needs CREATE rights on the database",
            ) from None

    def _lock_span_writes(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SPAN_WRITE_LOCK,))
