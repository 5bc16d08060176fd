"""The OTLP/HTTP receiver over real HTTP on loopback: content types, encodings, limits, auth, bad input."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracejudge._errors import InputError
from tracejudge.store import SqliteStore
from tracejudge_collectors.otel import (
    DEPTH_MARKER,
    TRUNCATED_MARKER,
    check_exposure,
    is_loopback,
    parse_listen,
    serve_in_thread,
)
from tracejudge_collectors.otel._receiver import _INFLATE_STEP

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}
TRACE_HEX = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30, trust_env=False) as c:
        yield c


def _status(resp: httpx.Response) -> Status:
    status = Status()
    status.ParseFromString(resp.content)
    return status


def _bomb(decompressed_bytes: int) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    parts = [comp.compress(zeros) for _ in range(decompressed_bytes >> 20)]
    parts.append(comp.flush())
    return b"".join(parts)


@pytest.fixture
def still_serving(
    client: httpx.Client, make_request: Callable[..., Any], good_span: Callable[..., Any], store: SqliteStore
) -> Callable[[str], None]:
    """After a bad request: the receiver answers and stores a good one, and earlier spans are intact."""
    counter = iter(range(10_000, 20_000))

    def check(url: str) -> None:
        before = store.get_spans(TRACE_HEX)
        n = next(counter)
        assert client.get(f"{url}/health").json() == {"status": "ok"}
        resp = client.post(
            f"{url}/v1/traces", content=make_request([good_span(n)]).SerializeToString(), headers=PB
        )
        assert resp.status_code == 200
        after = store.get_spans(TRACE_HEX)
        assert {s.span_id for s in after} == {s.span_id for s in before} | {n.to_bytes(8, "big").hex()}

    return check


def test_protobuf_export_is_stored_before_the_ack(
    receiver: str,
    client: httpx.Client,
    make_request: Callable[..., Any],
    good_span: Callable[..., Any],
    store: SqliteStore,
) -> None:
    body = make_request([good_span(1), good_span(2, parent=1)]).SerializeToString()
    resp = client.post(f"{receiver}/v1/traces", content=body, headers=PB)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/x-protobuf"
    parsed = ExportTraceServiceResponse()
    parsed.ParseFromString(resp.content)
    assert not parsed.HasField("partial_success")
    assert [s.span_id for s in store.get_spans(TRACE_HEX)] == ["0000000000000001", "0000000000000002"]


def test_json_export_on_the_langfuse_style_path(
    receiver: str, client: httpx.Client, store: SqliteStore
) -> None:
    body = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {"spans": [{"traceId": TRACE_HEX, "spanId": "00f067aa0ba902b7", "name": "root"}]}
                ]
            }
        ]
    }
    resp = client.post(f"{receiver}/api/public/otel/v1/traces", json=body)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    assert resp.json() == {}
    assert [s.name for s in store.get_spans(TRACE_HEX)] == ["root"]


def test_gzip_and_deflate_bodies(
    receiver: str,
    client: httpx.Client,
    make_request: Callable[..., Any],
    good_span: Callable[..., Any],
    store: SqliteStore,
) -> None:
    body = make_request([good_span(1)]).SerializeToString()
    r1 = client.post(
        f"{receiver}/v1/traces", content=gzip.compress(body), headers={**PB, "Content-Encoding": "gzip"}
    )
    body2 = make_request([good_span(2)]).SerializeToString()
    r2 = client.post(
        f"{receiver}/v1/traces", content=zlib.compress(body2), headers={**PB, "Content-Encoding": "deflate"}
    )
    # Two gzip members concatenated are one valid gzip stream.
    body3 = make_request([good_span(3)]).SerializeToString()
    r3 = client.post(
        f"{receiver}/v1/traces",
        content=gzip.compress(body3[:10]) + gzip.compress(body3[10:]),
        headers={**PB, "Content-Encoding": "gzip"},
    )
    assert (r1.status_code, r2.status_code, r3.status_code) == (200, 200, 200)
    assert len(store.get_spans(TRACE_HEX)) == 3


def test_duplicates_are_stored_once_and_out_of_order_spans_join_their_trace(
    receiver: str,
    client: httpx.Client,
    make_request: Callable[..., Any],
    good_span: Callable[..., Any],
    store: SqliteStore,
) -> None:
    child = make_request([good_span(3, parent=2)]).SerializeToString()
    middle = make_request([good_span(2, parent=1)]).SerializeToString()
    root = make_request([good_span(1)]).SerializeToString()
    for body in (child, child, middle, root, middle):
        assert client.post(f"{receiver}/v1/traces", content=body, headers=PB).status_code == 200
    spans = store.get_spans(TRACE_HEX)
    assert [(s.span_id[-1], s.parent_span_id) for s in spans] == [
        ("1", None),
        ("2", "0000000000000001"),
        ("3", "0000000000000002"),
    ]
    (summary,) = store.list_traces()
    assert (summary.span_count, summary.name) == (3, "span-1")


def test_malformed_protobuf_is_400_with_a_status_body(
    receiver: str, client: httpx.Client, still_serving: Callable[[str], None]
) -> None:
    resp = client.post(f"{receiver}/v1/traces", content=b"\x0a\xff\xff\xff\xff\x0fgarbage", headers=PB)
    assert resp.status_code == 400
    status = _status(resp)
    assert status.code == 3
    assert "not a valid OTLP ExportTraceServiceRequest protobuf" in status.message
    still_serving(receiver)


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"resourceSpans": {"a": 1}}', b"\x0a\x02hi"])
def test_malformed_json_is_400_with_a_json_status(
    receiver: str, client: httpx.Client, still_serving: Callable[[str], None], body: bytes
) -> None:
    resp = client.post(f"{receiver}/v1/traces", content=body, headers=JS)
    assert resp.status_code == 400
    assert resp.headers["content-type"] == "application/json"
    payload = resp.json()
    assert payload["code"] == 3
    assert "JSON" in payload["message"]
    still_serving(receiver)


@pytest.mark.parametrize(
    ("headers", "expect"),
    [
        ({"Content-Type": "text/plain"}, "unsupported Content-Type 'text/plain'"),
        ({}, "unsupported Content-Type '(none)'"),
        ({**PB, "Content-Encoding": "br"}, "unsupported Content-Encoding 'br'"),
    ],
)
def test_wrong_content_type_or_encoding_is_415(
    receiver: str,
    client: httpx.Client,
    still_serving: Callable[[str], None],
    headers: dict[str, str],
    expect: str,
) -> None:
    resp = client.post(f"{receiver}/v1/traces", content=b"hello", headers=headers)
    assert resp.status_code == 415
    message = (
        resp.json()["message"]
        if resp.headers["content-type"] == "application/json"
        else _status(resp).message
    )
    assert expect in message
    still_serving(receiver)


def test_gzip_bomb_is_413_without_inflating_it(
    store: SqliteStore, client: httpx.Client, still_serving: Callable[[str], None]
) -> None:
    bomb = _bomb(1 << 30)  # 1 GiB of zeros in about 1 MB
    with serve_in_thread(store, max_body_bytes=1 << 20) as url:
        tracemalloc.start()
        try:
            resp = client.post(f"{url}/v1/traces", content=bomb, headers={**PB, "Content-Encoding": "gzip"})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert resp.status_code == 413
        assert "larger than 1048576 bytes (after decompression)" in _status(resp).message
        assert peak < 64 << 20  # the 1 GiB never materializes
        still_serving(url)


class _Inflater:
    """zlib's decompressor, noting the size of every output it makes."""

    def __init__(self, real: Any, sizes: list[int]) -> None:
        self._real, self._sizes = real, sizes

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        out: bytes = self._real.decompress(data, max_length)
        self._sizes.append(len(out))
        return out

    def flush(self, *args: int) -> bytes:
        out: bytes = self._real.flush(*args)
        self._sizes.append(len(out))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_bomb_is_inflated_in_small_steps_never_past_the_limit(
    store: SqliteStore,
    client: httpx.Client,
    still_serving: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The inflated bytes in all stop at the limit, and no one step makes more than _INFLATE_STEP (a
    small share of the limit): the peak is the body read so far plus a step, not twice the limit."""
    limit = 8 << 20
    assert limit >= 8 * _INFLATE_STEP
    sizes: list[int] = []
    real = zlib.decompressobj
    bomb = _bomb(256 << 20)
    with serve_in_thread(store, max_body_bytes=limit) as url:
        monkeypatch.setattr(zlib, "decompressobj", lambda *a: _Inflater(real(*a), sizes))
        tracemalloc.start()
        try:
            resp = client.post(f"{url}/v1/traces", content=bomb, headers={**PB, "Content-Encoding": "gzip"})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            monkeypatch.undo()
        assert resp.status_code == 413
        assert f"larger than {limit} bytes (after decompression)" in _status(resp).message
        assert sum(sizes) == limit + 1  # one byte past the limit tells it is over
        assert max(sizes) <= _INFLATE_STEP
        assert peak < limit + 4 * _INFLATE_STEP  # the body plus a step, and the bomb's own bytes
        still_serving(url)


def test_default_limit_stops_a_bomb_too(receiver: str, client: httpx.Client) -> None:
    resp = client.post(
        f"{receiver}/v1/traces", content=_bomb(65 << 20), headers={**JS, "Content-Encoding": "gzip"}
    )
    assert resp.status_code == 413
    assert "--max-body-bytes" in resp.json()["message"]


def test_oversized_plain_body_is_413(
    store: SqliteStore, client: httpx.Client, still_serving: Callable[[str], None]
) -> None:
    with serve_in_thread(store, max_body_bytes=1 << 20) as url:
        resp = client.post(f"{url}/v1/traces", content=b"\x00" * (2 << 20), headers=PB)
        assert resp.status_code == 413
        # Without a Content-Length the limit is enforced while streaming.
        chunks = iter([b"\x00" * (256 << 10)] * 8)
        resp = client.post(f"{url}/v1/traces", content=chunks, headers=PB)
        assert resp.status_code == 413
        still_serving(url)


def test_truncated_gzip_is_400(
    receiver: str,
    client: httpx.Client,
    make_request: Callable[..., Any],
    good_span: Callable[..., Any],
    still_serving: Callable[[str], None],
) -> None:
    packed = gzip.compress(make_request([good_span(1)]).SerializeToString())
    resp = client.post(
        f"{receiver}/v1/traces", content=packed[:-12], headers={**PB, "Content-Encoding": "gzip"}
    )
    assert resp.status_code == 400
    assert "truncated" in _status(resp).message
    resp = client.post(
        f"{receiver}/v1/traces", content=b"not gzip at all", headers={**PB, "Content-Encoding": "gzip"}
    )
    assert resp.status_code == 400
    assert "not valid gzip" in _status(resp).message
    still_serving(receiver)


def test_invalid_ids_get_partial_success(
    receiver: str,
    client: httpx.Client,
    make_request: Callable[..., Any],
    good_span: Callable[..., Any],
    store: SqliteStore,
    still_serving: Callable[[str], None],
) -> None:
    body = make_request([good_span(1), good_span(2, trace_id=bytes(16)), good_span(3, span_id=b"\x01")])
    resp = client.post(f"{receiver}/v1/traces", content=body.SerializeToString(), headers=PB)
    assert resp.status_code == 200
    parsed = ExportTraceServiceResponse()
    parsed.ParseFromString(resp.content)
    assert parsed.partial_success.rejected_spans == 2
    assert "trace id must be 16 bytes and not all zero" in parsed.partial_success.error_message
    assert "span id must be 8 bytes" in parsed.partial_success.error_message
    assert [s.span_id for s in store.get_spans(TRACE_HEX)] == ["0000000000000001"]
    # JSON requests get a JSON partial success.
    js = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "00" * 16, "spanId": "1" * 16}]}]}]}
    resp = client.post(f"{receiver}/v1/traces", json=js)
    assert resp.status_code == 200
    assert resp.json()["partialSuccess"]["rejectedSpans"] == "1"
    still_serving(receiver)


def test_deeply_nested_and_huge_attributes_are_truncated_with_a_warning(
    receiver: str, client: httpx.Client, store: SqliteStore, still_serving: Callable[[str], None]
) -> None:
    deep: dict[str, Any] = {"stringValue": "bottom"}
    for _ in range(100):
        deep = {"kvlistValue": {"values": [{"key": "k", "value": deep}]}}
    huge = "z" * (5 << 20)
    body = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": TRACE_HEX,
                                "spanId": "00f067aa0ba902b7",
                                "attributes": [
                                    {"key": "deep", "value": deep},
                                    {"key": "huge", "value": {"stringValue": huge}},
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    resp = client.post(f"{receiver}/v1/traces", content=json.dumps(body), headers=JS)
    assert resp.status_code == 200
    partial = resp.json()["partialSuccess"]
    assert "rejectedSpans" not in partial  # a warning, nothing rejected
    assert "'deep' nested deeper than 64 levels" in partial["errorMessage"]
    assert "'huge' longer than" in partial["errorMessage"]
    (span,) = store.get_spans(TRACE_HEX)
    assert span.attributes["huge"].endswith(TRUNCATED_MARKER)
    value = span.attributes["deep"]
    while isinstance(value, dict):
        value = value["k"]
    assert value == DEPTH_MARKER
    still_serving(receiver)


def test_too_deep_for_protobuf_is_400(
    receiver: str,
    client: httpx.Client,
    make_request: Callable[..., Any],
    good_span: Callable[..., Any],
    still_serving: Callable[[str], None],
) -> None:
    from google.protobuf.internal.encoder import _VarintBytes
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    def field(n: int, payload: bytes) -> bytes:
        return _VarintBytes(n << 3 | 2) + _VarintBytes(len(payload)) + payload

    value = AnyValue(string_value="x").SerializeToString()
    for _ in range(500):
        value = field(5, field(1, value))
    span = make_request([good_span(1)]).resource_spans[0].scope_spans[0].spans[0].SerializeToString()
    body = field(1, field(2, field(2, span + field(9, field(1, b"deep") + field(2, value)))))
    resp = client.post(f"{receiver}/v1/traces", content=body, headers=PB)
    assert resp.status_code == 400
    assert "nested" in _status(resp).message
    still_serving(receiver)


def test_wrong_method_and_path(receiver: str, client: httpx.Client) -> None:
    assert client.get(f"{receiver}/v1/traces").status_code == 405
    assert client.post(f"{receiver}/v1/metrics", content=b"", headers=PB).status_code == 404


def test_bearer_token(
    store: SqliteStore, client: httpx.Client, make_request: Callable[..., Any], good_span: Callable[..., Any]
) -> None:
    body = make_request([good_span(1)]).SerializeToString()
    with serve_in_thread(store, token="s3cret-t0ken") as url:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret-t0ken"}):
            resp = client.post(f"{url}/v1/traces", content=body, headers={**PB, **headers})
            assert resp.status_code == 401
            assert resp.headers["www-authenticate"] == "Bearer"
            assert "bearer token" in _status(resp).message
            assert "s3cret-t0ken" not in _status(resp).message
        assert store.get_spans(TRACE_HEX) == []
        resp = client.post(
            f"{url}/v1/traces", content=body, headers={**PB, "Authorization": "Bearer s3cret-t0ken"}
        )
        assert resp.status_code == 200
        assert len(store.get_spans(TRACE_HEX)) == 1
        assert client.get(f"{url}/health").status_code == 200


def test_token_required_off_loopback(store: SqliteStore) -> None:
    with pytest.raises(InputError) as info:
        check_exposure("0.0.0.0", None)
    assert "TRACEJUDGE_OTLP_TOKEN" in (info.value.hint or "")
    with pytest.raises(InputError), serve_in_thread(store, "0.0.0.0:0"):
        pass
    with pytest.raises(InputError), serve_in_thread(store, "192.168.1.20:0"):
        pass
    check_exposure("0.0.0.0", "token")
    check_exposure("127.0.0.1", None)
    check_exposure("::1", None)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:4318") == ("127.0.0.1", 4318)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen("localhost:9") == ("localhost", 9)
    for bad in ("4318", "127.0.0.1", "host:port", ":4318", "h:70000", "[::1:4318"):
        with pytest.raises(InputError):
            parse_listen(bad)


def test_port_in_use_is_an_input_error(store: SqliteStore) -> None:
    with serve_in_thread(store) as url:
        port = url.rsplit(":", 1)[1]
        with pytest.raises(InputError, match="cannot listen"), serve_in_thread(store, f"127.0.0.1:{port}"):
            pass


_FIRST_REQUEST_WORK = """
import sys, threading
from tracejudge.store import SqliteStore
from tracejudge_collectors.otel import serve_in_thread

store = SqliteStore(sys.argv[1])
before = threading.active_count()
with serve_in_thread(store):
    print("anyio._backends._asyncio" in sys.modules, threading.active_count() - before)
store.close()
"""


def test_the_receiver_does_its_first_requests_one_time_work_before_it_is_ready(tmp_path: Any) -> None:
    """Importing anyio's thread backend and starting a worker thread (what the first request's hand-off
    to a thread did, ~20-70 ms of CPU) happen before the receiver says it is ready, in a fresh
    interpreter: the first export pays for itself only."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _FIRST_REQUEST_WORK, str(tmp_path / "s.db")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    imported, threads = out.stdout.split()
    # The server's own thread, and the worker thread the warm-up started.
    assert (imported, int(threads)) == ("True", 2)
