"""PostgreSQL restarted under a running store (every session ended, as a restart or a failover does):
the statement that finds its connection gone fails as a StoreError saying so — a receiver then answers
503 and the sender retries — and the store's next statement runs on a new connection, instead of every
later write failing with the driver's "the connection is closed" for as long as the process lives."""

from __future__ import annotations

import psycopg
import pytest

from tests.store.conftest import postgres_admin_url
from tracejudge import StoreError
from tracejudge.schema import RawSpan
from tracejudge.store import open_store

TRACE = "ab" * 16


def _span(i: int) -> RawSpan:
    return RawSpan(
        trace_id=TRACE,
        span_id=f"{i + 1:016x}",
        parent_span_id=None if i == 0 else f"{1:016x}",
        name=f"s{i}",
        start_time_unix_nano=1_000 + i,
        end_time_unix_nano=2_000 + i,
    )


def _end_every_session(url: str) -> None:
    """What a restart does to the store's connection: the server ends it (this test database's only)."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def test_a_dropped_connection_fails_one_statement_as_a_store_error_and_the_next_reconnects(
    postgres_url: str,
) -> None:
    store = open_store(postgres_url)
    try:
        assert store.put_spans([_span(0), _span(1)]) == 2
        _end_every_session(postgres_url)
        with pytest.raises(StoreError, match="lost its connection") as caught:
            store.put_spans([_span(2), _span(3)])
        assert "tracejudge:tracejudge@" not in str(caught.value)  # the password never shows
        assert caught.value.hint
        # Nothing of the failed write was stored; written again, all of it is, once, summary and all.
        assert store.put_spans([_span(1), _span(2), _span(3)]) == 2
        assert [s.span_id for s in store.get_spans(TRACE)] == [_span(i).span_id for i in range(4)]
        (summary,) = store.list_traces()
        assert summary.span_count == 4
        # Reads reconnect too.
        _end_every_session(postgres_url)
        with pytest.raises(StoreError, match="lost its connection"):
            store.list_traces()
        assert len(store.get_spans(TRACE)) == 4
    finally:
        store.close()


def test_a_server_still_down_fails_each_statement_with_what_to_do_until_it_is_back(postgres_url: str) -> None:
    store = open_store(postgres_url)
    name = postgres_url.rsplit("/", 1)[1]
    try:
        store.put_spans([_span(0)])
        with psycopg.connect(postgres_admin_url(), autocommit=True) as admin:
            # Down, as far as the store can tell: its session ended and no new one accepted.
            admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
            admin.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                " WHERE datname = %s AND usename = current_user AND pid <> pg_backend_pid()",
                (name,),
            )
            # The statement that finds the session gone, then each while no new one is accepted.
            for message in ("lost its connection", "cannot reconnect", "cannot reconnect"):
                with pytest.raises(StoreError, match=message) as caught:
                    store.put_spans([_span(1)])
                assert "run a stopped command again" in caught.value.hint
            admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")
        assert store.put_spans([_span(1)]) == 1
        assert len(store.get_spans(TRACE)) == 2
    finally:
        store.close()
