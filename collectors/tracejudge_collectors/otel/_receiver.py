"""OTLP/HTTP trace and log receiver: a starlette app served by uvicorn.

Log records (``/v1/logs``) are kept when they carry a span context: the GenAI instrumentations send
message content that way (see :mod:`tracejudge_collectors.otel._logs`). Spans and log records are
committed to the store (in a worker thread) before the 200 goes out, so an acknowledged record is never
lost. Requests that arrive while a commit is under way are committed together in the next one (group
commit): one transaction, one durable sync, for all of them. Bad input gets a 4xx with a
``google.rpc.Status`` body saying what is wrong; the receiver never answers a 5xx for bad input and
keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import io
import logging
import os
import signal
import socket
import sqlite3
import sys
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from tracejudge import InputError, StoreError, TracejudgeError, serving
from tracejudge.serving import bind, is_loopback, quiet_server, socket_url, token_matches
from tracejudge.store import Store
from tracejudge_collectors.otel._decode import DecodeResult, EncodeResult, decode_json, encode_protobuf
from tracejudge_collectors.otel._logs import LogDecodeResult, decode_logs_json, decode_logs_protobuf
from tracejudge_collectors.otel._otlp import DecodeLimits, LimitError, OtlpDecodeError
from tracejudge_collectors.otel._proto import export_logs_response_body, export_response_body, status_body

__all__ = [
    "DEFAULT_LISTEN",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_READ_TIMEOUT",
    "LOG_PATHS",
    "TRACE_PATHS",
    "build_app",
    "check_exposure",
    "is_loopback",
    "parse_listen",
    "serve",
    "serve_in_thread",
]

DEFAULT_LISTEN = "127.0.0.1:4318"
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
DEFAULT_READ_TIMEOUT = 30.0
"""Seconds a request may take to arrive whole, and the longest pause between its parts."""
TRACE_PATHS = ("/v1/traces", "/api/public/otel/v1/traces")
LOG_PATHS = ("/v1/logs", "/api/public/otel/v1/logs")

_log = logging.getLogger("tracejudge.otlp")

_PROTOBUF_TYPES = frozenset({"application/x-protobuf", "application/protobuf"})
_JSON_TYPE = "application/json"
# gRPC status codes carried in google.rpc.Status bodies.
_INVALID_ARGUMENT = 3
_UNAUTHENTICATED = 16
_UNAVAILABLE = 14
# 32 + MAX_WBITS: zlib accepts a gzip or a zlib header, so "deflate" senders of either kind work.
_AUTO_WBITS = 32 + zlib.MAX_WBITS
# What one inflate step may make (zlib's max_length). One step up to the whole limit made a bomb's
# peak its output plus the body holding it plus zlib's own buffers, ~3.6x the limit (fuzz_intake.py);
# in steps the peak is the body, at most the limit, plus one step.
_INFLATE_STEP = 1 << 20


class _Reject(Exception):
    def __init__(self, status: int, message: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close


def build_app(
    store: Store,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    limits: DecodeLimits | None = None,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> Starlette:
    """The receiver as an ASGI app: ``POST /v1/traces`` and ``/api/public/otel/v1/traces``, ``POST
    /v1/logs`` and ``/api/public/otel/v1/logs`` (protobuf or JSON, optionally gzip), and ``GET /health``.

    ``token``, when given, must arrive as ``Authorization: Bearer <token>``. ``max_body_bytes``
    bounds the body after decompression (413 beyond it; a declared ``Content-Length`` beyond it is
    refused before any of the body is read); ``limits`` bounds what decoding makes of it (413/400
    naming the limit); a body that takes longer than ``read_timeout`` seconds to arrive, or pauses
    that long, is answered 408.
    """
    exporter = _Exporter(
        expected=token.encode() if token else None,
        max_body_bytes=max_body_bytes,
        limits=limits or DecodeLimits(),
        read_timeout=read_timeout,
    )
    traces = _Signal("spans", _decode_spans, export_response_body, _GroupCommit(store.put_spans))
    logs = _Signal("log events", _decode_logs, export_logs_response_body, _GroupCommit(store.put_log_events))

    async def export_traces(request: Request) -> Response:
        return await exporter.export(request, traces)

    async def export_logs(request: Request) -> Response:
        return await exporter.export(request, logs)

    async def health(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes = [Route(path, export_traces, methods=["POST"]) for path in TRACE_PATHS]
    routes.extend(Route(path, export_logs, methods=["POST"]) for path in LOG_PATHS)
    routes.append(Route("/health", health, methods=["GET"]))
    return Starlette(routes=routes)


Decoded = DecodeResult | EncodeResult | LogDecodeResult


@dataclass
class _Waiting:
    """One request's records waiting for the transaction that will hold them."""

    records: Sequence[Any]
    done: bool = False
    """Has the transaction meant to hold them ended (committed or failed)?"""
    stored: bool = False
    error: BaseException | None = None


class _GroupCommit:
    """Writes that arrive while one is under way, made in the next one together: one store
    transaction (and one durable sync) for every export request waiting, instead of one each.

    :meth:`commit` (called in the request's worker thread, right after decoding) returns once the
    transaction holding its records has committed, so a request is acknowledged only when its
    records are durable. The first request to find no write under way writes every request waiting
    then (its own included) while the others wait; nothing waits to gather a group, so a lone request
    is written at once, in its own thread. A transaction that fails is tried again for each of its
    requests alone, so a request the store refuses fails only itself; each request that then fails
    gets the store's exception, as it would have had on its own."""

    def __init__(self, write: Callable[[list[Any]], object]) -> None:
        self._write = write
        self._turn = threading.Condition()
        self._waiting: list[_Waiting] = []
        self._writing = False

    def commit(self, records: Sequence[Any]) -> None:
        """Store ``records``; returns once they are committed, or raises what the store raised."""
        mine = _Waiting(records)
        with self._turn:
            self._waiting.append(mine)
            while self._writing and not mine.done:
                self._turn.wait()
            if not mine.done:  # no write under way: this thread writes the group
                group, self._waiting, self._writing = self._waiting, [], True
        if not mine.done:
            try:
                self._commit(group)
            finally:
                with self._turn:
                    self._writing = False
                    self._turn.notify_all()
        if mine.error is not None:
            raise mine.error

    def _commit(self, group: list[_Waiting]) -> None:
        try:
            self._write([r for waiting in group for r in waiting.records])
        except Exception as exc:
            if len(group) == 1:
                group[0].error = exc
                return
            # Which request the store refused is unknown: each alone, so the others still commit.
            for waiting in group:
                try:
                    self._write(list(waiting.records))
                except Exception as alone:
                    waiting.error = alone
                else:
                    waiting.stored = True
        else:
            for waiting in group:
                waiting.stored = True
        finally:
            for waiting in group:
                if not waiting.stored and waiting.error is None:  # interrupted (not an Exception)
                    waiting.error = StoreError("the receiver stopped before storing the records")
                waiting.done = True


@dataclass(frozen=True)
class _Signal:
    """One kind of export request (traces or logs): how its body decodes, the answer that says what
    was rejected, and the group commit that stores what was accepted."""

    kind: str
    """What is stored, for the log: "spans" or "log events"."""
    decode: Callable[[bytes, bool, DecodeLimits], tuple[Decoded, Sequence[Any]]]
    response_body: Callable[..., bytes]
    commits: _GroupCommit


def _status(code: int, grpc_code: int, message: str, as_json: bool, **headers: str) -> Response:
    return Response(
        status_body(grpc_code, message, as_json=as_json),
        status_code=code,
        media_type=_JSON_TYPE if as_json else "application/x-protobuf",
        headers=headers or None,
    )


@dataclass(frozen=True)
class _Exporter:
    """One export request, in order: refused on its headers (token, content type, encoding), its
    body read within the limits, decoded and stored, answered with what was rejected."""

    expected: bytes | None
    max_body_bytes: int
    limits: DecodeLimits
    read_timeout: float

    async def export(self, request: Request, signal: _Signal) -> Response:
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        as_json = media not in _PROTOBUF_TYPES
        encoding = request.headers.get("content-encoding", "").strip().lower()
        refused = self._refused(request, media, encoding, as_json)
        if refused is not None:
            await _drain(request, self.max_body_bytes)
            return refused
        try:
            body = await _read_body(
                request,
                compressed=encoding not in ("", "identity"),
                limit=self.max_body_bytes,
                timeout=self.read_timeout,
            )
        except _Reject as exc:
            extra = {"Connection": "close"} if exc.close else {}
            return _status(exc.status, _INVALID_ARGUMENT, exc.message, as_json, **extra)
        return await self._store(signal, body, as_json)

    def _refused(self, request: Request, media: str, encoding: str, as_json: bool) -> Response | None:
        """The answer to a request its headers refuse (the body is then drained, not read)."""
        header = (request.headers.get("authorization") or "").strip()
        if self.expected is not None and not token_matches(header, self.expected, basic=False):
            return _status(
                401,
                _UNAUTHENTICATED,
                "missing or wrong bearer token: send the header `Authorization: Bearer <token>` "
                "(OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer <token>')",
                as_json,
                **{"WWW-Authenticate": "Bearer"},
            )
        if media not in _PROTOBUF_TYPES and media != _JSON_TYPE:
            return _status(
                415,
                _INVALID_ARGUMENT,
                f"unsupported Content-Type {media or '(none)'!r}: "
                "send application/x-protobuf or application/json",
                True,
            )
        if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            return _status(
                415,
                _INVALID_ARGUMENT,
                f"unsupported Content-Encoding {encoding!r}: send gzip or none",
                as_json,
            )
        return None

    async def _store(self, signal: _Signal, body: bytes, as_json: bool) -> Response:
        try:
            result = await run_in_threadpool(_ingest, signal, body, as_json, self.limits)
        except LimitError as exc:
            return _status(exc.status, _INVALID_ARGUMENT, f"{exc.message}; {exc.hint}", as_json)
        except OtlpDecodeError as exc:
            message = f"{exc.message}; {exc.hint}" if exc.hint else exc.message
            return _status(400, _INVALID_ARGUMENT, message, as_json)
        except (StoreError, sqlite3.Error, OSError) as exc:
            # The sender may retry 503; nothing was acknowledged, so nothing is lost. A StoreError says
            # what happened (PostgreSQL restarting, …) in its message: one line per refused export, not
            # a traceback each for as long as the outage lasts.
            if isinstance(exc, StoreError):
                _log.warning("storing %s failed, answered 503: %s", signal.kind, exc)
            else:
                _log.exception("storing %s failed", signal.kind)
            # Retry-After 2: OpenTelemetry SDK exporters wait what it says within their export timeout
            # (10 s by default), then drop the batch: 2 s tries at 0, 2, 4, 6 and 8 s (5 s tried twice).
            return _status(
                503, _UNAVAILABLE, "the store is unavailable; retry later", as_json, **{"Retry-After": "2"}
            )
        return Response(
            signal.response_body(result.rejected, result.message, as_json=as_json),
            media_type=_JSON_TYPE if as_json else "application/x-protobuf",
        )


def _ingest(signal: _Signal, body: bytes, as_json: bool, limits: DecodeLimits) -> Decoded:
    """Decode, then store with the requests in flight beside it (one worker thread, no hand-off)."""
    result, records = signal.decode(body, as_json, limits)
    if records:
        signal.commits.commit(records)
    return result


def _decode_spans(body: bytes, as_json: bool, limits: DecodeLimits) -> tuple[Decoded, Sequence[Any]]:
    # Protobuf spans are stored in their own bytes (decoded when read): no attribute decoded twice.
    result = decode_json(body, limits=limits) if as_json else encode_protobuf(body, limits=limits)
    return result, result.spans


def _decode_logs(body: bytes, as_json: bool, limits: DecodeLimits) -> tuple[Decoded, Sequence[Any]]:
    result = decode_logs_json(body, limits=limits) if as_json else decode_logs_protobuf(body, limits=limits)
    return result, result.events


async def _drain(request: Request, limit: int) -> None:
    """Read and discard the rest of a refused body (up to ``limit`` bytes) so the sender sees our
    answer instead of a reset connection."""
    seen = 0
    with contextlib.suppress(Exception):
        while True:
            message = await request.receive()
            seen += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body") or seen > limit:
                return


async def _read_body(request: Request, *, compressed: bool, limit: int, timeout: float) -> bytes:
    """The body, decompressed incrementally so a gzip bomb stops at ``limit`` (413), not in memory;
    a body that takes longer than ``timeout`` seconds in all, or pauses that long, is refused (408).

    Read from the ASGI ``receive`` directly, under one deadline: a 1 MB body arrives in dozens of
    chunks, and a task per chunk (``wait_for``) or a generator per body cost more than the chunks."""
    too_large = _Reject(
        413,
        f"the request body is larger than {limit} bytes (after decompression); export smaller batches "
        "(BatchSpanProcessor / BatchLogRecordProcessor max_export_batch_size) or start the receiver "
        "with a larger --max-body-bytes",
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        # Refused before reading a byte of it; the connection closes rather than drain it.
        raise _Reject(too_large.status, too_large.message, close=True)
    body = _Body(limit, too_large, zlib.decompressobj(_AUTO_WBITS) if compressed else None)
    try:
        async with asyncio.timeout(timeout):
            await _receive_into(request, body)
    except TimeoutError:
        raise _Reject(
            408,
            f"the request body did not arrive within {timeout:g} s (or paused that long); "
            "send it whole, or start the receiver with a larger --read-timeout "
            "(env TRACEJUDGE_OTLP_READ_TIMEOUT)",
            close=True,
        ) from None
    except zlib.error as exc:
        if not body.ended:
            await _drain(request, limit)
        raise _Reject(400, f"the body is not valid gzip/deflate data ({exc})") from exc
    except _Reject as exc:
        if not exc.close and not body.ended:
            await _drain(request, limit)
        raise
    except ClientDisconnect as exc:
        raise _Reject(400, "the client disconnected before the body was complete") from exc
    return body.finish()


async def _receive_into(request: Request, body: _Body) -> None:
    """Every chunk of the request's body into ``body``, to its end."""
    receive = request.receive
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnect
        body.ended = not message.get("more_body", False)
        body.add(message.get("body", b""))
        if body.ended:
            return


@dataclass
class _Body:
    """A request body as it arrives, at most ``limit`` bytes; inflated chunk by chunk when ``dec`` is
    set, so a gzip bomb stops at the limit rather than in memory. The pieces are joined once, at the
    end (a body of one chunk is not copied at all) — up to an eighth of the limit: a larger body
    grows in one buffer from there, handed over without a copy, so it is never held twice (its pieces
    and their join: a body just under the limit peaked at twice it)."""

    limit: int
    too_large: _Reject
    dec: zlib._Decompress | None
    pieces: list[bytes] = field(default_factory=list)
    grown: io.BytesIO | None = None
    """The body past an eighth of the limit (its pieces then are in it)."""
    size: int = 0
    fed: bool = False
    """Has the current compressed member been fed data it has not finished?"""
    ended: bool = False
    """Has the last chunk arrived (nothing left to drain)?"""

    def add(self, chunk: bytes) -> None:
        if self.dec is None:
            self._keep(chunk)
            return
        data = chunk
        while data:
            self.fed = True
            self._keep(self.dec.decompress(data, min(_INFLATE_STEP, self.limit + 1 - self.size)))
            if self.dec.eof:
                # Concatenated gzip members; trailing zero padding is tolerated.
                data = self.dec.unused_data.lstrip(b"\x00")
                self.dec = zlib.decompressobj(_AUTO_WBITS)
                self.fed = False
            else:
                data = self.dec.unconsumed_tail

    def finish(self) -> bytes:
        """The whole body; a compressed one must end its last member."""
        if self.dec is not None and self.fed:
            try:
                self._keep(self.dec.flush())
            except zlib.error as exc:
                raise _Reject(400, f"the body is not valid gzip/deflate data ({exc})") from exc
            if not self.dec.eof:
                raise _Reject(400, "the compressed body is truncated")
        if self.grown is not None:
            return self.grown.getvalue()  # its own buffer, trimmed in place: not a copy
        return b"".join(self.pieces)

    def _keep(self, piece: bytes) -> None:
        if piece:
            self.size += len(piece)
            if self.size > self.limit:
                raise self.too_large
            if self.grown is not None:
                self.grown.write(piece)  # its buffer grows in place (realloc), by an eighth at a time
                return
            self.pieces.append(piece)
            if self.size > self.limit >> 3 and len(self.pieces) > 1:
                self.grown = io.BytesIO(b"".join(self.pieces))
                self.grown.seek(0, io.SEEK_END)
                self.pieces.clear()


# ---------------------------------------------------------------- serving

# glibc's mallopt parameters (malloc.h) and the values serve() sets: see _reuse_freed_memory.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest
_TRIM_THRESHOLD = 64 * 1024 * 1024


def _reuse_freed_memory() -> None:
    """Make glibc's malloc hand a request's freed buffers to the next request instead of returning
    them to the operating system: at most 64 MiB kept free in the heap, buffers up to 32 MiB taken
    from it. By default glibc maps a buffer over 128 KiB (later: over the largest one freed) anew
    and unmaps it when freed, and trims the heap's top beyond twice that -- so each export request's
    body and the socket reads, parser buffers and copies it passes through were fresh pages, each
    zeroed by the kernel on its first write: a third of the event loop's CPU (perf: page faults,
    clear_page, unmapping), ~375 faults per 1.3 MB request. Other allocators and platforms: nothing
    to do."""
    if sys.platform != "linux":
        return
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, ValueError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) → (host, port). Port 0 means any free port."""
    return serving.parse_listen(value, example_port=4318, strip=True)


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a bearer token."""
    serving.check_exposure(
        host,
        token,
        refusal=f"refusing to listen on {host} without a bearer token: "
        "anyone who can reach it could write traces",
        hint="set --token or TRACEJUDGE_OTLP_TOKEN (senders add the header "
        "`Authorization: Bearer <token>`), or listen on 127.0.0.1",
    )


def _prepare(
    store: Store,
    listen: str,
    token: str | None,
    max_body_bytes: int,
    on_ready: Callable[[str], None],
    wrap_app: Callable[[ASGIApp], ASGIApp] | None = None,
    limits: DecodeLimits | None = None,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> tuple[uvicorn.Server, socket.socket]:
    host, port = parse_listen(listen)
    check_exposure(host, token)
    if max_body_bytes < 1:
        raise InputError("--max-body-bytes must be positive", hint="the default is 67108864 (64 MiB)")
    if read_timeout <= 0:
        raise InputError("--read-timeout must be positive", hint=f"the default is {DEFAULT_READ_TIMEOUT:g} s")
    sock = bind(host, port)
    url = socket_url(sock)
    app: ASGIApp = build_app(
        store, token=token, max_body_bytes=max_body_bytes, limits=limits, read_timeout=read_timeout
    )
    server = quiet_server(
        wrap_app(app) if wrap_app is not None else app,
        lambda: on_ready(url),
        timeout_graceful_shutdown=10,
        header_timeout=read_timeout,
        warm=_warm,
    )
    return server, sock


async def _warm() -> None:
    """What the first export request would otherwise pay for, done before the receiver says it is
    ready: importing anyio's thread backend and starting a worker thread (run_in_threadpool's first
    call: ~20-30 ms of CPU on a quiet machine, ~60-70 ms at load 10 — a tenth of taking 10k spans in
    20 requests), and the encode's message classes (an empty request encoded)."""
    await run_in_threadpool(encode_protobuf, b"")


def serve(
    store: Store,
    listen: str = DEFAULT_LISTEN,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    on_ready: Callable[[str], None] | None = None,
    wrap_app: Callable[[ASGIApp], ASGIApp] | None = None,
    limits: DecodeLimits | None = None,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> None:
    """Run the receiver until SIGINT or SIGTERM (a second SIGINT forces the exit).

    ``on_ready`` receives the base URL (with the real port when ``listen`` asked for port 0) once
    the server accepts connections; ``wrap_app`` may wrap the receiver's ASGI app (to meter it);
    ``limits`` and ``read_timeout`` are :func:`build_app`'s (``read_timeout`` bounds the headers too).
    """
    server, sock = _prepare(
        store,
        listen,
        token,
        max_body_bytes,
        on_ready or (lambda _url: None),
        wrap_app,
        limits=limits,
        read_timeout=read_timeout,
    )

    def stop(signum: int, _frame: FrameType | None) -> None:
        if server.should_exit and signum == signal.SIGINT:
            server.force_exit = True
        server.should_exit = True

    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, stop)
    _reuse_freed_memory()
    # What is alive now (imports, the app) lives as long as the server: keep it out of the garbage
    # collector's full passes, which each request's spans would otherwise trigger over it.
    gc.freeze()
    try:
        server.run(sockets=[sock])
    finally:
        gc.unfreeze()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()


@contextlib.contextmanager
def serve_in_thread(
    store: Store,
    listen: str = "127.0.0.1:0",
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    limits: DecodeLimits | None = None,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> Iterator[str]:
    """Run the receiver in a background thread (tests, benchmarks, the demo); yields its base URL."""
    urls: list[str] = []
    ready = threading.Event()

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    server, sock = _prepare(
        store, listen, token, max_body_bytes, on_ready, limits=limits, read_timeout=read_timeout
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="otlp-receiver", daemon=True
    )
    thread.start()
    try:
        while not ready.wait(0.05):
            if not thread.is_alive():
                raise TracejudgeError("the OTLP receiver thread stopped before it was ready")
        yield urls[0]
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
