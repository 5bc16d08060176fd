"""PostgreSQL store, for several receivers, pullers and workers sharing one store. psycopg is imported
here only, lazily.

Concurrent writers take no global lock: a span is stored once by its primary key (``ON CONFLICT DO
NOTHING``, which waits for a concurrent insert of the same key to commit or roll back), and a trace's
summary is an upsert folding in only the spans this transaction actually inserted (min start, max end,
count += inserted), so a span another writer stored first is never counted twice. Rows are written in
key order, so two writers never wait on each other in a cycle; a deadlock or serialization failure
the server reports anyway is retried.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tracejudge._errors import InputError, MissingDependencyError, StoreError, StoreUnreachableError
from tracejudge._redact import redact
from tracejudge.store._protocol import LogEvent, MetaSwap
from tracejudge.store._sql import (
    INSERT_SESSION,
    AnySpan,
    SqlStore,
    dedup_spans,
    fold_traces,
    session_pairs,
    stored_forms,
)

# Serializes only the schema set-up (CREATE TABLE IF NOT EXISTS races on PostgreSQL's catalog).
_SETUP_LOCK = 0x7472_6A64  # "trjd"
_RETRIES = 8

# Spans inserted from arrays in one statement; what it returns is what this transaction inserted.
# The arrays go in binary (%b): as text, psycopg escapes every quote of every JSON payload.
_INSERT_SPANS = """
INSERT INTO spans (trace_id, span_id, parent_span_id, name, start_ns, end_ns, source, payload, otlp,
                   received_at)
SELECT t, s, p, n, st, en, src, pl, ob, %s
FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::bigint[], %b::bigint[], %b::text[],
            %b::text[], %b::bytea[]) AS u(t, s, p, n, st, en, src, pl, ob)
ON CONFLICT (trace_id, span_id) DO NOTHING
RETURNING trace_id, span_id
"""

# A trace summary folded in: excluded.* describes only the spans this transaction inserted.
_UPSERT_TRACES = """
INSERT INTO traces (trace_id, name, start_ns, end_ns, span_count, sources, first_seen, seq)
SELECT t, n, st, en, c, src, %s, nextval('traces_seq_gen')
FROM unnest(%b::text[], %b::text[], %b::bigint[], %b::bigint[], %b::bigint[], %b::text[])
     WITH ORDINALITY AS u(t, n, st, en, c, src, o)
ORDER BY o
ON CONFLICT (trace_id) DO UPDATE SET
    name = COALESCE(excluded.name, traces.name),
    start_ns = LEAST(traces.start_ns, excluded.start_ns),
    end_ns = GREATEST(traces.end_ns, excluded.end_ns),
    span_count = traces.span_count + excluded.span_count,
    sources = (
        SELECT string_agg(DISTINCT x, ',' ORDER BY x)
        FROM unnest(string_to_array(traces.sources || ',' || excluded.sources, ',')) AS x
        WHERE x <> ''
    )
"""

_INSERT_LOG_EVENTS = """
INSERT INTO log_events (event_id, trace_id, span_id, time_ns, seq, payload, received_at)
SELECT i, t, s, tn, nextval('log_events_seq_gen'), pl, %s
FROM unnest(%b::text[], %b::text[], %b::text[], %b::bigint[], %b::text[])
     WITH ORDINALITY AS u(i, t, s, tn, pl, o)
ORDER BY o
ON CONFLICT (event_id) DO NOTHING
"""


def redact_url(url: str) -> str:
    """The URL with any password replaced, for messages and the store's own ``url``."""
    return redact(url)


class PostgresStore(SqlStore):
    """Store on a PostgreSQL database (``postgresql://user:pass@host/db``); ``upgrade=False`` leaves a
    store at an older schema as it is until spans are stored (see :meth:`SqlStore._setup`)."""

    _placeholder = "%s"
    _begin = "BEGIN"
    _now_ms = "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    _skip_locked = " FOR UPDATE SKIP LOCKED"
    _blob = "BYTEA"
    shared_runs = True
    # Spans, traces and sessions stay keyed by trace_id (store schemas 3 and 4 changed SQLite's keys
    # only): concurrent writers dedup on that key before the trace's row, and so its seq, exists.
    _by_seq = False

    def __init__(self, url: str, *, upgrade: bool = True, statement_timeout_s: float | None = None) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise MissingDependencyError("psycopg", "postgres") from exc
        self.url = redact_url(url)
        self.statement_timeout_s = statement_timeout(statement_timeout_s)
        """How long a statement may go unanswered before its connection is given up (0: no bound)."""
        conn = _Reconnecting(url, self.url, self.statement_timeout_s)
        super().__init__(conn, self.url)
        try:
            self._setup(upgrade=upgrade)
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(
                f"cannot prepare the store {self.url}: {exc}",
                hint="the user needs CREATE rights on the database",
            ) from None

    def _lock_setup(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))

    def _setup_engine(self, cur: Any) -> None:
        # Sequences for arrival order: MAX(seq) + 1 would hand two concurrent writers the same number.
        for table, seq in (("traces", "traces_seq_gen"), ("log_events", "log_events_seq_gen")):
            cur.execute(f"CREATE SEQUENCE IF NOT EXISTS {seq}")
            # A store written before the sequence existed continues after its highest seq (only then:
            # never set back a sequence that running writers advance).
            cur.execute(
                f"SELECT setval('{seq}', m) FROM (SELECT MAX(seq) AS m FROM {table}) AS t"  # noqa: S608
                f" WHERE m > (SELECT last_value FROM {seq})"
            )

    def _write(self, work: Any) -> Any:
        """Run ``work(cur)`` in one transaction, retried when the server picks it as a deadlock victim
        or reports a serialization failure (both leave nothing written)."""
        import psycopg.errors

        with self._lock:
            for attempt in range(_RETRIES):
                cur = self._conn.cursor()
                try:
                    cur.execute("BEGIN")
                    result = work(cur)
                    cur.execute("COMMIT")
                    return result
                except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                    cur.execute("ROLLBACK")
                    if attempt == _RETRIES - 1:
                        raise
                    time.sleep(0.01 * (attempt + 1))
                except BaseException:
                    cur.execute("ROLLBACK")
                    raise
        raise AssertionError("unreachable")

    def put_spans(
        self,
        spans: Iterable[AnySpan],
        *,
        meta: Mapping[str, str] | None = None,
        swaps: Sequence[MetaSwap] = (),
    ) -> int:
        self._ready_for_spans()
        batch = dedup_spans(spans)
        if not batch:
            self._put_metas(meta, swaps)
            return 0
        columns = _span_columns([batch[k] for k in sorted(batch)])  # key order: no waits in a cycle
        now = datetime.now(UTC).isoformat()

        def work(cur: Any) -> int:
            cur.execute(_INSERT_SPANS, (now, *columns))
            inserted = [batch[(str(r[0]), str(r[1]))] for r in cur.fetchall()]
            if inserted:
                cur.execute(_UPSERT_TRACES, (now, *_trace_columns(inserted)))
                if pairs := session_pairs(inserted):
                    cur.executemany(INSERT_SESSION.replace("?", "%s"), pairs)
            self._write_meta(cur, meta)
            self._swap_metas(cur, swaps)
            return len(inserted)

        new = int(self._write(work))
        self._committed_spans()
        return new

    def put_log_events(self, events: Iterable[LogEvent]) -> int:
        batch: dict[str, LogEvent] = {}
        for e in events:
            batch.setdefault(e.event_id, e)
        if not batch:
            return 0
        ids = list(batch)  # arrival order: it orders records with equal times (a rare deadlock is retried)
        now = datetime.now(UTC).isoformat()
        params = (
            now,
            ids,
            [batch[i].trace_id for i in ids],
            [batch[i].span_id for i in ids],
            [batch[i].time_unix_nano for i in ids],
            [batch[i].model_dump_json() for i in ids],
        )

        def work(cur: Any) -> int:
            cur.execute(_INSERT_LOG_EVENTS, params)
            return int(cur.rowcount)

        return int(self._write(work))


_AGAIN = (
    "run a stopped command again once PostgreSQL is back: `score --run` resumes its run, and senders"
    " retry the 503 a receiver answers meanwhile"
)

# Bounds on a server that stops answering at the network level (its host gone, a partition), which
# the OS alone waits out for minutes: a connection attempt gives up after CONNECT_TIMEOUT_S (psycopg's
# default is 130 s; libpq counts it per address the host name resolves to), and a connection whose
# data goes unacknowledged for STALL_TIMEOUT_S, or whose idle wait for a reply goes unprobed as long
# (keepalives after 10 s, then every 5 s: a live server's kernel answers them, so a slow statement is
# not cut), fails as dropped. The URL's own settings win (``?keepalives=0``, ``?connect_timeout=30``),
# as does PGCONNECT_TIMEOUT.
CONNECT_TIMEOUT_S = 10
STALL_TIMEOUT_S = 20
_NETWORK = {
    "connect_timeout": str(CONNECT_TIMEOUT_S),
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "2",
    "tcp_user_timeout": str(STALL_TIMEOUT_S * 1000),
}
# libpq before 12 knows no tcp_user_timeout (an unknown option fails the connection).
_USER_TIMEOUT_SINCE = 120000
# A connection attempt that failed after this long (nothing answered) is not made again for as long:
# the statements that queued behind it fail at once with its error rather than each waiting the
# connect timeout in turn (a worker's calls then give up together once its reconnect time is over).
_SLOW_FAILURE_S = 1.0

# A statement the server has not answered after this long ends its connection (_Watchdog): the bound
# for a server that is frozen while its kernel still answers TCP. Generous: tracejudge's statements
# take milliseconds, its largest reads seconds. Argument (--store-statement-timeout) > environment >
# default; 0: no bound.
STATEMENT_TIMEOUT_S = 120.0
STATEMENT_TIMEOUT_ENV = "TRACEJUDGE_STORE_STATEMENT_TIMEOUT"


def statement_timeout(given: float | None = None) -> float:
    """The statement bound in seconds: ``given`` > ``TRACEJUDGE_STORE_STATEMENT_TIMEOUT`` > default."""
    if given is None:
        text = os.environ.get(STATEMENT_TIMEOUT_ENV, "").strip()
        if not text:
            return STATEMENT_TIMEOUT_S
        try:
            given = float(text)
        except ValueError:
            given = -1.0
        if not given >= 0 or given == float("inf"):
            raise InputError(
                f"{STATEMENT_TIMEOUT_ENV}={text!r} is not a number of seconds",
                hint=f"give seconds, e.g. {STATEMENT_TIMEOUT_ENV}=300 (0: no bound)",
            )
    if not given >= 0:
        raise InputError(f"a statement timeout of {given!r} s", hint="give seconds >= 0 (0: no bound)")
    return float(given)


def _network_options(url: str) -> dict[str, str]:
    """The connection bounds the URL (or the environment, for connect_timeout) does not set itself."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    given = set(conninfo_to_dict(url))
    if os.environ.get("PGCONNECT_TIMEOUT"):
        given.add("connect_timeout")
    if psycopg.pq.version() < _USER_TIMEOUT_SINCE:
        given.add("tcp_user_timeout")
    return {k: v for k, v in _NETWORK.items() if k not in given}


def _connect(url: str, label: str, *, again: bool = False) -> Any:
    """A new connection; ``again``: the store had one, which the server dropped."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    try:
        return psycopg.connect(make_conninfo(url, **_network_options(url)), autocommit=True)
    except psycopg.Error as exc:
        if again:
            raise StoreUnreachableError(
                f"the store {label} lost its connection and cannot reconnect: {_first_line(exc)}",
                hint=f"check that PostgreSQL is up; {_AGAIN}",
            ) from None
        raise StoreError(
            f"cannot connect to the store {label}: {_first_line(exc)}",
            hint="check that PostgreSQL is running and the URL's user, password and database are right",
        ) from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class _Reconnecting:
    """The store's connection, opened again when PostgreSQL dropped it (a restart, a failover, an idle
    session ended). The statement that finds it gone fails as a :class:`StoreError` saying so — nothing
    of its transaction was committed, or, if its COMMIT was under way, the write is safe to repeat:
    spans are deduplicated by key — so a receiver answers 503 and the sender retries; the next
    statement runs on a new connection. Without this, one restart left every later statement failing
    for as long as the process lived.

    A statement the server has not answered within ``statement_timeout_s`` ends the connection (see
    :class:`_Watchdog`) and fails the same way, saying how long it waited."""

    def __init__(self, url: str, label: str, statement_timeout_s: float = 0.0) -> None:
        self._url = url
        self._label = label
        self._conn: Any = _connect(url, label)
        self._slow_failure: tuple[float, StoreUnreachableError] | None = None
        self._timeout_s = statement_timeout_s
        self._watchdog = _Watchdog(statement_timeout_s) if statement_timeout_s > 0 else None

    def cursor(self) -> _Cursor:
        if self._conn.closed or self._conn.broken:
            self._conn.close()
            self._conn = self._reconnect()
        return _Cursor(self._conn.cursor(), self)

    def _reconnect(self) -> Any:
        if self._slow_failure is not None:
            until, error = self._slow_failure
            if time.monotonic() < until:
                raise StoreUnreachableError(error.message, hint=error.hint)
            self._slow_failure = None
        started = time.monotonic()
        try:
            return _connect(self._url, self._label, again=True)
        except StoreUnreachableError as exc:
            took = time.monotonic() - started
            if took >= _SLOW_FAILURE_S:
                self._slow_failure = (time.monotonic() + _SLOW_FAILURE_S, exc)
            raise

    def run(self, conn: Any, call: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``call(*args, **kwargs)``, a statement on ``conn``: a dropped connection fails as
        :class:`StoreUnreachableError`, and so does a statement left unanswered past the bound."""
        try:
            return self._statement(conn, call, args, kwargs)
        except (KeyboardInterrupt, SystemExit):
            # Ctrl-C or SIGTERM (the CLI raises KeyboardInterrupt) landed in the statement: it may have
            # been sent and never answered, and then every later statement failed with "another command
            # is already in progress" — a stopped score --run worker's leave_run among them, its claims
            # left for their lease. The next statement reconnects (the server rolls back what was open).
            conn.close()
            raise

    def _statement(self, conn: Any, call: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import psycopg

        dog = self._watchdog
        if dog is None:
            try:
                return call(*args, **kwargs)
            except psycopg.OperationalError as exc:
                if (lost := self.lost(exc)) is not None:
                    raise lost from None
                raise
        token = dog.arm(conn)
        try:
            result = call(*args, **kwargs)
        except psycopg.Error as exc:
            if dog.disarm(token):
                raise self._unanswered() from None
            if isinstance(exc, psycopg.OperationalError) and (lost := self.lost(exc)) is not None:
                raise lost from None
            raise
        except BaseException:
            if dog.disarm(token):
                conn.close()
            raise
        if dog.disarm(token):
            # Answered as the watchdog ended the connection: the answer stands, the next statement
            # reconnects rather than find the connection shut.
            conn.close()
        return result

    def _unanswered(self) -> StoreUnreachableError:
        return StoreUnreachableError(
            # Not the driver's words: "server closed the connection" is this side's own doing here.
            f"the store {self._label} did not answer a statement within {self._timeout_s:g} s; this"
            " side closed its connection",
            hint="check that PostgreSQL is up and not frozen or overloaded (the next statement reconnects;"
            " what this one wrote was not committed, or its COMMIT is repeated safely). A statement that"
            f" needs longer: raise {STATEMENT_TIMEOUT_ENV} or --store-statement-timeout (0: no bound);"
            f" {_AGAIN}",
        )

    def lost(self, exc: BaseException) -> StoreUnreachableError | None:
        """The error to raise for ``exc`` when it means the connection is gone, else None."""
        if not (self._conn.closed or self._conn.broken):
            return None
        return StoreUnreachableError(
            f"the store {self._label} lost its connection: {_first_line(exc)}",
            hint="check that PostgreSQL is up (the next statement reconnects; what this one wrote was"
            f" not committed); {_AGAIN}",
        )

    def gone(self) -> bool:
        """Whether the connection is closed or broken (the server ends an open transaction with it)."""
        return bool(self._conn.closed or self._conn.broken)

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()
        self._conn.close()


class _Watchdog:
    """Ends a connection whose statement the server has not answered within ``limit_s``.

    A server that is frozen (stopped, swapped out, its disk hung) or a middlebox that stops forwarding
    while its kernel still acknowledges what it is sent holds a statement forever: TCP keepalives are
    answered and no data goes unacknowledged, so neither keepalives nor ``tcp_user_timeout`` fire,
    and a server-side ``statement_timeout`` is the frozen server's own. One thread per connection
    watches the statement under way; past its deadline it shuts the connection's socket down, which
    wakes the waiting statement with an error at once (the server rolls back whatever transaction
    the connection had open). Statements pay two lock round trips; the thread wakes once per
    ``limit_s`` when idle, and at the deadline of a statement under way."""

    def __init__(self, limit_s: float) -> None:
        self._limit_s = limit_s
        self._cond = threading.Condition(threading.Lock())
        self._armed: dict[int, tuple[float, Any]] = {}  # token -> (deadline, connection)
        self._fired: set[int] = set()
        self._next = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, conn: Any) -> int:
        with self._cond:
            self._next += 1
            self._armed[self._next] = (time.monotonic() + self._limit_s, conn)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="tracejudge-store-watchdog", daemon=True
                )
                self._thread.start()
            return self._next

    def disarm(self, token: int) -> bool:
        """Done with the statement ``token``; whether the watchdog ended its connection."""
        with self._cond:
            self._armed.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                return True
            return False

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                # Idle, it looks again after a whole bound: a statement armed meanwhile has a later
                # deadline, which the next look waits for.
                wake = now + self._limit_s
                for token, (deadline, conn) in list(self._armed.items()):
                    if deadline <= now:
                        self._end(conn)
                        for other, (_, c) in list(self._armed.items()):
                            if c is conn:  # every statement waiting on that connection fails with it
                                del self._armed[other]
                                self._fired.add(other)
                    elif token in self._armed:
                        wake = min(wake, deadline)
                self._cond.wait(max(wake - now, 0.0))

    @staticmethod
    def _end(conn: Any) -> None:
        """Shut the connection's socket down (not close it: the statement's thread owns the
        descriptor), so that the statement waiting on it fails at once."""
        with contextlib.suppress(Exception):
            fd = conn.pgconn.socket
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)


class _Cursor:
    """A psycopg cursor whose statements report a dropped or unanswered connection as
    :class:`StoreUnreachableError`."""

    def __init__(self, cur: Any, owner: _Reconnecting) -> None:
        self._cur = cur
        self._owner = owner

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        if args and args[0] == "ROLLBACK" and self._owner.gone():
            # The transaction ended with its connection; the error that ended it is the one to report.
            return self
        self._owner.run(self._cur.connection, self._cur.execute, args, kwargs)
        return self

    def executemany(self, *args: Any, **kwargs: Any) -> None:
        self._owner.run(self._cur.connection, self._cur.executemany, args, kwargs)

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> Any:
        return self._cur.fetchall()

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)


def _span_columns(ordered: list[AnySpan]) -> tuple[list[Any], ...]:
    """The spans as the column arrays of _INSERT_SPANS."""
    rows = [
        (
            s.trace_id,
            s.span_id,
            s.parent_span_id,
            s.name,
            s.start_time_unix_nano,
            s.end_time_unix_nano,
            s.source,
            *stored_forms(s),
        )
        for s in ordered
    ]
    return tuple(list(col) for col in zip(*rows, strict=True))


def _trace_columns(inserted: list[AnySpan]) -> tuple[list[Any], ...]:
    """Per trace (in trace-id order), what the newly inserted spans add to its summary."""
    folded = fold_traces(inserted)
    rows = [(t, *folded[t].columns()) for t in sorted(folded)]
    return tuple(list(col) for col in zip(*rows, strict=True))
