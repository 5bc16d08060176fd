"""A shared run's worker whose store dropped the connection just as a transaction committed (the
commit went through, its answer never came) rides it out without stranding an item or losing one it
stored: a claim it never heard of is not renewed, so its lease runs out and the item is scored; an item
it stored is reported as its own when storing it again finds it there. Before, the worker exited on the
first lost connection; riding out a restart by repeating the call alone left the unheard claim renewed
by the heartbeat for as long as the worker lived, which then waited for it forever."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.store.test_run_queue import _joined, _score
from tracejudge import StoreUnreachableError
from tracejudge.judge import load_rubric
from tracejudge.runs import ScoreOptions
from tracejudge.runs._run import score_run_async
from tracejudge.runs._shared import worker_id, write_back_shared_run
from tracejudge.schema import ItemResult, RunRecord
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import ScriptedOpenAIServer
from tracejudge.write import WriteReport

if TYPE_CHECKING:
    from tests.conftest import Restaurant


def _lost() -> StoreUnreachableError:
    return StoreUnreachableError("the store lost its connection: server closed the connection unexpectedly")


class _LostAnswers(SqliteStore):
    """A store whose second claim and first stored item commit, then fail as a dropped connection
    does; and whose next few calls find the server gone (it is restarting)."""

    claims = 0
    finishes = 0
    down = 0
    unheard: list[str]
    renewed: list[Collection[str] | None]

    def _restarting(self) -> None:
        if self.down:
            self.down -= 1
            raise _lost()

    def claim_run_items(self, run_id: str, *, worker: str, n: int, lease_s: float) -> list[str]:
        self._restarting()
        got = super().claim_run_items(run_id, worker=worker, n=n, lease_s=lease_s)
        self.claims += 1
        if self.claims == 2 and got:
            self.unheard = got
            self.down = 3
            raise _lost()
        return got

    def finish_run_item(self, item: ItemResult, *, worker: str) -> bool:
        self._restarting()
        stored = super().finish_run_item(item, worker=worker)
        self.finishes += 1
        if self.finishes == 1:
            self.down = 2
            raise _lost()
        return stored

    def renew_run_lease(
        self, run_id: str, *, worker: str, lease_s: float, items: Collection[str] | None = None
    ) -> None:
        self._restarting()
        self.renewed.append(items)
        super().renew_run_lease(run_id, worker=worker, lease_s=lease_s, items=items)


def test_an_unheard_claim_lapses_and_an_unheard_store_is_the_workers_own(
    restaurant: Restaurant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _LostAnswers(tmp_path / "s.db")
    store.renewed = []
    try:
        store.put_spans(restaurant.spans)
        ids = sorted({s.trace_id for s in restaurant.spans})
        slow = [dataclasses.replace(r, delay=0.05) for r in restaurant.rules]
        seen: list[str] = []
        with ScriptedOpenAIServer(slow) as judge:
            monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            options = ScoreOptions(run_name="lost", lease_s=1.0, concurrency=2, use_cache=False)
            run = asyncio.run(
                asyncio.wait_for(
                    score_run_async(
                        load_rubric(restaurant.rubric),
                        store,
                        ids,
                        options=options,
                        on_item=lambda item: seen.append(item.trace_id),
                    ),
                    timeout=120,  # a stranded claim kept the worker waiting for ever
                )
            )
        assert run.status == "complete"
        assert run.summary.overall.n == len(ids)
        assert store.unheard  # the lost claim happened, and its items were scored all the same
        assert sorted(seen) == ids  # every item once, the one stored in the unheard commit included
        assert store.run_progress("lost").done == len(ids)
        assert store.renewed
        assert all(r is not None for r in store.renewed)  # what it held, by name
    finally:
        store.close()


class _LostTake(SqliteStore):
    """A store whose first write-back take commits, then fails as a dropped connection does."""

    takes = 0
    unheard: list[str]

    def take_run_write_backs(self, run_id: str, *, worker: str, n: int, lease_s: float) -> list[str]:
        got = super().take_run_write_backs(run_id, worker=worker, n=n, lease_s=lease_s)
        self.takes += 1
        if self.takes == 1:
            self.unheard = got
            raise _lost()
        return got


def test_a_write_back_take_whose_answer_was_lost_is_written_by_the_worker_that_took_it(
    tmp_path: Path,
) -> None:
    # Before, the batch stayed taken ('writing') under this worker's lease: this write-back went on
    # with the rest and left it to the next worker, or a rerun, once the lease ended.
    store = _LostTake(tmp_path / "s.db")
    try:
        run = _joined(store, "lost-take", (worker_id(),))
        mine = _score(store, "lost-take", worker_id(), 25)  # more than one take
        written: list[str] = []

        def write(target: str, _run: RunRecord, items: Sequence[ItemResult]) -> WriteReport:
            written.extend(i.trace_id for i in items)
            return WriteReport(target=target, written=len(items))

        (report,) = write_back_shared_run(store, run, ["t"], lease_s=30, reconnect_s=60, write=write)
        assert store.unheard
        assert sorted(written) == sorted(mine)  # each once, the unheard batch included
        assert report.written == 25
        assert store.take_run_write_backs("lost-take", worker="other", n=30, lease_s=-1) == []
    finally:
        store.close()
