"""Runs: provenance on every stored score, series, cache, deterministic sampling, budget, write-back."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tracejudge.judge import parse_rubric
from tracejudge.runs import (
    ScoreOptions,
    evaluation_events,
    in_sample,
    run_json,
    score_records,
    score_run,
    select_trace_ids,
    write_back,
)
from tracejudge.schema import ItemResult, RawSpan, Rubric, TaskRecord, ToolCall
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge.write import RecordingEvaluationWriter, RecordingWriter

RUBRIC = """\
name: support
version: {version}
judge: {{model: {model}, temperature: 0, base_url: "{url}", max_retries: 0,
         input_cost_per_mtok: 1000000, output_cost_per_mtok: 0}}
criteria:
  - {{name: helpful, description: "Helps the customer.", threshold: 7}}
  - {{name: accuracy, description: "Agrees with the tool results.", threshold: 7}}
checks:
  - {{name: total, type: number, near: total, expected_from: {{tool: compute_total, path: result.total}},
     criterion: accuracy}}
"""
REPLY = {"criteria": {"helpful": {"reasoning": "clear", "score": 8}}, "reasoning": "ok"}


def task(i: int, total: float = 10.0, said: float = 10.0) -> TaskRecord:
    return TaskRecord(
        trace_id=f"{i:032x}",
        input=f"order number {i}",
        final_answer=f"Your total is ${said:.2f}.",
        final_answer_span_id=f"{i:016x}",
        tool_calls=(ToolCall(span_id="t", name="compute_total", result={"total": total}),),
    )


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer([Rule(reply=REPLY)]) as s:
        yield s


def rubric(server: ScriptedOpenAIServer, version: int = 1, model: str = "judge-a") -> Rubric:
    return parse_rubric(RUBRIC.format(version=version, model=model, url=server.base_url))


def test_check_decides_criterion_and_judge_is_not_asked(server: ScriptedOpenAIServer) -> None:
    store = SqliteStore(":memory:")
    run = score_run(rubric(server), store, [task(1), task(2, total=12.0)])
    items = {i.trace_id: i for i in store.iter_score_items(run.run_id)}
    ok, bad = items[f"{1:032x}"], items[f"{2:032x}"]
    assert ok.verdict == "pass"
    assert ok.criteria["accuracy"].decided_by == "check:total"
    assert bad.verdict == "fail"
    assert bad.criteria["accuracy"].verdict == "fail"
    for body in server.completion_requests():
        system = body["messages"][0]["content"]
        assert "- helpful:" in system
        assert "- accuracy:" not in system
        assert list(
            body["response_format"]["json_schema"]["schema"]["properties"]["criteria"]["required"]
        ) == ["helpful"]


def test_provenance_on_every_stored_score(server: ScriptedOpenAIServer) -> None:
    store = SqliteStore(":memory:")
    run = score_run(rubric(server), store, [task(i) for i in range(3)])
    stored = store.get_run(run.run_id)
    assert stored is not None
    assert stored.status == "complete"
    p = stored.provenance
    assert (p.rubric_name, p.rubric_version, p.judge_model, p.temperature) == ("support", "1", "judge-a", 0.0)
    assert len(p.prompt_hash) == 64
    assert p.tracejudge_version
    assert p.judge_base_url is not None
    assert p.judge_base_url.startswith("http://127.0.0.1:")
    items = list(store.iter_score_items(run.run_id))
    assert len(items) == 3
    for item in items:
        assert item.run_id == run.run_id
        assert all(len(r.prompt_hash) == 64 for r in item.replies)
        assert item.replies[0].raw is not None
    out = run_json(stored, items)
    assert out["rubric"] == {"name": "support", "version": "1"}
    assert out["summary"]["n"] == 3
    assert out["summary"]["pass_rate"] == 1.0
    assert set(out["items"][0]["criteria"]["helpful"]) >= {"score", "reasoning", "verdict"}
    assert out["items"][0]["checks"]["total"]["verdict"] == "pass"


def test_rerun_is_a_new_linked_run_and_changes_start_new_series(server: ScriptedOpenAIServer) -> None:
    store = SqliteStore(":memory:")
    first = score_run(rubric(server), store, [task(1)])
    again = score_run(rubric(server), store, [task(1)])
    assert again.run_id != first.run_id
    assert again.series == first.series
    assert again.previous_run_id == first.run_id
    assert store.get_run(first.run_id) == first
    bumped = score_run(rubric(server, version=2), store, [task(1)])
    other_judge = score_run(rubric(server, model="judge-b"), store, [task(1)])
    assert len({first.series, bumped.series, other_judge.series}) == 3
    assert bumped.previous_run_id is None
    assert other_judge.previous_run_id is None
    assert len(store.list_runs()) == 4


def test_cache_hit_makes_no_model_calls(server: ScriptedOpenAIServer) -> None:
    store = SqliteStore(":memory:")
    tasks = [task(i) for i in range(5)]
    first = score_run(rubric(server), store, tasks)
    calls = len(server.completion_requests())
    assert calls == 5
    second = score_run(rubric(server), store, tasks)
    assert len(server.completion_requests()) == calls
    assert second.summary.cache_hits == 5
    assert second.summary.judge_calls == 0
    assert second.summary.overall.pass_ == first.summary.overall.pass_
    # A changed judge model is a different cache key.
    score_run(rubric(server, model="judge-b"), store, tasks)
    assert len(server.completion_requests()) == calls + 5
    # And --no-cache asks again.
    score_run(rubric(server), store, tasks, options=ScoreOptions(use_cache=False))
    assert len(server.completion_requests()) == calls + 10


def test_a_run_interrupted_mid_way_resumes_from_the_cache_without_duplicates(
    server: ScriptedOpenAIServer,
) -> None:
    store = SqliteStore(":memory:")
    tasks = [task(i) for i in range(6)]
    seen: list[str] = []

    def crash_after_three(item: Any) -> None:
        seen.append(item.trace_id)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        score_run(
            rubric(server), store, tasks, options=ScoreOptions(concurrency=1), on_item=crash_after_three
        )
    (broken,) = store.list_runs()
    assert broken.status == "interrupted"
    assert broken.summary.overall.n == 3
    assert len(server.completion_requests()) == 3
    # The rerun is a new run: the three judged items come from the cache, only the rest are asked.
    again = score_run(rubric(server), store, tasks)
    assert len(server.completion_requests()) == 6
    assert (again.summary.cache_hits, again.summary.judge_calls) == (3, 3)
    ids = [i.trace_id for i in store.iter_score_items(again.run_id)]
    assert sorted(ids) == sorted(t.trace_id for t in tasks)
    assert len(list(store.iter_score_items(broken.run_id))) == 3


def test_transport_failures_are_not_cached(server: ScriptedOpenAIServer) -> None:
    store = SqliteStore(":memory:")
    server.set_rules([Rule(status=500, times=1), Rule(reply=REPLY)])
    first = score_run(rubric(server), store, [task(1)])
    assert first.summary.overall.indeterminate == 1
    second = score_run(rubric(server), store, [task(1)])
    assert second.summary.overall.pass_ == 1
    assert second.summary.cache_hits == 0


def _spans(trace_id: str) -> list[RawSpan]:
    return [RawSpan(trace_id=trace_id, span_id="1" * 16, name="agent", attributes={"input.value": "hi"})]


def test_sample_is_deterministic_and_shared_across_rubrics() -> None:
    ids = [f"{i:032x}" for i in range(2000)]
    a = [t for t in ids if in_sample(t, 0.05)]
    assert 60 <= len(a) <= 140
    assert a == [t for t in ids if in_sample(t, 0.05)]
    wider = {t for t in ids if in_sample(t, 0.10)}
    assert set(a) <= wider
    store = SqliteStore(":memory:")
    for t in ids[:300]:
        store.put_spans(_spans(t))
    picked = list(select_trace_ids(store, sample=0.05))
    assert picked == [t for t in sorted(ids[:300]) if in_sample(t, 0.05)]
    assert list(select_trace_ids(store, sample=0.05, limit=3)) == picked[:3]
    assert list(select_trace_ids(store, trace_ids=[ids[5].upper(), ids[5]])) == [ids[5]]


def test_runs_score_the_same_sampled_traces_for_two_rubrics(server: ScriptedOpenAIServer) -> None:
    store = SqliteStore(":memory:")
    for i in range(200):
        store.put_spans(_spans(f"{i:032x}"))
    r1 = score_run(rubric(server), store, select_trace_ids(store, sample=0.1))
    r2 = score_run(rubric(server, version=9), store, select_trace_ids(store, sample=0.1))
    ids1 = [i.trace_id for i in store.iter_score_items(r1.run_id)]
    ids2 = [i.trace_id for i in store.iter_score_items(r2.run_id)]
    assert ids1 == ids2
    assert ids1


def test_budget_stops_the_run_cleanly(server: ScriptedOpenAIServer) -> None:
    store = SqliteStore(":memory:")
    # 1,000,000 USD per million prompt tokens: one USD per prompt token.
    tasks = [task(i) for i in range(40)]
    probe = score_run(rubric(server), SqliteStore(":memory:"), tasks[:1])
    per_item = probe.summary.cost_usd
    assert per_item > 0
    run = score_run(
        rubric(server), store, tasks, options=ScoreOptions(concurrency=2, budget_usd=per_item * 10.5)
    )
    assert run.status == "stopped_budget"
    scored = run.summary.overall.n
    assert 1 <= scored <= 11
    assert run.summary.not_scored == 40 - scored
    assert run.summary.cost_usd <= per_item * 12
    assert store.get_run(run.run_id) == run
    assert len(list(store.iter_score_items(run.run_id))) == scored


def test_budget_projection_counts_every_item_not_yet_finished() -> None:
    # The one projection both a local and a shared run check before launching an item: what is spent,
    # plus the mean per finished item for each item in flight and the one about to launch.
    from tracejudge.runs._run import projected_over_budget

    usd = ScoreOptions(budget_usd=1.75)
    # 4 items done for 1 USD: 0.25 each; 2 in flight and 1 new -> 1.75, not past the budget.
    assert not projected_over_budget(usd, usd=1.0, tokens=0, done=4, ahead=3)
    assert projected_over_budget(usd, usd=1.0, tokens=0, done=4, ahead=4)
    tokens = ScoreOptions(budget_tokens=1000)
    assert projected_over_budget(tokens, usd=0.0, tokens=800, done=2, ahead=1)
    assert not projected_over_budget(tokens, usd=0.0, tokens=600, done=2, ahead=1)
    # Nothing finished yet: nothing to project from, so only what is spent counts.
    assert not projected_over_budget(usd, usd=0.0, tokens=0, done=0, ahead=64)
    assert not projected_over_budget(ScoreOptions(), usd=1e9, tokens=10**9, done=1, ahead=1)


def test_unloadable_trace_is_indeterminate(server: ScriptedOpenAIServer) -> None:
    store = SqliteStore(":memory:")
    run = score_run(rubric(server), store, ["f" * 32])
    (item,) = store.iter_score_items(run.run_id)
    assert item.verdict == "indeterminate"
    assert "no spans stored" in item.reason


def test_write_back_langfuse_scores_and_otel_events(server: ScriptedOpenAIServer) -> None:
    store = SqliteStore(":memory:")
    run = score_run(rubric(server), store, [task(1), task(2, total=3)])
    items = list(store.iter_score_items(run.run_id))
    writer = RecordingWriter()
    report = write_back("langfuse", run, items, writer=writer)
    assert report.ok
    records = score_records(run, items)
    assert report.written == len(records) == 8
    by_name: dict[str, list[Any]] = {}
    for r in writer.scores.values():
        by_name.setdefault(r.name, []).append(r)
    assert set(by_name) == {"support.helpful", "support.accuracy", "support.total", "support.verdict"}
    # The hard check lands as a BOOLEAN per item: passed for task 1, failed for the wrong total.
    total = {r.trace_id: r for r in by_name["support.total"]}
    assert {r.data_type for r in total.values()} == {"BOOLEAN"}
    assert sorted(r.value for r in total.values()) == [False, True]
    helpful = by_name["support.helpful"][0]
    assert helpful.data_type == "NUMERIC"
    assert helpful.value == 8
    assert helpful.rubric_version == "1"
    assert helpful.judge_model == "judge-a"
    assert helpful.prompt_hash
    assert helpful.comment == "clear"
    assert {r.value for r in by_name["support.verdict"]} == {"pass", "fail"}
    # A rerun writes the same ids: replaced, not duplicated.
    again = score_run(rubric(server), store, [task(1), task(2, total=3)])
    write_back("langfuse", again, list(store.iter_score_items(again.run_id)), writer=writer)
    assert len(writer.scores) == 8
    ew = RecordingEvaluationWriter()
    write_back("otel", run, items, event_writer=ew)
    assert len(ew.events) == len(evaluation_events(run, items)) == 6
    ev = next(e for e in ew.events if e.name == "helpful")
    assert ev.span_id == items[0].span_id
    attrs = ev.otel_attributes()
    assert attrs["gen_ai.evaluation.score.value"] == 8.0
    assert attrs["gen_ai.evaluation.score.label"] == "pass"
    assert attrs["tracejudge.rubric.version"] == "1"
    json.dumps(attrs)


def test_results_are_written_in_batches_beside_the_calls_and_all_before_the_run_ends(
    server: ScriptedOpenAIServer,
) -> None:
    batches: list[int] = []

    class Counting(SqliteStore):
        def put_score_items(self, items: Any, *, cached_replies: Any) -> None:
            batches.append(len(items))
            time.sleep(0.05)  # a slow disk: what finishes meanwhile waits for the next batch
            super().put_score_items(items, cached_replies=cached_replies)

    store = Counting(":memory:")
    tasks = [task(i) for i in range(40)]
    run = score_run(rubric(server), store, tasks, options=ScoreOptions(concurrency=8))
    assert sorted(i.trace_id for i in store.iter_score_items(run.run_id)) == sorted(t.trace_id for t in tasks)
    assert sum(batches) == 40
    assert len(batches) < 40  # items that finish while a batch is written go in the next one
    # Every reply is cached: the same run again asks the judge nothing.
    again = score_run(rubric(server), store, tasks, options=ScoreOptions(concurrency=8))
    assert (again.summary.cache_hits, again.summary.judge_calls) == (40, 0)


def test_a_result_write_that_fails_fails_the_run(server: ScriptedOpenAIServer) -> None:
    from tracejudge import StoreError

    class Full(SqliteStore):
        def put_score_items(self, items: Any, *, cached_replies: Any) -> None:
            raise StoreError("the disk is full", hint="free some space")

    with pytest.raises(StoreError, match="disk is full"):
        score_run(rubric(server), Full(":memory:"), [task(i) for i in range(5)])


def test_a_reply_waiting_to_be_written_is_found_in_the_cache() -> None:
    import asyncio

    from tracejudge.runs._results import ResultWriter

    store = SqliteStore(":memory:")
    writer = ResultWriter(store)
    writer.put_cached_reply("k", '{"text": "a"}')
    writer.put_cached_reply("k", '{"text": "b"}')  # the first of a key is kept, as the store keeps it
    assert writer.get_cached_reply("k") == '{"text": "a"}'
    assert store.get_cached_reply("k") is None
    asyncio.run(writer.close())
    assert store.get_cached_reply("k") == '{"text": "a"}'


def _prefetch_over(ids: list[str], loads: list[str], *, depth: int, quiet_s: float, fail_at: str = "") -> Any:
    from tracejudge import StoreError
    from tracejudge.runs._prefetch import Prefetch

    def load(trace_id: str) -> TaskRecord | str:
        loads.append(trace_id)
        if trace_id == fail_at:
            raise StoreError("the store went away", hint="reconnect")
        return TaskRecord(trace_id=trace_id, input="q", final_answer="a")

    return Prefetch(iter(ids), load, depth=depth, quiet_s=quiet_s)


def _spin(prefetch: Any) -> Any:
    async def go() -> Any:
        ahead = asyncio.create_task(prefetch.run())
        first = prefetch.take()
        for _ in range(50):
            await asyncio.sleep(0)
        ahead.cancel()
        return first

    return asyncio.run(go())


def test_traces_are_loaded_ahead_up_to_the_depth_once_the_loop_is_quiet() -> None:
    ids = [f"{i:032x}" for i in range(10)]
    loads: list[str] = []
    prefetch = _prefetch_over(ids, loads, depth=3, quiet_s=0.0)
    first = _spin(prefetch)
    assert first[0] == ids[0]
    assert first[1].trace_id == ids[0]  # none ready yet: loaded by the taker
    assert loads == ids[:4]  # then three ahead, in order, and no more
    assert prefetch.left() == 9  # taken never: the three loaded ahead and the six not loaded


def test_nothing_is_loaded_ahead_while_workers_keep_taking() -> None:
    loads: list[str] = []
    prefetch = _prefetch_over([f"{i:032x}" for i in range(10)], loads, depth=3, quiet_s=60.0)
    _spin(prefetch)
    assert len(loads) == 1


def test_a_load_ahead_that_fails_fails_the_worker_that_takes_it() -> None:
    from tracejudge import StoreError

    ids = [f"{i:032x}" for i in range(5)]
    loads: list[str] = []
    prefetch = _prefetch_over(ids, loads, depth=4, quiet_s=0.0, fail_at=ids[2])
    _spin(prefetch)
    assert loads == ids[:3]

    async def rest() -> list[str]:
        return [prefetch.take()[0] for _ in range(1)]

    assert asyncio.run(rest()) == [ids[1]]  # what was loaded before the failure is still handed out
    with pytest.raises(StoreError, match="went away"):
        asyncio.run(rest())  # then the failure, not a run that silently skips a trace


def test_quiet_work_waits_for_a_moment_without_replies_and_the_rest_is_done_at_the_end() -> None:
    from tracejudge.runs._quiet import Quiet, QuietQueue

    done: list[int] = []

    async def go(quiet_s: float) -> list[int]:
        later = QuietQueue(done.append, Quiet(quiet_s))
        task = asyncio.create_task(later.run())
        later.add(1)
        later.add(2)
        for _ in range(50):
            await asyncio.sleep(0)
        seen = list(done)
        task.cancel()
        later.finish()
        return seen

    assert asyncio.run(go(60.0)) == []  # an item just finished: the loop is busy
    assert done == [1, 2]  # done when the run ends
    done.clear()
    assert asyncio.run(go(0.0)) == [1, 2]  # quiet: done as they come, in order


def test_a_result_batch_waits_for_a_quiet_loop() -> None:
    from tracejudge.runs._quiet import Quiet
    from tracejudge.runs._results import ResultWriter

    store = SqliteStore(":memory:")
    item = ItemResult(run_id="r", trace_id="t" * 32, verdict="pass", reason="", scored_at=datetime.now(UTC))

    async def go() -> int:
        quiet = Quiet(60.0)
        quiet.busy()
        writer = ResultWriter(store, quiet=quiet, wait_s=60.0)
        writer.add(item)
        for _ in range(50):
            await asyncio.sleep(0)
        written = len(list(store.iter_score_items("r")))
        writer.close_now()  # what an interrupted run does: written here and now
        return written

    assert asyncio.run(go()) == 0
    assert [i.trace_id for i in store.iter_score_items("r")] == ["t" * 32]


def test_a_result_batch_the_interruption_cut_and_what_was_queued_behind_it_are_written() -> None:
    """An interrupted run cancels its result writer's task while a batch is on its way to the store.
    Its write was dropped when no thread had taken it up yet (asyncio.to_thread cancelled with the
    task), and the cancellation was kept as a failed write, so close_now skipped what was queued behind
    the batch: items and judge replies lost (the flake of
    test_a_run_interrupted_mid_way_resumes_from_the_cache_without_duplicates: 2 of 15 runs)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tracejudge.runs._results import ResultWriter

    store = SqliteStore(":memory:")
    first, second = (
        ItemResult(run_id="r", trace_id=c * 32, verdict="pass", reason="", scored_at=datetime.now(UTC))
        for c in "ab"
    )
    busy = threading.Event()

    async def interrupted() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(1))
        blocker = loop.run_in_executor(None, busy.wait, 60)  # the one thread busy: the batch waits
        writer = ResultWriter(store)
        writer.add(first)
        for _ in range(10):
            await asyncio.sleep(0)  # the writer's task takes the batch and hands it on
        writer.put_cached_reply("k", '{"text": "a"}')
        writer.add(second)
        drain = writer._task
        assert drain is not None
        drain.cancel()  # what asyncio.run does to every task left when the run is interrupted
        busy.set()
        with pytest.raises(asyncio.CancelledError):
            await drain
        await blocker
        writer.close_now()  # the interrupted run's finally

    asyncio.run(interrupted())  # asyncio.run waits for the executor's calls
    assert sorted(i.trace_id for i in store.iter_score_items("r")) == ["a" * 32, "b" * 32]
    assert store.get_cached_reply("k") == '{"text": "a"}'


def test_workers_start_a_loop_turn_apart_so_a_call_goes_out_before_the_next_is_prepared(
    server: ScriptedOpenAIServer,
) -> None:
    # aiohttp writes a request from a task of its own, on the loop's next turn. Workers started in one
    # turn prepared every first call (each loading its trace) before any went out, so the calls went
    # and came back as one wave; started a turn apart, the first goes out before the last is prepared.
    from tracejudge.judge import Completion

    events: list[str] = []

    class SentNextTurn:
        async def complete(self, messages: Any, *, schema: Any) -> Completion:
            asyncio.get_running_loop().call_soon(events.append, "sent")
            await asyncio.sleep(0.01)
            return Completion(text=json.dumps(REPLY), model="fake", input_tokens=1, output_tokens=1)

        async def aclose(self) -> None:
            return None

    def load(trace_id: str) -> TaskRecord:
        events.append("load")
        return task(int(trace_id, 16))

    ids = [f"{i:032x}" for i in range(16)]
    run = score_run(
        rubric(server),
        SqliteStore(":memory:"),
        ids,
        client=SentNextTurn(),
        loader=load,
        options=ScoreOptions(concurrency=8),
    )
    assert run.summary.overall.n == 16
    assert events[: events.index("sent")].count("load") < 8
