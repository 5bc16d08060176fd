"""Which store a URL names, resolved at the edge: argument > ``TRACEJUDGE_STORE`` > default."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tracejudge._errors import InputError
from tracejudge.store._protocol import Store
from tracejudge.store._sqlite import SqliteStore, split_options

DEFAULT_STORE = "sqlite:///.tracejudge/tracejudge.db"

# A path that starts like a URL's scheme (two or more letters and a colon: not a Windows drive) is a
# mistyped URL, not a file: `postgresql:/host/db` would otherwise be a SQLite file made in the working
# folder, and a receiver would acknowledge spans into it that never reach PostgreSQL.
_SCHEME_LIKE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")


def resolve_store_url(arg: str | None) -> str:
    """Argument > ``TRACEJUDGE_STORE`` > default."""
    return arg or os.environ.get("TRACEJUDGE_STORE") or DEFAULT_STORE


def open_store(
    url: str, *, upgrade: bool = True, read_only: bool = False, statement_timeout_s: float | None = None
) -> Store:
    """Open the store a URL names: ``sqlite:///relative.db``, ``sqlite:////abs.db``, ``sqlite://:memory:``,
    ``postgresql://user:pass@host:5432/db``, or a bare file path.

    A store at an older schema is upgraded in place on open, unless ``upgrade=False`` (the commands
    that only read): then it is read as it is and upgraded only when spans are stored in it.
    ``read_only=True`` (with it) opens an existing SQLite store without writing it or adding a file
    beside it, also in a folder that cannot be written (see ``read_only_options``); a store that
    does not exist yet, an in-memory one and PostgreSQL are opened as with ``upgrade=False``.

    ``statement_timeout_s`` (PostgreSQL): how long a statement may go unanswered before its
    connection is closed and it fails as :class:`~tracejudge.StoreUnreachableError`; default
    ``TRACEJUDGE_STORE_STATEMENT_TIMEOUT``, else 120 s; 0: no bound."""
    if url.startswith(("postgresql://", "postgres://")):
        from tracejudge.store._postgres import PostgresStore

        return PostgresStore(url, upgrade=upgrade, statement_timeout_s=statement_timeout_s)
    path = sqlite_path(url)
    target = path if url.startswith("sqlite://") else Path(path)
    if read_only:
        file = Path(split_options(path)[0] if isinstance(target, str) else path)
        if str(file) != ":memory:" and file.is_file() and file.stat().st_size > 0:
            return SqliteStore(target, upgrade=False, read_only=True)
    return SqliteStore(target, upgrade=upgrade)


def sqlite_path(url: str) -> str:
    """The SQLite path a store URL names (``:memory:`` for ``sqlite://``); an InputError for a URL of
    another scheme than sqlite or postgresql."""
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :]
        return (rest[1:] if rest.startswith("/") else rest) or ":memory:"
    if "://" in url:
        raise InputError(f"unknown store URL scheme in {url!r}", hint="use sqlite:///PATH or a file path")
    if scheme := _SCHEME_LIKE.match(url):
        # Only the scheme is shown: what follows may hold a password the redactor cannot tell as one.
        raise InputError(
            f"the store {scheme.group(1)}:… is neither a store URL nor a file path",
            hint="write postgresql://USER@HOST:5432/DB (the password after USER:) or sqlite:///PATH"
            " (a file whose name has a colon: ./NAME)",
        )
    return url


def sqlite_file(url: str) -> str | None:
    """The SQLite file a store URL names, without its options (``?synchronous=…``): ``:memory:`` for
    an in-memory store, None for PostgreSQL; an InputError for a URL of another scheme."""
    if url.startswith(("postgresql://", "postgres://")):
        return None
    return split_options(sqlite_path(url))[0]
