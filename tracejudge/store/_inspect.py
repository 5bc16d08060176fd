"""What a store is, read without changing it. Opening a store creates its tables and upgrades an older
schema in place; ``tracejudge doctor`` must do neither (an upgrade locks older tracejudge processes
out of the store), so it inspects through a read-only connection instead."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracejudge._errors import MissingDependencyError, StoreError
from tracejudge.store._open import sqlite_file
from tracejudge.store._sqlite import IMMUTABLE, has_side_file, read_only_connection, read_only_options

__all__ = ["StoreState", "inspect_store"]


@dataclass(frozen=True)
class StoreState:
    """A store as found, untouched."""

    schema_version: int | None
    """The schema version it records; None when it has no tracejudge tables (yet)."""
    has_traces: bool
    """Whether a trace is stored."""


_ABSENT = StoreState(schema_version=None, has_traces=False)


def inspect_store(url: str) -> StoreState:
    """The store ``url`` names, read through a read-only connection: nothing is created, upgraded or
    written (a SQLite file that does not exist is not created either). A :class:`StoreError` when it
    cannot be read."""
    path = sqlite_file(url)
    if path is None:
        return _inspect_postgres(url)
    if path == ":memory:" or not Path(path).is_file():
        return _ABSENT
    try:
        return _inspect_sqlite(Path(path).resolve())
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the store {path}: {exc}", hint=_SQLITE_HINT) from exc


def _inspect_sqlite(path: Path) -> StoreState:
    """Read a SQLite store as the read-only store opens it (:func:`read_only_options`: one policy), adding
    no file beside it and needing no write to its folder.

    Where that reads the file alone (``immutable``: a folder this process cannot write, no -wal or
    -journal beside the store), a read would miss commits a writer with more rights puts in a WAL
    meanwhile, or tear on a checkpoint copying pages into the file. A read that is over at once can
    check: it counts only when no side file appeared and the file's size and mtime are the same after
    it; otherwise it is tried again, and at last read through SQLite's locks (``mode=ro``, whose side
    files are there by then)."""
    for _ in range(3):
        options = read_only_options(path)
        if options != IMMUTABLE:
            return _read_sqlite(path, options)  # through SQLite's locks: a committed snapshot
        before = _stamp(path)
        try:
            state = _read_sqlite(path, options)
        except sqlite3.DatabaseError:
            if _stamp(path) == before and not has_side_file(path):
                raise  # the file as it is, not a torn read
            continue
        if _stamp(path) == before and not has_side_file(path):
            return state
    return _read_sqlite(path, "mode=ro")


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _read_sqlite(path: Path, options: str) -> StoreState:
    conn = read_only_connection(path, options)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return _state(conn.cursor(), tables)
    finally:
        conn.close()


_SQLITE_HINT = "check the path given with --store / TRACEJUDGE_STORE is a tracejudge SQLite file"


def _state(cur: Any, tables: set[str]) -> StoreState:
    if "schema_info" not in tables:
        return _ABSENT
    cur.execute("SELECT version FROM schema_info")
    row = cur.fetchone()
    if row is None:
        return _ABSENT
    has_traces = False
    if "traces" in tables:
        cur.execute("SELECT 1 FROM traces LIMIT 1")
        has_traces = cur.fetchone() is not None
    return StoreState(schema_version=int(row[0]), has_traces=has_traces)


def _inspect_postgres(url: str) -> StoreState:
    try:
        import psycopg
    except ImportError as exc:
        raise MissingDependencyError("psycopg", "postgres") from exc
    from tracejudge.store._postgres import redact_url

    try:
        conn = psycopg.connect(url, autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to the store {redact_url(url)}: {str(exc).strip().splitlines()[0]}",
            hint="check that PostgreSQL is running and the URL's user, password and database are right",
        ) from None
    try:
        with conn.cursor() as cur:
            # Every statement of this session is read-only: the server refuses a write, should one slip in.
            cur.execute("SET default_transaction_read_only = on")
            # The tables tracejudge's own unqualified names would find (the same search_path).
            cur.execute(
                "SELECT t FROM unnest(ARRAY['schema_info', 'traces']) AS t WHERE to_regclass(t) IS NOT NULL"
            )
            return _state(cur, {str(r[0]) for r in cur.fetchall()})
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot read the store {redact_url(url)}: {str(exc).strip().splitlines()[0]}",
            hint="the user needs to read the store's tables (SELECT)",
        ) from None
    finally:
        conn.close()
