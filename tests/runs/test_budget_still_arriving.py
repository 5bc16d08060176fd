"""A local run its budget stopped, and a trace still arriving (DESIGN 5.5). A stopped run is not resumed (its
claims are refused: nothing more is scored), so an item it left unscored because its trace may still be
arriving is final as it is — indeterminate, saying why, like any item of a run that ended — and nothing is
said to wait: keeping it waiting would say 'rerun later' forever and never write it back. The judge is the
OpenAI stand-in (a checks-only rubric costs nothing, so no budget stops it); the batches are the real SDK's
BatchSpanProcessor's (tests/localize/test_late_spans.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.localize.test_late_spans import RUNS, _batches, collect_batch
from tests.runs.test_shared_still_arriving import late_beside_whole
from tests.store.conftest import postgres_url, store_url  # noqa: F401 - the store fixtures
from tracejudge.cli import cli
from tracejudge.runs import is_still_arriving
from tracejudge.store import RunProgress, open_store
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

# A judged criterion beside the check; every prompt token costs a dollar, so the budget is spent by items.
RUBRIC = """\
name: prepayment-answer
version: 1
judge: {{model: judge-a, temperature: 0, base_url: "{url}", max_retries: 0,
         input_cost_per_mtok: 1000000, output_cost_per_mtok: 0}}
criteria:
  - {{name: helpful, description: "Answers what was asked.", threshold: 7}}
checks:
  - {{name: states_cap, type: contains, target: output, value: "30,000"}}
"""
REPLY = {"criteria": {"helpful": {"reasoning": "states the cap", "score": 8}}, "reasoning": "ok"}


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer([Rule(reply=REPLY)]) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
        yield server


def _score(url: str, rubric: Path, *args: str) -> tuple[dict[str, Any], str]:
    one_at_a_time = ("--no-cache", "--concurrency", "1")
    argv = ["--store", url, "score", "--rubric", str(rubric), *one_at_a_time, *args, "--json"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out, " ".join(result.stderr.split())


def _stopped(
    url: str, tmp_path: Path, judge: ScriptedOpenAIServer, *more: str
) -> tuple[dict[str, Any], str, str, str]:
    """A run (``more``: ``--run NAME`` for a shared one) of a late trace, a whole one and another, which its
    budget stops after the whole one: its output, stderr, the late trace's id and the whole one's."""
    _, late, done, _ = late_beside_whole(url, tmp_path)
    run = next(r for r in RUNS if r.name == "draft-then-answer")
    another = [s for batch in _batches(run) for s in batch]
    collect_batch(url, tmp_path / "another.json", another)
    rubric = tmp_path / "judged.yaml"
    rubric.write_text(RUBRIC.format(url=judge.base_url))

    # What one judged item costs.
    probe, _ = _score(url, rubric, "--trace", done)
    cost = probe["summary"]["cost_usd"]
    assert cost > 0

    # One at a time: the late trace (not judged, free), the whole one (judged), then the third would pass
    # the budget (1.5x one item's cost projected, 2x in a shared run) and is not launched: the budget stops
    # the run.
    out, said = _score(
        url, rubric, "--trace", late, "--trace", done, "--trace", f"{another[0].context.trace_id:032x}",
        "--budget-usd", f"{cost * 1.25}", *more,
    )  # fmt: skip
    assert (out["status"], out["summary"]["not_scored"]) == ("stopped_budget", 1)
    verdicts = {i["trace_id"]: i["verdict"] for i in out["items"]}
    assert verdicts == {late: "indeterminate", done: "pass"}
    # Final as it is: nothing waits, nothing is said to, and no rerun is offered.
    assert (out["summary"]["waiting"], out["waiting"]) == (0, {"items": 0, "after_s": None, "command": None})
    assert "still arriving" not in said
    return out["run_id"], late


def test_a_run_its_budget_stopped_keeps_an_item_still_arriving_final(
    judge: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    run_id, late = _stopped(url, tmp_path, judge)
    store = open_store(url)
    try:
        stored = store.get_run(run_id)
        assert stored is not None
        assert stored.status == "stopped_budget"
        assert stored.finished_at is not None
        items = {i.trace_id: i for i in store.iter_score_items(run_id)}
        assert is_still_arriving(items[late])
        # Not made a resumable run: no queue holds the item.
        assert store.run_progress(run_id) == RunProgress()
    finally:
        store.close()


def test_a_shared_run_its_budget_stopped_makes_an_item_kept_waiting_final(
    judge: ScriptedOpenAIServer,
    store_url: str,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    _, late = _stopped(store_url, tmp_path, judge, "--run", "capped")
    store = open_store(store_url)
    try:
        stored = store.get_run("capped")
        assert stored is not None
        assert (stored.status, stored.summary.not_scored) == ("stopped_budget", 1)
        items = {i.trace_id: i for i in store.iter_score_items("capped")}
        assert is_still_arriving(items[late])
        # Done (it was left waiting for good: counted as not scored too once its wait ran out, never written
        # back), counted once; the third, never claimed, is the one not scored.
        progress = store.run_progress("capped")
        assert (progress.done, progress.waiting, progress.pending, progress.claimed) == (2, 0, 1, 0)
        assert progress.stopped
    finally:
        store.close()
