"""A shared run's worker whose lease renewal fails once (the store's connection dropped and came back)
keeps renewing: its heartbeat died on the first failure, so its claimed items' leases ran out and other
workers scored them again, and the worker itself failed at its end on that stale error."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tracejudge import StoreError
from tracejudge.judge import load_rubric
from tracejudge.runs import ScoreOptions
from tracejudge.runs._run import score_run_async
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import ScriptedOpenAIServer

if TYPE_CHECKING:
    from tests.conftest import Restaurant


class _Blip(SqliteStore):
    """A store whose first lease renewal fails as a dropped PostgreSQL connection does."""

    renewals = 0

    def renew_run_lease(
        self, run_id: str, *, worker: str, lease_s: float, items: Collection[str] | None = None
    ) -> None:
        self.renewals += 1
        if self.renewals == 1:
            raise StoreError(
                "the store lost its connection: terminating connection due to administrator command"
            )
        super().renew_run_lease(run_id, worker=worker, lease_s=lease_s, items=items)


def test_a_failed_renewal_does_not_stop_the_heartbeat(
    restaurant: Restaurant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _Blip(tmp_path / "s.db")
    try:
        store.put_spans(restaurant.spans)
        ids = sorted({s.trace_id for s in restaurant.spans})
        slow = [dataclasses.replace(r, delay=0.15) for r in restaurant.rules]
        with ScriptedOpenAIServer(slow) as judge:
            monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            options = ScoreOptions(run_name="blip", lease_s=0.6, concurrency=1, use_cache=False)
            run = asyncio.run(score_run_async(load_rubric(restaurant.rubric), store, ids, options=options))
        assert run.status == "complete"
        assert run.summary.overall.n == len(ids)
        assert store.renewals >= 3  # it went on renewing after the failed one
    finally:
        store.close()
