"""The SQLite store's spool (tracejudge.store._spool): an answered span can be read right away, from
this process and from others; a process killed with spans spooled, or in the middle of moving them,
loses none and doubles none; a record cut short by a crash is left out; summaries stay right."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx

from tests.collectors.otel.conftest import build_request
from tracejudge.schema import RawSpan
from tracejudge.store import SqliteStore
from tracejudge.store._spool import META_PREFIX, parse_records, spool_dir
from tracejudge_collectors.otel import encode_protobuf, serve_in_thread

PB = {"Content-Type": "application/x-protobuf"}


def _body(trace: int, spans: int, first: int = 1) -> bytes:
    return build_request(
        [
            {
                "trace_id": trace.to_bytes(16, "big"),
                "span_id": (first + i).to_bytes(8, "big"),
                "name": f"step {first + i}",
                "start_time_unix_nano": 1_790_000_000_000_000_000 + i,
                "end_time_unix_nano": 1_790_000_000_000_000_100 + i,
                "attributes": {"input.value": "context " * 50, "session.id": f"s{trace % 3}"},
            }
            for i in range(spans)
        ]
    ).SerializeToString()


def _tid(trace: int) -> str:
    return f"{trace:032x}"


def _segments(db: Path) -> list[str]:
    return sorted(p.name for p in spool_dir(str(db)).glob("*.seg"))


def test_an_answered_span_is_read_at_once_by_this_process_and_by_another(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    other = SqliteStore(db)  # another connection and spool handle: what another process has
    try:
        with serve_in_thread(store) as url, httpx.Client(trust_env=False, timeout=30) as client:
            for n in range(1, 6):
                assert client.post(f"{url}/v1/traces", content=_body(n, 4), headers=PB).status_code == 200
                # Read right after the answer, before the mover may have run: the read moves it.
                assert len(other.get_spans(_tid(n))) == 4
                assert {t.trace_id for t in other.list_traces()} >= {_tid(n)}
                assert other.trace_session(_tid(n)) == f"s{n % 3}"
            assert client.post(f"{url}/v1/traces", content=_body(9, 3), headers=PB).status_code == 200
            code = textwrap.dedent(
                f"""
                from tracejudge.store import SqliteStore
                s = SqliteStore({str(db)!r})
                print(sum(t.span_count for t in s.list_traces()))
                s.close()
                """
            )
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            assert out.stdout.strip() == "23"
        assert len(store.get_spans(_tid(9))) == 3
    finally:
        other.close()
        store.close()
    # Everything moved, every segment removed with the store.
    assert _segments(db) == []
    again = SqliteStore(db)
    try:
        counts = {t.trace_id: t.span_count for t in again.list_traces()}
        assert counts == {**{_tid(n): 4 for n in range(1, 6)}, _tid(9): 3}
        assert again.get_metas([META_PREFIX]) == {}
    finally:
        again.close()


_SPOOL_AND_DIE = """
import os, signal, sys
from tracejudge.store import SqliteStore
from tracejudge_collectors.otel import encode_protobuf
store = SqliteStore(sys.argv[1])
store._move = lambda **_: None  # the mover never runs: every span stays in the spool
for path in sys.argv[2:]:
    store.spool_spans(encode_protobuf(open(path, "rb").read()).spans)
print("spooled", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _spool_and_die(db: Path, bodies: list[bytes], tmp_path: Path) -> None:
    paths = []
    for i, body in enumerate(bodies):
        p = tmp_path / f"body{i}.pb"
        p.write_bytes(body)
        paths.append(str(p))
    proc = subprocess.run(
        [sys.executable, "-c", _SPOOL_AND_DIE, str(db), *paths], capture_output=True, text=True, check=False
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout == "spooled\n"


def test_spans_spooled_by_a_killed_process_are_moved_by_the_next_open(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    SqliteStore(db).close()
    # Trace 1 split over two requests; request 3 repeats request 1 (an exporter's retry).
    bodies = [_body(1, 5), _body(1, 3, first=6), _body(1, 5), _body(2, 4)]
    _spool_and_die(db, bodies, tmp_path)
    assert len(_segments(db)) == 1
    store = SqliteStore(db)
    try:
        counts = {t.trace_id: t.span_count for t in store.list_traces()}
        assert counts == {_tid(1): 8, _tid(2): 4}
        assert sorted(s.span_id for s in store.get_spans(_tid(1))) == [f"{i:016x}" for i in range(1, 9)]
        assert store.session_traces("s1")[0].trace_id == _tid(1)
    finally:
        store.close()
    assert _segments(db) == []


def test_a_record_cut_short_by_a_crash_is_left_out(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    SqliteStore(db).close()
    _spool_and_die(db, [_body(1, 2), _body(2, 2), _body(3, 2)], tmp_path)
    (segment,) = _segments(db)
    path = spool_dir(str(db)) / segment
    data = path.read_bytes()
    ends = [end for _, end in parse_records(data)]
    assert len(ends) == 3
    # The third record's write cut off half way by the crash (it was never answered).
    path.write_bytes(data[: ends[1] + (ends[2] - ends[1]) // 2])
    store = SqliteStore(db)
    try:
        assert {t.trace_id: t.span_count for t in store.list_traces()} == {_tid(1): 2, _tid(2): 2}
    finally:
        store.close()
    assert _segments(db) == []


_MOVE_AND_DIE = """
import os, signal, sys
from tracejudge.store import SqliteStore
from tracejudge.store._sql import SqlStore
after, inside = int(sys.argv[2]), sys.argv[3] == "inside"
done = [0]
store_moved, write_spans = SqliteStore._store_moved, SqlStore._write_spans

def moved(self, spans, ends):
    n = store_moved(self, spans, ends)
    done[0] += 1
    if done[0] == after and not inside:
        os.kill(os.getpid(), signal.SIGKILL)  # after a committed batch, before the next
    return n

def write(self, *args):
    n = write_spans(self, *args)
    if done[0] == after and inside:
        os.kill(os.getpid(), signal.SIGKILL)  # rows written, the transaction not committed
    return n

SqliteStore._store_moved, SqlStore._write_spans = moved, write
SqliteStore(sys.argv[1])  # the open moves what is spooled
"""


def test_a_move_killed_part_way_is_redone_without_doubles(tmp_path: Path) -> None:
    """A spool of 60 requests (9,000 spans, moved ~4,096 spans a transaction) moved by processes
    killed in the middle of a move's transaction and between two of them; the next open finds every
    span once, and the summaries right."""
    db = tmp_path / "s.db"
    SqliteStore(db).close()
    bodies = [_body(n // 2 + 1, 150, first=1 + (n % 2) * 150) for n in range(60)]
    _spool_and_die(db, bodies, tmp_path)
    stored = []
    # Killed inside the first transaction; inside the second (the first committed); between the
    # first and the second.
    for after, where in ((0, "inside"), (1, "inside"), (1, "after")):
        proc = subprocess.run(
            [sys.executable, "-c", _MOVE_AND_DIE, str(db), str(after), where],
            capture_output=True,
            check=False,
        )
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        with sqlite3.connect(db) as raw:  # not through the store: an open would move the rest
            stored.append(raw.execute("SELECT count(*) FROM spans").fetchone()[0])
    assert stored == [0, 4200, 8400]  # each killed where meant (a transaction: 28 requests' spans)
    store = SqliteStore(db)
    try:
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        counts = {t.trace_id: t.span_count for t in store.list_traces()}
        assert counts == {_tid(t): 300 for t in range(1, 31)}
        assert store._conn.execute("SELECT count(*) FROM spans").fetchone()[0] == 9000
        assert len({s.span_id for s in store.get_spans(_tid(1))}) == 300
    finally:
        store.close()
    assert _segments(db) == []


def test_a_decoded_span_goes_through_the_spool_as_it_was(tmp_path: Path) -> None:
    """Spans the receiver keeps decoded (JSON form) are spooled as JSON and read back equal."""
    db = tmp_path / "s.db"
    span = RawSpan(trace_id=_tid(5), span_id=f"{1:016x}", name="decoded", attributes={"k": [1, "two"]})
    encoded = encode_protobuf(_body(5, 1, first=2)).spans
    store = SqliteStore(db)
    store._move = lambda **_: None  # type: ignore[method-assign]
    store.spool_spans([span, *encoded])
    reader = SqliteStore(db)
    try:
        got = {s.span_id: s for s in reader.get_spans(_tid(5))}
        assert got[span.span_id] == span
        assert got[f"{2:016x}"] == encoded[0].decode()
    finally:
        reader.close()
        del store._move
        store.close()
