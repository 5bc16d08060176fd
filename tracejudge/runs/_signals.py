"""A scoring command's event loop, stopped by SIGTERM the way asyncio stops it on Ctrl-C: by cancelling
the command at the loop's next turn, not by an exception raised wherever the main thread happens to be."""

from __future__ import annotations

import asyncio
import functools
import signal
import threading
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any, ParamSpec, TypeVar

__all__ = ["in_thread_to_the_end", "run_to_a_safe_stop"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


async def in_thread_to_the_end(fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """``fn(*args, **kwargs)`` in the loop's default executor, waited for to its end even when the task
    awaiting it is cancelled meanwhile (the cancellation is raised once it has ended, whatever its
    outcome) — for a store write that a stop must not cut: a result already paid for.

    Not ``asyncio.to_thread``: cancelled before a thread took its call up, it drops the call; and when a
    KeyboardInterrupt escapes the loop, asyncio.run cancels every task left, a task made to hold the
    call among them. The call is handed to the executor here and now, and asyncio.run waits for the
    executor's calls before it returns."""
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait((future,))
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return future.result()


def run_to_a_safe_stop(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)``, with SIGTERM a cancellation of ``main``, delivered where a task awaits —
    as asyncio.run makes Ctrl-C one — and the signal handed on to the handler it had (the CLI's: exit
    143, as for Ctrl-C) once the loop is closed.

    The CLI's handler raises KeyboardInterrupt wherever the main thread is, and in a ``score --run``
    worker that is often inside one of the worker's own tasks, between a judge's reply and the store
    call that keeps the item's result: the task died with the result in hand, outside the shutdown
    that the other tasks go through, and a rerun paid the judge for that item again. A cancellation
    arrives only where a task awaits, and the worker lets an item's store call end before it gives way
    (runs._shared).

    Off the main thread, or with SIGTERM ignored, this is ``asyncio.run``: there is no signal to take."""
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(main)
    previous = signal.getsignal(signal.SIGTERM)
    if previous in (signal.SIG_IGN, None):
        return asyncio.run(main)
    stop = _Stop()
    try:
        with asyncio.Runner() as runner:
            stop.loop = runner.get_loop()
            signal.signal(signal.SIGTERM, stop.on_term)
            try:
                return runner.run(stop.watched(main))
            except asyncio.CancelledError:
                if not stop.termed:
                    raise
                # Only if the handler handed the signal below does not raise (SIG_DFL ends the
                # process there; the CLI's raises KeyboardInterrupt).
                raise KeyboardInterrupt from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        if stop.termed:
            signal.raise_signal(signal.SIGTERM)


class _Stop:
    """SIGTERM taken while a command's loop runs: the command cancelled at the loop's next turn."""

    def __init__(self) -> None:
        self.termed = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None

    async def watched(self, main: Coroutine[Any, Any, _T]) -> _T:
        self.task = asyncio.current_task()
        if self.termed:  # before the command began
            main.close()
            raise asyncio.CancelledError
        return await main

    def on_term(self, _signum: int, _frame: FrameType | None) -> None:
        # Runs between two bytecodes of whatever the main thread is doing: it only asks the loop to
        # cancel the command once the task running now gives way.
        self.termed = True
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
