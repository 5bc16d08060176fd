"""Group commit: export requests in flight at once are stored in one transaction, each acknowledged
only after the commit that holds its spans; a failed commit fails the requests in it (503), and a
request the store refuses fails alone. Concurrent httpx senders and the real SDK exporters against
the real receiver, on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtoSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.collectors.otel.conftest import build_request
from tests.collectors.otel.test_logs import SPAN, T0, TRACE_HEX, chat_span, log_request, user_record
from tests.store.conftest import postgres_url  # noqa: F401  (the fixture, for the PostgreSQL runs)
from tracejudge import StoreError
from tracejudge.store import SqlStore, Store, open_store
from tracejudge_collectors.otel import serve_in_thread
from tracejudge_collectors.otel._receiver import _GroupCommit

PB = {"Content-Type": "application/x-protobuf"}
BASE_NS = 1_790_000_000_000_000_000


class HeldStore:
    """A real store whose ``put_spans`` can be held at a gate before it writes; it records, after
    each commit returns, the spans that commit held. ``refuse`` names spans the store fails on (the
    whole transaction), ``down`` fails every write."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.commits: list[set[tuple[str, str]]] = []
        self.committed: set[tuple[str, str]] = set()
        self.refuse: set[str] = set()
        self.down = False
        self._lock = threading.Lock()

    def put_spans(self, spans: Iterable[Any], *, meta: Mapping[str, str] | None = None) -> int:
        batch = list(spans)
        self.entered.set()
        assert self.gate.wait(60)
        if self.down or any(s.name in self.refuse for s in batch):
            raise StoreError("the test store refuses this transaction")
        new = self.inner.put_spans(batch, meta=meta)
        keys = {(s.trace_id, s.span_id) for s in batch}
        with self._lock:
            self.commits.append(keys)
            self.committed |= keys
        return new

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture(params=["sqlite", "postgresql"])
def backing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    url = (
        f"sqlite:///{tmp_path}/store.db"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    store = open_store(url)
    assert isinstance(store, SqlStore)
    yield store
    store.close()


def _span(trace: int, n: int, name: str | None = None) -> dict[str, Any]:
    return {
        "trace_id": trace.to_bytes(16, "big"),
        "span_id": n.to_bytes(8, "big"),
        "name": name or f"span-{n}",
        **({"parent_span_id": (1).to_bytes(8, "big")} if n > 1 else {}),
        "start_time_unix_nano": BASE_NS + trace * 1_000_000 + n,
        "end_time_unix_nano": BASE_NS + trace * 1_000_000 + n + 500,
        "attributes": {"input.value": f"trace {trace} step {n}", "n": n},
    }


def _instant(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _keys(spans: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(s["trace_id"].hex(), s["span_id"].hex()) for s in spans}


# ---------------------------------------------------------------- the group commit itself


class _Writer:
    """A write function whose first call is held until released; records each call's records."""

    def __init__(self, fail: Callable[[list[str]], bool] = lambda _records: False) -> None:
        self.calls: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = fail

    def __call__(self, records: list[str]) -> int:
        self.entered.set()
        assert self.release.wait(60)
        self.calls.append(list(records))
        if self.fail(records):
            raise StoreError(f"refused {records}")
        return len(records)


def _group_of_four(writer: _Writer) -> list[BaseException | None]:
    """``a`` commits alone (held); ``b``, ``c``, ``d`` arrive meanwhile; the results of all four."""
    commits = _GroupCommit(writer)
    results: dict[str, BaseException | None] = {}

    def commit(name: str, records: list[str]) -> None:
        try:
            commits.commit(records)
        except StoreError as exc:
            results[name] = exc
        else:
            results[name] = None

    a = threading.Thread(target=commit, args=("a", ["a1", "a2"]))
    a.start()
    assert writer.entered.wait(60)
    rest = [threading.Thread(target=commit, args=(name, [name])) for name in ("b", "c", "d")]
    for t in rest:
        t.start()
    deadline = time.monotonic() + 60
    while len(commits._waiting) < 3 and time.monotonic() < deadline:  # each has queued its records
        time.sleep(0.005)
    assert results == {}, "acknowledged before its commit"
    writer.release.set()
    for t in [a, *rest]:
        t.join(60)
    return [results[name] for name in ("a", "b", "c", "d")]


def test_requests_arriving_during_a_commit_share_the_next_transaction() -> None:
    writer = _Writer()
    assert _group_of_four(writer) == [None] * 4
    # b, c and d queued in any order: one transaction holds the three.
    assert [sorted(call) for call in writer.calls] == [["a1", "a2"], ["b", "c", "d"]]


def test_a_record_the_store_refuses_fails_only_its_own_request() -> None:
    writer = _Writer(fail=lambda records: "c" in records)
    results = _group_of_four(writer)
    assert [r is None for r in results] == [True, True, False, True]
    assert isinstance(results[2], StoreError)
    # The group's transaction failed as a whole, then each request was committed alone.
    calls = [sorted(call) for call in writer.calls]
    assert calls[:2] == [["a1", "a2"], ["b", "c", "d"]]
    assert sorted(calls[2:]) == [["b"], ["c"], ["d"]]


def test_a_store_that_is_down_fails_every_request_of_the_group() -> None:
    writer = _Writer(fail=lambda records: records != ["a1", "a2"])
    results = _group_of_four(writer)
    assert results[0] is None
    assert all(isinstance(r, StoreError) for r in results[1:])


# ---------------------------------------------------------------- through the real receiver


def test_concurrent_senders_every_span_stored_once_and_acked_after_its_commit(backing: SqlStore) -> None:
    """16 senders, 4 requests each; neighbours resend each other's spans (an exporter's retry, two
    collectors' overlap). Every 200 comes after the commit holding that request's spans."""
    store = HeldStore(backing)
    senders, per_sender, traces = 16, 4, 12
    plans: list[list[list[dict[str, Any]]]] = []
    for s in range(senders):
        plan = []
        for r in range(per_sender):
            k = s * per_sender + r
            spans = [_span(1 + (k + j) % traces, 1 + (k * 5 + j) % 30) for j in range(10)]
            plan.append(spans)
        plans.append(plan)
    early: list[str] = []

    def send(url: str, plan: list[list[dict[str, Any]]]) -> None:
        with httpx.Client(trust_env=False, timeout=60) as client:
            for spans in plan:
                resp = client.post(url, content=build_request(spans).SerializeToString(), headers=PB)
                assert resp.status_code == 200, resp.text
                if not _keys(spans) <= store.committed:
                    early.append(f"a 200 before its spans were committed: {_keys(spans) - store.committed}")

    with serve_in_thread(store) as base, ThreadPoolExecutor(senders) as pool:
        list(pool.map(lambda plan: send(f"{base}/v1/traces", plan), plans))

    assert early == []
    sent = [s for plan in plans for spans in plan for s in spans]
    expected: dict[str, list[dict[str, Any]]] = {}
    for s in sent:
        expected.setdefault(s["trace_id"].hex(), [])
        if all(x["span_id"] != s["span_id"] for x in expected[s["trace_id"].hex()]):
            expected[s["trace_id"].hex()].append(s)
    summaries = {t.trace_id: t for t in backing.list_traces()}
    assert set(summaries) == set(expected)
    for trace_id, spans in expected.items():
        stored = backing.get_spans(trace_id)
        assert sorted(s.span_id for s in stored) == sorted(s["span_id"].hex() for s in spans)
        assert sorted(s.start_time_unix_nano for s in stored) == sorted(
            s["start_time_unix_nano"] for s in spans
        )
        summary = summaries[trace_id]
        assert summary.span_count == len(spans)
        # Earliest start and latest end over the spans sent (the store's instants are float seconds).
        assert summary.start_time == _instant(min(s["start_time_unix_nano"] for s in spans))
        assert summary.end_time == _instant(max(s["end_time_unix_nano"] for s in spans))
    # 64 requests: at most one transaction each (fewer when they overlapped).
    assert 1 <= len(store.commits) <= senders * per_sender


def test_an_ack_waits_for_the_commit_and_a_refused_request_fails_alone(backing: SqlStore) -> None:
    """While the first commit is held, no request in flight is answered; when the next transaction
    (holding a span the store refuses) fails, only the request that sent that span gets the 503."""
    store = HeldStore(backing)
    store.refuse = {"poison"}
    bodies = {
        "first": [_span(1, 1)],
        "b": [_span(2, 1), _span(2, 2)],
        "bad": [_span(3, 1, name="poison")],
        "c": [_span(4, 1)],
    }
    answers: dict[str, httpx.Response] = {}

    def send(url: str, name: str) -> None:
        with httpx.Client(trust_env=False, timeout=60) as client:
            body = build_request(bodies[name]).SerializeToString()
            answers[name] = client.post(url, content=body, headers=PB)

    with serve_in_thread(store) as base, ThreadPoolExecutor(4) as pool:
        url = f"{base}/v1/traces"
        store.gate.clear()
        first = pool.submit(send, url, "first")
        assert store.entered.wait(60)
        others = [pool.submit(send, url, name) for name in ("b", "bad", "c")]
        assert answers == {}, "answered while its commit was held"
        store.gate.set()
        for f in [first, *others]:
            f.result()

    assert {name: r.status_code for name, r in answers.items()} == {
        "first": 200,
        "b": 200,
        "bad": 503,
        "c": 200,
    }
    assert answers["bad"].headers["retry-after"] == "2"
    assert {t.trace_id: t.span_count for t in backing.list_traces()} == {
        (1).to_bytes(16, "big").hex(): 1,
        (2).to_bytes(16, "big").hex(): 2,
        (4).to_bytes(16, "big").hex(): 1,
    }


def test_a_store_that_is_down_answers_every_concurrent_request_503(backing: SqlStore) -> None:
    store = HeldStore(backing)
    store.down = True
    with serve_in_thread(store) as base, ThreadPoolExecutor(8) as pool:

        def send(n: int) -> httpx.Response:
            with httpx.Client(trust_env=False, timeout=60) as client:
                body = build_request([_span(n, 1), _span(n, 2)]).SerializeToString()
                return client.post(f"{base}/v1/traces", content=body, headers=PB)

        answers = list(pool.map(send, range(1, 9)))
    assert [r.status_code for r in answers] == [503] * 8
    assert backing.list_traces() == []


def test_sdk_exporters_at_once_store_every_span_once(backing: SqlStore) -> None:
    """Four instrumented services (protobuf, gzip protobuf, JSON exporters) exporting at once, each
    flushing many small batches."""
    with serve_in_thread(backing) as base:
        exporters = [
            ProtoSpanExporter(endpoint=f"{base}/v1/traces"),
            ProtoSpanExporter(endpoint=f"{base}/v1/traces", compression=Compression.Gzip),
            JsonSpanExporter(endpoint=f"{base}/v1/traces"),
            ProtoSpanExporter(endpoint=f"{base}/v1/traces"),
        ]
        expected: dict[str, set[str]] = {}
        lock = threading.Lock()

        def run(i: int) -> None:
            provider = TracerProvider(resource=Resource.create({"service.name": f"svc-{i}"}))
            provider.add_span_processor(BatchSpanProcessor(exporters[i], max_export_batch_size=8))
            tracer = provider.get_tracer("tests.group_commit")
            for t in range(10):
                with tracer.start_as_current_span(f"svc-{i} run {t}") as root:
                    for step in range(5):
                        with tracer.start_as_current_span(f"step {step}") as child:
                            child.set_attribute("input.value", f"svc {i} run {t} step {step}")
                            with lock:
                                ctx = child.get_span_context()
                                expected.setdefault(f"{ctx.trace_id:032x}", set()).add(f"{ctx.span_id:016x}")
                    ctx = root.get_span_context()
                    with lock:
                        expected.setdefault(f"{ctx.trace_id:032x}", set()).add(f"{ctx.span_id:016x}")
            assert provider.force_flush(60_000)
            provider.shutdown()

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(run, range(4)))

    summaries = {t.trace_id: t.span_count for t in backing.list_traces()}
    assert summaries == {trace_id: len(ids) for trace_id, ids in expected.items()}
    for trace_id, ids in expected.items():
        assert sorted(s.span_id for s in backing.get_spans(trace_id)) == sorted(ids)


def test_concurrent_log_requests_store_every_record_once(backing: SqlStore) -> None:
    """Log records (GenAI message events) go through the same group commit: 8 senders at once, each
    resending a record another sent; every record is stored once and merged into its span."""

    def records(k: int) -> list[dict[str, Any]]:
        # Sender k's own two records, and sender k - 1's first again (a retry's overlap).
        return [user_record(f"q{k}a", at=T0 + 10 * k + 1), user_record(f"q{k}b", at=T0 + 10 * k + 2)] + (
            [user_record(f"q{k - 1}a", at=T0 + 10 * (k - 1) + 1)] if k else []
        )

    with serve_in_thread(backing) as base, ThreadPoolExecutor(8) as pool:

        def send(k: int) -> int:
            with httpx.Client(trust_env=False, timeout=60) as client:
                body = log_request(*records(k)).SerializeToString()
                return client.post(f"{base}/v1/logs", content=body, headers=PB).status_code

        assert list(pool.map(send, range(8))) == [200] * 8
        with httpx.Client(trust_env=False, timeout=60) as client:
            assert client.post(f"{base}/v1/traces", content=chat_span(), headers=PB).status_code == 200

    (span,) = backing.get_spans(TRACE_HEX)
    assert span.span_id == SPAN.hex()
    assert [e.attributes["content"] for e in span.events] == [f"q{k}{x}" for k in range(8) for x in "ab"]
