"""The one module that imports uvicorn (imported lazily by :func:`tracejudge._serving.quiet_server`):
a server that leaves signals to its caller and says when it is ready, and an HTTP protocol that
closes a connection whose request headers do not arrive in time."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["QuietServer", "timed_protocol"]


class _TimedProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """Uvicorn's HTTP protocol with a header deadline: uvicorn itself never times out a slow or
    partial request, so a client dribbling headers would hold a connection forever."""

    header_timeout: float = 30.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(self.header_timeout, self._expire, self.cycle)

    def _expire(self, cycle_then: Any) -> None:
        # Still on the cycle armed for (no new request's headers complete since): give up.
        waiting = self.cycle is cycle_then and (cycle_then is None or cycle_then.response_complete)
        if waiting and not self.transport.is_closing():
            self.transport.close()


def timed_protocol(header_timeout: float) -> type[_TimedProtocol]:
    """The protocol class closing connections whose headers take longer than ``header_timeout`` s."""
    return type("_TimedProtocol", (_TimedProtocol,), {"header_timeout": header_timeout})


class QuietServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its caller and calls ``on_ready`` once it
    accepts connections."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_ready()
