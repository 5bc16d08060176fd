"""``score_run`` called as a library and a trace still arriving (DESIGN 5.5): the same rule as ``score``,
decided in one place (``score_run_async``). A stored trace whose answer may be a draft is kept as not final
— the item indeterminate, saying why, the run ``running`` (not done) with the item waiting in its queue —
and the run is resumed by ``score_run`` with ``ScoreOptions(run_name=<its run_id>)``, which scores it once
the rest has arrived. A task record given whole is final as it is (no resume could load it again). On SQLite
and on a real PostgreSQL; the batches are the real SDK's BatchSpanProcessor's
(tests/localize/test_late_spans.py)."""

from __future__ import annotations

from pathlib import Path

from tests.localize.test_late_spans import collect_batch
from tests.runs.test_shared_still_arriving import late_beside_whole
from tests.store.conftest import postgres_url, store_url  # noqa: F401 - the store fixtures
from tracejudge.judge import load_rubric
from tracejudge.runs import ScoreOptions, is_still_arriving, score_run, store_loader
from tracejudge.schema import TaskRecord
from tracejudge.store import RunProgress, open_store


def test_score_run_keeps_a_stored_trace_still_arriving_and_its_resume_scores_it(
    store_url: str,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    rest, late, done, rubric_path = late_beside_whole(store_url, tmp_path)
    rubric = load_rubric(rubric_path)
    store = open_store(store_url)
    try:
        run = score_run(rubric, store, [late, done])
        # Not done (it was `complete`, the item stored as final and never scored again).
        assert (run.status, run.finished_at) == ("running", None)
        assert (run.summary.overall.n, run.summary.overall.indeterminate) == (2, 1)
        stored = store.get_run(run.run_id)
        assert stored is not None
        assert stored.status == "running"
        items = {i.trace_id: i for i in store.iter_score_items(run.run_id)}
        assert is_still_arriving(items[late])
        assert items[done].verdict == "pass"
        progress = store.run_progress(run.run_id)
        assert (progress.done, progress.pending, progress.claimed, progress.waiting) == (1, 0, 0, 1)
        assert progress.waiting_s is not None
        assert 0 < progress.waiting_s <= 600
        scored_at = items[done].scored_at

        # The rest arrives: resumed by its id, the run scores the kept item only, and is complete.
        collect_batch(store_url, tmp_path / "rest.json", rest)
        resumed = score_run(rubric, store, [late, done], options=ScoreOptions(run_name=run.run_id))
        assert (resumed.run_id, resumed.status) == (run.run_id, "complete")
        assert resumed.finished_at is not None
        assert (resumed.summary.overall.n, resumed.summary.overall.pass_) == (2, 2)
        items = {i.trace_id: i for i in store.iter_score_items(run.run_id)}
        assert {t: i.verdict for t, i in items.items()} == {late: "pass", done: "pass"}
        assert items[done].scored_at == scored_at
        assert store.run_progress(run.run_id).done == 2
    finally:
        store.close()


def test_score_run_keeps_a_task_record_still_arriving_final(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    _, late, _, rubric_path = late_beside_whole(url, tmp_path)
    store = open_store(url)
    try:
        task = store_loader(store)(late)
        assert isinstance(task, TaskRecord)
        run = score_run(load_rubric(rubric_path), store, [task])
        # The caller holds the record, not a trace a resume would read: final as it is, nothing kept.
        assert run.status == "complete"
        (item,) = store.iter_score_items(run.run_id)
        assert is_still_arriving(item)
        assert store.run_progress(run.run_id) == RunProgress()
    finally:
        store.close()
