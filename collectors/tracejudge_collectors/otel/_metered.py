"""``collect otlp`` with OpenTelemetry metrics: the receiver's app wrapped to count requests and
spans, served by :func:`tracejudge_collectors.otel._receiver.serve`.

The receiver itself exposes no counts, so they are read from the outside: accepted spans from the
store's ``put_spans`` (after the commit, so a 503 counts nothing), rejected spans from the
``partial_success`` of the response the receiver sent, requests from the response status.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracejudge.report import RunMetrics
from tracejudge.store import Store
from tracejudge_collectors._cli_common import metered_store
from tracejudge_collectors.otel._otlp import DecodeLimits
from tracejudge_collectors.otel._receiver import DEFAULT_READ_TIMEOUT, LOG_PATHS, TRACE_PATHS, serve

__all__ = ["count_exports", "rejected_spans", "serve_metered"]

SOURCE = "otlp"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


def rejected_spans(body: bytes, *, as_json: bool) -> int:
    """``partial_success.rejected_spans`` of an ExportTraceServiceResponse (0 when absent or unreadable)."""
    try:
        if as_json:
            data = json.loads(body or b"{}")
            partial = data.get("partialSuccess") if isinstance(data, dict) else None
            return int((partial or {}).get("rejectedSpans") or 0)
        resp = ExportTraceServiceResponse()
        resp.ParseFromString(body)
        return int(resp.partial_success.rejected_spans)
    except (ValueError, TypeError, AttributeError):
        return 0


def count_exports(app: Asgi, metrics: RunMetrics) -> Asgi:
    """``app``, counting every export request by signal and status, and the spans it rejected."""

    async def counted(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope.get("type") == "http" else ""
        kind = "traces" if path in TRACE_PATHS else "logs" if path in LOG_PATHS else None
        if kind is None or scope.get("method") != "POST":
            await app(scope, receive, send)
            return
        seen: dict[str, Any] = {"status": 500, "json": False}
        chunks: list[bytes] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = int(message["status"])
                headers = dict(message.get("headers") or [])
                seen["json"] = headers.get(b"content-type", b"").startswith(b"application/json")
            elif message["type"] == "http.response.body" and kind == "traces":
                chunks.append(bytes(message.get("body", b"")))
            await send(message)

        try:
            await app(scope, receive, watch)
        finally:
            metrics.request_answered(signal=kind, status=seen["status"], source=SOURCE)
            if kind == "traces" and seen["status"] == 200:
                rejected = rejected_spans(b"".join(chunks), as_json=seen["json"])
                if rejected:
                    metrics.spans_rejected(rejected, source=SOURCE)

    return counted


def serve_metered(
    store: Store,
    listen: str,
    *,
    metrics: RunMetrics,
    token: str | None = None,
    max_body_bytes: int,
    on_ready: Callable[[str], None],
    limits: DecodeLimits | None = None,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> None:
    """Run the receiver until SIGINT or SIGTERM (a second SIGINT forces the exit), counting into
    ``metrics``; the caller closes ``metrics`` afterwards, which pushes the last values."""

    def on_put(given: int, new: int) -> None:
        metrics.spans_accepted(given, source=SOURCE)
        metrics.spans_collected(new, source=SOURCE)

    serve(
        metered_store(store, on_put),
        listen,
        token=token,
        max_body_bytes=max_body_bytes,
        on_ready=on_ready,
        wrap_app=lambda app: count_exports(app, metrics),
        limits=limits,
        read_timeout=read_timeout,
    )
