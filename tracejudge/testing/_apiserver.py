"""What the local Langfuse and Phoenix API servers share: locating and loading an OpenAPI spec,
fault injection, request recording, spec validation of requests and responses, and serving on a
loopback port in a background thread.

Each server says what differs: its routes and handlers, its auth scheme, the status and body of
its errors, which paths are exempt from faults, and the path it matches and records.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tracejudge._errors import InputError, MissingDependencyError

FaultKind = Literal["429", "500", "slow", "drop", "echo"]


def find_spec_file(env_var: str, name: str, backend: str) -> Path:
    """Locate an OpenAPI spec: ``$<env_var>``, the test fixture copy, or ``../shared/reference/``
    beside the checkout."""
    env = os.environ.get(env_var)
    candidates = [Path(env)] if env else []
    root = Path(__file__).resolve().parents[2]
    candidates += [
        root / "tests" / "fixtures" / name,
        root.parent / "shared" / "reference" / name,
    ]
    for path in candidates:
        if path.is_file():
            return path
    raise InputError(
        f"cannot find {backend}'s OpenAPI spec ({name})",
        hint=f"set {env_var} to the spec file, or put it in tests/fixtures/",
    )


_SPEC_CACHE: dict[Path, Any] = {}
_SPEC_LOCK = threading.Lock()


def load_openapi(path: Path, read: Callable[[Path], Any]) -> Any:
    """The spec ``read(path)`` parses, as an ``openapi_core.OpenAPI``, loaded once per process."""
    with _SPEC_LOCK:
        if path in _SPEC_CACHE:
            return _SPEC_CACHE[path]
        try:
            from openapi_core import Config, OpenAPI
        except ImportError as exc:
            raise MissingDependencyError("openapi-core", "dev") from exc
        spec = read(path)
        # The specs use JSON-Schema keywords (``const``) a strict OpenAPI 3.0 spec check refuses;
        # validation of requests and responses against them works once that check is off.
        api = OpenAPI.from_dict(spec, config=Config(spec_validator_cls=None))  # type: ignore[arg-type]
        _SPEC_CACHE[path] = api
        return api


@dataclass
class Fault:
    """A fault to inject into matching requests, ``times`` times (None: every time)."""

    kind: FaultKind
    """``429`` (with ``Retry-After``), ``500``, ``slow`` (wait ``delay``), ``drop`` (close mid-body),
    ``echo`` (a 500 whose message echoes the request's headers, ``Authorization`` included, as a
    misbehaving backend or proxy does)."""
    path: str = ""
    """Regex searched in the path after ``/api/public`` (``""`` matches every route but health)."""
    method: str | None = None
    """Only this HTTP method, if given."""
    times: int | None = 1
    """How many requests it hits; None: unlimited."""
    retry_after: int | None = 1
    """Seconds in the ``Retry-After`` header of a 429; None: a 429 that says no wait (no
    ``Retry-After``, nor Langfuse's ``X-RateLimit-Reset``)."""
    delay: float = 0.0
    """Seconds a ``slow`` fault waits before answering."""
    status: int = 500
    """Status an ``echo`` fault answers (a 4xx is not retried)."""
    after: int = 0
    """Let this many matching requests pass first (for example: fail the third page)."""
    seen: int = field(default=0, compare=False)
    """Matching requests so far."""
    used: int = field(default=0, compare=False)
    """Requests this fault has hit."""

    def hits(self, method: str, path: str) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.method is not None and self.method.upper() != method:
            return False
        if not re.search(self.path, path):
            return False
        self.seen += 1
        if self.seen <= self.after:
            return False
        self.used += 1
        return True


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    """HTTP method."""
    path: str
    """Path after ``/api/public``."""
    query: tuple[tuple[str, str], ...]
    """Query parameters in order (repeated keys repeat)."""
    body: Any
    """Parsed JSON body, or None."""
    status: int
    """Status answered (0 for a dropped connection)."""

    def param(self, name: str) -> str | None:
        """The first value of a query parameter."""
        return next((v for k, v in self.query if k == name), None)


class HandlerError(Exception):
    """A route handler's refusal: the status and message the server answers with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


Handler = Callable[..., tuple[int, Any]]
"""A route handler: ``(request, parsed body, **path params) -> (status, JSON payload)``."""


@dataclass(frozen=True)
class Call:
    """A request as the server reads it once: what routes, faults, handlers and the record see."""

    request: Request
    body: bytes
    """The raw body (the spec check reads it)."""
    method: str
    """Upper-case HTTP method."""
    sub: str
    """The path routes and faults match (after the server's prefix)."""
    query: tuple[tuple[str, str], ...]
    """Query parameters in order."""
    parsed: Any
    """The body parsed as JSON, or None (empty or not JSON)."""

    @classmethod
    async def read(cls, request: Request, route_path: Callable[[str], str]) -> Call:
        body = await request.body()
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = None
        return cls(
            request=request,
            body=body,
            method=request.method.upper(),
            sub=route_path(request.url.path),
            query=tuple(request.query_params.multi_items()),
            parsed=parsed,
        )


async def _incomplete_body(scope: Scope, receive: Receive, send: Send) -> None:  # noqa: ARG001 - ASGI's signature
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")],
        }
    )
    await send({"type": "http.response.body", "body": b'{"data": [', "more_body": True})


def _dropped(call: Call, fault: Fault) -> tuple[int, ASGIApp]:  # noqa: ARG001 - the table's signature
    """A ``drop`` fault: the headers promise 4096 bytes, a few arrive, and uvicorn closes the
    connection on the incomplete response (recorded with status 0)."""
    return 0, _incomplete_body


def _echoed(call: Call, fault: Fault) -> tuple[int, ASGIApp]:
    """An ``echo`` fault: an error whose message repeats the request's headers."""
    headers = "; ".join(f"{k}: {v}" for k, v in call.request.headers.items())
    echo = {
        "message": f"upstream failed for {call.method} {call.request.url.path}; request headers: {headers}"
    }
    return fault.status, Response(json.dumps(echo), status_code=fault.status, media_type="application/json")


_CUT_SHORT: dict[str, Callable[[Call, Fault], tuple[int, ASGIApp]]] = {"drop": _dropped, "echo": _echoed}
"""Fault kinds answered before any wait, route or check: kind -> (status recorded, the answer)."""


class ApiServer:
    """An API on loopback, in a background thread; subclasses answer in :meth:`_respond`."""

    backend: ClassVar[str]
    """The service it stands in for, as messages name it (``Langfuse``)."""

    record: bool
    page_latency: float
    _api: Any

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.faults: list[Fault] = []
        self._requests: list[RecordedRequest] = []
        self.request_errors: list[str] = []
        """Requests the spec (or the server's own rules) rejected, with the reason."""
        self.response_errors: list[str] = []
        """Responses that broke the spec: always a bug in this server."""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0

    # -- what differs ----------------------------------------------------------------------

    recorded_statuses: ClassVar[frozenset[int]] = frozenset({400})
    """Statuses of a :class:`HandlerError` kept in :attr:`request_errors` (a bad request, not a miss)."""

    def _route_path(self, path: str) -> str:
        """The path routes, faults and the record see."""
        return path

    def _exempt(self, sub: str) -> bool:  # noqa: ARG002 - a hook; this server exempts nothing
        """A path no fault and no page latency touches."""
        return False

    def _fault_response(self, fault: Fault) -> Response | None:
        """The answer of an injected ``429`` or ``500`` (None for the other kinds)."""
        raise NotImplementedError

    def _error(self, status: int, message: str) -> Response:
        """An error answer in the server's own shape."""
        raise NotImplementedError

    async def _respond(self, call: Call) -> Response:
        raise NotImplementedError

    # -- recording and faults --------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Requests received so far, in order."""
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        """Forget recorded requests and validation errors."""
        with self._lock:
            self._requests.clear()
            self.request_errors.clear()

    def inject(self, *faults: Fault) -> None:
        """Add faults; each matching request takes the first fault that still hits."""
        with self._lock:
            self.faults.extend(faults)

    def lift(self, *faults: Fault) -> None:
        """Remove injected faults: one without a count (``times=None``) hits until lifted."""
        with self._lock:
            self.faults = [f for f in self.faults if all(f is not g for g in faults)]

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        if not self._port:
            raise RuntimeError("the server is not started")
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> Self:
        """Bind a free loopback port, serve in a background thread, return once it accepts connections."""
        if self._thread is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit this on Linux; without it h11's separate header and body writes
        # meet the client's delayed ACK and every answer takes ~40 ms.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._asgi, interface="asgi3", log_level="critical", access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name=f"{self.backend.lower()}-server",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the local {self.backend} server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- ASGI -------------------------------------------------------------------------------

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        call = await Call.read(Request(scope, receive), self._route_path)
        exempt = self._exempt(call.sub)
        fault = None if exempt else self._take_fault(call)
        cut_short = _CUT_SHORT.get(fault.kind) if fault is not None else None
        if fault is not None and cut_short is not None:
            status, app = cut_short(call, fault)
        else:
            await self._wait(call, fault, exempt)
            response = self._fault_response(fault) if fault is not None else None
            if response is None:
                response = await self._respond(call)
            status, app = response.status_code, response
        self._log(call.method, call.sub, call.query, call.parsed, status)
        await app(scope, receive, send)

    def _take_fault(self, call: Call) -> Fault | None:
        """The first injected fault that still hits this request (counting it)."""
        with self._lock:
            return next((f for f in self.faults if f.hits(call.method, call.sub)), None)

    async def _wait(self, call: Call, fault: Fault | None, exempt: bool) -> None:
        """A ``slow`` fault's delay, then the page latency every read pays."""
        if fault is not None and fault.kind == "slow":
            await asyncio.sleep(fault.delay)
        if call.method == "GET" and not exempt and self.page_latency > 0:
            await asyncio.sleep(self.page_latency)

    def _answer(self, call: Call, handler: Handler, params: dict[str, str], openapi_request: Any) -> Response:
        """Run a route's handler: its payload checked against the spec, or its refusal as an error."""
        try:
            status, payload = handler(call.request, call.parsed, **params)
        except HandlerError as exc:
            if exc.status in self.recorded_statuses:
                with self._lock:
                    self.request_errors.append(f"{call.method} {call.sub}: {exc}")
            return self._error(exc.status, str(exc))
        response = JSONResponse(payload, status_code=status)
        breach = (
            self._check_response(openapi_request, response, call.method, call.sub) if status < 300 else None
        )
        return response if breach is None else self._error(500, breach)

    def _log(self, method: str, sub: str, query: tuple[tuple[str, str], ...], body: Any, status: int) -> None:
        if self.record:
            with self._lock:
                self._requests.append(RecordedRequest(method, sub, query, body, status))

    # -- spec validation --------------------------------------------------------------------

    def _check_request(
        self, request: Request, body: bytes, method: str, sub: str
    ) -> tuple[Any, Exception | None]:
        """(the request as openapi-core sees it, or None when not validating; the spec's objection,
        already kept in :attr:`request_errors`)."""
        if self._api is None:
            return None, None
        from openapi_core.contrib.starlette import StarletteOpenAPIRequest

        openapi_request = StarletteOpenAPIRequest(request, body)
        try:
            self._api.validate_request(openapi_request)
        except Exception as exc:
            with self._lock:
                self.request_errors.append(f"{method} {sub}: {exc}")
            return openapi_request, exc
        return openapi_request, None

    def _check_response(self, openapi_request: Any, response: Response, method: str, sub: str) -> str | None:
        """What is wrong with a response by the spec (kept in :attr:`response_errors`), or None."""
        if self._api is None or openapi_request is None:
            return None
        from openapi_core.contrib.starlette import StarletteOpenAPIResponse

        try:
            self._api.validate_response(openapi_request, StarletteOpenAPIResponse(response))
        except Exception as exc:
            with self._lock:
                self.response_errors.append(f"{method} {sub}: {exc}")
            return f"server bug, response breaks the spec: {exc}"
        return None
