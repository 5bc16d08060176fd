"""``tracejudge serve``: the report live from the store and ``/metrics`` for Prometheus; read-only,
loopback by default, a token when exposed."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import ipaddress
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tracejudge._errors import InputError
from tracejudge.report._data import build_report
from tracejudge.report._html import CSP, render_html
from tracejudge.report._metrics import CONTENT_TYPE, LatencyCache, store_metrics
from tracejudge.store import Store

DEFAULT_LISTEN = "127.0.0.1:8765"

_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6)."""
    host, sep, port_text = value.rpartition(":")
    if host.startswith("["):
        host = host.strip("[]") if host.endswith("]") else ""
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise InputError(
            f"--listen {value!r} is not HOST:PORT",
            hint="for example 127.0.0.1:8765, [::1]:8765, or 127.0.0.1:0 for any free port",
        )
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a token: the report shows trace content."""
    if not token and not is_loopback(host):
        raise InputError(
            f"refusing to serve on {host} without a token: anyone who can reach it could read the traces",
            hint="set --token or TRACEJUDGE_SERVE_TOKEN (clients send `Authorization: Bearer <token>`, or"
            " HTTP basic auth with the token as password), or listen on 127.0.0.1",
        )


def _authorized(header: str, token: bytes) -> bool:
    scheme, _, value = header.partition(" ")
    scheme = scheme.lower()
    if scheme == "bearer":
        return hmac.compare_digest(value.strip().encode(), token)
    if scheme == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        _, _, password = decoded.partition(b":")
        return hmac.compare_digest(password, token)
    return False


def build_app(
    store: Store,
    *,
    token: str | None = None,
    suites: Sequence[str | Path] = (),
    langfuse_url: str | None = None,
) -> Any:
    """The ASGI app: ``GET /`` the report, ``GET /metrics``, ``GET /healthz``. Nothing writes."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, PlainTextResponse, Response
    from starlette.routing import Route

    expected = token.encode() if token else None
    cache = LatencyCache()

    def guard(request: Request) -> Response | None:
        if expected is None or _authorized(request.headers.get("authorization", ""), expected):
            return None
        return PlainTextResponse(
            "a token is required: send `Authorization: Bearer <token>`",
            status_code=401,
            headers={**_HEADERS, "WWW-Authenticate": 'Basic realm="tracejudge", charset="UTF-8"'},
        )

    def report(request: Request) -> Response:
        if (denied := guard(request)) is not None:
            return denied
        html = render_html(build_report(store, suites=suites, langfuse_url=langfuse_url))
        return HTMLResponse(html, headers={**_HEADERS, "Content-Security-Policy": CSP})

    def metrics(request: Request) -> Response:
        if (denied := guard(request)) is not None:
            return denied
        return Response(store_metrics(store, cache=cache), media_type=CONTENT_TYPE, headers=_HEADERS)

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


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, addr = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
        except OSError:
            sock.close()
            raise
    except OSError as exc:
        raise InputError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="pick another address or port with --listen (port 0 picks a free one)",
        ) from exc
    return sock


def serve(
    store: Store,
    listen: str = DEFAULT_LISTEN,
    *,
    token: str | None = None,
    suites: Sequence[str | Path] = (),
    langfuse_url: str | None = None,
    on_ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM (or ``stop`` is set); ``on_ready`` gets the URL once listening."""
    import uvicorn

    host, port = parse_listen(listen)
    check_exposure(host, token)
    sock = _bind(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    url = f"http://{f'[{bound_host}]' if ':' in bound_host else bound_host}:{bound_port}"
    config = uvicorn.Config(
        build_app(store, token=token, suites=suites, langfuse_url=langfuse_url),
        log_level="warning",
        access_log=False,
        server_header=False,
        lifespan="off",
    )

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and on_ready is not None:
                on_ready(url)

    server = _Server(config)

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
