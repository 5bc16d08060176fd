"""A shared run's worker stopped by Ctrl-C or SIGTERM hands back everything it claimed, a claim it had
sent just before included: the claim runs in a thread that the interruption cannot stop, and it could
commit after the worker left the run — its items then stayed claimed by a worker that was gone until
their lease ran out (a flake of tests/cli/test_score_shared_run.py's SIGTERM test at load 10). A join
under way did the same to the worker's place in the run, which on SQLite refused a rerun for the lease.
Here the call is held until the worker has left (or its command has ended), on SQLite and on a real
PostgreSQL, so the order that was a matter of timing is the one every run takes."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tracejudge.judge import load_rubric
from tracejudge.runs import ScoreOptions
from tracejudge.runs._run import score_run_async
from tracejudge.schema import RunRecord
from tracejudge.store import SqliteStore, SqlStore
from tracejudge.store._postgres import PostgresStore
from tracejudge.testing.openai_server import ScriptedOpenAIServer

if TYPE_CHECKING:
    from tests.conftest import Restaurant

_LEASE = 300.0  # far longer than the test: an item left claimed stays claimed while it runs
_OPTIONS = ScoreOptions(run_name="late", lease_s=_LEASE, concurrency=1, use_cache=False)


class _Held(SqlStore):
    """A store whose ``held`` call ("join", or the second "claim"), once sent, waits until its worker
    has left the run or the command has ended, then commits."""

    held = ""
    claims = 0
    sent: threading.Event
    left: threading.Event
    ended: threading.Event
    late: list[str]

    def _hold(self) -> None:
        self.sent.set()
        # Bounded only so that a worker that never leaves fails the test instead of hanging it.
        for _ in range(1200):
            if self.left.wait(0.1) or self.ended.is_set():
                return
        raise AssertionError("the worker neither left the run nor ended")

    def join_run(self, run: RunRecord, trace_ids: Any, *, worker: str, lease_s: float) -> RunRecord:
        if self.held == "join":
            self.held = ""
            self._hold()
        return super().join_run(run, trace_ids, worker=worker, lease_s=lease_s)

    def claim_run_items(self, run_id: str, *, worker: str, n: int, lease_s: float) -> list[str]:
        self.claims += 1
        if self.held == "claim" and self.claims == 2:
            self.held = ""
            self._hold()
            self.late = super().claim_run_items(run_id, worker=worker, n=n, lease_s=lease_s)
            return self.late
        return super().claim_run_items(run_id, worker=worker, n=n, lease_s=lease_s)

    def leave_run(self, run_id: str, *, worker: str) -> None:
        super().leave_run(run_id, worker=worker)
        self.left.set()


class _SqliteHeld(_Held, SqliteStore):
    pass


class _PostgresHeld(_Held, PostgresStore):
    pass


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[_Held]:
    opened: _Held
    if request.param == "sqlite":
        opened = _SqliteHeld(tmp_path / "s.db")
    else:
        opened = _PostgresHeld(request.getfixturevalue("postgres_url"))
    opened.sent, opened.left, opened.ended, opened.late = (
        threading.Event(),
        threading.Event(),
        threading.Event(),
        [],
    )
    try:
        yield opened
    finally:
        opened.close()


Interrupt = Callable[["asyncio.Task[RunRecord]", _Held], Awaitable[None]]


async def _ctrl_c(run: asyncio.Task[RunRecord], store: _Held) -> None:
    """What asyncio.run does on Ctrl-C: it cancels the running command. Once that has ended, what the
    worker held is back — not only once asyncio.run has waited for its threads."""
    await asyncio.to_thread(store.sent.wait)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    store.ended.set()
    assert store.run_progress("late").claimed == 0


async def _sigterm(run: asyncio.Task[RunRecord], store: _Held) -> None:
    """KeyboardInterrupt out of the event loop (what the CLI's SIGTERM handler did before score ran its
    loop through run_to_a_safe_stop, and what a second Ctrl-C still does), after which asyncio.run
    cancels every task left (the command's among them) and waits for them."""
    await asyncio.to_thread(store.sent.wait)
    store.ended.set()  # the command ends with the loop; asyncio.run still runs its cancellation
    raise KeyboardInterrupt


def _interrupted(store: _Held, restaurant: Restaurant, interrupt: Interrupt, held: str) -> list[str]:
    """Store the example's traces and score them as a run until the ``held`` call is sent, then interrupt
    the worker; the run's items."""
    store.put_spans(restaurant.spans)
    ids = sorted({s.trace_id for s in restaurant.spans})
    store.held = held
    rubric = load_rubric(restaurant.rubric)

    async def main() -> None:
        await interrupt(asyncio.create_task(score_run_async(rubric, store, ids, options=_OPTIONS)), store)

    with pytest.raises(KeyboardInterrupt) if interrupt is _sigterm else contextlib.nullcontext():
        asyncio.run(main())
    return ids


def _rerun(store: _Held, restaurant: Restaurant) -> list[str]:
    """A rerun's items; it completes the run."""
    ids = sorted({s.trace_id for s in restaurant.spans})
    seen: list[str] = []
    again = asyncio.run(
        score_run_async(
            load_rubric(restaurant.rubric),
            store,
            ids,
            options=_OPTIONS,
            on_item=lambda i: seen.append(i.trace_id),
        )
    )
    assert again.status == "complete"
    assert again.summary.overall.n == len(ids)
    return seen


@pytest.fixture
def judge(restaurant: Restaurant, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(restaurant.rules) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server


@pytest.mark.parametrize("interrupt", [_ctrl_c, _sigterm], ids=["ctrl-c", "sigterm"])
def test_a_claim_that_commits_after_the_worker_left_goes_back_at_once(
    store: _Held, interrupt: Interrupt, restaurant: Restaurant, judge: ScriptedOpenAIServer
) -> None:
    ids = _interrupted(store, restaurant, interrupt, "claim")
    assert store.late, "the held claim took nothing"
    progress = store.run_progress("late")
    # Before, the held claim's items stayed claimed by the departed worker for _LEASE seconds.
    assert progress.claimed == 0
    assert 0 < progress.done < len(ids)
    assert progress.pending == len(ids) - progress.done
    seen = _rerun(store, restaurant)
    assert len(seen) == len(set(seen)) == len(ids) - progress.done  # each item stored once


@pytest.mark.parametrize("interrupt", [_ctrl_c, _sigterm], ids=["ctrl-c", "sigterm"])
def test_a_join_that_commits_after_the_worker_was_stopped_leaves_again(
    store: _Held, interrupt: Interrupt, restaurant: Restaurant, judge: ScriptedOpenAIServer
) -> None:
    ids = _interrupted(store, restaurant, interrupt, "join")
    assert store.run_progress("late").pending == len(ids)  # the join went through, nothing scored
    # Before, on SQLite the rerun was refused ('being scored by another worker') for _LEASE seconds.
    assert sorted(_rerun(store, restaurant)) == ids
