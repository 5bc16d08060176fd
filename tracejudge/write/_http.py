"""The retrying JSON-over-HTTP loop that the Langfuse and Phoenix clients share.

Each client says what differs (its name, which statuses it retries, its hints, how its error
bodies carry the message); the retry loop, the backoff and the error wording live here once.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, Self

import httpx
import orjson

from tracejudge._errors import TracejudgeError
from tracejudge._redact import redact

_MAX_RETRY_AFTER = 60.0


class ApiError(TracejudgeError):
    """A backend answered with an error, or could not be reached, after the retries."""

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        """HTTP status, or None when the server could not be reached."""


def _clamp(seconds: float) -> float:
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER)


def _retry_after_header(value: str) -> float | None:
    try:
        return _clamp(float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return _clamp((when - datetime.now(UTC)).total_seconds())


def retry_after(response: httpx.Response, *, rate_limit_headers: bool) -> float | None:
    """Seconds the server asked to wait (``Retry-After`` as seconds or HTTP date), capped at a
    minute; with ``rate_limit_headers`` also ``Retry-After-Ms`` and, on 429, ``X-RateLimit-Reset``."""
    value = response.headers.get("retry-after")
    if value is not None:
        seconds = _retry_after_header(value)
        if seconds is not None or not rate_limit_headers:
            return seconds
    if not rate_limit_headers:
        return None
    ms = response.headers.get("retry-after-ms")
    if ms is not None:
        try:
            return _clamp(float(ms) / 1000)
        except ValueError:
            pass
    reset = response.headers.get("x-ratelimit-reset")
    if reset is not None and response.status_code == 429:
        try:
            return _clamp(float(reset) - time.time())
        except ValueError:
            pass
    return None


def _query(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The query parameters to send: a None or an empty list means the filter is not asked for."""
    return {k: v for k, v in (params or {}).items() if v is not None and v != []}


class _RateLimitPause:
    """A client-wide pause after a 429: the thread whose request got it waits (``Retry-After``, else
    the backoff) and sends again; every other thread holds its next request until that one is answered
    without a 429, so a rate-limited server sees one request per wait, not one per thread in flight.

    The thread holding the pause is the only one the pause lets through; it ends the pause on any
    other answer, on an error, or when it gives up (then the next 429 starts another pause)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._holder: int | None = None

    def enter(self) -> None:
        """Return once this thread may send: no pause, or this thread holds it."""
        me = threading.get_ident()
        with self._cond:
            while self._holder is not None and self._holder != me:
                self._cond.wait()

    def limited(self) -> bool:
        """This thread's request got a 429: True when it holds the pause (it waits and probes);
        False when another thread already does (this one waits for that one's answer)."""
        me = threading.get_ident()
        with self._cond:
            if self._holder is None:
                self._holder = me
            return self._holder == me

    def end(self) -> None:
        """End the pause if this thread holds it."""
        with self._cond:
            if self._holder == threading.get_ident():
                self._holder = None
                self._cond.notify_all()


class RetryingJsonClient:
    """Sends JSON requests with retries: 429 honours ``Retry-After``; the other retry statuses and
    connection errors back off exponentially with jitter. Thread-safe (one ``httpx.Client``): a 429
    pauses every thread's requests (:class:`_RateLimitPause`), and the counters are kept under a lock.

    Subclasses set the class attributes and build the ``httpx.Client`` (base URL, auth)."""

    name: ClassVar[str]
    """The backend as messages name it (``Langfuse``)."""
    error_type: ClassVar[type[ApiError]]
    retry_status: ClassVar[frozenset[int]]
    rate_limit_headers: ClassVar[bool] = False
    """Also honour ``Retry-After-Ms`` and ``X-RateLimit-Reset``."""
    shown_prefix: ClassVar[str] = ""
    """Path prefix the client's base URL carries, shown in messages."""
    unreachable_hint: ClassVar[str]
    auth_hint: ClassVar[str]

    def __init__(
        self,
        client: httpx.Client,
        base_url: str,
        *,
        max_retries: int,
        backoff: float,
        max_backoff: float,
        sleep: Callable[[float], None],
    ) -> None:
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self._base_url = base_url
        self.retries = 0
        """Retries made so far (rate limits, server errors, resets)."""
        self.waits: list[float] = []
        """Each wait slept before a retry, in seconds, in order (a request held by another thread's
        rate-limit pause waits for that one's answer instead, with no entry here)."""
        # The counters move from every thread sending (writers and pulls send several at once).
        self._counted = threading.Lock()
        self._pause = _RateLimitPause()
        self._client = client

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _detail(self, body: dict[str, Any]) -> str | None:
        """The message an error body carries, when it carries one."""
        message = body.get("message")
        return message if isinstance(message, str) else None

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        allow_404: bool = False,
    ) -> Any:
        try:
            return self._send(method, path, query=_query(params), json_body=json_body, allow_404=allow_404)
        finally:
            # However this request ends (an answer, an error, Ctrl-C in a wait), a pause it holds ends.
            self._pause.end()

    def _send(self, method: str, path: str, *, query: dict[str, Any], json_body: Any, allow_404: bool) -> Any:
        where = f"{method} {self.shown_prefix}{path}"
        attempt = 0
        while True:
            self._pause.enter()
            try:
                response = self._client.request(method, path, params=query, json=json_body)
            except httpx.TransportError as exc:
                self._pause.end()
                if attempt >= self.max_retries:
                    raise self.error_type(
                        f"{self.name} at {self._base_url} could not be reached for {where}: "
                        f"{type(exc).__name__}",
                        hint=self.unreachable_hint,
                    ) from None
                delay = None
            else:
                status = response.status_code
                if status not in self.retry_status or attempt >= self.max_retries:
                    return self._answer(where, response, allow_404=allow_404)
                if status == 429 and not self._pause.limited():
                    # Another thread holds the pause: this request waits for its answer, then goes again.
                    self._count(None)
                    attempt += 1
                    continue
                if status != 429:
                    self._pause.end()
                delay = retry_after(response, rate_limit_headers=self.rate_limit_headers)
            self._wait(attempt, delay)
            attempt += 1

    def _answer(self, where: str, response: httpx.Response, *, allow_404: bool) -> Any:
        """The JSON of a final answer (None for an allowed 404); an error for any other status."""
        status = response.status_code
        if status == 404 and allow_404:
            return None
        if status >= 300:
            raise self._error(where, response)
        try:
            # orjson: a page of spans parses in about two thirds of json's time; what it refuses
            # (NaN, integers beyond 64 bits, other encodings) is read by json, as before.
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            pass
        try:
            return response.json()
        except ValueError:
            raise self.error_type(
                f"{self.name} answered {where} with a body that is not JSON", status=status
            ) from None

    def _wait(self, attempt: int, retry_after: float | None) -> None:
        if retry_after is None:
            delay = min(self.backoff * 2**attempt, self.max_backoff) + random.uniform(0, self.backoff)
        else:
            delay = retry_after
        self._count(delay)
        self._sleep(delay)

    def _count(self, delay: float | None) -> None:
        """Count a retry, and the wait slept before it (None: it waited on another thread's pause)."""
        with self._counted:
            self.retries += 1
            if delay is not None:
                self.waits.append(delay)

    def _message(self, response: httpx.Response) -> str:
        """What the error body says, redacted before it is cut short (so a cut never leaves half a
        secret the redactor no longer recognizes)."""
        try:
            body = response.json()
        except ValueError:
            return redact(response.text)[:300]
        detail = self._detail(body) if isinstance(body, dict) else None
        return redact(response.text if detail is None else detail)[:300]

    def _error(self, where: str, response: httpx.Response) -> ApiError:
        status = response.status_code
        message = self._message(response)
        name, error = self.name, self.error_type
        if status in (401, 403):
            return error(f"{name} refused {where} ({status}): {message}", status=status, hint=self.auth_hint)
        if status == 429:
            return error(
                f"{name} kept rate-limiting {where} after {self.max_retries} retries",
                status=status,
                hint="wait a minute and rerun: the pull resumes where it stopped",
            )
        if status >= 500:
            return error(
                f"{name} failed on {where} ({status}) after {self.max_retries} retries: {message}",
                status=status,
                hint="rerun later: the pull resumes where it stopped",
            )
        return error(f"{name} rejected {where} ({status}): {message}", status=status)
