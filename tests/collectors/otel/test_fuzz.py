"""The intake fuzz suite (issue 17), a bounded slice for ``make test``: hypothesis mutates valid OTLP
protobuf and OTLP/JSON export requests (bit flips, cuts, splices of hostile fragments: lone
surrogates, deep nesting, huge numbers, long names, odd ids) and sends them through the receiver app
in-process. For every request: no 5xx; the peak memory it adds bounded; and when the answer is 200,
every span the request validly holds (ids of the right length, not zero) that was not reported
rejected is stored.

The longer run with counts is ``benchmarks/fuzz_intake.py``.
"""

from __future__ import annotations

import gzip
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from starlette.testclient import TestClient

from tests.conftest import load_module
from tracejudge.store import SqliteStore
from tracejudge_collectors.otel import DecodeLimits, build_app

from .conftest import build_request

# The independent reader of what a request validly holds, and the request encodings, are the long
# fuzz script's (benchmarks/fuzz_intake.py): one reader for both runs.
fuzz = load_module(Path(__file__).resolve().parents[3] / "benchmarks" / "fuzz_intake.py", "fuzz_intake")

BODY_LIMIT = 256 * 1024
LIMITS = DecodeLimits(max_spans=200, max_decoded_bytes=8 * BODY_LIMIT, max_name_chars=1024)
# What one request may add at its peak (RSS, or tracemalloc): a generous multiple of the body
# limit — the finding was 3 GB for a 188 KB body.
MEMORY_BOUND = 64 * BODY_LIMIT

FRAGMENTS = [
    b"\xed\xa0\x80",
    b"\\udc00",
    b"\\ud800\\u0041",
    b"\xff\xfe",
    b"[" * 3000,
    b"{" * 3000,
    b"9" * 5000,
    b"\x00" * 16,
    b'"' + b"k" * 2000 + b'"',
    b"\x1b]0;t\x07",
    b"\xe2\x80\xae",
    b'{"resourceSpans": [{"scopeSpans": [{"spans": [',
    b'"traceId": "00000000000000000000000000000000"',
    b"\x0a\xff\xff\xff\xff\x0f",
]


def _can_reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


@contextmanager
def _peak_growth() -> Iterator[Callable[[], int]]:
    """Bytes the block added at its peak: the kernel's RSS high-water mark, reset before the block
    (native allocations — protobuf, zlib, SQLite — included); tracemalloc's peak where /proc does not
    allow the reset."""
    if _can_reset_peak_rss():
        before = fuzz.status_kib("VmRSS")
        peak: list[int] = []
        yield lambda: peak[0]
        peak.append(max(0, fuzz.status_kib("VmHWM") - before) * 1024)
        return
    tracemalloc.start()
    try:
        traced: list[int] = []
        yield lambda: traced[0]
        traced.append(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, SqliteStore]]:
    store = SqliteStore(tmp_path_factory.mktemp("fuzz") / "fuzz.db")
    app = build_app(store, max_body_bytes=BODY_LIMIT, limits=LIMITS)
    with TestClient(app, raise_server_exceptions=True) as client:
        yield client, store
    store.close()


def _seed_request(n: int, salt: int) -> ExportTraceServiceRequest:
    spans = []
    for i in range(n):
        spans.append(
            {
                "trace_id": (salt * 1_000_003 + 1).to_bytes(16, "big"),
                "span_id": (salt * 1000 + i + 1).to_bytes(8, "big"),
                "name": f"span-{i}",
                "start_time_unix_nano": 1_700_000_000_000_000_000 + i,
                "end_time_unix_nano": 1_700_000_000_000_001_000 + i,
                "attributes": {
                    "input.value": f"question {i}",
                    "n": i,
                    "docs": [{"id": f"d{i}", "score": 0.5}],
                },
            }
        )
    return build_request(spans)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[bytes, bool, bool]:
    """(body, as JSON, gzip) — a valid request, then a few mutations."""
    salt = draw(st.integers(1, 2**40))
    req = _seed_request(draw(st.integers(1, 6)), salt)
    as_json = draw(st.booleans())
    body = bytearray(fuzz.to_json(req) if as_json else req.SerializeToString())
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "splice", "delete", "duplicate"]))
        at = draw(st.integers(0, max(0, len(body) - 1)))
        if kind == "flip" and body:
            body[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del body[at:]
        elif kind == "splice":
            body[at:at] = draw(st.sampled_from(FRAGMENTS))
        elif kind == "delete":
            del body[at : at + draw(st.integers(1, 8))]
        elif kind == "duplicate":
            body[at:at] = body[at : at + draw(st.integers(1, 64))]
    return bytes(body), as_json, draw(st.booleans())


@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(mutated(), st.sampled_from(["/v1/traces", "/v1/logs"]))
def test_mutated_requests_never_5xx_and_acknowledged_spans_are_stored(
    receiver: tuple[TestClient, SqliteStore], case: tuple[bytes, bool, bool], path: str
) -> None:
    client, store = receiver
    body, as_json, gz = case
    headers = {"Content-Type": "application/json" if as_json else "application/x-protobuf"}
    if gz:
        headers["Content-Encoding"] = "gzip"
    with _peak_growth() as peak:
        resp = client.post(path, content=gzip.compress(body) if gz else body, headers=headers)
    assert resp.status_code < 500, (resp.status_code, resp.text[:300])
    assert peak() < MEMORY_BOUND, (peak(), len(body))
    assert resp.status_code in (200, 400, 413), resp.status_code
    if resp.status_code != 200 or path != "/v1/traces":
        return
    expected = fuzz.valid_span_ids(body, as_json)
    missing = [ids for ids in expected if not any(s.span_id == ids[1] for s in store.get_spans(ids[0]))]
    # A rejected span may be one of these (a bad attribute, a bad parent id); none else may be missing.
    assert len(missing) <= fuzz.rejected_spans(resp, as_json), missing


@pytest.mark.parametrize(
    "body",
    [
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[' + b",".join([b'{"traceId":"a"}'] * 20_000) + b"]}]}]}",
        b"[" * 100_000,
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736",'
        b'"spanId":"00f067aa0ba902b7","name":"' + b"n" * 200_000 + b'"}]}]}]}',
        gzip.compress(b"{" * (BODY_LIMIT - 1)),
    ],
    ids=["many tiny spans", "deep", "long name", "gzip of braces"],
)
def test_hostile_bodies_take_bounded_memory(receiver: tuple[TestClient, SqliteStore], body: bytes) -> None:
    client, _ = receiver
    headers = {"Content-Type": "application/json"}
    if body[:2] == b"\x1f\x8b":
        headers["Content-Encoding"] = "gzip"
    tracemalloc.start()
    try:
        resp = client.post("/v1/traces", content=body, headers=headers)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 400 <= resp.status_code < 500, resp.status_code
    assert peak < MEMORY_BOUND, peak


def test_the_fuzz_corpus_fragments_are_what_the_findings_were(tmp_path: Path) -> None:
    # A guard that the slice keeps its teeth: each fragment class of issue 17 is present.
    joined = b"".join(FRAGMENTS)
    for needle in (b"\xed\xa0\x80", b"\\udc00", b"[" * 1000, b"9" * 4400, b"\xe2\x80\xae"):
        assert needle in joined
