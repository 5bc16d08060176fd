"""A small HTTP client for Langfuse's public API: Basic auth, retries on 429/5xx/resets, no secrets in errors.

Both the Langfuse collector (reads) and the Langfuse writer (score and dataset writes) use it.
It is plain ``httpx``: SDK 5's generated client has no readers for the legacy API generation, does
not retry a dropped connection, and reads v4 cursor pages 2.3x slower (benchmarks/bench_langfuse_client.py,
figures in the README); one client for both generations keeps retries and error messages alike.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from tracejudge import __version__
from tracejudge._errors import InputError
from tracejudge.write._http import ApiError, RetryingJsonClient

_PREFIX = "/api/public"


class LangfuseApiError(ApiError):
    """Langfuse answered with an error, or could not be reached, after the retries."""


# Each setting as messages name it, and the variables that may hold it (the first one set wins).
_SETTINGS = (
    ("LANGFUSE_BASE_URL (or LANGFUSE_HOST)", ("LANGFUSE_BASE_URL", "LANGFUSE_HOST")),
    ("LANGFUSE_PUBLIC_KEY", ("LANGFUSE_PUBLIC_KEY",)),
    ("LANGFUSE_SECRET_KEY", ("LANGFUSE_SECRET_KEY",)),
)


def _first_set(env: Mapping[str, str], names: tuple[str, ...]) -> str:
    """The value of the first of ``names`` that is set and not empty; "" when none is."""
    return next((env[name] for name in names if env.get(name)), "")


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
        values = {label: _first_set(env, names) for label, names in _SETTINGS}
        missing = [label for label, value in values.items() if not value]
        if missing:
            raise InputError(
                f"Langfuse is not configured: {', '.join(missing)} not set",
                hint="export LANGFUSE_BASE_URL=https://cloud.langfuse.com, LANGFUSE_PUBLIC_KEY=pk-lf-… "
                "and LANGFUSE_SECRET_KEY=sk-lf-… (from the project's API keys page)",
            )
        base_url, public_key, secret_key = values.values()
        if not base_url.startswith(("http://", "https://")):
            raise InputError(
                f"LANGFUSE_BASE_URL must be an http(s) URL, got {base_url!r}",
                hint="for example https://cloud.langfuse.com",
            )
        return cls(base_url=base_url.rstrip("/"), public_key=public_key, secret_key=SecretStr(secret_key))


class LangfuseApi(RetryingJsonClient):
    """Calls ``/api/public/…`` with retries: 429 honours ``Retry-After``; 5xx, 408, 409 and connection
    errors back off exponentially with jitter. Thread-safe (one ``httpx.Client``)."""

    name = "Langfuse"
    error_type = LangfuseApiError
    retry_status = frozenset({408, 409, 429, 500, 502, 503, 504})
    rate_limit_headers = True
    shown_prefix = _PREFIX
    unreachable_hint = "check LANGFUSE_BASE_URL and the network; rerun to resume where it stopped"
    auth_hint = (
        "check that LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY belong to the project at LANGFUSE_BASE_URL"
    )

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
        client = httpx.Client(
            base_url=credentials.base_url + _PREFIX,
            auth=httpx.BasicAuth(credentials.public_key, credentials.secret_key.get_secret_value()),
            timeout=timeout,
            headers={"User-Agent": f"tracejudge/{__version__}"},
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )
        super().__init__(
            client,
            credentials.base_url,
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            sleep=sleep,
        )

    def get(self, path: str, params: Mapping[str, Any] | None = None, *, allow_404: bool = False) -> Any:
        """GET and parse JSON; with ``allow_404`` a 404 returns None instead of raising."""
        return self._call("GET", path, params=params, allow_404=allow_404)

    def post(self, path: str, body: Any) -> Any:
        """POST a JSON body and parse the JSON answer."""
        return self._call("POST", path, json_body=body)
