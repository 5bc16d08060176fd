"""Claims of a shared run's items (`score --run NAME`), on SQLite and on a real PostgreSQL: a claim
takes at most the items asked for, in order, and two workers' claims never overlap; a stored item is
taken for write-back by one worker — its own, or a stopped or dead one's — and done with once written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import psycopg

from tracejudge.judge import load_rubric
from tracejudge.runs import ScoreOptions
from tracejudge.runs._run import new_run_record
from tracejudge.runs._shared import worker_id, write_back_shared_run
from tracejudge.schema import GroupSummary, ItemResult, RunRecord, RunSummary
from tracejudge.store import SqlStore, open_store
from tracejudge.write import WriteReport

RUBRIC = Path(__file__).resolve().parents[2] / "examples" / "restaurant" / "rubric.yaml"
IDS = [f"{i:032x}" for i in range(840)]


def _joined(store: SqlStore, run_id: str, workers: tuple[str, ...]) -> RunRecord:
    rubric = load_rubric(RUBRIC)
    run = new_run_record(rubric, store, ScoreOptions(run_name=run_id), run_id=run_id, repeat=1)
    for w in workers:
        store.join_run(run, IDS, worker=w, lease_s=30)
    return run


def test_a_claim_takes_at_most_n_items_in_order(make_store: Callable[[], SqlStore]) -> None:
    store = make_store()
    _joined(store, "claims-1", ("w1",))
    assert store.claim_run_items("claims-1", worker="w1", n=4, lease_s=30) == IDS[:4]
    assert store.claim_run_items("claims-1", worker="w1", n=4, lease_s=30) == IDS[4:8]
    progress = store.run_progress("claims-1")
    assert progress.claimed == 8
    assert progress.pending == len(IDS) - 8


def test_a_run_new_to_the_statistics_is_claimed_n_at_a_time(postgres_url: str) -> None:
    # Once PostgreSQL has statistics on earlier runs, a new run looks like one row to the planner,
    # which then joins the pick as the inner side of a nested loop, once per row of the run.
    store = open_store(postgres_url)
    assert isinstance(store, SqlStore)
    try:
        _joined(store, "last-night", ("w0",))
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("ANALYZE run_queue")
        _joined(store, "tonight", ("w1",))
        assert store.claim_run_items("tonight", worker="w1", n=4, lease_s=30) == IDS[:4]
        assert store.run_progress("tonight").claimed == 4
    finally:
        store.close()


def test_two_workers_claims_split_the_items(postgres_url: str) -> None:
    # PostgreSQL only: SQLite refuses a second worker on a run (tests/cli/test_score_shared_run.py).
    first, second = open_store(postgres_url), open_store(postgres_url)
    assert isinstance(first, SqlStore)
    assert isinstance(second, SqlStore)
    _joined(first, "claims-2", ("a",))
    _joined(second, "claims-2", ("b",))
    got: dict[str, list[str]] = {"a": [], "b": []}
    for _ in range(5):
        got["a"] += first.claim_run_items("claims-2", worker="a", n=4, lease_s=30)
        got["b"] += second.claim_run_items("claims-2", worker="b", n=4, lease_s=30)
    assert len(got["a"]) == len(got["b"]) == 20
    assert not set(got["a"]) & set(got["b"])
    assert sorted(got["a"] + got["b"]) == IDS[:40]
    first.close()
    second.close()


def _score(store: SqlStore, run_id: str, worker: str, n: int) -> list[str]:
    got = store.claim_run_items(run_id, worker=worker, n=n, lease_s=30)
    for t in got:
        assert store.finish_run_item(ItemResult(run_id=run_id, trace_id=t, verdict="pass"), worker=worker)
    return got


def test_write_backs_are_taken_once_from_this_or_a_gone_worker(make_store: Callable[[], SqlStore]) -> None:
    store = make_store()
    _joined(store, "wb", ("a",))
    gone = _score(store, "wb", "a", 3)
    store.leave_run("wb", worker="a")  # stopped (Ctrl-C) before writing back
    _joined(store, "wb", ("b",))
    mine = _score(store, "wb", "b", 2)
    if store.shared_runs:  # a live worker's stored items are its own to write back
        _joined(store, "wb", ("c",))
        assert store.take_run_write_backs("wb", worker="c", n=10, lease_s=30) == gone
        store.finish_run_write_backs("wb", gone, written=False)  # a failed write goes back
    assert store.take_run_write_backs("wb", worker="b", n=2, lease_s=30) == gone[:2]
    store.finish_run_write_backs("wb", gone[:2], written=True)
    assert store.take_run_write_backs("wb", worker="b", n=10, lease_s=30) == [gone[2], *mine]
    # Taken again before it was finished: a take whose answer was lost (the connection dropped as it
    # committed) is the worker's own to take again, not left until its lease ends; no other's.
    assert store.take_run_write_backs("wb", worker="b", n=10, lease_s=30) == [gone[2], *mine]
    assert store.take_run_write_backs("wb", worker="d", n=10, lease_s=30) == []
    store.finish_run_write_backs("wb", gone, written=True)
    store.finish_run_write_backs("wb", mine, written=False)
    # A writer that died mid-write: its lease (here one already run out) ends and the next takes its items.
    assert store.take_run_write_backs("wb", worker="b", n=10, lease_s=-1) == mine
    assert store.take_run_write_backs("wb", worker="d", n=10, lease_s=30) == mine
    store.finish_run_write_backs("wb", mine, written=True)
    assert store.take_run_write_backs("wb", worker="b", n=10, lease_s=30) == []
    # Written items count as done in the run's progress, not as pending.
    progress = store.run_progress("wb")
    assert (progress.done, progress.claimed, progress.pending) == (5, 0, len(IDS) - 5)


def test_a_write_back_writes_items_stored_after_it_began(postgres_url: str) -> None:
    # Worker a still scores its item while this one writes back; a stores it, then is stopped. The next
    # take is that item, which the write-back's first read of the stored items did not hold: it was
    # marked written and never written. (PostgreSQL only: SQLite has one worker on a run at a time.)
    store = open_store(postgres_url)
    assert isinstance(store, SqlStore)
    _joined(store, "late", ("a",))
    (late,) = store.claim_run_items("late", worker="a", n=1, lease_s=30)
    run = _joined(store, "late", (worker_id(),))
    mine = _score(store, "late", worker_id(), 25)  # more than one take
    written: list[str] = []

    def write(target: str, _run: RunRecord, items: Sequence[ItemResult]) -> WriteReport:
        if not written:
            assert store.finish_run_item(ItemResult(run_id="late", trace_id=late, verdict="pass"), worker="a")
            store.leave_run("late", worker="a")
        written.extend(i.trace_id for i in items)
        return WriteReport(target=target, written=len(items))

    (report,) = write_back_shared_run(store, run, ["t"], lease_s=30, write=write)
    assert sorted(written) == sorted([*mine, late])
    assert report.written == 26
    assert store.take_run_write_backs("late", worker="b", n=10, lease_s=30) == []
    store.close()


def test_a_renewal_given_the_items_held_leaves_any_other_claim_to_run_out(
    make_store: Callable[[], SqlStore],
) -> None:
    # A claim whose answer the worker never got (the connection dropped as it committed) is not among
    # the items it holds: renewing by name lets that claim's lease run out, where renewing every claim
    # of the worker kept the item its own for as long as it lived.
    store = make_store()
    _joined(store, "renew", ("w1",))
    held = store.claim_run_items("renew", worker="w1", n=2, lease_s=30)
    unheard = store.claim_run_items("renew", worker="w1", n=2, lease_s=-1)  # its lease as good as over
    store.renew_run_lease("renew", worker="w1", lease_s=30, items=held)
    assert store.claim_run_items("renew", worker="w2", n=4, lease_s=30) == unheard + IDS[4:6]
    store.renew_run_lease("renew", worker="w1", lease_s=30, items=[])  # the worker alive, nothing held
    store.renew_run_lease("renew", worker="w1", lease_s=-1)  # every claim of the worker, as before
    assert store.claim_run_items("renew", worker="w2", n=2, lease_s=30) == held


def test_storing_an_item_again_tells_the_workers_own_from_anothers(
    make_store: Callable[[], SqlStore],
) -> None:
    # A worker whose commit went through as its connection dropped stores the item again: it is its
    # own (reported as stored), not another worker's (not), and counted once.
    store = make_store()
    _joined(store, "again", ("a",))
    (item,) = store.claim_run_items("again", worker="a", n=1, lease_s=30)
    result = ItemResult(run_id="again", trace_id=item, verdict="pass")
    assert store.finish_run_item(result, worker="a")
    assert store.finish_run_item(result, worker="a")
    assert not store.finish_run_item(result, worker="b")
    assert store.run_progress("again").done == 1


def test_an_item_kept_as_not_final_waits_then_its_final_result_replaces_it_once(
    make_store: Callable[[], SqlStore],
) -> None:
    store = make_store()
    _joined(store, "kept", ("a",))
    first, second = store.claim_run_items("kept", worker="a", n=2, lease_s=30)
    kept = ItemResult(run_id="kept", trace_id=first, verdict="indeterminate", reason="still_arriving: …")
    assert store.defer_run_item(kept, worker="a", after_s=600)
    assert store.defer_run_item(kept, worker="a", after_s=600)  # a repeat (its answer lost) is its own
    assert not store.defer_run_item(kept.model_copy(update={"trace_id": second}), worker="b", after_s=600)
    progress = store.run_progress("kept")
    assert (progress.done, progress.claimed, progress.waiting) == (0, 1, 1)
    assert progress.waiting_s is not None
    assert 590 < progress.waiting_s <= 600
    # Stored (the run shows it, indeterminate), not counted, not written back, not claimed while it waits.
    assert [(i.trace_id, i.verdict) for i in store.iter_score_items("kept")] == [(first, "indeterminate")]
    assert store.take_run_write_backs("kept", worker="a", n=10, lease_s=30) == []
    assert first not in store.claim_run_items("kept", worker="a", n=len(IDS), lease_s=30)
    # Woken (its trace arrived), it is claimed again (first in the run's order) and its final result
    # replaces it, once.
    store.leave_run("kept", worker="a")
    _joined(store, "kept", ("c",))
    assert store.run_waiting("kept") == [first]
    store.wake_run_items("kept", [first])  # its trace has arrived: no need to wait the rest
    assert store.run_waiting("kept") == []
    assert store.claim_run_items("kept", worker="c", n=1, lease_s=30) == [first]
    final = ItemResult(run_id="kept", trace_id=first, verdict="pass", cost_usd=0.5, input_tokens=7)
    assert store.finish_run_item(final, worker="c")
    assert store.finish_run_item(final, worker="c")  # a repeat
    assert not store.finish_run_item(final, worker="a")
    assert [(i.trace_id, i.verdict) for i in store.iter_score_items("kept")] == [(first, "pass")]
    progress = store.run_progress("kept")
    assert (progress.done, progress.usd, progress.tokens, progress.waiting) == (1, 0.5, 7, 0)
    assert store.take_run_write_backs("kept", worker="c", n=10, lease_s=30) == [first]


def test_a_run_recorded_as_ended_is_not_put_back_to_running(make_store: Callable[[], SqlStore]) -> None:
    # A worker's snapshot of a shared run at rest with items waiting (running) may be stored after a later
    # worker scored them and recorded the run complete: the run stays complete.
    store = make_store()
    run = _joined(store, "ended", ("w1",))
    assert store.get_run("ended") == run
    store.put_run(run.model_copy(update={"status": "complete"}))
    store.put_run(run)
    stored = store.get_run("ended")
    assert stored is not None
    assert stored.status == "complete"
    # While it has not ended, each record replaces the last (a run at rest with items waiting, its summary).
    going = run.model_copy(update={"run_id": "going"})
    store.put_run(going)
    store.put_run(going.model_copy(update={"summary": RunSummary(overall=GroupSummary(n=2))}))
    stored = store.get_run("going")
    assert stored is not None
    assert (stored.status, stored.summary.overall.n) == ("running", 2)
    store.put_run(going.model_copy(update={"status": "stopped_budget"}))
    stored = store.get_run("going")
    assert stored is not None
    assert stored.status == "stopped_budget"


def test_a_stopped_run_keeps_nothing_waiting(make_store: Callable[[], SqlStore]) -> None:
    # The budget stops the run: an item kept before is final as it is, and so is one a worker defers after
    # (it was scoring it as the stop came): done and counted, written back, never claimed or waited for.
    store = make_store()
    _joined(store, "capped", ("a",))
    first, second = store.claim_run_items("capped", worker="a", n=2, lease_s=30)
    kept = ItemResult(run_id="capped", trace_id=first, verdict="indeterminate", reason="still_arriving: …")
    assert store.defer_run_item(kept, worker="a", after_s=600)
    assert store.run_progress("capped").waiting == 1
    store.stop_run("capped")
    progress = store.run_progress("capped")
    assert (progress.done, progress.waiting, progress.claimed, progress.stopped) == (1, 0, 1, True)
    late = kept.model_copy(update={"trace_id": second})
    assert store.defer_run_item(late, worker="a", after_s=600)
    assert store.defer_run_item(late, worker="a", after_s=600)  # a repeat (its answer lost) is its own
    progress = store.run_progress("capped")
    assert (progress.done, progress.waiting, progress.claimed) == (2, 0, 0)
    assert store.run_waiting("capped") == []
    assert sorted(store.take_run_write_backs("capped", worker="a", n=10, lease_s=30)) == sorted(
        [first, second]
    )
