"""Where raw spans and run state live: SQLite by default, behind the :class:`Store` protocol."""

from __future__ import annotations

import os
from pathlib import Path

from tracejudge._errors import InputError
from tracejudge.store._protocol import LogEvent, RunProgress, Store, TraceSummary, TriageEntry
from tracejudge.store._sql import _SCHEMA_VERSION, SqlStore
from tracejudge.store._sqlite import SqliteStore

DEFAULT_STORE = "sqlite:///.tracejudge/tracejudge.db"

STORE_SCHEMA_VERSION = _SCHEMA_VERSION
"""The store schema this tracejudge writes (a newer store is refused; shown by ``--version``)."""

__all__ = [
    "DEFAULT_STORE",
    "STORE_SCHEMA_VERSION",
    "LogEvent",
    "RunProgress",
    "SqlStore",
    "SqliteStore",
    "Store",
    "TraceSummary",
    "TriageEntry",
    "open_store",
    "resolve_store_url",
]


def resolve_store_url(arg: str | None) -> str:
    """Argument > ``TRACEJUDGE_STORE`` > default."""
    return arg or os.environ.get("TRACEJUDGE_STORE") or DEFAULT_STORE


def open_store(url: str) -> Store:
    """Open the store a URL names: ``sqlite:///relative.db``, ``sqlite:////abs.db``, ``sqlite://:memory:``,
    ``postgresql://user:pass@host:5432/db``, or a bare file path."""
    if url.startswith(("postgresql://", "postgres://")):
        from tracejudge.store._postgres import PostgresStore

        return PostgresStore(url)
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :]
        path = rest[1:] if rest.startswith("/") else rest
        return SqliteStore(path or ":memory:")
    if "://" in url:
        raise InputError(f"unknown store URL scheme in {url!r}", hint="use sqlite:///PATH or a file path")
    return SqliteStore(Path(url))
