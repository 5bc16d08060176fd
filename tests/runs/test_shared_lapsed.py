"""A shared-run worker whose own lease ran out while it still held items (starved of CPU past
--lease on a loaded machine, its heartbeat late) can claim those items back: the claim takes any
lapsed item, its own among them. It scored such an item a second time beside the task already scoring
it, and both stores came back as its own (the second finds its own result), so the item was reported,
and written back, twice. Now an item it already holds is left to the task that has it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.store.test_run_queue import IDS, _joined
from tracejudge.runs import ScoreOptions
from tracejudge.runs._shared import _Membership, _RideOut, _SharedWorker
from tracejudge.schema import ItemResult
from tracejudge.store import SqliteStore


class _Starved(SqliteStore):
    """A store whose first claim's lease is as good as over when it commits: the worker was starved
    past its lease from the start. Its second claim sets ``claimed_again``."""

    claims = 0
    claimed_again: asyncio.Event
    loop: asyncio.AbstractEventLoop

    def claim_run_items(self, run_id: str, *, worker: str, n: int, lease_s: float) -> list[str]:
        self.claims += 1
        if self.claims == 1:
            return super().claim_run_items(run_id, worker=worker, n=n, lease_s=-1)
        got = super().claim_run_items(run_id, worker=worker, n=n, lease_s=lease_s)
        self.loop.call_soon_threadsafe(self.claimed_again.set)
        return got


def test_an_item_a_worker_holds_is_not_scored_again_when_its_own_claim_takes_it_back(
    tmp_path: Path,
) -> None:
    store = _Starved(tmp_path / "s.db")
    try:
        _joined(store, "starved", ("me",))
        seen: list[str] = []

        async def main() -> None:
            store.loop = asyncio.get_running_loop()
            store.claimed_again = asyncio.Event()

            async def score(trace_id: str) -> ItemResult:
                if trace_id == IDS[0]:  # still being scored when the second claim takes it back
                    await store.claimed_again.wait()
                return ItemResult(run_id="starved", trace_id=trace_id, verdict="pass")

            options = ScoreOptions(run_name="starved", lease_s=30, concurrency=2)
            me = _SharedWorker(
                store,
                "starved",
                _Membership(store, "starved", "me"),
                options,
                score,
                lambda i: seen.append(i.trace_id),
                _RideOut(0),
            )
            await asyncio.gather(me.work(), me.work())

        asyncio.run(main())
        assert store.claims >= 2
        assert sorted(seen) == sorted(IDS)  # before: IDS[0] twice
        assert store.run_progress("starved").done == len(IDS)
    finally:
        store.close()
