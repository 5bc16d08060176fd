"""A local OpenAI-compatible HTTP server with scripted replies, for tests, benchmarks and the demo.

It speaks enough of the API for the real ``openai`` client: ``POST /v1/chat/completions``
(plain and streamed), ``POST /v1/embeddings`` (deterministic bag-of-words vectors, see
:func:`embed_text`) and ``GET /v1/models``. What it answers is a list of :class:`Rule`\\ s,
tried in order against each request; the first that matches (and still has uses left) decides
the reply, or the fault to inject (an HTTP status with ``Retry-After``, a delay, a malformed
body). Every request is recorded.

Example::

    with ScriptedOpenAIServer([Rule(reply="30,000 RMB", last_user=r"prepayment")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "cap?"}])
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["RecordedRequest", "Rule", "ScriptedOpenAIServer", "embed_text"]

_UNSET: Any = object()


@dataclass
class Rule:
    """One scripted behaviour: when a request matches, reply with ``reply`` (or inject a fault).

    Every given matcher must match (an empty rule matches everything). Regexes are searched
    (``re.search``, case-insensitive, dot matches newlines) in the message text.
    """

    reply: str | dict[str, Any] | list[Any] | None = None
    """Reply text; a dict or list is sent as its JSON text (for structured output)."""
    last_user: str | None = None
    """Regex searched in the last user message."""
    any_message: str | None = None
    """Regex searched in the text of every message (system, user, assistant, tool) joined."""
    model: str | None = None
    """Exact model name of the request."""
    times: int | None = None
    """How many requests this rule may answer; None: unlimited. Lets a fault happen once, then pass."""
    status: int = 200
    """HTTP status; anything but 200 sends an OpenAI-style error body."""
    retry_after: float | None = None
    """Seconds for a ``Retry-After`` header (with a 429 or 5xx status)."""
    delay: float = 0.0
    """Seconds to wait before answering (to exercise client timeouts and concurrency)."""
    malformed: bool = False
    """Answer 200 with a body that is not valid JSON."""
    raw_body: str | None = None
    """Send exactly this body (status ``status``, content type application/json) instead of a completion."""
    tool_calls: Sequence[dict[str, Any]] = ()
    """Tool calls to return: ``{"name": ..., "arguments": {...}}`` each."""
    finish_reason: str | None = None
    """Finish reason; default ``stop`` (``tool_calls`` when tool calls are returned)."""
    used: int = field(default=0, compare=False)
    """How many requests this rule has answered so far."""

    def matches(self, body: dict[str, Any]) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.model is not None and body.get("model") != self.model:
            return False
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        # Each regex matcher with the text it is searched in (read only when the matcher is set).
        matchers = ((self.last_user, _last_user_text), (self.any_message, _all_messages_text))
        return all(
            pattern is None or re.search(pattern, text_of(messages), re.IGNORECASE | re.DOTALL)
            for pattern, text_of in matchers
        )

    def reply_text(self) -> str | None:
        if self.reply is None or isinstance(self.reply, str):
            return self.reply
        return json.dumps(self.reply)


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    """HTTP method."""
    path: str
    """URL path."""
    headers: dict[str, str]
    """Request headers, lower-cased names; ``authorization`` is masked."""
    body: Any
    """The JSON body (None when there was none, the raw text when it was not JSON)."""
    rule: int | None
    """Index of the rule that answered it; None when none matched (or for non-completion paths)."""
    received_at: float
    """``time.time()`` at arrival."""


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    users = [m for m in messages if m.get("role") == "user"]
    return _message_text(users[-1]) if users else ""


def _all_messages_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(_message_text(m) for m in messages)


def _tokens(text: str) -> int:
    return max(1, len(text.split())) if text else 0


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JSONResponse(body, status_code=status, headers=headers)


class ScriptedOpenAIServer:
    """An OpenAI-compatible server on loopback, in a background thread.

    Use as a context manager (or call :meth:`start` / :meth:`stop`). ``port=0`` picks a free port;
    :attr:`base_url` is what to give ``openai.OpenAI(base_url=...)``.
    """

    def __init__(
        self,
        rules: Iterable[Rule] = (),
        *,
        default_reply: str | None = None,
        models: Sequence[str] = ("scripted-model",),
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
    ) -> None:
        self._rules: list[Rule] = list(rules)
        self.api_key = api_key
        """When set, a request without ``Authorization: Bearer <api_key>`` gets 401, as OpenAI answers."""
        self.default_reply = default_reply
        """Reply when no rule matches; None answers 400 so an unscripted request fails loudly."""
        self.models = tuple(models)
        self.host = host
        self._port = port
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._stopping = threading.Event()

    # --- script ---------------------------------------------------------------------------

    @property
    def rules(self) -> list[Rule]:
        """The current rules (a copy)."""
        with self._lock:
            return list(self._rules)

    def set_rules(self, rules: Iterable[Rule], *, default_reply: str | None = _UNSET) -> None:
        """Replace the script (between runs; requests in flight keep their rule)."""
        with self._lock:
            self._rules = list(rules)
            if default_reply is not _UNSET:
                self.default_reply = default_reply

    def add_rule(self, rule: Rule) -> None:
        """Append a rule (tried after the existing ones)."""
        with self._lock:
            self._rules.append(rule)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def completion_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat-completion requests received so far."""
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self._requests.clear()

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._sock is None:
            raise RuntimeError("the server is not started")
        return int(self._sock.getsockname()[1])

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> ScriptedOpenAIServer:
        """Bind, start serving in a background thread, and return once it accepts connections."""
        if self._thread is not None:
            return self
        self._stopping.clear()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._port))
        sock.listen(128)
        self._sock = sock
        config = uvicorn.Config(self._app(), log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="scripted-openai", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the scripted OpenAI server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._sock is not None:
            self._sock.close()
        self._server = None
        self._thread = None
        self._sock = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- HTTP -----------------------------------------------------------------------------

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/chat/completions", self._chat, methods=["POST"]),
                # Groq's OpenAI-compatible path (the ``groq`` client posts there)
                Route("/openai/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                Route("/embeddings", self._embeddings, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/models", self._models, methods=["GET"]),
            ]
        )

    def _record(self, request: Request, body: Any, rule: int | None) -> None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if "authorization" in headers:
            headers["authorization"] = "***"
        rec = RecordedRequest(request.method, request.url.path, headers, body, rule, time.time())
        with self._lock:
            self._requests.append(rec)

    def _refused(self, request: Request) -> Response | None:
        if self.api_key is None or request.headers.get("authorization") == f"Bearer {self.api_key}":
            return None
        return _error(401, "Incorrect API key provided.", "invalid_request_error")

    async def _models(self, request: Request) -> Response:
        self._record(request, None, None)
        if (refused := self._refused(request)) is not None:
            return refused
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "tracejudge"} for m in self.models]
        return JSONResponse({"object": "list", "data": data})

    async def _embeddings(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self._record(request, body if body is not None else raw.decode("utf-8", "replace"), None)
        if (refused := self._refused(request)) is not None:
            return refused
        try:
            texts, size = _embedding_input(body)
        except _InvalidRequest as exc:
            return _error(400, str(exc), "invalid_request_error")
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": _encoded(embed_text(_as_text(item), size), as_base64),
            }
            for i, item in enumerate(texts)
        ]
        tokens = sum(_tokens(_as_text(t)) for t in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": str(body.get("model") or self.models[0]),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def _pick(self, body: dict[str, Any]) -> tuple[int | None, Rule | None]:
        with self._lock:
            for i, rule in enumerate(self._rules):
                if rule.matches(body):
                    rule.used += 1
                    return i, rule
        return None, None

    async def _chat(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            self._record(request, raw.decode("utf-8", "replace"), None)
            return _error(400, "the request body is not JSON", "invalid_request_error")
        if (refused := self._chat_refused(request, body)) is not None:
            self._record(request, body, None)
            return refused
        index, rule = self._pick(body)
        self._record(request, body, index)
        if rule is None and self.default_reply is None:
            return _error(400, "no scripted rule matches this request", "invalid_request_error")
        rule = rule or Rule(reply=self.default_reply)
        await self._delay(rule.delay)
        return self._reply(body, rule)

    def _chat_refused(self, request: Request, body: Any) -> Response | None:
        """The answer to a chat request that is not a chat request, or not allowed; None if fine."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "'messages' is required", "invalid_request_error")
        return self._refused(request)

    async def _delay(self, seconds: float) -> None:
        """Wait a rule's delay, in small steps, so stop() does not wait out a long scripted delay."""
        until = time.monotonic() + seconds
        while not self._stopping.is_set() and (left := until - time.monotonic()) > 0:
            await asyncio.sleep(min(left, 0.05))

    def _reply(self, body: dict[str, Any], rule: Rule) -> Response:
        """What the rule answers: its raw body, its fault, a malformed body, a stream or a completion."""
        headers = {"retry-after": f"{rule.retry_after:g}"} if rule.retry_after is not None else {}
        if rule.raw_body is not None:
            return Response(
                rule.raw_body, status_code=rule.status, media_type="application/json", headers=headers
            )
        if rule.status != 200:
            kind = "rate_limit_error" if rule.status == 429 else "server_error"
            return _error(rule.status, f"scripted fault (HTTP {rule.status})", kind, headers)
        if rule.malformed:
            return Response('{"id": "chatcmpl-broken", "choices": [', media_type="application/json")
        if body.get("stream"):
            return StreamingResponse(self._stream(body, rule), media_type="text/event-stream")
        return JSONResponse(self._completion(body, rule))

    def _completion(self, body: dict[str, Any], rule: Rule) -> dict[str, Any]:
        text = rule.reply_text()
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        calls = _tool_calls(rule)
        if calls:
            message["tool_calls"] = calls
        prompt = sum(_tokens(_message_text(m)) for m in body["messages"] if isinstance(m, dict))
        completion = _tokens(text or "")
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or self.models[0]),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": rule.finish_reason or ("tool_calls" if calls else "stop"),
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    async def _stream(self, body: dict[str, Any], rule: Rule) -> AsyncIterator[bytes]:
        full = self._completion(body, rule)
        base = {k: full[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            data = base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]} | extra
            return f"data: {json.dumps(data)}\n\n".encode()

        yield chunk({"role": "assistant", "content": ""})
        text = full["choices"][0]["message"]["content"] or ""
        # Word-sized pieces, so a client that joins deltas is exercised on more than one chunk.
        for piece in re.findall(r"\S+\s*|\s+", text):
            yield chunk({"content": piece})
        calls = full["choices"][0]["message"].get("tool_calls") or []
        for i, call in enumerate(calls):
            yield chunk({"tool_calls": [{"index": i, **call}]})
        yield chunk({}, full["choices"][0]["finish_reason"])
        if (body.get("stream_options") or {}).get("include_usage"):
            data = base | {"choices": [], "usage": full["usage"]}
            yield f"data: {json.dumps(data)}\n\n".encode()
        yield b"data: [DONE]\n\n"


_FLOAT32 = struct.Struct("<f")


def embed_text(text: str, dimensions: int = 64) -> list[float]:
    """The vector ``POST /v1/embeddings`` returns: hashed bag of lower-cased words, unit length.

    Stable across processes and machines (BLAKE2b, not ``hash()``), so recorded retrievals rank
    documents the same way on every run; texts sharing words have a positive cosine similarity.
    """
    counts = [0.0] * dimensions
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        counts[int.from_bytes(digest, "little") % dimensions] += 1.0
    norm = math.sqrt(sum(c * c for c in counts))
    if norm == 0:
        # An empty text still gets a unit vector, so cosine similarity stays defined.
        return [1.0 / math.sqrt(dimensions)] * dimensions
    return [c / norm for c in counts]


class _InvalidRequest(Exception):
    """A request the API refuses with 400 ``invalid_request_error``; the message says why."""


def _embedding_input(body: Any) -> tuple[list[Any], int]:
    """The texts to embed and the vector size an embeddings request asks for."""
    if not isinstance(body, dict):
        raise _InvalidRequest("the request body is not a JSON object")
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts:
        raise _InvalidRequest("'input' must be a string or a non-empty list")
    dims = body.get("dimensions")
    size: int = dims if isinstance(dims, int) else 64
    if not 1 <= size <= 4096:
        raise _InvalidRequest("'dimensions' must be between 1 and 4096")
    return texts, size


def _as_text(item: Any) -> str:
    """An embeddings input as text: token-id inputs (lists of ints) through their decimal text."""
    return item if isinstance(item, str) else json.dumps(item)


def _encoded(vector: list[float], as_base64: bool) -> Any:
    """A vector as the request asked: floats, or (the openai client's default) base64 of
    little-endian float32, like the real API."""
    if not as_base64:
        return vector
    return base64.b64encode(b"".join(_FLOAT32.pack(x) for x in vector)).decode()


def _tool_calls(rule: Rule) -> list[dict[str, Any]]:
    out = []
    for call in rule.tool_calls:
        args = call.get("arguments", {})
        out.append(
            {
                "id": str(call.get("id") or f"call_{uuid.uuid4().hex[:12]}"),
                "type": "function",
                "function": {
                    "name": str(call["name"]),
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    return out
