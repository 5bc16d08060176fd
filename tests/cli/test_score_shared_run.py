"""``score --run NAME``: worker processes on one PostgreSQL share a run — each item scored once, the
work split, a SIGKILLed worker's items taken over, one budget for the run — and SQLite refuses a
second worker on a run."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psycopg
from click.testing import CliRunner

from tests.cli import score_workers as sw
from tests.cli.score_workers import judge  # noqa: F401 - the slow scripted judge
from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tracejudge.cli import cli
from tracejudge.store import open_store
from tracejudge.testing.openai_server import ScriptedOpenAIServer

COPIES = 6  # 14 example traces x 6 = 84 items, each copy a trace of its own


def test_three_workers_share_a_run_and_take_over_a_killed_ones_items(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    spans = sw.put_copies(postgres_url, COPIES)
    everything = sorted({s.trace_id for s in spans})
    args = ("--run", "nightly-1", "--lease", "2", "--concurrency", "2")
    workers = [sw.start_worker(postgres_url, judge, *args) for _ in range(3)]
    with sw.reaped(*workers):
        deadline = time.monotonic() + 120
        # Mid-run: every worker has stored an item (however slowly each started), and the first has
        # stored some and holds claimed ones it will never finish.
        while (
            any(sw.held_by(postgres_url, "nightly-1", w.pid)[0] == 0 for w in workers[1:])
            or (held := sw.held_by(postgres_url, "nightly-1", workers[0].pid))[0] < 2
            or held[1] == 0
        ):
            assert time.monotonic() < deadline, "the workers stored too few items"
            assert all(w.poll() is None for w in workers), "a worker ended early"
            time.sleep(0.02)
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(timeout=30)
        killed_done = sw.held_by(postgres_url, "nightly-1", workers[0].pid)[0]
        survivors = [sw.finish(w) for w in workers[1:]]
    stored = sw.stored_ids(postgres_url, "nightly-1")
    assert sorted(stored) == everything  # every item once: no item lost, none stored twice
    theirs = [{i["trace_id"] for i in data["items"]} for data in survivors]
    assert all(theirs), "the work was not split: a surviving worker scored nothing"
    assert not theirs[0] & theirs[1]
    # The killed worker's stored items stand; everything else, its unfinished claims included, the
    # survivors scored.
    assert len(theirs[0] | theirs[1]) == len(everything) - killed_done
    assert killed_done >= 2
    last = max(survivors, key=lambda d: d["summary"]["n"])
    assert last["run_id"] == "nightly-1"
    assert last["status"] == "complete"
    assert last["summary"]["n"] == len(everything)

    # A late worker finds nothing left, scores nothing and reports the whole run.
    late = sw.finish(sw.start_worker(postgres_url, judge, *args))
    assert late["items"] == []
    assert late["summary"]["n"] == len(everything)
    assert late["status"] == "complete"
    store = open_store(postgres_url)
    try:
        run = store.get_run("nightly-1")
        assert run is not None
        assert run.status == "complete"
        assert run.summary.overall.n == len(everything)
    finally:
        store.close()


def test_a_budget_is_the_runs_not_each_workers(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    sw.put_copies(postgres_url, 2)
    budget = 0.002  # about half the 28 items at the example judge's prices
    args = ("--run", "budgeted", "--concurrency", "2", "--budget-usd", str(budget))
    runs = [sw.finish(w) for w in [sw.start_worker(postgres_url, judge, *args) for _ in range(2)]]
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT payload FROM score_items WHERE run_id = 'budgeted'").fetchall()
    costs = [json.loads(r[0])["cost_usd"] for r in rows]
    n = len(costs)
    assert 0 < n < 28
    # Two workers each spending the whole budget would pass it: the run's total stays near it
    # (items in flight when it was reached may finish, each about one item's cost).
    assert sum(costs) <= budget + 4 * max(costs)
    assert sum(len(r["items"]) for r in runs) == n
    final = max(runs, key=lambda d: d["summary"]["n"])
    assert final["status"] == "stopped_budget"
    assert final["summary"]["n"] == n
    assert final["summary"]["not_scored"] == 28 - n
    # Every worker reports the run as it ended, and records that: not a snapshot taken while the
    # other's last item was still in flight (then stored after the report).
    assert [(r["status"], r["summary"]["n"], r["summary"]["not_scored"]) for r in runs] == [
        ("stopped_budget", n, 28 - n)
    ] * 2
    store = open_store(postgres_url)
    try:
        run = store.get_run("budgeted")
        assert run is not None
        assert (run.summary.overall.n, run.summary.not_scored) == (n, 28 - n)
    finally:
        store.close()


def test_what_a_stopped_or_killed_worker_scored_is_written_back_once_by_a_later_one(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    spans = sw.put_copies(postgres_url, 2)
    everything = {s.trace_id for s in spans}
    with sw.langfuse() as (langfuse, env):
        args = ("--run", "written", "--lease", "2", "--concurrency", "1", "--write-back", "langfuse")
        # Ctrl-C: the worker stops (its stored items stand, its claims go back) before writing back.
        stopped = sw.start_worker(postgres_url, judge, *args, env=env)
        sw.wait_stored(postgres_url, "written", stopped, 2)
        stopped.send_signal(signal.SIGINT)
        assert stopped.wait(timeout=60) == 130
        # kill -9: the worker never writes back.
        killed = sw.start_worker(postgres_url, judge, *args, env=env)
        sw.wait_stored(postgres_url, "written", killed, 2)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        left = (
            sw.held_by(postgres_url, "written", stopped.pid)[0]
            + sw.held_by(postgres_url, "written", killed.pid)[0]
        )
        assert left >= 4
        last = sw.finish(sw.start_worker(postgres_url, judge, *args, env=env))
    assert last["status"] == "complete"
    assert len(last["items"]) == len(everything) - left
    # Every item of the run is written back — the stopped and the killed worker's too — each once.
    assert {s["traceId"] for s in langfuse.scores} == everything
    posted = [r for r in langfuse.requests if r.method == "POST" and r.path.endswith("/scores")]
    assert len(posted) == len(langfuse.scores)
    (report,) = last["write_back"]
    assert report["written"] == len(langfuse.scores)
    assert report["failed"] == []
    # A worker started after that finds nothing left to score or to write back.
    late = sw.finish(sw.start_worker(postgres_url, judge, *args, env=env))
    assert late["items"] == []
    assert late["write_back"][0]["written"] == 0


def test_sigterm_stops_a_worker_as_ctrl_c_does_and_a_rerun_resumes(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    # What Kubernetes, systemd and `timeout` send: the worker died on it at once (143, no word), and
    # the items it had claimed waited out their lease before another worker could take them.
    spans = sw.put_copies(postgres_url, 2)
    args = ("--run", "termed", "--concurrency", "2", "--lease", "300")
    worker = sw.start_worker(postgres_url, judge, *args)
    sw.wait_stored(postgres_url, "termed", worker, 2)
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=60)
    assert worker.returncode == 143, err[-2000:]
    assert "run the command again to resume" in err
    done, claimed = sw.held_by(postgres_url, "termed", worker.pid)
    assert done >= 2
    assert claimed == 0  # its claims went back at once, not after the 300 s lease
    rerun = sw.finish(sw.start_worker(postgres_url, judge, *args))
    assert rerun["status"] == "complete"
    assert len(rerun["items"]) == 28 - done
    assert sorted(sw.stored_ids(postgres_url, "termed")) == sorted({s.trace_id for s in spans})


def test_sqlite_refuses_a_second_worker_on_a_run(tmp_path: Path, judge: ScriptedOpenAIServer) -> None:  # noqa: F811
    url = f"sqlite:///{tmp_path}/s.db"
    sw.put_copies(url, 2)
    first = sw.start_worker(url, judge, "--run", "solo", "--concurrency", "1")
    try:
        deadline = time.monotonic() + 120
        while True:
            store = open_store(url)
            try:
                started = bool(list(store.iter_score_items("solo")))
            finally:
                store.close()
            if started:
                break
            assert time.monotonic() < deadline, "the first worker did not start"
            assert first.poll() is None, first.communicate()[1][-2000:]
            time.sleep(0.05)
        result = CliRunner().invoke(
            cli,
            [
                "--store",
                url,
                "score",
                "--rubric",
                str(sw.EXAMPLE / "rubric.yaml"),
                "--run",
                "solo",
            ],
        )
        assert result.exit_code == 2, result.output
        assert "PostgreSQL" in result.output
        assert "another worker" in result.output
    finally:
        first.kill()
        first.wait(timeout=30)


def test_a_worker_with_another_budget_rubric_or_manifest_is_refused_before_any_judge_call(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The budget is the run's: a worker started with another budget, or none, was let in and
    checked the run's spend against its own — alone (the others done or killed) it scored past the
    budget the run was recorded with (the trial: --budget-usd 0.01 recorded, 0.089 spent)."""
    sw.put_copies(postgres_url, 1)
    first = sw.finish(sw.start_worker(postgres_url, judge, "--run", "cfg", "--budget-usd", "1"))
    assert (first["status"], first["summary"]["n"]) == ("complete", 14)
    calls = len(judge.requests)
    other_rubric = tmp_path / "rubric.yaml"
    other_rubric.write_text(
        (sw.EXAMPLE / "rubric.yaml").read_text("utf-8").replace("threshold: 7", "threshold: 8"), "utf-8"
    )
    refusals = [
        ((), "run cfg was started with --budget-usd 1; this worker has no budget"),
        (("--budget-usd", "2"), "this worker has --budget-usd 2"),
        (
            ("--budget-usd", "1", "--budget-tokens", "5000"),
            "this worker has --budget-usd 1 --budget-tokens 5000",
        ),
        (
            ("--budget-usd", "1", "--rubric", str(other_rubric)),
            "was started with rubric restaurant-assistant",
        ),
    ]
    other_manifest = tmp_path / "manifest.jsonl"
    other_manifest.write_text(
        "".join((sw.EXAMPLE / "manifest.jsonl").read_text("utf-8").splitlines(keepends=True)[1:]), "utf-8"
    )
    # Without the manifest (or with another) the permission check of its items is decided otherwise:
    # the run's summary mixed the trial's worker without --manifest (all indeterminate) with the others.
    manifests = [
        (None, "was started with the index manifest sha256"),
        (other_manifest, "this worker has the index manifest sha256"),
    ]
    for manifest, said in manifests:
        proc = sw.start_worker(postgres_url, judge, "--run", "cfg", "--budget-usd", "1", manifest=manifest)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, (manifest, err[-2000:])
        assert said in err, err
        assert "same --manifest file" in err
    for extra, said in refusals:
        proc = sw.start_worker(postgres_url, judge, "--run", "cfg", *extra)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, (extra, err[-2000:])
        assert said in err, err
        assert "give --run a new name" in err
        assert out == ""
    assert len(judge.requests) == calls  # refused before any judge call
    again = sw.finish(sw.start_worker(postgres_url, judge, "--run", "cfg", "--budget-usd", "1"))
    assert (again["status"], again["summary"], again["items"]) == ("complete", first["summary"], [])


def test_a_worker_with_another_selection_is_refused_and_a_relative_from_started_later_is_not(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    """The first worker's selection is the run's items: a worker started with another --from, --sample,
    --limit or none was let in without a word and scored the run's items, not the ones it asked for. The
    same relative --from (3650d), read as each worker starts, is the same selection."""
    sw.put_copies(postgres_url, 2)
    args = ("--run", "sel", "--from", "3650d", "--sample", "0.5")
    first = sw.finish(sw.start_worker(postgres_url, judge, *args))
    assert first["status"] == "complete"
    assert 0 < first["summary"]["n"] < 28
    calls = len(judge.requests)
    refusals = [
        (("--from", "7300d", "--sample", "0.5"), "this worker has --from "),
        (("--from", "3650d"), "--sample 0.5; this worker has --from "),
        (("--from", "3650d", "--sample", "0.6"), "--sample 0.6"),
        (("--sample", "0.5"), "this worker has --sample 0.5"),
        (("--from", "3650d", "--sample", "0.5", "--limit", "5"), "--sample 0.5 --limit 5"),
        ((), "this worker has no selection (every stored trace)"),
    ]
    for extra, said in refusals:
        proc = sw.start_worker(postgres_url, judge, "--run", "sel", *extra)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, (extra, err[-2000:])
        assert "run sel was started with --from " in err, err
        assert said in err, err
        assert "the first worker's selection is the run's" in err
        assert out == ""
    assert len(judge.requests) == calls  # refused before any judge call
    again = sw.finish(sw.start_worker(postgres_url, judge, *args))
    assert (again["status"], again["summary"], again["items"]) == ("complete", first["summary"], [])
