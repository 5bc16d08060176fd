"""A small HTTP client for Langfuse's public API: Basic auth, retries on 429/5xx/resets, no secrets in errors.

Both the Langfuse collector (reads) and the Langfuse writer (score and dataset writes) use it.
It is plain ``httpx``: SDK 5 has no readers for the legacy API generation, and one client for
both generations keeps retries and error messages alike.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from tracejudge import __version__
from tracejudge._errors import InputError, TracejudgeError

_PREFIX = "/api/public"
_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_MAX_RETRY_AFTER = 60.0


class LangfuseApiError(TracejudgeError):
    """Langfuse answered with an error, or could not be reached, after the retries."""

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        """HTTP status, or None when the server could not be reached."""


class LangfuseCredentials(BaseModel):
    """Where Langfuse is and the key pair; the secret key never shows in ``repr`` or dumps."""

    model_config = ConfigDict(frozen=True)

    base_url: str
    """Scheme, host and port, without ``/api/public``."""
    public_key: str
    """``pk-lf-…``."""
    secret_key: SecretStr
    """``sk-lf-…``; read it with ``get_secret_value()`` only to authenticate."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LangfuseCredentials:
        """Read ``LANGFUSE_BASE_URL`` (or the older ``LANGFUSE_HOST``) and the key pair
        ``LANGFUSE_PUBLIC_KEY`` / ``LANGFUSE_SECRET_KEY``."""
        env = os.environ if env is None else env
        base_url = env.get("LANGFUSE_BASE_URL") or env.get("LANGFUSE_HOST")
        public_key = env.get("LANGFUSE_PUBLIC_KEY")
        secret_key = env.get("LANGFUSE_SECRET_KEY")
        missing = [
            name
            for name, value in (
                ("LANGFUSE_BASE_URL (or LANGFUSE_HOST)", base_url),
                ("LANGFUSE_PUBLIC_KEY", public_key),
                ("LANGFUSE_SECRET_KEY", secret_key),
            )
            if not value
        ]
        if missing or base_url is None or public_key is None or secret_key is None:
            raise InputError(
                f"Langfuse is not configured: {', '.join(missing)} not set",
                hint="export LANGFUSE_BASE_URL=https://cloud.langfuse.com, LANGFUSE_PUBLIC_KEY=pk-lf-… "
                "and LANGFUSE_SECRET_KEY=sk-lf-… (from the project's API keys page)",
            )
        if not base_url.startswith(("http://", "https://")):
            raise InputError(
                f"LANGFUSE_BASE_URL must be an http(s) URL, got {base_url!r}",
                hint="for example https://cloud.langfuse.com",
            )
        return cls(base_url=base_url.rstrip("/"), public_key=public_key, secret_key=SecretStr(secret_key))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is not None:
        try:
            return min(max(float(value), 0.0), _MAX_RETRY_AFTER)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value) if value else None
            if when is not None:
                return min(max((when - datetime.now(UTC)).total_seconds(), 0.0), _MAX_RETRY_AFTER)
    ms = response.headers.get("retry-after-ms")
    if ms is not None:
        try:
            return min(max(float(ms) / 1000, 0.0), _MAX_RETRY_AFTER)
        except ValueError:
            pass
    reset = response.headers.get("x-ratelimit-reset")
    if reset is not None and response.status_code == 429:
        try:
            return min(max(float(reset) - time.time(), 0.0), _MAX_RETRY_AFTER)
        except ValueError:
            pass
    return None


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])[:300]
    return response.text[:300]


class LangfuseApi:
    """Calls ``/api/public/…`` with retries: 429 honours ``Retry-After``; 5xx, 408, 409 and connection
    errors back off exponentially with jitter. Thread-safe (one ``httpx.Client``)."""

    def __init__(
        self,
        credentials: LangfuseCredentials,
        *,
        timeout: float = 30.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        max_connections: int = 16,
    ) -> None:
        self.credentials = credentials
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self.retries = 0
        """Retries made so far (rate limits, server errors, resets)."""
        self.waits: list[float] = []
        """Each wait before a retry, in seconds, in order."""
        self._client = httpx.Client(
            base_url=credentials.base_url + _PREFIX,
            auth=httpx.BasicAuth(credentials.public_key, credentials.secret_key.get_secret_value()),
            timeout=timeout,
            headers={"User-Agent": f"tracejudge/{__version__}"},
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )

    def __enter__(self) -> LangfuseApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def get(self, path: str, params: Mapping[str, Any] | None = None, *, allow_404: bool = False) -> Any:
        """GET and parse JSON; with ``allow_404`` a 404 returns None instead of raising."""
        return self._call("GET", path, params=params, allow_404=allow_404)

    def post(self, path: str, body: Any) -> Any:
        """POST a JSON body and parse the JSON answer."""
        return self._call("POST", path, json_body=body)

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        allow_404: bool = False,
    ) -> Any:
        where = f"{method} {_PREFIX}{path}"
        attempt = 0
        while True:
            try:
                response = self._client.request(
                    method,
                    path,
                    params={k: v for k, v in (params or {}).items() if v is not None},
                    json=json_body,
                )
            except httpx.TransportError as exc:
                if attempt >= self.max_retries:
                    raise LangfuseApiError(
                        f"Langfuse at {self.credentials.base_url} could not be reached for {where}: "
                        f"{type(exc).__name__}",
                        hint="check LANGFUSE_BASE_URL and the network; rerun to resume where it stopped",
                    ) from None
                self._wait(attempt, None)
                attempt += 1
                continue
            status = response.status_code
            if status < 300:
                try:
                    return response.json()
                except ValueError:
                    raise LangfuseApiError(
                        f"Langfuse answered {where} with a body that is not JSON", status=status
                    ) from None
            if status == 404 and allow_404:
                return None
            if status in _RETRY_STATUS and attempt < self.max_retries:
                self._wait(attempt, _retry_after(response))
                attempt += 1
                continue
            raise self._error(where, response)

    def _wait(self, attempt: int, retry_after: float | None) -> None:
        if retry_after is None:
            delay = min(self.backoff * 2**attempt, self.max_backoff)
            delay += random.uniform(0, self.backoff)
        else:
            delay = retry_after
        self.retries += 1
        self.waits.append(delay)
        self._sleep(delay)

    def _error(self, where: str, response: httpx.Response) -> LangfuseApiError:
        status = response.status_code
        message = _message(response)
        if status in (401, 403):
            return LangfuseApiError(
                f"Langfuse refused {where} ({status}): {message}",
                status=status,
                hint="check that LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY belong to the project"
                " at LANGFUSE_BASE_URL",
            )
        if status == 429:
            return LangfuseApiError(
                f"Langfuse kept rate-limiting {where} after {self.max_retries} retries",
                status=status,
                hint="wait a minute and rerun: the pull resumes where it stopped",
            )
        if status >= 500:
            return LangfuseApiError(
                f"Langfuse failed on {where} ({status}) after {self.max_retries} retries: {message}",
                status=status,
                hint="rerun later: the pull resumes where it stopped",
            )
        return LangfuseApiError(f"Langfuse rejected {where} ({status}): {message}", status=status)
