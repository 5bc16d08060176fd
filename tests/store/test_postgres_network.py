"""A PostgreSQL server that stops answering at the network level (its host gone, a partition), as
opposed to one that ends its sessions: the OS alone waits minutes — psycopg's connect ~130 s by
default, a statement in flight until the kernel gives up retransmitting. The store's connections give
up sooner: ``connect_timeout``, TCP keepalives and ``tcp_user_timeout``, each of which the URL may set
itself (the URL wins).

The black hole here is the kernel's own: a listener whose accept queue is full drops each SYN it is
sent (nothing answers, as with a host gone), so connecting waits for the timeout. A statement in flight
on a live TCP connection cannot be black-holed from user space (the proxy's kernel acknowledges what
it is sent), so the keepalive and user-timeout settings are read back from the connection's socket.

That acknowledging proxy is itself the other case: a server frozen while its kernel still answers TCP
(the postmaster's backend stopped, a host swapping, a middlebox that stops forwarding). Keepalives
are answered and no data goes unacknowledged, so only the store's own statement bound
(``TRACEJUDGE_STORE_STATEMENT_TIMEOUT``) ends such a statement: the proxy's ``freeze()``."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.store.test_postgres_reconnect import _end_every_session, _span
from tracejudge import InputError, StoreUnreachableError
from tracejudge.store import SqlStore, open_store
from tracejudge.store._postgres import PostgresStore


class BlackHoleProxy:
    """A TCP proxy to PostgreSQL that can stop answering: its connections are cut and new ones are
    never answered (the listener's accept queue kept full, so the kernel drops their SYNs)."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit("@", 1)[1].split("/", 1)[0].rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=16)
        self.port = int(self._listener.getsockname()[1])
        self._open: list[socket.socket] = []
        self._fillers: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepting = threading.Event()
        self._accepting.set()
        self._flowing = threading.Event()  # cleared by freeze(): bytes are taken but not passed on
        self._flowing.set()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def url(self, url: str) -> str:
        userinfo, rest = url.split("@", 1)
        return f"{userinfo}@127.0.0.1:{self.port}/{rest.split('/', 1)[1]}"

    def _accept(self) -> None:
        while not self._closed:
            self._accepting.wait()
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._accepting.is_set() or self._closed:
                client.close()
                continue
            if not self._flowing.is_set():
                with self._lock:  # frozen: the connection is taken and never answered
                    self._open.append(client)
                continue
            server = socket.create_connection(self._target)
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                self._flowing.wait()
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def black_hole(self) -> None:
        """Cut every connection and answer no new one."""
        self._accepting.clear()
        # The accept thread may be blocked in accept(): let one connection wake it (then refused).
        poke = socket.create_connection(("127.0.0.1", self.port))
        poke.close()
        self._listener.listen(0)
        # A backlog of 0 holds one connection: with it queued and never accepted, SYNs are dropped.
        self._fillers.append(socket.create_connection(("127.0.0.1", self.port)))
        with self._lock:
            cut, self._open = self._open, []
        for s in cut:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def freeze(self) -> None:
        """Stop passing bytes on, the connections kept open: what is sent is acknowledged (by this
        process's kernel) and never answered, as by a frozen server. New connections are taken and
        never answered either."""
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._accepting.set()
        self._flowing.set()
        for s in [*self._fillers, *self._open]:
            s.close()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[BlackHoleProxy]:
    p = BlackHoleProxy(postgres_url)
    try:
        yield p
    finally:
        p.close()


def _socket_of(store: SqlStore) -> socket.socket:
    conn: Any = store._conn._conn  # the live psycopg connection under the reconnecting one
    return socket.socket(fileno=os.dup(conn.pgconn.socket))


def _settings(store: SqlStore) -> tuple[int, int, int]:
    with _socket_of(store) as s:
        return (
            s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            s.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        )


def test_the_stores_connections_are_probed_and_give_up_on_unacknowledged_data(postgres_url: str) -> None:
    store = open_store(postgres_url)
    assert isinstance(store, SqlStore)
    try:
        assert _settings(store) == (1, 10, 20_000)
        _end_every_session(postgres_url)  # and so is the connection made again after a restart
        with pytest.raises(StoreUnreachableError):
            store.put_spans([_span(0)])
        assert store.put_spans([_span(0)]) == 1
        assert _settings(store) == (1, 10, 20_000)
    finally:
        store.close()


def test_the_urls_own_settings_win(postgres_url: str) -> None:
    store = open_store(f"{postgres_url}?keepalives_idle=30&tcp_user_timeout=0")
    assert isinstance(store, SqlStore)
    try:
        assert _settings(store) == (1, 30, 0)
    finally:
        store.close()
    store = open_store(f"{postgres_url}?keepalives=0")
    assert isinstance(store, SqlStore)
    try:
        assert _settings(store)[0] == 0
    finally:
        store.close()


def test_reconnecting_to_a_server_that_does_not_answer_gives_up_and_queued_statements_fail_with_it(
    postgres_url: str, proxy: BlackHoleProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, each reconnect waited psycopg's ~130 s (this test's threads are given 60 s), one after
    another for the statements queued behind it; now the first gives up after the connect timeout
    and the ones that waited for it fail with its error at once."""
    import psycopg

    store = open_store(proxy.url(postgres_url))
    assert isinstance(store, SqlStore)
    attempts: list[str] = []
    connect = psycopg.connect

    def counted(*args: Any, **kwargs: Any) -> Any:
        attempts.append("connect")
        return connect(*args, **kwargs)

    try:
        assert store.put_spans([_span(0)]) == 1
        proxy.black_hole()
        monkeypatch.setattr(psycopg, "connect", counted)
        errors: list[BaseException] = []

        def statement() -> None:
            try:
                store.list_traces()
            except BaseException as exc:  # reported below
                errors.append(exc)

        # The first finds the connection cut; the rest queue behind its reconnect.
        threads = [threading.Thread(target=statement) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), "a statement still waits for the server"
        assert len(errors) == 4
        assert all(isinstance(e, StoreUnreachableError) for e in errors), errors
        assert "tracejudge:tracejudge@" not in "".join(str(e) for e in errors)
        assert sum("cannot reconnect" in str(e) for e in errors) >= 3
        assert len(attempts) == 1  # one wait for the timeout, not one per statement
    finally:
        store.close()


def _in_thread(call: Any) -> list[Any]:
    """What ``call()`` returned or raised, made in a thread given 60 s (a hung statement fails here)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # reported by the caller
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "a statement still waits for the frozen server"
    return outcome


def _again(call: Any) -> Any:
    """``call()`` made again while it finds the store unreachable (for up to a minute)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return call()
        except StoreUnreachableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_statement_a_frozen_server_never_answers_fails_after_the_bound_and_the_next_reconnects(
    postgres_url: str, proxy: BlackHoleProxy
) -> None:
    """Before, the statement waited forever: the proxy's kernel acknowledges every byte and answers
    every keepalive, so neither keepalives nor tcp_user_timeout ever fire."""
    store = open_store(f"{proxy.url(postgres_url)}?connect_timeout=2", statement_timeout_s=1)
    assert isinstance(store, SqlStore)
    try:
        assert store.put_spans([_span(0)]) == 1
        proxy.freeze()
        (error,) = _in_thread(lambda: store.put_spans([_span(1)]))
        assert isinstance(error, StoreUnreachableError), error
        assert "did not answer a statement within 1 s; this side closed its connection" in error.message
        assert "server closed" not in error.message  # the driver's words would blame the server
        assert "TRACEJUDGE_STORE_STATEMENT_TIMEOUT" in str(error.hint)
        assert "tracejudge:tracejudge@" not in str(error)
        # Still frozen: the new connection is not answered either, and gives up after connect_timeout.
        (error,) = _in_thread(store.list_traces)
        assert isinstance(error, StoreUnreachableError), error
        assert "cannot reconnect" in error.message
        proxy.thaw()
        # The write that was cut was not committed; made again, it is, once (made again as a worker
        # does: the failed reconnect's error stands for a second, so that queued statements share it).
        assert _again(lambda: store.put_spans([_span(1)])) == 1
        assert [s.span_id for s in store.get_spans(_span(0).trace_id)] == [_span(0).span_id, _span(1).span_id]
        (summary,) = store.list_traces()
        assert summary.span_count == 2
    finally:
        store.close()


def test_a_slow_answer_within_the_bound_is_waited_for(postgres_url: str) -> None:
    """The bound cuts only what goes unanswered past it: a statement that takes a while but answers in
    time keeps its connection (the same one serves the next statement)."""
    store = open_store(postgres_url, statement_timeout_s=30)
    assert isinstance(store, SqlStore)
    try:
        before: Any = store._conn._conn
        with store._lock:
            cur = store._conn.cursor()
            cur.execute("SELECT pg_sleep(0.5)")
        assert store.put_spans([_span(0)]) == 1
        assert store._conn._conn is before
    finally:
        store.close()


def test_the_statement_bound_resolves_argument_then_environment_then_default(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracejudge.cli import cli

    def resolved(*args: str) -> float:
        ctx = cli.make_context("tracejudge", ["--store", postgres_url, *args, "traces", "list"])
        with ctx:
            assert cli.callback is not None
            ctx.invoke(cli.callback, **ctx.params)  # the root group's settings, resolved once
            store = ctx.obj.store
            assert isinstance(store, PostgresStore)
            return store.statement_timeout_s

    monkeypatch.delenv("TRACEJUDGE_STORE_STATEMENT_TIMEOUT", raising=False)
    assert resolved() == 120
    assert resolved("--store-statement-timeout", "7") == 7
    monkeypatch.setenv("TRACEJUDGE_STORE_STATEMENT_TIMEOUT", "300")
    assert resolved() == 300
    assert resolved("--store-statement-timeout", "0") == 0  # the argument wins; 0: no bound
    monkeypatch.setenv("TRACEJUDGE_STORE_STATEMENT_TIMEOUT", "soon")
    with pytest.raises(InputError, match="TRACEJUDGE_STORE_STATEMENT_TIMEOUT='soon' is not a number"):
        open_store(postgres_url)
