"""The store on SQLite and on PostgreSQL: dedup, transactions, listing, meta, concurrent writers."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tracejudge import InputError, StoreError
from tracejudge.schema import RawSpan
from tracejudge.store import EncodedSpan, SqliteStore, SqlStore, open_store, resolve_store_url
from tracejudge_collectors.otel import encode_protobuf

T1 = "0af7651916cd43dd8448eb211c80319c"
T2 = "4bf92f3577b34da6a3ce929d0e0e4736"

MakeStore = Callable[[], SqlStore]


def span(trace: str, sid: str, parent: str | None = None, start: int = 1, name: str = "s") -> RawSpan:
    return RawSpan(
        trace_id=trace,
        span_id=sid,
        parent_span_id=parent,
        name=name,
        start_time_unix_nano=start,
        end_time_unix_nano=start + 10,
        attributes={"k": [1, {"a": "b"}], "text": "30,000 RMB — ünïcode"},
    )


def test_same_span_twice_is_stored_once_and_first_copy_wins(make_store: MakeStore) -> None:
    store = make_store()
    first = span(T1, "a" * 16, name="first")
    assert store.put_spans([first, span(T1, "a" * 16, name="dup-in-batch")]) == 1
    assert store.put_spans([span(T1, "a" * 16, name="later")]) == 0
    assert store.get_spans(T1) == [first]
    assert store.list_traces()[0].span_count == 1


def test_spans_of_one_trace_across_batches_in_any_order(make_store: MakeStore) -> None:
    store = make_store()
    child = span(T1, "b" * 16, parent="a" * 16, start=5, name="child")
    root = span(T1, "a" * 16, start=2, name="root")
    assert store.put_spans([child]) == 1
    assert store.list_traces()[0].name is None  # the root has not arrived yet
    assert store.put_spans([root, span(T2, "c" * 16, start=100, name="other")]) == 2
    by_id = {t.trace_id: t for t in store.list_traces()}
    assert by_id[T1].name == "root"
    assert by_id[T1].span_count == 2
    assert by_id[T1].start_time is not None
    assert by_id[T1].end_time is not None
    assert [s.name for s in store.get_spans(T1)] == ["root", "child"]
    assert [t.trace_id for t in store.list_traces()] == [T2, T1]  # newest first
    assert [t.trace_id for t in store.list_traces(limit=1)] == [T2]
    assert sorted(store.iter_trace_ids()) == sorted([T1, T2])


def test_data_survives_reopen_and_meta_round_trips(make_store: MakeStore) -> None:
    store = make_store()
    store.put_spans([span(T1, "a" * 16)])
    store.set_meta("watermark", "1")
    store.set_meta("watermark", "2")
    store.close()
    again = make_store()
    assert again.get_meta("watermark") == "2"
    assert again.get_meta("absent") is None
    assert len(again.get_spans(T1)) == 1


def test_get_metas_reads_the_keys_that_are_set_in_one_call(make_store: MakeStore) -> None:
    store = make_store()
    store.set_metas({f"p.trace:{i:04d}": str(i) for i in range(1200)})  # more keys than one chunk
    asked = [f"p.trace:{i:04d}" for i in range(0, 1300, 2)] + ["p.trace:0000", "absent"]
    got = store.get_metas(asked)
    assert got == {f"p.trace:{i:04d}": str(i) for i in range(0, 1200, 2)}
    assert got == {k: v for k in asked if (v := store.get_meta(k)) is not None}
    assert store.get_metas([]) == {}


def test_a_failed_batch_leaves_nothing_behind(make_store: MakeStore) -> None:
    store = make_store()
    store.put_spans([span(T1, "a" * 16)])

    class Boom(RawSpan):
        def model_dump_json(self, **_: object) -> str:  # type: ignore[override]
            raise RuntimeError("serializer failed mid-batch")

    with pytest.raises(RuntimeError):
        store.put_spans([span(T2, "c" * 16), Boom(trace_id=T2, span_id="d" * 16)])
    assert store.get_spans(T2) == []
    assert [t.trace_id for t in store.list_traces()] == [T1]
    assert store.put_spans([span(T2, "c" * 16)]) == 1


def test_concurrent_writers_store_each_span_once(make_store: MakeStore) -> None:
    """Several receivers (one connection each) write overlapping spans of the same traces."""
    stores = [make_store() for _ in range(4)]
    traces = [f"{i:032x}" for i in range(1, 21)]
    spans = [span(t, f"{j + 1:016x}", start=j + 1) for t in traces for j in range(5)]
    counts: list[int] = []
    errors: list[BaseException] = []

    def write(store: SqlStore, offset: int) -> None:
        try:
            n = 0
            for k in range(0, len(spans), 7):
                n += store.put_spans(spans[(k + offset) % len(spans) :][:7])
            counts.append(n)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s, i * 13)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    check = make_store()
    summaries = check.list_traces()
    assert sorted(s.trace_id for s in summaries) == traces
    assert {s.span_count for s in summaries} == {5}
    assert sum(len(check.get_spans(t)) for t in traces) == len(spans)
    assert sum(counts) == len(spans)  # every span counted as new exactly once


def test_sqlite_file_that_is_not_a_store_gives_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="cannot open the store"):
        SqliteStore(path)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE schema_info SET version = 999")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="newer"):
        SqliteStore(path)


def test_postgres_connection_error_names_the_store_without_its_password() -> None:
    url = "postgresql://someone:hunter2secret@127.0.0.1:1/nowhere"
    with pytest.raises(StoreError) as info:
        open_store(url)
    text = str(info.value)
    assert "cannot connect to the store postgresql://someone:[redacted]@127.0.0.1:1/nowhere" in text
    assert "hunter2secret" not in text


def test_store_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACEJUDGE_STORE", raising=False)
    assert resolve_store_url(None) == "sqlite:///.tracejudge/tracejudge.db"
    monkeypatch.setenv("TRACEJUDGE_STORE", "sqlite:///from-env.db")
    assert resolve_store_url(None) == "sqlite:///from-env.db"
    assert resolve_store_url("sqlite:///arg.db") == "sqlite:///arg.db"
    abs_store = open_store(f"sqlite:///{tmp_path}/a.db")
    assert isinstance(abs_store, SqliteStore)
    assert Path(abs_store.path) == tmp_path / "a.db"
    assert isinstance(open_store(str(tmp_path / "b.db")), SqliteStore)
    with pytest.raises(InputError, match="unknown store URL scheme"):
        open_store("mysql://x")


def test_compare_and_set_meta_lets_one_of_two_racing_writers_win(make_store: MakeStore) -> None:
    one, two = make_store(), make_store()
    assert one.compare_and_set_meta("wm", None, "a") is True
    assert two.compare_and_set_meta("wm", None, "b") is False  # already set
    assert two.compare_and_set_meta("wm", "a", "c") is True
    assert one.compare_and_set_meta("wm", "a", "d") is False  # one read "a", two changed it meanwhile
    assert one.get_meta("wm") == "c"


def test_put_spans_swaps_metas_in_its_own_transaction(make_store: MakeStore) -> None:
    """A pull's last batch carries its watermark: both commit in the one transaction, in order."""
    one, two = make_store(), make_store()
    assert (
        one.put_spans(
            [span(T1, "a" * 16)], meta={"m:1": "x"}, swaps=[("list", None, "[1]"), ("wm", None, "a")]
        )
        == 1
    )
    assert (two.get_meta("list"), two.get_meta("wm"), two.get_meta("m:1")) == ("[1]", "a", "x")
    # "wm" holds "a", not what this writer read: it is left, and so is the swap after it; the spans
    # and the plain meta commit all the same, as they would before a separate compare-and-set.
    swaps = [("list", "[1]", "[2]"), ("wm", "stale", "b"), ("after", None, "c")]
    assert two.put_spans([span(T2, "b" * 16)], meta={"m:2": "y"}, swaps=swaps) == 1
    assert [s.span_id for s in one.get_spans(T2)] == ["b" * 16]
    assert (one.get_meta("list"), one.get_meta("wm"), one.get_meta("after"), one.get_meta("m:2")) == (
        "[2]",
        "a",
        None,
        "y",
    )
    # Spans already stored (nothing new): the metas are still written, in one transaction.
    assert one.put_spans([span(T2, "b" * 16)], swaps=[("wm", "a", "c")]) == 0
    assert two.put_spans([], meta={"m:3": "z"}, swaps=[("wm", "c", "d"), ("wm", "c", "e")]) == 0
    assert (one.get_meta("wm"), one.get_meta("m:3")) == ("d", "z")


def test_concurrent_read_merge_write_loses_no_update(make_store: MakeStore) -> None:
    """Writers that merge into one meta value with compare-and-set keep every writer's part."""
    stores = [make_store() for _ in range(4)]
    errors: list[BaseException] = []

    def add(store: SqlStore, who: int) -> None:
        try:
            for n in range(15):
                while True:
                    raw = store.get_meta("set")
                    merged = sorted({*(raw or "").split(), f"{who}-{n}"})
                    if store.compare_and_set_meta("set", raw, " ".join(merged)):
                        break
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(s, i)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len((stores[0].get_meta("set") or "").split()) == 4 * 15


def test_a_trace_from_two_sources_lists_both_and_keeps_its_bounds(make_store: MakeStore) -> None:
    one, two = make_store(), make_store()
    assert one.put_spans([span(T1, "b" * 16, parent="a" * 16, start=50)]) == 1
    late = span(T1, "c" * 16, parent="a" * 16, start=10).model_copy(update={"source": "langfuse"})
    root = span(T1, "a" * 16, start=30, name="root")
    assert two.put_spans([late, root, span(T1, "b" * 16, start=1)]) == 2  # b is stored already
    (summary,) = one.list_traces()
    assert summary.sources == ("langfuse", "otlp")
    assert summary.span_count == 3
    assert summary.name == "root"
    assert tuple(one._execute("SELECT start_ns, end_ns FROM traces").fetchone()) == (10, 60)


def _encoded(trace: str, sid: str, parent: str | None, start: int, name: str, session: str) -> EncodedSpan:
    """A span as the OTLP receiver hands it over: in its own OTLP bytes."""
    req = ExportTraceServiceRequest()
    sp = (
        req.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=bytes.fromhex(trace), span_id=bytes.fromhex(sid), name=name)
    )
    if parent is not None:
        sp.parent_span_id = bytes.fromhex(parent)
    sp.start_time_unix_nano, sp.end_time_unix_nano = start, start + 10
    sp.attributes.add(key="session.id", value=AnyValue(string_value=session))
    (got,) = encode_protobuf(req.SerializeToString()).spans
    assert isinstance(got, EncodedSpan)
    return got


def test_a_batch_mixing_both_forms_is_stored_once_with_its_summaries_and_sessions(
    make_store: MakeStore,
) -> None:
    store = make_store()
    json_root = span(T1, "a" * 16, start=30, name="root").model_copy(
        update={"attributes": {"session.id": "s-json"}, "source": "langfuse"}
    )
    otlp_child = _encoded(T1, "b" * 16, "a" * 16, 10, "child", "s-otlp")
    other = _encoded(T2, "c" * 16, None, 100, "other", "s-otlp")
    dup = _encoded(T1, "a" * 16, None, 1, "dup-in-batch", "s-dup")  # the root's key again
    assert store.put_spans([otlp_child, json_root, other, dup]) == 3
    by_id = {t.trace_id: t for t in store.list_traces()}
    assert (by_id[T1].name, by_id[T1].span_count, by_id[T1].sources) == ("root", 2, ("langfuse", "otlp"))
    assert [s.name for s in store.get_spans(T1)] == ["child", "root"]
    assert store.get_spans(T2) == [other.decode()]
    assert [t.trace_id for t in store.session_traces("s-otlp")] == [T1, T2]
    assert [t.trace_id for t in store.session_traces("s-json")] == [T1]
    assert store.session_traces("s-dup") == []
    # Both forms sent again, with a new span of each form for T1: only the new ones are stored.
    late_json = span(T1, "d" * 16, parent="a" * 16, start=5, name="late-json")
    late_otlp = _encoded(T1, "e" * 16, "a" * 16, 60, "late-otlp", "s-late")
    assert store.put_spans([json_root, otlp_child, other, late_json, late_otlp]) == 2
    t1 = next(t for t in store.list_traces() if t.trace_id == T1)
    assert (t1.name, t1.span_count) == ("root", 4)
    stored = [*store.get_spans(T1), *store.get_spans(T2)]
    assert min(s.start_time_unix_nano for s in stored) == 5
    assert max(s.end_time_unix_nano for s in stored) == 110
    assert [s.name for s in store.get_spans(T1)] == ["late-json", "child", "root", "late-otlp"]
    assert store.trace_session(T1) == "s-json"
    assert [t.trace_id for t in store.session_traces("s-late")] == [T1]


def test_meta_written_with_spans_is_set_only_if_they_are_stored(make_store: MakeStore) -> None:
    store = make_store()
    assert store.put_spans([span(T1, "a" * 16)], meta={"p.trace:" + T1: "done"}) == 1
    assert store.get_meta("p.trace:" + T1) == "done"
    # A batch whose spans are all stored already still sets its meta.
    assert store.put_spans([span(T1, "a" * 16)], meta={"p.trace:" + T1: "again"}) == 0
    assert store.get_meta("p.trace:" + T1) == "again"

    class Boom(RawSpan):
        def model_dump_json(self, **_: object) -> str:  # type: ignore[override]
            raise RuntimeError("serializer failed mid-batch")

    with pytest.raises(RuntimeError):
        store.put_spans(
            [span(T2, "c" * 16), Boom(trace_id=T2, span_id="d" * 16)], meta={"p.trace:" + T2: "x"}
        )
    assert store.get_meta("p.trace:" + T2) is None
    store.set_metas({"b": "2", "a": "1"})
    assert (store.get_meta("a"), store.get_meta("b")) == ("1", "2")


def test_a_postgres_store_from_before_the_sequences_continues_after_its_highest_seq(
    postgres_url: str,
) -> None:
    store = open_store(postgres_url)
    assert isinstance(store, SqlStore)
    store.put_spans([span(T1, "a" * 16)])
    # As an earlier version left it: seq numbers from MAX(seq) + 1, no sequence.
    store._execute("DROP SEQUENCE traces_seq_gen")
    store._execute("UPDATE traces SET seq = 41")
    store.close()
    again = open_store(postgres_url)
    assert isinstance(again, SqlStore)
    try:
        again.put_spans([span(T2, "c" * 16)])
        seqs = dict(again._execute("SELECT trace_id, seq FROM traces").fetchall())
        assert seqs[T2] > seqs[T1] == 41
    finally:
        again.close()
