"""What every tracejudge server shares (``tracejudge serve``, ``tracejudge mcp --http``, the OTLP
receiver in ``tracejudge_collectors``): parsing ``--listen``, refusing to expose itself beyond
loopback without a token, checking the token, binding the socket and running uvicorn quietly.

The public face of ``tracejudge._serving`` for code outside the ``tracejudge`` package.
"""

from tracejudge._serving import (
    bind,
    check_exposure,
    is_loopback,
    loopback_host,
    parse_listen,
    quiet_server,
    socket_url,
    token_matches,
)

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
