"""A PostgreSQL server that stops answering at the network level (its host gone, a partition), as
opposed to one that ends its sessions: the OS alone waits minutes — psycopg's connect ~130 s by
default, a statement in flight until the kernel gives up retransmitting. The store's connections give
up sooner: ``connect_timeout``, TCP keepalives and ``tcp_user_timeout``, each of which the URL may set
itself (the URL wins).

The black hole here is the kernel's own: a listener whose accept queue is full drops each SYN it is
sent (nothing answers, as with a host gone), so connecting waits for the timeout. A statement in flight
on a live TCP connection cannot be black-holed from user space (the proxy's kernel acknowledges what
it is sent), so the keepalive and user-timeout settings are read back from the connection's socket."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.store.test_postgres_reconnect import _end_every_session, _span
from tracejudge import StoreUnreachableError
from tracejudge.store import SqlStore, open_store


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
            server = socket.create_connection(self._target)
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
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

    def close(self) -> None:
        self._closed = True
        self._accepting.set()
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
