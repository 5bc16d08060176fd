"""``score --run NAME``: worker processes on one PostgreSQL share a run — each item scored once, the
work split, a SIGKILLed worker's items taken over, one budget for the run — and SQLite refuses a
second worker on a run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from tests.conftest import load_module
from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tracejudge.cli import cli
from tracejudge.schema import RawSpan
from tracejudge.store import open_store
from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "restaurant"
traces = load_module(EXAMPLE / "traces.py", "restaurant_traces")
COPIES = 6  # 14 example traces x 6 = 84 items, each copy a trace of its own


def _copies(n: int) -> list[RawSpan]:
    spans = list(traces.all_spans())
    out: list[RawSpan] = []
    for k in range(n):
        out.extend(s.model_copy(update={"trace_id": f"{k:02x}" + s.trace_id[2:]}) for s in spans)
    return out


def _put_copies(url: str, n: int) -> list[RawSpan]:
    """``_copies(n)``, stored in the store at ``url``."""
    spans = _copies(n)
    store = open_store(url)
    try:
        store.put_spans(spans)
    finally:
        store.close()
    return spans


@pytest.fixture
def judge() -> Iterator[ScriptedOpenAIServer]:
    # A slow judge, so workers overlap and a worker can be killed mid-run.
    rules = [
        Rule(reply=r["reply"], any_message=re.escape(r["match"]), delay=0.25) for r in traces.judge_rules()
    ]
    with ScriptedOpenAIServer(rules) as s:
        yield s


def _worker(
    store_url: str,
    judge: ScriptedOpenAIServer,
    *extra: str,
    env: dict[str, str] | None = None,
    manifest: Path | None = EXAMPLE / "manifest.jsonl",
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": judge.base_url,
        "OPENAI_API_KEY": "sk-test",
        "NO_PROXY": "127.0.0.1",
        **(env or {}),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracejudge",
            "--store",
            store_url,
            "score",
            "--rubric",
            str(EXAMPLE / "rubric.yaml"),
            *(("--manifest", str(manifest)) if manifest else ()),
            "--no-cache",
            "--json",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _held_by(url: str, run: str, pid: int) -> tuple[int, int]:
    """(items done, items claimed) by the worker in process ``pid`` (worker ids are host:pid:random)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT state, count(*) FROM run_queue WHERE run_id = %s AND worker LIKE %s GROUP BY state",
            (run, f"%:{pid}:%"),
        ).fetchall()
    counts = dict(rows)
    return int(counts.get("done", 0)), int(counts.get("claimed", 0))


def _stored(url: str, run: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT trace_id FROM score_items WHERE run_id = %s", (run,))]


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    data: dict[str, Any] = json.loads(out)
    return data


def test_three_workers_share_a_run_and_take_over_a_killed_ones_items(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,
) -> None:
    spans = _put_copies(postgres_url, COPIES)
    everything = sorted({s.trace_id for s in spans})
    args = ("--run", "nightly-1", "--lease", "2", "--concurrency", "2")
    workers = [_worker(postgres_url, judge, *args) for _ in range(3)]
    try:
        deadline = time.monotonic() + 120
        # Mid-run: every worker has stored an item (however slowly each started), and the first has
        # stored some and holds claimed ones it will never finish.
        while (
            any(_held_by(postgres_url, "nightly-1", w.pid)[0] == 0 for w in workers[1:])
            or (held := _held_by(postgres_url, "nightly-1", workers[0].pid))[0] < 2
            or held[1] == 0
        ):
            assert time.monotonic() < deadline, "the workers stored too few items"
            assert all(w.poll() is None for w in workers), "a worker ended early"
            time.sleep(0.02)
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(timeout=30)
        killed_done = _held_by(postgres_url, "nightly-1", workers[0].pid)[0]
        survivors = [_finish(w) for w in workers[1:]]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    stored = _stored(postgres_url, "nightly-1")
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
    late = _finish(_worker(postgres_url, judge, *args))
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
    judge: ScriptedOpenAIServer,
) -> None:
    _put_copies(postgres_url, 2)
    budget = 0.002  # about half the 28 items at the example judge's prices
    args = ("--run", "budgeted", "--concurrency", "2", "--budget-usd", str(budget))
    runs = [_finish(w) for w in [_worker(postgres_url, judge, *args) for _ in range(2)]]
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


def _stored_by(url: str, run: str, proc: subprocess.Popen[str], n: int) -> None:
    """Wait until the worker in ``proc`` has stored ``n`` items and holds more."""
    deadline = time.monotonic() + 120
    while (held := _held_by(url, run, proc.pid))[0] < n or held[1] == 0:
        assert time.monotonic() < deadline, "the worker stored too few items"
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.02)


def test_what_a_stopped_or_killed_worker_scored_is_written_back_once_by_a_later_one(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,
) -> None:
    spans = _put_copies(postgres_url, 2)
    everything = {s.trace_id for s in spans}
    langfuse = LangfuseServer(generation="v4").start()
    try:
        env = {
            "LANGFUSE_BASE_URL": langfuse.base_url,
            "LANGFUSE_PUBLIC_KEY": langfuse.public_key,
            "LANGFUSE_SECRET_KEY": langfuse.secret_key,
        }
        args = ("--run", "written", "--lease", "2", "--concurrency", "1", "--write-back", "langfuse")
        # Ctrl-C: the worker stops (its stored items stand, its claims go back) before writing back.
        stopped = _worker(postgres_url, judge, *args, env=env)
        _stored_by(postgres_url, "written", stopped, 2)
        stopped.send_signal(signal.SIGINT)
        assert stopped.wait(timeout=60) == 130
        # kill -9: the worker never writes back.
        killed = _worker(postgres_url, judge, *args, env=env)
        _stored_by(postgres_url, "written", killed, 2)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        left = (
            _held_by(postgres_url, "written", stopped.pid)[0]
            + _held_by(postgres_url, "written", killed.pid)[0]
        )
        assert left >= 4
        last = _finish(_worker(postgres_url, judge, *args, env=env))
    finally:
        langfuse.stop()
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
    late = _finish(_worker(postgres_url, judge, *args, env=env))
    assert late["items"] == []
    assert late["write_back"][0]["written"] == 0


def test_sigterm_stops_a_worker_as_ctrl_c_does_and_a_rerun_resumes(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,
) -> None:
    # What Kubernetes, systemd and `timeout` send: the worker died on it at once (143, no word), and
    # the items it had claimed waited out their lease before another worker could take them.
    spans = _put_copies(postgres_url, 2)
    args = ("--run", "termed", "--concurrency", "2", "--lease", "300")
    worker = _worker(postgres_url, judge, *args)
    _stored_by(postgres_url, "termed", worker, 2)
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=60)
    assert worker.returncode == 143, err[-2000:]
    assert "run the command again to resume" in err
    done, claimed = _held_by(postgres_url, "termed", worker.pid)
    assert done >= 2
    assert claimed == 0  # its claims went back at once, not after the 300 s lease
    rerun = _finish(_worker(postgres_url, judge, *args))
    assert rerun["status"] == "complete"
    assert len(rerun["items"]) == 28 - done
    assert sorted(_stored(postgres_url, "termed")) == sorted({s.trace_id for s in spans})


def test_sqlite_refuses_a_second_worker_on_a_run(tmp_path: Path, judge: ScriptedOpenAIServer) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    store = open_store(url)
    store.put_spans(_copies(2))
    store.close()
    first = _worker(url, judge, "--run", "solo", "--concurrency", "1")
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
                str(EXAMPLE / "rubric.yaml"),
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
    judge: ScriptedOpenAIServer,
    tmp_path: Path,
) -> None:
    """The budget is the run's: a worker started with another budget, or none, was let in and
    checked the run's spend against its own — alone (the others done or killed) it scored past the
    budget the run was recorded with (the trial: --budget-usd 0.01 recorded, 0.089 spent)."""
    store = open_store(postgres_url)
    store.put_spans(_copies(1))
    store.close()
    first = _finish(_worker(postgres_url, judge, "--run", "cfg", "--budget-usd", "1"))
    assert (first["status"], first["summary"]["n"]) == ("complete", 14)
    calls = len(judge.requests)
    other_rubric = tmp_path / "rubric.yaml"
    other_rubric.write_text(
        (EXAMPLE / "rubric.yaml").read_text("utf-8").replace("threshold: 7", "threshold: 8"), "utf-8"
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
        "".join((EXAMPLE / "manifest.jsonl").read_text("utf-8").splitlines(keepends=True)[1:]), "utf-8"
    )
    # Without the manifest (or with another) the permission check of its items is decided otherwise:
    # the run's summary mixed the trial's worker without --manifest (all indeterminate) with the others.
    manifests = [
        (None, "was started with the index manifest sha256"),
        (other_manifest, "this worker has the index manifest sha256"),
    ]
    for manifest, said in manifests:
        proc = _worker(postgres_url, judge, "--run", "cfg", "--budget-usd", "1", manifest=manifest)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, (manifest, err[-2000:])
        assert said in err, err
        assert "same --manifest file" in err
    for extra, said in refusals:
        proc = _worker(postgres_url, judge, "--run", "cfg", *extra)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, (extra, err[-2000:])
        assert said in err, err
        assert "give --run a new name" in err
        assert out == ""
    assert len(judge.requests) == calls  # refused before any judge call
    again = _finish(_worker(postgres_url, judge, "--run", "cfg", "--budget-usd", "1"))
    assert (again["status"], again["summary"], again["items"]) == ("complete", first["summary"], [])


def test_a_worker_with_another_selection_is_refused_and_a_relative_from_started_later_is_not(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,
) -> None:
    """The first worker's selection is the run's items: a worker started with another --from, --sample,
    --limit or none was let in without a word and scored the run's items, not the ones it asked for. The
    same relative --from (3650d), read as each worker starts, is the same selection."""
    store = open_store(postgres_url)
    store.put_spans(_copies(2))
    store.close()
    args = ("--run", "sel", "--from", "3650d", "--sample", "0.5")
    first = _finish(_worker(postgres_url, judge, *args))
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
        proc = _worker(postgres_url, judge, "--run", "sel", *extra)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, (extra, err[-2000:])
        assert "run sel was started with --from " in err, err
        assert said in err, err
        assert "the first worker's selection is the run's" in err
        assert out == ""
    assert len(judge.requests) == calls  # refused before any judge call
    again = _finish(_worker(postgres_url, judge, *args))
    assert (again["status"], again["summary"], again["items"]) == ("complete", first["summary"], [])
