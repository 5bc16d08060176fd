"""When a run's event loop is quiet: the moment for work no judge call waits on.

Calls launched together return together, so at 64 calls in flight the loop is busy in bursts — a wave
of replies handled and the next calls sent — with the judge's latency in between. Work that only has
to be done by the end of the run (loading traces ahead, writing results, rendering the output) waits
for a moment without a reply; done during a burst it delays the calls of that wave, and in a thread
it holds the GIL the loop then waits for.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Quiet", "QuietQueue"]

T = TypeVar("T")


class Quiet:
    """The loop's last busy moment (a worker taking a trace, an item finishing) and a wait for a
    moment of ``quiet_s`` without one."""

    def __init__(self, quiet_s: float = 0.005) -> None:
        self.quiet_s = quiet_s
        self._last = 0.0

    def busy(self) -> None:
        """The loop is handling replies now."""
        self._last = asyncio.get_running_loop().time()

    def idle_for(self) -> float:
        """Seconds since the loop was last busy."""
        return asyncio.get_running_loop().time() - self._last

    async def wait(self, at_most: float | None = None) -> None:
        """Return once the loop has been quiet for ``quiet_s`` (or ``at_most`` seconds have passed)."""
        loop = asyncio.get_running_loop()
        end = None if at_most is None else loop.time() + at_most
        while (idle := self.idle_for()) < self.quiet_s:
            pause = self.quiet_s - idle
            if end is not None:
                if loop.time() >= end:
                    return
                pause = min(pause, end - loop.time())
            await asyncio.sleep(pause)


class QuietQueue(Generic[T]):
    """Work on each of a run's items done one item at a time in the loop's quiet moments, in order;
    :meth:`finish` does what is left when the run ends."""

    def __init__(self, work: Callable[[T], None], quiet: Quiet | None = None) -> None:
        self._work = work
        self._quiet = quiet or Quiet()
        self._queue: deque[T] = deque()
        self._waiting = asyncio.Event()
        self._error: Exception | None = None

    def add(self, value: T) -> None:
        """Queue an item (it just finished: the loop is busy)."""
        self._queue.append(value)
        self._quiet.busy()
        self._waiting.set()

    async def run(self) -> None:
        """Work through the queue while the loop is quiet, until cancelled."""
        while True:
            if not self._queue:
                self._waiting.clear()
                await self._waiting.wait()
                continue
            await self._quiet.wait()
            if self._queue:
                try:
                    self._work(self._queue.popleft())
                except Exception as exc:
                    self._error = exc  # raised by check() and finish(), in the run
                    return
            await asyncio.sleep(0)  # replies that arrived meanwhile go first

    def check(self) -> None:
        """Raise what the work in a quiet moment ran into."""
        if self._error is not None:
            raise self._error

    def finish(self) -> None:
        """Do the work left, here and now (raising what the work ran into before)."""
        self.check()
        while self._queue:
            self._work(self._queue.popleft())
