"""Reading and normalizing a run's traces while its judge calls are out.

A worker that loaded its next trace when its reply came back did so exactly when every other reply
came back too (calls launched together return together): reading and normalizing 64 traces then
delayed the next 64 calls. Here traces are loaded ahead, one at a time, only once the event loop has
been quiet for a moment — while the calls are out — and a worker that finds none ready loads its own.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator

from tracejudge.runs._quiet import Quiet
from tracejudge.schema import TaskRecord

__all__ = ["Prefetch"]

Loaded = tuple[str | TaskRecord, TaskRecord | str]
"""A source and what loading it gave: its task record, or why it has none."""


class Prefetch:
    """The run's sources, loaded up to ``depth`` ahead of the workers."""

    def __init__(
        self,
        sources: Iterator[str | TaskRecord],
        load: Callable[[str], TaskRecord | str],
        *,
        depth: int,
        quiet_s: float = 0.005,
        quiet: Quiet | None = None,
    ) -> None:
        self._sources = sources
        self._load = load
        self._depth = max(1, depth)
        self._quiet = quiet or Quiet(quiet_s)
        self._ready: deque[Loaded] = deque()
        self._room = asyncio.Event()
        self._error: Exception | None = None

    def _next(self) -> Loaded | None:
        src = next(self._sources, None)
        if src is None:
            return None
        return src, src if isinstance(src, TaskRecord) else self._load(src)

    def take(self) -> Loaded | None:
        """The next source, loaded (here and now if none is ready); None when there are no more."""
        self._quiet.busy()
        self._room.set()
        if self._ready:
            return self._ready.popleft()
        if self._error is not None:
            raise self._error  # what loading ahead ran into, in the worker that would have met it
        return self._next()

    def left(self) -> int:
        """Sources never taken (loaded ahead or not): what a stopped run did not score."""
        return len(self._ready) + sum(1 for _ in self._sources)

    async def run(self) -> None:
        """Load ahead while the loop is quiet; returns when the sources run out (cancel it to stop)."""
        while True:
            if len(self._ready) >= self._depth:
                self._room.clear()
                await self._room.wait()
                continue
            idle = self._quiet.idle_for()
            if idle < self._quiet.quiet_s:
                await asyncio.sleep(self._quiet.quiet_s - idle)
                continue
            try:
                loaded = self._next()
            except Exception as exc:
                self._error = exc
                return
            if loaded is None:
                return
            self._ready.append(loaded)
            await asyncio.sleep(0)  # replies that arrived meanwhile go first
