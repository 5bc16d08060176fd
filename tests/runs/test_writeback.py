"""A run's scores carry their trace's start, stamped when each item is scored: Langfuse write-back sends
them with no lookup per score, and a rerun (another run, another day) sends the same time, so it
replaces the scores the first wrote instead of adding beside them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.judge.test_runs import REPLY, rubric
from tracejudge.runs import score_records, score_run, write_back
from tracejudge.schema import ItemResult, RunRecord, TaskRecord, ToolCall
from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge.write import LangfuseApi, LangfuseCredentials, LangfuseWriter

# Half a minute before midnight UTC: a time taken at writing, rather than the trace's, falls on another day.
START = datetime(2026, 11, 28, 23, 59, 30, tzinfo=UTC)


def task(i: int, start: datetime | None = START) -> TaskRecord:
    return TaskRecord(
        trace_id=f"{i:032x}",
        start_time=start,
        input=f"order number {i}",
        final_answer="Your total is $10.00.",
        final_answer_span_id=f"{i:016x}",
        tool_calls=(ToolCall(span_id="t", name="compute_total", result={"total": 10.0 + i % 2}),),
    )


@pytest.fixture
def judge() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer([Rule(reply=REPLY)]) as s:
        yield s


@pytest.fixture(params=["v4", "v3"])
def langfuse(request: pytest.FixtureRequest) -> Iterator[LangfuseServer]:
    with LangfuseServer(generation=request.param) as srv:
        yield srv
        assert srv.request_errors == []
        assert srv.response_errors == []


def scored(judge: ScriptedOpenAIServer, tasks: list[TaskRecord]) -> tuple[RunRecord, list[ItemResult]]:
    store = SqliteStore(":memory:")
    run = score_run(rubric(judge), store, tasks)
    return run, list(store.iter_score_items(run.run_id))


def writer(srv: LangfuseServer) -> LangfuseWriter:
    creds = LangfuseCredentials.model_validate(
        {"base_url": srv.base_url, "public_key": srv.public_key, "secret_key": srv.secret_key}
    )
    return LangfuseWriter(LangfuseApi(creds))


def test_items_carry_their_traces_start(judge: ScriptedOpenAIServer) -> None:
    run, items = scored(judge, [task(1), task(2, start=None)])
    stamps = {i.trace_id: i.task_time for i in items}
    assert stamps == {f"{1:032x}": START, f"{2:032x}": None}
    records = score_records(run, items)
    assert {(r.trace_id, r.timestamp) for r in records} == {(f"{1:032x}", START), (f"{2:032x}", None)}


def test_stamped_scores_are_written_without_a_lookup_and_a_rerun_replaces_them(
    judge: ScriptedOpenAIServer, langfuse: LangfuseServer
) -> None:
    tasks = [task(i) for i in range(6)]
    run, items = scored(judge, tasks)
    with writer(langfuse) as w:
        first = write_back("langfuse", run, items, writer=w)
    assert first.ok
    assert first.written == len(score_records(run, items)) == 24
    assert [r for r in langfuse.requests if r.method == "GET"] == []
    posts = [r.body for r in langfuse.requests if r.method == "POST"]
    assert {p["timestamp"] for p in posts} == {"2026-11-28T23:59:30.000Z"}
    stored = {s["id"]: s for s in langfuse.scores}
    # A rerun: another run of the same rubric over the same traces, its items scored later.
    rerun, again_items = scored(judge, tasks)
    assert rerun.run_id != run.run_id
    assert all(a.scored_at != b.scored_at for a, b in zip(items, again_items, strict=True))
    langfuse.clear_requests()
    with writer(langfuse) as w:
        again = write_back("langfuse", rerun, again_items, writer=w)
    assert again.ids == first.ids
    assert [r for r in langfuse.requests if r.method == "GET"] == []
    # Each score replaced, none added: the same ids, times and names as the first run's.
    assert len(langfuse.scores) == 24
    assert {s["id"]: (s["name"], s["timestamp"]) for s in langfuse.scores} == {
        k: (s["name"], s["timestamp"]) for k, s in stored.items()
    }
    assert {s["metadata"]["run_id"] for s in langfuse.scores} == {rerun.run_id}


def test_a_trace_without_a_start_is_looked_up_as_before(
    judge: ScriptedOpenAIServer, langfuse: LangfuseServer
) -> None:
    run, items = scored(judge, [task(1), task(2, start=None)])
    with writer(langfuse) as w:
        report = write_back("langfuse", run, items, writer=w)
    assert report.written == 8
    gets = [r for r in langfuse.requests if r.method == "GET" and r.path.endswith("/scores")]
    looked_up = {r.param("id") or r.param("scoreIds") for r in gets}
    # The unstamped trace's four scores are looked up (v3 also probes /v3/scores once, answered 404).
    unstamped = {r.score_id for r in score_records(run, items) if r.timestamp is None}
    assert len(unstamped) == 4
    assert looked_up == unstamped
