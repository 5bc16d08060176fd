"""A shared run (``score --run NAME``) and a trace still arriving (DESIGN 5.5). An item whose trace may still
be arriving, its answer maybe a draft, is kept as not final — indeterminate, saying why — and handed back
to the run's queue until the trace has had time to arrive; a later worker of the run (``score --run NAME``
again) scores it then, or as soon as the rest of it has arrived, and scores nothing already final. Its
kept result is replaced by the final one, which is stored and counted once (the run's totals, which its
budget is checked against, count it once). On SQLite and on a real PostgreSQL; the batches are the real
SDK's BatchSpanProcessor's (tests/localize/test_late_spans.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan

from tests.localize.test_late_spans import RUNS, _batches, collect_batch
from tests.runs.test_still_arriving import RUBRIC
from tests.store.conftest import postgres_url, store_url  # noqa: F401 - the store fixtures
from tracejudge.cli import cli
from tracejudge.schema import ItemResult, RunRecord
from tracejudge.store import open_store

RUN = "nightly"


def _score(url: str, rubric: Path, *trace_ids: str) -> tuple[dict[str, Any], str]:
    args = ["--store", url, "score", "--rubric", str(rubric), "--run", RUN, "--json"]
    for t in trace_ids:
        args += ["--trace", t]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out, " ".join(result.stderr.split())


def _stored(url: str) -> tuple[dict[str, ItemResult], Any]:
    store = open_store(url)
    try:
        return {i.trace_id: i for i in store.iter_score_items(RUN)}, store.run_progress(RUN)
    finally:
        store.close()


def _run(url: str) -> RunRecord:
    store = open_store(url)
    try:
        run = store.get_run(RUN)
    finally:
        store.close()
    assert run is not None
    return run


def _wait_over(url: str) -> None:
    """The time the kept items wait has passed: as a later worker finds it (no test waits ten minutes)."""
    store = open_store(url)
    try:
        store.wake_run_items(RUN, store.run_waiting(RUN))
    finally:
        store.close()


def late_beside_whole(url: str, tmp_path: Path) -> tuple[Sequence[ReadableSpan], str, str, Path]:
    """A first batch (the draft, v1's 50,000 RMB) and another run of the agent, all of it arrived, collected
    into the store: the rest of the first (its root and answer, to collect later), the late trace's id, the
    whole one's, and the rubric."""
    run = next(r for r in RUNS if r.name == "draft-then-answer")
    first, rest = _batches(run)
    whole = [s for batch in _batches(run) for s in batch]
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(RUBRIC)
    collect_batch(url, tmp_path / "first.json", first)
    collect_batch(url, tmp_path / "whole.json", whole)
    return rest, f"{first[0].context.trace_id:032x}", f"{whole[0].context.trace_id:032x}", rubric


def assert_late_kept(out: dict[str, Any], said: str, late: str, done: str, run: str) -> str:
    """``score --json``'s output ``out`` and its stderr ``said``: the whole trace scored, the late one kept
    (indeterminate, still_arriving), the run not done (``running``, one of its indeterminate items waiting),
    and what waits, when and the command that goes on with the run (``score --run run``), said; that
    command."""
    verdicts = {i["trace_id"]: (i["verdict"], i["reason"]) for i in out["items"]}
    assert verdicts[done] == ("pass", "")
    assert verdicts[late][0] == "indeterminate"
    assert verdicts[late][1].startswith("still_arriving: the answer was read from span ")
    assert out["status"] == "running"
    assert (out["summary"]["n"], out["summary"]["indeterminate"], out["summary"]["waiting"]) == (2, 1, 1)
    assert out["waiting"]["items"] == 1
    assert 0 < out["waiting"]["after_s"] <= 600
    command: str = out["waiting"]["command"]
    assert command.startswith("tracejudge ")
    assert " score --rubric " in command
    assert f" --run {run} " in command
    assert (
        "1 trace(s) still arriving, not scored yet (kept indeterminate, still_arriving; the run is not done:"
        " status running); rerun in " in said
    )
    assert said.endswith(command)
    return command


def test_an_item_still_arriving_is_scored_by_a_later_worker_of_the_run_once(
    store_url: str,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    rest, late, done, rubric = late_beside_whole(store_url, tmp_path)

    out, said = _score(store_url, rubric, late, done)
    assert_late_kept(out, said, late, done, RUN)
    # Not done: the stored run says so too (it was `complete`), and is not finished.
    stored_run = _run(store_url)
    assert (stored_run.status, stored_run.finished_at) == ("running", None)
    assert stored_run.summary.overall.n == 2
    assert stored_run.left_waiting == 1  # at rest with one item waiting, recorded so
    items, progress = _stored(store_url)
    # Kept, not final: shown with the run (its summary counts it indeterminate), not in its totals.
    assert items[late].verdict == "indeterminate"
    assert (progress.done, progress.pending, progress.claimed, progress.waiting) == (1, 0, 0, 1)
    scored_at = items[done].scored_at

    # Run again before the wait is over: nothing to score (the final item is not scored again).
    out, _ = _score(store_url, rubric, late, done)
    assert out["items"] == []
    assert (out["waiting"]["items"], out["status"]) == (1, "running")

    # The wait is over but the trace still lacks its root and ended moments ago: kept again, not final.
    _wait_over(store_url)
    out, _ = _score(store_url, rubric, late, done)
    assert [(i["trace_id"], i["verdict"]) for i in out["items"]] == [(late, "indeterminate")]
    assert _stored(store_url)[1].done == 1

    # The rest arrives: a later worker scores it at once (its wait not over), and only it; stored and
    # counted once.
    collect_batch(store_url, tmp_path / "rest.json", rest)
    out, said = _score(store_url, rubric, late, done)
    assert [(i["trace_id"], i["verdict"]) for i in out["items"]] == [(late, "pass")]
    assert out["waiting"] == {"items": 0, "after_s": None, "command": None}
    assert "still arriving" not in said
    assert (out["summary"]["n"], out["summary"]["pass"], out["summary"]["waiting"], out["status"]) == (
        2,
        2,
        0,
        "complete",
    )
    assert _run(store_url).status == "complete"
    assert _run(store_url).finished_at is not None
    assert _run(store_url).left_waiting == 0
    items, progress = _stored(store_url)
    assert {t: i.verdict for t, i in items.items()} == {late: "pass", done: "pass"}
    assert items[done].scored_at == scored_at
    assert (progress.done, progress.pending, progress.claimed, progress.waiting) == (2, 0, 0, 0)

    # Nothing is left: a rerun scores nothing.
    out, _ = _score(store_url, rubric, late, done)
    assert out["items"] == []
    assert _stored(store_url)[1].done == 2
