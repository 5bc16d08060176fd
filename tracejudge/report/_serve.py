"""``tracejudge serve``: the report live from the store and ``/metrics`` for Prometheus; read-only,
loopback by default, a token when exposed."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracejudge import _serving
from tracejudge._errors import StoreUnreachableError
from tracejudge._serving import bind, loopback_host, quiet_server, socket_url, token_matches
from tracejudge._serving import is_loopback as is_loopback  # re-exported by tracejudge.report
from tracejudge.report._data import build_report
from tracejudge.report._html import CSP, render_html
from tracejudge.report._metrics import CONTENT_TYPE, LatencyCache, store_metrics
from tracejudge.store import Store

if TYPE_CHECKING:
    from starlette.responses import Response

DEFAULT_LISTEN = "127.0.0.1:8765"

_log = logging.getLogger(__name__)

_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6)."""
    return _serving.parse_listen(value, example_port=8765)


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a token: the report shows trace content."""
    _serving.check_exposure(
        host,
        token,
        refusal=f"refusing to serve on {host} without a token: anyone who can reach it could read the traces",
        hint="set --token or TRACEJUDGE_SERVE_TOKEN (clients send `Authorization: Bearer <token>`, or"
        " HTTP basic auth with the token as password), or listen on 127.0.0.1",
    )


def build_app(
    store: Store,
    *,
    token: str | None = None,
    suites: Sequence[str | Path] = (),
    langfuse_url: str | None = None,
) -> Any:
    """The ASGI app: ``GET /`` the report, ``GET /metrics``, ``GET /healthz``. Nothing writes.

    Without a token only requests addressed to a loopback name are answered: a web page the user
    visits could otherwise point its own host name at 127.0.0.1 (DNS rebinding) and read the traces."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, PlainTextResponse, Response
    from starlette.routing import Route

    expected = token.encode() if token else None
    cache = LatencyCache()

    def guard(request: Request) -> Response | None:
        if expected is None and not loopback_host(request.headers.get("host", "")):
            return PlainTextResponse(
                "without a token tracejudge serve answers only requests to localhost or 127.0.0.1;"
                " set --token (TRACEJUDGE_SERVE_TOKEN) to serve under another name",
                status_code=421,
                headers=_HEADERS,
            )
        if expected is None or token_matches(request.headers.get("authorization", ""), expected, basic=True):
            return None
        return PlainTextResponse(
            "a token is required: send `Authorization: Bearer <token>`",
            status_code=401,
            headers={**_HEADERS, "WWW-Authenticate": 'Basic realm="tracejudge", charset="UTF-8"'},
        )

    def report(request: Request) -> Response:
        if (denied := guard(request)) is not None:
            return denied
        return _from_store(
            lambda: HTMLResponse(
                render_html(build_report(store, suites=suites, langfuse_url=langfuse_url)),
                headers={**_HEADERS, "Content-Security-Policy": CSP},
            )
        )

    def metrics(request: Request) -> Response:
        if (denied := guard(request)) is not None:
            return denied
        return _from_store(
            lambda: Response(store_metrics(store, cache=cache), media_type=CONTENT_TYPE, headers=_HEADERS)
        )

    def healthz(request: Request) -> Response:
        del request
        return PlainTextResponse("ok", headers=_HEADERS)

    return Starlette(
        routes=[
            Route("/", report, methods=["GET", "HEAD"]),
            Route("/metrics", metrics, methods=["GET", "HEAD"]),
            Route("/healthz", healthz, methods=["GET", "HEAD"]),
        ]
    )


def _from_store(make: Callable[[], Response]) -> Response:
    """``make()``, the response read from the store; 503 while the store's server is restarting or
    unreachable (the next request reconnects). One log line says why — a traceback apiece filled the
    log while an outage lasted — and the page says only that, not where the store lives."""
    from starlette.responses import PlainTextResponse

    try:
        return make()
    except StoreUnreachableError as exc:
        _log.warning("reading the store failed, answered 503: %s", exc.message)
        return PlainTextResponse(
            "the store is unavailable (its database restarting or unreachable); retry later",
            status_code=503,
            headers={**_HEADERS, "Retry-After": "5"},
        )


def serve(
    store: Store,
    listen: str = DEFAULT_LISTEN,
    *,
    token: str | None = None,
    suites: Sequence[str | Path] = (),
    langfuse_url: str | None = None,
    on_ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    read_timeout: float = 30.0,
) -> None:
    """Serve until SIGINT/SIGTERM (or ``stop`` is set); ``on_ready`` gets the URL once listening.

    A connection whose request has not arrived whole ``read_timeout`` seconds after it opened is
    closed (slow or partial requests would otherwise hold it forever)."""
    host, port = parse_listen(listen)
    check_exposure(host, token)
    sock = bind(host, port)
    url = socket_url(sock)
    server = quiet_server(
        build_app(store, token=token, suites=suites, langfuse_url=langfuse_url),
        lambda: on_ready(url) if on_ready is not None else None,
        header_timeout=read_timeout,
    )

    async def main() -> None:
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
        if stop is not None:

            async def watch() -> None:
                while not stop.is_set() and not server.should_exit:
                    await asyncio.sleep(0.05)
                server.should_exit = True

            task = asyncio.create_task(watch())
        await server.serve(sockets=[sock])
        if stop is not None:
            task.cancel()

    try:
        asyncio.run(main())
    finally:
        sock.close()
