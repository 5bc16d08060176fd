"""A worker's wait for a store that stopped answering counts from when the call that failed began: a
server silent at the network level holds a statement until the connection's bounds end it (20 s by
default, store._postgres), and that hold is part of the --reconnect-timeout, not added before it."""

from __future__ import annotations

import time

import pytest

from tracejudge import StoreUnreachableError
from tracejudge.runs._shared import _RideOut


def test_the_time_a_failing_call_was_held_counts_toward_the_reconnect_timeout() -> None:
    calls: list[float] = []

    def held_then_dropped() -> None:
        calls.append(time.monotonic())
        time.sleep(0.3)  # held longer than the whole reconnect timeout below
        raise StoreUnreachableError("the store lost its connection: connection timeout expired")

    with pytest.raises(StoreUnreachableError, match="for it to come back"):
        _RideOut(0.2).call_sync(held_then_dropped)
    # Before, the wait began when the error arrived: the call was made again for another 0.2 s.
    assert len(calls) == 1
