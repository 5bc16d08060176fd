"""Judging one item: the prompt, the cache, the call, the reading of the reply."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import Sequence
from typing import Any, Protocol

from tracejudge.judge._client import Completion, JudgeCallError, JudgeClient
from tracejudge.judge._parse import parse_reply
from tracejudge.judge._prompt import build_messages, messages_canon, messages_hash, reply_schema
from tracejudge.schema import Criterion, JudgeConfig, JudgeReply, Rubric, TaskRecord


class ReplyCache(Protocol):
    """Where judge replies are cached (the store implements it). A cache whose ``put_cached_reply``
    only queues the reply for a later write says so with a true ``queues_writes`` attribute: it is
    called on the event loop, where a store's own synced commit is sent to a thread."""

    def get_cached_reply(self, key: str) -> str | None: ...

    def put_cached_reply(self, key: str, payload: str) -> None: ...


def resolved_base_url(config: JudgeConfig) -> str | None:
    """The endpoint a judge config talks to (argument > ``OPENAI_BASE_URL``)."""
    return config.base_url or os.environ.get("OPENAI_BASE_URL") or None


def cache_key(
    config: JudgeConfig, messages: Sequence[dict[str, str]], repeat: int, *, canon: str | None = None
) -> str:
    """Key of a reply in the cache: judge configuration + exact prompt + repeat index.

    The sha256 of ``json.dumps`` of these fields with sorted keys, no spaces and no ASCII escapes, written
    field by field so the messages (``canon``: their ``messages_canon``, when already written) are not
    serialized again: the same bytes as dumping the whole object (tests/judge/test_cache_key.py)."""
    fields = {
        "model": config.model,
        "base_url": resolved_base_url(config),
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "response_format": config.response_format,
        "messages": None,
        "repeat": repeat,
    }
    listed = messages_canon(messages) if canon is None else canon
    written = ",".join(
        f"{json.dumps(key)}:{listed if key == 'messages' else json.dumps(value, **_CANON)}"
        for key, value in sorted(fields.items())
    )
    return hashlib.sha256(f"{{{written}}}".encode()).hexdigest()


_CANON: dict[str, Any] = {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":")}


class Judge:
    """Asks the judge about the criteria no check decided, with bounded concurrency and a cache."""

    def __init__(
        self,
        rubric: Rubric,
        client: JudgeClient,
        *,
        cache: ReplyCache | None = None,
        concurrency: int = 8,
    ) -> None:
        if rubric.judge is None:
            raise ValueError("the rubric has no judge section")
        self.rubric = rubric
        self.config: JudgeConfig = rubric.judge
        self.client = client
        self.cache = cache
        self._sem = asyncio.Semaphore(max(1, concurrency))
        self.calls = 0
        self.cache_hits = 0

    async def judge(
        self, task: TaskRecord, criteria: Sequence[Criterion], *, category: str, repeat: int = 1
    ) -> list[JudgeReply]:
        """One reply per repeat, in repeat order. Never raises for a judge failure: the reply says why."""
        messages = build_messages(self.rubric, task, criteria, category=category)
        schema = reply_schema(criteria)
        names = [c.name for c in criteria]
        canon = messages_canon(messages)  # hashed for the prompt and each repeat's cache key
        if repeat == 1:
            # Awaited here, not gathered: a gathered call is a task that starts on the loop's next turn,
            # after every other reply that came back with this one was handled — at 64 calls in flight
            # each wave's calls then all waited for the whole wave's handling.
            return [await self._one(messages, schema, names, 0, canon)]
        return list(
            await asyncio.gather(*(self._one(messages, schema, names, i, canon) for i in range(repeat)))
        )

    async def _one(
        self,
        messages: list[dict[str, str]],
        schema: dict[str, object],
        names: list[str],
        repeat: int,
        canon: str | None = None,
    ) -> JudgeReply:
        canon = messages_canon(messages) if canon is None else canon
        prompt_hash = messages_hash(messages, canon=canon)
        key = cache_key(self.config, messages, repeat, canon=canon)
        if self.cache is not None:
            if getattr(self.cache, "queues_writes", False):
                hit = self.cache.get_cached_reply(key)
            else:
                # A store's read (a PostgreSQL round trip): off the event loop, as its write below.
                hit = await asyncio.to_thread(self.cache.get_cached_reply, key)
            if hit is not None:
                self.cache_hits += 1
                comp = Completion(**json.loads(hit))
                return self._read(comp, names, prompt_hash, repeat, cached=True, latency_ms=0.0)
        async with self._sem:
            t0 = time.perf_counter()
            try:
                self.calls += 1
                comp = await self.client.complete(messages, schema=schema)
            except JudgeCallError as exc:
                return JudgeReply(
                    repeat=repeat,
                    prompt_hash=prompt_hash,
                    error=exc.kind,
                    error_detail=exc.detail,
                    latency_ms=(time.perf_counter() - t0) * 1000,
                )
            except Exception as exc:
                return JudgeReply(
                    repeat=repeat,
                    prompt_hash=prompt_hash,
                    error="client_error",
                    error_detail=f"{type(exc).__name__}: {str(exc)[:200]}",
                    latency_ms=(time.perf_counter() - t0) * 1000,
                )
            latency = (time.perf_counter() - t0) * 1000
        if self.cache is not None:
            payload = json.dumps(comp.__dict__)
            if getattr(self.cache, "queues_writes", False):
                self.cache.put_cached_reply(key, payload)
            else:
                # The store commits durably (fsync); off the event loop so calls in flight keep flowing.
                await asyncio.to_thread(self.cache.put_cached_reply, key, payload)
        return self._read(comp, names, prompt_hash, repeat, cached=False, latency_ms=latency)

    def _read(
        self,
        comp: Completion,
        names: list[str],
        prompt_hash: str,
        repeat: int,
        *,
        cached: bool,
        latency_ms: float,
    ) -> JudgeReply:
        common = {
            "repeat": repeat,
            "prompt_hash": prompt_hash,
            "raw": comp.text,
            "model": comp.model,
            "input_tokens": 0 if cached else comp.input_tokens,
            "output_tokens": 0 if cached else comp.output_tokens,
            "latency_ms": latency_ms,
            "cached": cached,
            "structured": comp.structured,
        }
        if comp.refusal or comp.finish_reason == "content_filter":
            detail = comp.refusal or "the reply was stopped by the content filter"
            return JudgeReply(**common, error="refusal", error_detail=detail[:300])
        parsed = parse_reply(comp.text, names)
        if comp.finish_reason == "length" and (parsed.error is not None or parsed.problems):
            return JudgeReply(
                **common,
                error="truncated",
                error_detail="the reply hit max_tokens before naming every criterion",
            )
        return JudgeReply(
            **common,
            reasoning=parsed.overall,
            scores=parsed.scores,
            criterion_reasoning=parsed.reasoning,
            error=parsed.error,
            error_detail=parsed.error_detail,
            problems=parsed.problems,
        )
