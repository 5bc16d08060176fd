"""The one module that imports uvicorn (imported lazily by :func:`tracejudge._serving.quiet_server`):
a server that leaves signals to its caller and says when it is ready, and an HTTP protocol that
closes a connection whose request headers do not arrive in time, or keep coming.

uvicorn parses with httptools (C) when it is installed, else with h11 (pure Python, about a quarter
more of the event loop's CPU per request); both answer a malformed request 400."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["MAX_HEAD_BYTES", "QuietServer", "timed_protocol"]

# h11 refuses a request head it has buffered 16 KiB of without finding its end; httptools keeps
# buffering (a header's value grows in its parser until the line ends), so a client could grow one
# by gigabytes before the header deadline. Under httptools the bytes received while a head is
# incomplete are counted, a read at a time (up to 256 KiB each, so a head this close to the limit
# may be refused when it shares a read with a previous request's body).
MAX_HEAD_BYTES = 1 << 20
try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    _COUNT_HEAD = issubclass(AutoHTTPProtocol, HttpToolsProtocol)
except ImportError:  # no httptools: uvicorn parses with h11
    _COUNT_HEAD = False


class _TimedProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """Uvicorn's HTTP protocol with a header deadline: uvicorn itself never times out a slow or
    partial request, so a client dribbling headers would hold a connection forever."""

    header_timeout: float = 30.0
    _header_timer: asyncio.TimerHandle | None = None
    _in_head = True  # httptools only: between a message's first byte and its headers' end
    _head_bytes = 0

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if _COUNT_HEAD and self._in_head:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
                # What h11 answers a head past its limit (and any malformed request).
                self.send_400_response("Invalid HTTP request received.")

    # httptools' callbacks (h11's protocol has none of these names).
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._head_bytes = True, 0

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

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
    accepts connections (after awaiting ``warm``, when given, in its event loop)."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_ready: Callable[[], None],
        warm: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        super().__init__(config)
        self._on_ready = on_ready
        self._warm = warm

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            if self._warm is not None:
                await self._warm()
            self._on_ready()
