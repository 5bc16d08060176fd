"""What every tracejudge server shares (``tracejudge serve``, the OTLP receiver): parsing
``--listen``, refusing to expose itself beyond loopback without a token, checking the token,
binding the socket and running uvicorn quietly with signals left to the caller."""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tracejudge._errors import InputError

if TYPE_CHECKING:
    import uvicorn

__all__ = [
    "bind",
    "check_exposure",
    "is_loopback",
    "loopback_host",
    "parse_listen",
    "quiet_server",
    "socket_url",
    "token_matches",
]


def parse_listen(value: str, *, example_port: int, strip: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) → (host, port). Port 0 means any free port.

    ``strip`` drops surrounding white space first; the error names ``value`` as given."""
    text = value.strip() if strip else value
    host, sep, port_text = text.rpartition(":")
    if host.startswith("["):
        host = host.strip("[]") if host.endswith("]") else ""
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise InputError(
            f"--listen {value!r} is not HOST:PORT",
            hint=f"for example 127.0.0.1:{example_port}, [::1]:{example_port},"
            " or 127.0.0.1:0 for any free port",
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


def loopback_host(header: str) -> bool:
    """True when a ``Host`` header names this machine (``localhost``, ``127.x``, ``[::1]``, any port)."""
    host = header.strip()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else ""
    else:
        host = host.rpartition(":")[0] if host.count(":") == 1 else host
    return bool(host) and is_loopback(host.rstrip("."))


def check_exposure(host: str, token: str | None, *, refusal: str, hint: str) -> None:
    """Raise :class:`InputError` (``refusal``, ``hint``) when ``host`` reaches beyond loopback and
    there is no token."""
    if not token and not is_loopback(host):
        raise InputError(refusal, hint=hint)


def token_matches(header: str, token: bytes, *, basic: bool) -> bool:
    """True when an ``Authorization`` header carries ``token`` as ``Bearer <token>`` (or, with
    ``basic``, as the password of HTTP basic auth). Compared in constant time."""
    scheme, _, value = header.partition(" ")
    scheme = scheme.lower()
    if scheme == "bearer":
        return hmac.compare_digest(value.strip().encode(), token)
    if basic and scheme == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        _, _, password = decoded.partition(b":")
        return hmac.compare_digest(password, token)
    return False


def bind(host: str, port: int) -> socket.socket:
    """A bound (not yet listening) TCP socket; a refused address is an :class:`InputError`."""
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


def socket_url(sock: socket.socket) -> str:
    """``http://HOST:PORT`` of a bound socket (the real port when port 0 was asked for)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def quiet_server(
    app: Any,
    on_ready: Callable[[], None],
    *,
    timeout_graceful_shutdown: int | None = None,
    header_timeout: float = 30.0,
    warm: Callable[[], Awaitable[object]] | None = None,
) -> uvicorn.Server:
    """A uvicorn server for ``app`` without access log or server header, that calls ``on_ready``
    once it accepts connections and leaves signal handling to its caller. ``warm``, when given, is
    awaited in the server's event loop before ``on_ready`` is called: work the first request would
    otherwise pay for.

    A connection whose request line and headers have not arrived ``header_timeout`` seconds after it
    opened (or after its previous response) is closed: uvicorn itself never times out a slow or
    partial request, so a client dribbling headers would hold a connection forever."""
    import uvicorn

    from tracejudge._uvicorn import QuietServer, timed_protocol

    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        server_header=False,
        lifespan="off",
        timeout_graceful_shutdown=timeout_graceful_shutdown,
        http=timed_protocol(header_timeout),
    )
    return QuietServer(config, on_ready, warm)
