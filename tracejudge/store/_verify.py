"""Whether every stored trace still reads back (``tracejudge doctor --deep``).

A store's file can be damaged (a disk error, a copy taken mid-write without its WAL, another program's
writes); a read of a damaged trace is a :class:`~tracejudge.StoreError` whose hint sends the user here.
This reads every trace back through the store's own read path — what triage, sweep and score would hit —
and, for a SQLite file, runs SQLite's own ``quick_check`` of its pages first. Nothing is written: the store
is opened read-only, at whatever schema it has (no upgrade), and a store with no tracejudge tables is not
opened at all."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracejudge._errors import StoreDamageError, StoreError
from tracejudge.store._inspect import inspect_store
from tracejudge.store._open import open_store, sqlite_file
from tracejudge.store._sqlite import read_only_connection, read_only_options

__all__ = ["StoreVerification", "UnreadableTrace", "verify_store"]

# quick_check stops after this many problems: a damaged file can report one per page.
_MOST_PROBLEMS = 20


@dataclass(frozen=True)
class UnreadableTrace:
    """A stored trace whose spans do not read back."""

    trace_id: str
    """The trace's id."""
    error: str
    """What the read said."""


@dataclass(frozen=True)
class StoreVerification:
    """What reading every stored trace back found."""

    traces: int
    """Traces read (those that read back and those that did not)."""
    spans: int
    """Spans read back."""
    unreadable: tuple[UnreadableTrace, ...]
    """The traces that did not read back, in the store's order."""
    file_problems: tuple[str, ...]
    """What SQLite's ``quick_check`` reported about the file's pages (at most 20); empty when it found
    nothing, and for PostgreSQL (whose server checks its own pages)."""

    @property
    def ok(self) -> bool:
        """Whether everything read back and the file's pages are sound."""
        return not self.unreadable and not self.file_problems


def verify_store(url: str, *, progress: Callable[[int, int], None] | None = None) -> StoreVerification:
    """Read every trace of the store ``url`` names back, without writing it; ``progress(done, total)``
    after each trace. A store that does not exist or holds no tracejudge tables verifies as empty. A
    :class:`StoreError` when the store cannot be opened at all."""
    path = sqlite_file(url)
    file = None if path in (None, ":memory:") else Path(path).resolve()
    problems = _quick_check(file) if file is not None and file.is_file() else ()
    try:
        state = inspect_store(url)
    except StoreError:
        if problems:  # what SQLite found wrong says more than the read that failed on it
            return StoreVerification(traces=0, spans=0, unreadable=(), file_problems=problems)
        raise
    if state.schema_version is None:
        return StoreVerification(traces=0, spans=0, unreadable=(), file_problems=problems)
    store = open_store(url, upgrade=False, read_only=True)
    unreadable: list[UnreadableTrace] = []
    spans = 0
    try:
        ids = list(store.iter_trace_ids())
        for done, trace_id in enumerate(ids, 1):
            try:
                spans += len(store.get_spans(trace_id))
            except (StoreDamageError, sqlite3.DatabaseError) as exc:
                # Another StoreError (the server gone, the store locked) says nothing of this trace: raised.
                message = exc.message if isinstance(exc, StoreDamageError) else str(exc)
                unreadable.append(UnreadableTrace(trace_id=trace_id, error=message))
            if progress is not None:
                progress(done, len(ids))
    finally:
        store.close()
    return StoreVerification(
        traces=len(ids), spans=spans, unreadable=tuple(unreadable), file_problems=problems
    )


def _quick_check(path: Path) -> tuple[str, ...]:
    """SQLite's ``quick_check`` of the file's pages and records: its problems (none when it says ok)."""
    conn = read_only_connection(path, read_only_options(path))
    try:
        rows = conn.execute(f"PRAGMA quick_check({_MOST_PROBLEMS})").fetchall()
    except sqlite3.DatabaseError as exc:
        return (str(exc),)
    finally:
        conn.close()
    found = tuple(str(r[0]) for r in rows)
    return () if found == ("ok",) else found
