"""A statement interrupted by Ctrl-C or SIGTERM (the CLI raises KeyboardInterrupt for both) does not
leave the store's PostgreSQL connection unusable: when the interruption landed after the statement was
sent and before its answer was read, every later statement failed with the driver's "another command is
already in progress" — a stopped `score --run` worker reads traces on its event loop's thread, so its
leave_run failed so and its claimed items stayed claimed for their lease (a flake of
tests/cli/test_score_shared_run.py's SIGTERM test at load 10: 1 run in 40 of a SIGTERM loop).
The next statement now reconnects."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tracejudge.store._postgres import PostgresStore


def _sent_then_interrupted(cur: psycopg.Cursor[Any], *_: object, **__: object) -> None:
    """A statement the interruption cut between sending it and reading its answer."""
    cur.connection.pgconn.send_query(b"SELECT 1")
    raise KeyboardInterrupt


@pytest.mark.parametrize("statement_timeout_s", [None, 0.0], ids=["watchdog", "no-bound"])
def test_a_statement_cut_by_an_interrupt_leaves_the_next_one_working(
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    statement_timeout_s: float | None,
) -> None:
    store = PostgresStore(postgres_url, statement_timeout_s=statement_timeout_s)
    try:
        with monkeypatch.context() as patched:
            patched.setattr(psycopg.Cursor, "execute", _sent_then_interrupted)
            with pytest.raises(KeyboardInterrupt):
                store.get_spans("ab" * 16)  # a worker loading its next trace on the loop's thread
        failed: list[BaseException] = []

        def leave() -> None:  # what the stopped worker does next, from a thread
            try:
                store.leave_run("r", worker="w")
            except BaseException as exc:  # any failure is the finding
                failed.append(exc)

        thread = threading.Thread(target=leave)
        thread.start()
        thread.join()
        assert failed == []  # before: OperationalError 'another command is already in progress'
        assert store.get_run("r") is None
    finally:
        store.close()
