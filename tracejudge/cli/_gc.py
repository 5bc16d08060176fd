"""Python's cyclic garbage collector in a CLI process: what start-up makes lives until the process
ends, so collecting it again and again is wasted work — at the wrong moment, too.

A ``score`` of 2,000 traces at 64 calls in flight, each collection timed (a machine at load 10):
start-up (tracejudge, the ``openai`` package and its client, about a million objects) was gone
through again by 6 full collections during the run, 0.1-0.6 s each while the event loop waited (a
wave of replies held up), and by ~790 young and middle ones, 3.4-3.7 s in all; and the interpreter's
exit went through it once more after the output was printed (1.5-1.9 s). With start-up frozen: no
full collection, ~100 others (0.4-0.7 s), and an exit of 0.5 s.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator

__all__ = [
    "RUN_THRESHOLD",
    "collected_after_start_up",
    "process_ends_with_the_command",
    "skip_exit_collection",
]

_ENDING: list[bool] = [False]


def process_ends_with_the_command() -> None:
    """Say the process ends once its command is done (the console entry): a run then leaves the
    collector as the run had it — what start-up made stays frozen — where restoring it for a process
    that goes on thawed a million objects into the oldest generation after the output, and the first
    collection after that went through them (~10 ms of CPU at load 5 between the output and the exit)."""
    _ENDING[0] = True


RUN_THRESHOLD = (20_000, 20, 20)
"""Collection thresholds during a run, once start-up is frozen: young objects collected 20,000 at a
time (a few milliseconds each), not 700."""


@contextlib.contextmanager
def collected_after_start_up() -> Iterator[Callable[[], None]]:
    """No collection while a command starts; then (when the yielded ``started`` is called, e.g. as the
    first result arrives) everything made so far is frozen out of later collections and the rest is
    collected at :data:`RUN_THRESHOLD`. On exit the collector is as it was (what was frozen thawed,
    unless the process had frozen objects already), so an embedding process (a test's CliRunner)
    keeps its own — unless the process ends with the command (:func:`process_ends_with_the_command`)."""
    threshold = gc.get_threshold()
    enabled = gc.isenabled()
    # Objects frozen before cannot be told apart from ours: with any, ours stay frozen too.
    thaw = gc.get_freeze_count() == 0
    frozen = False
    gc.disable()

    def started() -> None:
        nonlocal frozen
        if frozen:
            return
        frozen = True
        gc.freeze()
        gc.set_threshold(*RUN_THRESHOLD)
        if enabled:
            gc.enable()

    try:
        yield started
    finally:
        if not _ENDING[0]:
            _restore(threshold, thaw=frozen and thaw, enabled=enabled)


def _restore(threshold: tuple[int, int, int], *, thaw: bool, enabled: bool) -> None:
    gc.set_threshold(*threshold)
    if thaw:
        gc.unfreeze()
    if enabled:
        gc.enable()


def skip_exit_collection() -> None:
    """Freeze every object before the process exits: the interpreter's own collections at exit then
    go through nothing that lived this long (the objects are freed all the same)."""
    gc.freeze()
