"""Hostile OTLP input (issue 17): lone surrogates, decode limits, slow and oversized requests.

Each case reproduces a finding of the adversarial round and failed before its fix.
"""

from __future__ import annotations

import base64
import gzip
import json
import selectors
import signal
import socket
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from google.rpc.status_pb2 import Status

from tracejudge.cli import cli
from tracejudge.report import serve as serve_report
from tracejudge.store import SqliteStore
from tracejudge_collectors.otel import DEFAULT_MAX_NAME_CHARS, DecodeLimits, serve_in_thread

TRACE_HEX = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_HEX = "00f067aa0ba902b7"
JS = {"Content-Type": "application/json"}
PB = {"Content-Type": "application/x-protobuf"}
RAW_SURROGATE = b"\xed\xa0\x80"  # U+D800 as (invalid) UTF-8
ESCAPED_SURROGATE = b"\\udc00"


def _span_body(name: str = "NAME", key: str = "KEY", value: str = "VAL") -> bytes:
    span = {
        "traceId": TRACE_HEX,
        "spanId": SPAN_HEX,
        "name": name,
        "attributes": [
            {"key": key, "value": {"stringValue": value}},
            {
                "key": "nested",
                "value": {"kvlistValue": {"values": [{"key": "NK", "value": {"stringValue": "NV"}}]}},
            },
        ],
        "events": [{"name": "EV", "attributes": [{"key": "EK", "value": {"stringValue": "EVV"}}]}],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "RES"}}]}
    return json.dumps(
        {
            "resourceSpans": [
                {"resource": resource, "scopeSpans": [{"scope": {"name": "SCOPE"}, "spans": [span]}]}
            ]
        }
    ).encode()


def _log_body() -> bytes:
    record = {
        "traceId": TRACE_HEX,
        "spanId": SPAN_HEX,
        "eventName": "EN",
        "body": {"stringValue": "BODY"},
        "attributes": [{"key": "LK", "value": {"stringValue": "LV"}}],
    }
    return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}).encode()


def _with(body: bytes, token: str, bad: bytes) -> bytes:
    return body.replace(token.encode(), b"x" + bad + b"y", 1)


def _storable(value: object) -> None:
    """Every string can be written as UTF-8 JSON (what SQLite, PostgreSQL and orjson need)."""
    orjson.dumps(value)


SPAN_PLACES = ["NAME", "KEY", "VAL", "NK", "NV", "EV", "EK", "EVV", "RES", "SCOPE"]


@pytest.mark.parametrize("bad", [RAW_SURROGATE, ESCAPED_SURROGATE], ids=["raw", "escaped"])
@pytest.mark.parametrize("place", SPAN_PLACES)
def test_a_lone_surrogate_anywhere_in_a_span_is_replaced_not_a_500(
    receiver: str, store: SqliteStore, place: str, bad: bytes
) -> None:
    with httpx.Client(timeout=30, trust_env=False) as client:
        resp = client.post(f"{receiver}/v1/traces", content=_with(_span_body(), place, bad), headers=JS)
    assert resp.status_code == 200, resp.text
    (span,) = store.get_spans(TRACE_HEX)
    dumped = span.model_dump()
    _storable(dumped)
    assert "x\ufffd" in json.dumps(dumped, ensure_ascii=False)


@pytest.mark.parametrize("bad", [RAW_SURROGATE, ESCAPED_SURROGATE], ids=["raw", "escaped"])
@pytest.mark.parametrize("place", ["EN", "BODY", "LK", "LV"])
def test_a_lone_surrogate_in_a_log_record_is_replaced_not_a_500(
    receiver: str, store: SqliteStore, place: str, bad: bytes
) -> None:
    with httpx.Client(timeout=30, trust_env=False) as client:
        resp = client.post(f"{receiver}/v1/logs", content=_with(_log_body(), place, bad), headers=JS)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {}


def test_a_body_that_is_not_utf8_reads_with_replacement_characters(receiver: str, store: SqliteStore) -> None:
    with httpx.Client(timeout=30, trust_env=False) as client:
        resp = client.post(
            f"{receiver}/v1/traces", content=_with(_span_body(), "VAL", b"\xff\xfe"), headers=JS
        )
    assert resp.status_code == 200, resp.text
    (span,) = store.get_spans(TRACE_HEX)
    assert span.attributes["KEY"] == "x\ufffd\ufffdy"


@pytest.mark.parametrize("name", ["spans.json", "spans.jsonl"])
def test_collect_file_with_lone_surrogates_stores_the_span(
    tmp_path: Path, store_path: Path, store: SqliteStore, name: str
) -> None:
    path = tmp_path / name
    body = _with(_with(_span_body(), "NAME", RAW_SURROGATE), "VAL", ESCAPED_SURROGATE)
    path.write_bytes(body + b"\n" + _with(_log_body(), "BODY", RAW_SURROGATE) + b"\n")
    result = CliRunner().invoke(
        cli, ["--store", f"sqlite:///{store_path}", "collect", "file", str(path), "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["spans"], summary["log_events"], summary["failed"]) == (1, 1, 0)
    (span,) = store.get_spans(TRACE_HEX)
    assert span.name == "x\ufffd\ufffd\ufffdy"
    assert span.attributes["KEY"] == "x\ufffdy"


# ---------------------------------------------------------------- limits on decoded work


def _message(resp: httpx.Response) -> str:
    if resp.headers["content-type"] == "application/json":
        return str(resp.json()["message"])
    status = Status()
    status.ParseFromString(resp.content)
    return str(status.message)


def _json_spans(n: int, name: str = "s") -> bytes:
    spans = [{"traceId": TRACE_HEX, "spanId": f"{i + 1:016x}", "name": name} for i in range(n)]
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def _json_logs(n: int) -> bytes:
    records = [{"traceId": TRACE_HEX, "spanId": f"{i + 1:016x}", "eventName": "e"} for i in range(n)]
    return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}).encode()


def test_more_spans_than_the_limit_is_413_naming_it_and_stores_nothing(
    store: SqliteStore, make_request: Callable[..., Any], good_span: Callable[..., Any]
) -> None:
    with (
        serve_in_thread(store, limits=DecodeLimits(max_spans=10)) as url,
        httpx.Client(timeout=30, trust_env=False) as client,
    ):
        pb = make_request([good_span(i) for i in range(1, 12)]).SerializeToString()
        answers = [
            client.post(f"{url}/v1/traces", content=pb, headers=PB),
            client.post(f"{url}/v1/traces", content=_json_spans(11), headers=JS),
            client.post(f"{url}/v1/logs", content=_json_logs(11), headers=JS),
        ]
        for resp in answers:
            assert resp.status_code == 413, resp.text
            message = _message(resp)
            assert "11" in message
            assert "limit of 10" in message
            assert "--max-spans" in message
            assert "TRACEJUDGE_OTLP_MAX_SPANS" in message
        assert store.get_spans(TRACE_HEX) == []
        ok = client.post(f"{url}/v1/traces", content=_json_spans(10), headers=JS)
        assert ok.status_code == 200
        assert len(store.get_spans(TRACE_HEX)) == 10


def test_a_gzip_bomb_of_tiny_spans_is_413_before_it_is_parsed(store: SqliteStore) -> None:
    # The finding: 188 KiB of gzip expanding to 63 MiB of 1.3M tiny spans took the receiver to 3 GB.
    tiny = json.dumps({"traceId": TRACE_HEX, "spanId": SPAN_HEX}, separators=(",", ":")).encode()
    n = 800_000  # ~58 MiB, under the 64 MiB body limit
    plain = b'{"resourceSpans":[{"scopeSpans":[{"spans":[' + b",".join([tiny] * n) + b"]}]}]}"
    bomb = gzip.compress(plain, compresslevel=9)
    inflated = len(plain)
    del plain
    assert len(bomb) < 1 << 20
    with serve_in_thread(store) as url, httpx.Client(timeout=120, trust_env=False) as client:
        tracemalloc.start()
        try:
            resp = client.post(f"{url}/v1/traces", content=bomb, headers={**JS, "Content-Encoding": "gzip"})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert resp.status_code == 413, resp.text[:300]
    assert "--max-decoded-bytes" in resp.json()["message"]
    # The body is held once (~1.14x: its buffer's headroom, an inflate step): not its pieces and their
    # join, nor its text beside it (refused on the bytes' counts), each of which made it 2x; the parse
    # never happens.
    assert peak < 1.5 * inflated


# The receiver as `tracejudge collect otlp` runs it, tracing its allocations: each SIGUSR1 prints the
# memory traced now and the peak since the last SIGUSR1 (then starts the next peak from there).
_TRACED_RECEIVER = """
import signal, sys, tracemalloc
from tracejudge.cli import console_main

def report(_signum, _frame):
    current, peak = tracemalloc.get_traced_memory()
    sys.stdout.write(f"traced {current} {peak}\\n")
    sys.stdout.flush()
    tracemalloc.reset_peak()

signal.signal(signal.SIGUSR1, report)
tracemalloc.start()
sys.argv = ["tracejudge", *sys.argv[1:]]
console_main()
"""


def _line(proc: subprocess.Popen[str], what: str) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(120):
        pytest.fail(f"the receiver did not print {what}")
    return proc.stdout.readline()


def _traced(proc: subprocess.Popen[str]) -> tuple[int, int]:
    """The receiver's traced memory now and its peak since the last call."""
    proc.send_signal(signal.SIGUSR1)
    kind, current, peak = _line(proc, "its traced memory").split()
    assert kind == "traced"
    return int(current), int(peak)


def test_a_large_plain_body_is_held_once(store_path: Path) -> None:
    """An uncompressed body past an eighth of the limit grows in one buffer handed over as it is: its
    chunks joined at the end held it twice (the chunks and the join), and its text a second time.

    Measured in the receiver's own process (``collect otlp``), from just before the request to just
    after its answer: traced in the test's process, the client's send and the server thread's reads
    counted too (1.3-1.7x, under load more), and the bound had to leave room for them."""
    tiny = json.dumps({"traceId": TRACE_HEX, "spanId": SPAN_HEX}, separators=(",", ":")).encode()
    plain = b'{"resourceSpans":[{"scopeSpans":[{"spans":[' + b",".join([tiny] * 200_000) + b"]}]}]}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _TRACED_RECEIVER,
            "--store",
            f"sqlite:///{store_path}",
            "collect",
            "otlp",
            "--listen",
            "127.0.0.1:0",
            "--max-body-bytes",
            str(32 << 20),
            "--max-decoded-bytes",
            str(1 << 20),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = _line(proc, "its listening line").split()[-1]
        with httpx.Client(timeout=120, trust_env=False) as client:
            client.post(f"{url}/v1/traces", content=_span_body(), headers=JS).raise_for_status()
            before, _ = _traced(proc)
            resp = client.post(f"{url}/v1/traces", content=plain, headers=JS)
            _, peak = _traced(proc)
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert resp.status_code == 413, resp.text[:300]
    assert "would take about" in resp.json()["message"]
    # The buffer grown an eighth at a time (a realloc: tracemalloc counts its new size only) and the
    # chunks in flight beside it: 1.14-1.16x measured. The body held twice (its chunks and their join)
    # is 2.00x.
    ratio = (peak - before) / len(plain)
    assert ratio < 1.3, f"the receiver's peak was {ratio:.2f}x the body"


@pytest.mark.parametrize(
    ("name", "refused"),
    [
        ("a" * 3500, "about"),  # ASCII: the estimate on the bytes is exactly the text's
        ("中" * 3000, None),  # over on the bytes' length (3 per character), within on the text's
        ("中" * 3500, "about"),  # over on the text's length, within on a quarter of the bytes'
        ("中" * 6000, "at least"),  # over even on a quarter of the bytes': refused before its text
    ],
)
def test_the_decoded_size_estimate_is_checked_on_the_bytes_only_when_it_decides_the_same(
    name: str, refused: str | None
) -> None:
    """A JSON body is refused before its text is made only when the text would be refused too: the
    same requests are refused as when the estimate was made on the text (UTF-16 bodies still are)."""
    from tracejudge_collectors.otel import LimitError, decode_json

    span = {"traceId": TRACE_HEX, "spanId": SPAN_HEX, "name": name}
    doc = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}, ensure_ascii=False)
    limits = DecodeLimits(max_decoded_bytes=8192, max_name_chars=10_000)
    brackets = 400 * 4 + 100 * 3  # four objects, three arrays
    for body in (doc.encode(), doc.encode("utf-16")):
        if refused is None:
            assert decode_json(body, limits=limits).spans[0].name == name
            continue
        with pytest.raises(LimitError) as info:
            decode_json(body, limits=limits)
        assert info.value.status == 413
        if refused == "at least" and body == doc.encode():
            assert f"would take at least {2 * (len(body) // 4) + brackets} bytes" in info.value.message
        else:
            assert f"would take about {2 * len(doc) + brackets} bytes" in info.value.message


def test_a_json_body_beyond_the_decoded_size_limit_is_413(store: SqliteStore) -> None:
    with (
        serve_in_thread(store, limits=DecodeLimits(max_decoded_bytes=1 << 20)) as url,
        httpx.Client(timeout=30, trust_env=False) as client,
    ):
        resp = client.post(f"{url}/v1/traces", content=_json_spans(5000), headers=JS)
        assert resp.status_code == 413
        assert "TRACEJUDGE_OTLP_MAX_DECODED_BYTES" in resp.json()["message"]
        assert client.post(f"{url}/v1/traces", content=_json_spans(100), headers=JS).status_code == 200


@pytest.mark.parametrize("where", ["span name", "attribute key", "event name", "scope name"])
@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_a_name_or_key_past_the_limit_is_400_naming_it(
    receiver: str, store: SqliteStore, make_request: Callable[..., Any], where: str, encoding: str
) -> None:
    long = "n" * (DEFAULT_MAX_NAME_CHARS + 1)
    span: dict[str, Any] = {"trace_id": bytes.fromhex(TRACE_HEX), "span_id": bytes.fromhex(SPAN_HEX)}
    if where == "span name":
        span["name"] = long
    elif where == "attribute key":
        span["attributes"] = {long: "v"}
    req = make_request([span])
    if where == "event name":
        req.resource_spans[0].scope_spans[0].spans[0].events.add(name=long)
    elif where == "scope name":
        req.resource_spans[0].scope_spans[0].scope.name = long
    if encoding == "protobuf":
        body, headers = req.SerializeToString(), PB
    else:
        body, headers = _to_json(req), JS
    with httpx.Client(timeout=30, trust_env=False) as client:
        resp = client.post(f"{receiver}/v1/traces", content=body, headers=headers)
    assert resp.status_code == 400, resp.text[:300]
    message = _message(resp)
    assert f"more than the limit of {DEFAULT_MAX_NAME_CHARS}" in message
    # Which span and which name or key broke the limit, and how to raise it.
    expected = {
        "span name": f"span {SPAN_HEX}: the name",
        "attribute key": f"span {SPAN_HEX}: attribute key",
        "event name": f"span {SPAN_HEX}: the event name",
        "scope name": "a scope name",
    }[where]
    assert f"{expected} 'nnn" in message, message[:300]
    assert "--max-name-chars" in message
    assert "TRACEJUDGE_OTLP_MAX_NAME_CHARS" in message
    assert store.get_spans(TRACE_HEX) == []


def test_a_long_attribute_value_is_still_truncated_not_refused(receiver: str, store: SqliteStore) -> None:
    body = _span_body(value="v" * (DEFAULT_MAX_NAME_CHARS * 2))
    with httpx.Client(timeout=30, trust_env=False) as client:
        assert client.post(f"{receiver}/v1/traces", content=body, headers=JS).status_code == 200
    assert len(store.get_spans(TRACE_HEX)[0].attributes["KEY"]) == DEFAULT_MAX_NAME_CHARS * 2


def _to_json(req: Any) -> bytes:
    doc = json_format.MessageToDict(req, use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                for key in ("traceId", "spanId"):
                    sp[key] = base64.b64decode(sp[key]).hex()
    return json.dumps(doc).encode()


# ---------------------------------------------------------------- slow, partial and oversized requests


def _raw(url: str, data: bytes, *, wait: float = 20.0) -> bytes:
    """Send ``data`` on a raw connection and return what the server answers until it closes (or
    ``wait`` seconds pass: a server that neither answers nor closes fails the caller's assertion)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=wait) as sock:
        sock.sendall(data)
        got = b""
        try:
            while chunk := sock.recv(65536):
                got += chunk
        except TimeoutError:
            pass
        return got


def test_a_declared_content_length_beyond_the_limit_is_refused_at_once(store: SqliteStore) -> None:
    with serve_in_thread(store, max_body_bytes=1 << 20) as url:
        head = (
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 1000000000000\r\n\r\n"
        )
        # Only a few bytes of the declared terabyte follow: a receiver that drained would wait for more.
        answer = _raw(url, head + b"\x00" * 100)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"connection: close" in answer.lower()
    assert b"larger than 1048576 bytes" in answer


def test_a_body_that_stops_arriving_is_408(store: SqliteStore) -> None:
    with serve_in_thread(store, read_timeout=0.5) as url:
        head = (
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n"
        )
        answer = _raw(url, head + b'{"resourceSpans": [')
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"--read-timeout" in answer
        with httpx.Client(timeout=30, trust_env=False) as client:
            assert client.post(f"{url}/v1/traces", content=_json_spans(1), headers=JS).status_code == 200


def test_a_header_that_keeps_growing_is_refused(store: SqliteStore) -> None:
    # h11 stops at 16 KiB of unfinished head; httptools buffers a header's value until its line
    # ends, so the receiver counts the bytes itself (tracejudge._uvicorn.MAX_HEAD_BYTES).
    with serve_in_thread(store, read_timeout=120) as url:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=20) as sock:
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nX-Grows: ")
            try:
                for _ in range(64):  # 4 MiB of one header's value, no line end
                    sock.sendall(b"a" * (64 << 10))
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused while sending
            got = b""
            try:
                while chunk := sock.recv(65536):
                    got += chunk
            except (TimeoutError, ConnectionResetError):
                pass
        assert got.startswith(b"HTTP/1.1 400"), got[:200]
        assert got.endswith(b"Invalid HTTP request received."), got[-200:]
        with httpx.Client(timeout=30, trust_env=False) as client:
            assert client.post(f"{url}/v1/traces", content=_json_spans(1), headers=JS).status_code == 200


def test_headers_that_never_finish_close_the_connection(store: SqliteStore) -> None:
    with serve_in_thread(store, read_timeout=0.5) as url:
        answer = _raw(url, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
        assert answer == b""  # closed by the receiver, not left open until the client gives up
        with httpx.Client(timeout=30, trust_env=False) as client:
            assert client.get(f"{url}/health").status_code == 200


def test_serve_closes_a_connection_whose_headers_never_finish(store: SqliteStore) -> None:
    urls: list[str] = []
    ready, stop = threading.Event(), threading.Event()

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    thread = threading.Thread(
        target=serve_report,
        args=(store, "127.0.0.1:0"),
        kwargs={"on_ready": on_ready, "stop": stop, "read_timeout": 0.5},
        daemon=True,
    )
    thread.start()
    try:
        assert ready.wait(30)
        assert _raw(urls[0], b"GET / HTTP/1.1\r\nHost: x\r\n") == b""
    finally:
        stop.set()
        thread.join(15)
