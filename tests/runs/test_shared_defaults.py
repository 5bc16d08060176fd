"""A shared run's settings have one default, ScoreOptions', which `score`'s options and the library's
write_back_shared_run both take: the write-back called without ``reconnect_s`` rides out a restarting
store for as long as a worker does. Before, the library's write-back gave up at once (0 s) while the
CLI passed 60 s."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

import click

from tests.store.test_run_queue import _joined, _score
from tracejudge import StoreUnreachableError
from tracejudge.cli import score as score_command
from tracejudge.runs import ScoreOptions
from tracejudge.runs._shared import worker_id, write_back_shared_run
from tracejudge.schema import ItemResult, RunRecord
from tracejudge.store import SqliteStore
from tracejudge.write import WriteReport


class _Restarting(SqliteStore):
    """A store whose first two takes find the server gone (nothing taken)."""

    down = 2

    def take_run_write_backs(self, run_id: str, *, worker: str, n: int, lease_s: float) -> list[str]:
        if self.down:
            self.down -= 1
            raise StoreUnreachableError("the store lost its connection: server closed the connection")
        return super().take_run_write_backs(run_id, worker=worker, n=n, lease_s=lease_s)


def test_the_library_write_back_rides_out_a_restart_by_default(tmp_path: Path) -> None:
    store = _Restarting(tmp_path / "s.db")
    try:
        run = _joined(store, "wb-default", (worker_id(),))
        mine = _score(store, "wb-default", worker_id(), 3)
        written: list[str] = []

        def write(target: str, _run: RunRecord, items: Sequence[ItemResult]) -> WriteReport:
            written.extend(i.trace_id for i in items)
            return WriteReport(target=target, written=len(items))

        (report,) = write_back_shared_run(store, run, ["t"], lease_s=30, write=write)
        assert store.down == 0
        assert sorted(written) == sorted(mine)
        assert report.written == 3
    finally:
        store.close()


def test_the_cli_and_the_library_default_alike() -> None:
    options = {p.name: p for p in score_command.params if isinstance(p, click.Option)}
    defaults = ScoreOptions()
    assert options["reconnect_s"].default == defaults.reconnect_s
    assert options["lease_s"].default == defaults.lease_s
    assert options["concurrency"].default == defaults.concurrency
    reconnect = inspect.signature(write_back_shared_run).parameters["reconnect_s"]
    assert reconnect.default == defaults.reconnect_s
