"""Writing a run's results beside its judge calls: finished items and the judge replies to cache are
collected while the judge works and written in one transaction per batch, in a thread.

One synced commit per item and another per cached reply, each holding the store while the event loop
waited on it to read the next trace, bounded a run at 64 calls in flight more than the judge did. Here
a batch is whatever finished while the previous batch was being written, so a slow disk makes batches
larger, not the run slower.
"""

from __future__ import annotations

import asyncio
import threading

from tracejudge.runs._quiet import Quiet
from tracejudge.runs._signals import in_thread_to_the_end
from tracejudge.schema import ItemResult
from tracejudge.store import Store

__all__ = ["ResultWriter"]


class ResultWriter:
    """Finished items and cached replies on their way to the store; also the run's reply cache (a
    reply waiting to be written is found as a stored one is)."""

    queues_writes = True
    """``put_cached_reply`` only queues (the judge calls it on the event loop)."""

    def __init__(self, store: Store, *, quiet: Quiet | None = None, wait_s: float = 1.0) -> None:
        self._store = store
        # Batches start while the loop is quiet (the calls out), not among a wave of replies, where the
        # thread's serializing would take the GIL from the loop; but after ``wait_s`` at most, so that a
        # loop never quiet (replies from the cache, a fast judge) still writes as it goes.
        self._quiet = quiet
        self._wait_s = wait_s
        self._lock = threading.Lock()  # the judge puts replies from a worker thread
        self._items: list[ItemResult] = []
        self._replies: dict[str, str] = {}
        self._unwritten: dict[str, str] = {}  # replies not yet committed, in a batch or waiting
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    # -- the judge's reply cache ---------------------------------------------------------------

    def get_cached_reply(self, key: str) -> str | None:
        """A cached reply: one waiting to be written, else the store's."""
        with self._lock:
            waiting = self._unwritten.get(key)
        return waiting if waiting is not None else self._store.get_cached_reply(key)

    def put_cached_reply(self, key: str, payload: str) -> None:
        """Queue a reply for the cache (the first of a key is kept, as the store keeps it)."""
        with self._lock:
            if key not in self._unwritten:
                self._unwritten[key] = payload
                self._replies[key] = payload

    # -- results -------------------------------------------------------------------------------

    def add(self, item: ItemResult) -> None:
        """Queue a finished item; it is written with whatever else finishes meanwhile. A write that
        failed is raised here (and by :meth:`close`)."""
        if self._error is not None:
            raise self._error
        self._items.append(item)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def _take(self) -> tuple[list[ItemResult], dict[str, str]]:
        with self._lock:
            items, replies = self._items, self._replies
            self._items, self._replies = [], {}
        return items, replies

    async def _drain(self) -> None:
        while self._items or self._replies:
            if self._quiet is not None:
                await self._quiet.wait(at_most=self._wait_s)
            items, replies = self._take()
            try:
                # To its end: cancelled (the run interrupted) before a thread took it up, the write was
                # dropped with the batch taken from the queue; and a cancellation is no failed write,
                # so close_now still writes what is queued behind the batch.
                await in_thread_to_the_end(self._store.put_score_items, items, cached_replies=replies)
            except Exception as exc:
                self._error = exc
                raise
            with self._lock:
                for key in replies:
                    self._unwritten.pop(key, None)

    async def close(self) -> None:
        """Write everything queued and wait for it (replies queued without an item too)."""
        while True:
            if self._task is not None:
                await asyncio.shield(self._task)
            if self._error is not None:
                raise self._error
            if not (self._items or self._replies):
                return
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def close_now(self) -> None:
        """After an interruption: write what is still queued, here and now (a batch being written by
        the thread finishes by itself; the store's lock orders the two)."""
        items, replies = self._take()
        if (items or replies) and self._error is None:
            self._store.put_score_items(items, cached_replies=replies)
