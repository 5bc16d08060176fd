"""The judge client: any OpenAI-compatible endpoint through the ``openai`` package (the one module
that imports it), and a scripted fake beside it."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import orjson

from tracejudge._errors import InputError, MissingDependencyError, TracejudgeError
from tracejudge._redact import redact
from tracejudge.judge._reexports import reexports_on_use
from tracejudge.schema import JudgeConfig


@dataclass(frozen=True)
class Completion:
    """One chat completion as the judge runner needs it."""

    text: str | None
    refusal: str | None = None
    finish_reason: str | None = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    structured: bool = False


class JudgeCallError(TracejudgeError):
    """A judge call that produced no reply. ``kind`` becomes the indeterminate reason."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = redact(detail)


class JudgeClient(Protocol):
    """Sends one chat request and returns the completion, or raises :class:`JudgeCallError`."""

    async def complete(
        self, messages: Sequence[dict[str, str]], *, schema: dict[str, Any] | None
    ) -> Completion: ...

    async def aclose(self) -> None: ...


_NOT_A_COMPLETION = "the server's reply is not a chat completion"


def _first_choice(body: bytes) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The completion object, its first choice and that choice's message (whose content is text or
    null); ``malformed_response`` when the body is not a chat completion, ``empty_reply`` when it
    has no choices."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(choices, list | None):
        raise JudgeCallError("malformed_response", _NOT_A_COMPLETION)
    if not choices:
        raise JudgeCallError("empty_reply", "the server returned no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("content"), str | None):
        raise JudgeCallError("malformed_response", _NOT_A_COMPLETION)
    return data, choice, message


def _completion(body: bytes, *, structured: bool) -> Completion:
    """A chat completion's JSON body as a :class:`Completion`; a body that is not one is a
    ``malformed_response`` (no choices at all: ``empty_reply``)."""
    data, choice, message = _first_choice(body)
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Completion(
        text=message.get("content"),
        refusal=_text(message.get("refusal")),
        finish_reason=_text(choice.get("finish_reason")),
        model=_text(data.get("model")),
        input_tokens=_count(usage.get("prompt_tokens")),
        output_tokens=_count(usage.get("completion_tokens")),
        structured=structured,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


_POOL = 8
"""Connections in flight per client over httpx (see :class:`OpenAIJudgeClient`)."""

Transport = Literal["auto", "aiohttp", "httpx"]
"""How the judge's requests travel: openai's aiohttp transport, its default httpx one, or aiohttp when
it is installed (``auto``)."""

TRANSPORT_ENV = "TRACEJUDGE_JUDGE_HTTP"
"""The environment variable that picks the transport when no argument does (default ``auto``)."""


def judge_transport(requested: str | None = None) -> Literal["aiohttp", "httpx"]:
    """The transport the judge client uses: ``requested`` (else ``TRACEJUDGE_JUDGE_HTTP``, else
    ``auto``); ``auto`` is aiohttp when ``openai[aiohttp]`` is installed, httpx otherwise. Asking for
    aiohttp without it installed is an error with the install hint."""
    choice = (requested or os.environ.get(TRANSPORT_ENV) or "auto").strip().lower()
    if choice not in ("auto", "aiohttp", "httpx"):
        raise InputError(
            f"unknown judge HTTP transport {choice!r} (from {TRANSPORT_ENV})",
            hint=f"set {TRANSPORT_ENV} to auto, aiohttp or httpx, or unset it",
        )
    if choice == "httpx":
        return "httpx"
    installed = importlib.util.find_spec("aiohttp") is not None
    if choice == "aiohttp" and not installed:
        raise MissingDependencyError("aiohttp", "aiohttp")
    return "aiohttp" if installed else "httpx"


def _tls_context(client_class: type) -> dict[str, Any]:
    """One SSL context for all the judge's clients, made as each would make its own (by the HTTP
    library the openai package uses: httpx2, or httpx before it), so that they do not each spend
    25 ms of CPU making it; nothing when that library has no such function (each makes its own)."""
    library = next(
        (c.__module__.split(".")[0] for c in client_class.__mro__ if c.__name__ == "AsyncClient"), ""
    )
    make = getattr(sys.modules.get(library), "create_ssl_context", None)
    return {"verify": make()} if callable(make) else {}


def _plain_http_tls(base_url: str | None) -> dict[str, Any]:
    """For a judge at an http:// URL, aiohttp's own verifying SSL context, which importing aiohttp
    made already, rather than one more: openai's aiohttp transport makes its context whatever the URL
    (loading the CA certificates, ~25 ms of CPU at load 9, before the first call), and an http://
    judge uses one only if it redirects to https — then verified as ever. Nothing otherwise (an https
    judge, the default endpoint, an aiohttp without that context): the transport makes its own."""
    if base_url is None or urlsplit(base_url).scheme.lower() != "http":
        return {}
    import ssl

    made = getattr(sys.modules.get("aiohttp.connector"), "_SSL_CONTEXT_VERIFIED", None)
    ok = isinstance(made, ssl.SSLContext) and made.verify_mode == ssl.CERT_REQUIRED and made.check_hostname
    return {"verify": made} if ok else {}


def _schema_rejected(exc: Exception) -> bool:
    text = str(exc).lower()
    return any(w in text for w in ("response_format", "json_schema", "structured", "schema"))


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__


def _dropped(exc: BaseException) -> bool:
    """Whether a call the openai client says timed out was a connection that failed: the aiohttp
    transport maps every ``ClientConnectionError`` (refused, reset, closed by the server) to a connect
    timeout, where httpx says connection error — the same failure gets the same reason."""
    raised = next((e for e in _causes(exc) if type(e).__module__.split(".")[0] == "aiohttp"), None)
    return raised is not None and not isinstance(raised, TimeoutError)


class OpenAIJudgeClient:
    """Judge calls through ``openai.AsyncOpenAI``. Retries (429 with Retry-After, 5xx, resets) are
    the openai client's; what is left after them is a :class:`JudgeCallError`.

    ``transport`` (see :func:`judge_transport`): openai's aiohttp transport when ``openai[aiohttp]``
    is installed — about 40% less CPU per call than its default httpx one, which at 64 calls in flight
    is what each wave of replies waits on — else httpx. Retries, timeouts and the errors that end a
    call are the same either way."""

    def __init__(
        self, config: JudgeConfig, *, concurrency: int = 8, transport: Transport | None = None
    ) -> None:
        try:
            # Without the ~470 type modules openai's packages re-export, which no call of ours uses
            # (its post with the body read as bytes): they were half of its import, before the first call.
            with reexports_on_use("openai.types", "openai.lib"):
                import openai
        except ImportError as exc:  # pragma: no cover - openai is a core dependency
            raise MissingDependencyError("openai", "dev") from exc
        self._openai = openai
        self.config = config
        self.concurrency = concurrency
        self.transport = judge_transport(transport)
        aio = getattr(openai, "DefaultAioHttpClient", None) if self.transport == "aiohttp" else None
        if self.transport == "aiohttp" and aio is None:
            # An openai too old to have the transport (1.90 added it; tracejudge[aiohttp] installs one).
            if (transport or os.environ.get(TRANSPORT_ENV) or "auto").strip().lower() == "aiohttp":
                raise MissingDependencyError("openai>=1.90 with aiohttp", "aiohttp")
            self.transport = "httpx"
        base_url = config.base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = os.environ.get(config.api_key_env)
        if base_url is None and not key:
            # Every call to the default endpoint would fail on auth: say so once, before any run starts.
            raise InputError(
                f"no judge endpoint: {config.api_key_env} is not set and no base URL is given",
                hint=f"export {config.api_key_env}=… for OpenAI, or point OPENAI_BASE_URL (or the rubric's"
                " judge.base_url) at an OpenAI-compatible server such as Ollama or vLLM",
            )
        # Local OpenAI-compatible servers take no key; the client insists on one, so send a placeholder.
        api_key = key or "unused"
        if aio is not None:
            # aiohttp's pool hands out a connection without looking at the others: one client will do.
            http_clients = [aio(timeout=config.timeout_s, **_plain_http_tls(base_url))]
        else:
            # Calls go round one client per _POOL connections in flight. httpcore looks at every
            # connection of its pool (polling each idle socket) for each request it sends: at 64 calls
            # in flight over one pool that scan was a quarter of the CPU a call cost, over eight an
            # eighth of it.
            tls = _tls_context(openai.DefaultAsyncHttpxClient)
            http_clients = [
                openai.DefaultAsyncHttpxClient(timeout=config.timeout_s, **tls)
                for _ in range(max(1, -(-concurrency // _POOL)))
            ]
        self._clients = [
            openai.AsyncOpenAI(
                base_url=base_url,
                api_key=api_key,
                timeout=config.timeout_s,
                max_retries=config.max_retries,
                http_client=http,
            )
            for http in http_clients
        ]
        self._turn = 0
        self._structured = config.response_format in ("auto", "json_schema")

    def _response_format(self, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        """The rubric's JSON schema while the server takes structured output, else JSON mode when the
        rubric asks for it, else nothing (plain text, parsed as JSON)."""
        if schema is not None and self._structured:
            return {
                "type": "json_schema",
                "json_schema": {"name": "judgement", "schema": schema, "strict": True},
            }
        if self.config.response_format == "json_object":
            return {"type": "json_object"}
        return None

    def _schema_refused(self, fmt: dict[str, Any] | None, exc: Exception) -> bool:
        """Whether a 400 says the server does not do structured output, and ``auto`` may do without."""
        auto = self.config.response_format == "auto"
        return fmt is not None and fmt["type"] == "json_schema" and auto and _schema_rejected(exc)

    async def _call_unstructured(self, messages: Sequence[dict[str, str]]) -> Completion:
        """The server does not do structured output: parse plain JSON from now on."""
        self._structured = False
        try:
            return await self._call(messages, None)
        except self._openai.APIError as exc:
            raise self._classify(exc) from exc

    async def complete(
        self, messages: Sequence[dict[str, str]], *, schema: dict[str, Any] | None
    ) -> Completion:
        fmt = self._response_format(schema)
        try:
            return await self._call(messages, fmt)
        except self._openai.BadRequestError as exc:
            if self._schema_refused(fmt, exc):
                return await self._call_unstructured(messages)
            raise self._classify(exc) from exc
        except self._openai.APIError as exc:
            raise self._classify(exc) from exc
        except (ValueError, AttributeError, TypeError) as exc:
            # A 200 whose body is not JSON, or JSON that is not a chat completion: the openai client
            # hands back the raw text or fails decoding it.
            raise JudgeCallError(
                "malformed_response", f"the server's reply is not a chat completion ({type(exc).__name__})"
            ) from exc

    async def _call(self, messages: Sequence[dict[str, str]], fmt: dict[str, Any] | None) -> Completion:
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": list(messages),
            "temperature": self.config.temperature,
        }
        if self.config.max_tokens is not None:
            kwargs["max_tokens"] = self.config.max_tokens
        if fmt is not None:
            kwargs["response_format"] = fmt
        # The SDK's own post (its retries, errors and headers) with the body kept as bytes: building a
        # typed ChatCompletion and transforming the request params cost more CPU per call than the
        # HTTP exchange, and at 64 calls in flight that CPU, not the judge, bounded a run.
        self._turn = (self._turn + 1) % len(self._clients)
        client = self._clients[self._turn]
        body = await client.post("/chat/completions", cast_to=bytes, body=kwargs)
        return _completion(body, structured=fmt is not None and fmt["type"] == "json_schema")

    def _classify(self, exc: Exception) -> JudgeCallError:
        o = self._openai
        retries = f" after {self.config.max_retries} retries"
        if isinstance(exc, o.APITimeoutError) and _dropped(exc):
            return JudgeCallError("connection_error", f"APIConnectionError{retries}")
        if isinstance(exc, o.APITimeoutError):
            return JudgeCallError("timeout", f"no reply within {self.config.timeout_s:g} s{retries}")
        if isinstance(exc, o.RateLimitError):
            return JudgeCallError("rate_limited", f"HTTP 429{retries}")
        if isinstance(exc, o.AuthenticationError | o.PermissionDeniedError):
            return JudgeCallError("auth_error", f"HTTP {exc.status_code}: check {self.config.api_key_env}")
        if isinstance(exc, o.APIStatusError):
            kind = "server_error" if exc.status_code >= 500 else "bad_request"
            return JudgeCallError(kind, f"HTTP {exc.status_code}{retries if kind == 'server_error' else ''}")
        if isinstance(exc, o.APIConnectionError):
            return JudgeCallError("connection_error", f"{type(exc).__name__}{retries}")
        if isinstance(exc, o.APIResponseValidationError):
            return JudgeCallError("malformed_response", "the server's reply is not a chat completion")
        return JudgeCallError("api_error", type(exc).__name__)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.close()


class FakeJudgeClient:
    """A recording fake: ``reply(messages)`` decides each completion (or raises JudgeCallError)."""

    def __init__(self, reply: Callable[[Sequence[dict[str, str]]], str | Completion], *, delay: float = 0.0):
        self._reply = reply
        self._delay = delay
        self.calls: list[list[dict[str, str]]] = []
        self.schemas: list[dict[str, Any] | None] = []

    async def complete(
        self, messages: Sequence[dict[str, str]], *, schema: dict[str, Any] | None
    ) -> Completion:
        self.schemas.append(schema)
        self.calls.append(list(messages))
        if self._delay:
            await asyncio.sleep(self._delay)
        out = self._reply(messages)
        if isinstance(out, Completion):
            return out
        words = sum(len(m["content"].split()) for m in messages)
        return Completion(text=out, model="fake", input_tokens=words, output_tokens=len(out.split()))

    async def aclose(self) -> None:
        return None
