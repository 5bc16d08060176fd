"""The Langfuse collector against the local, spec-validated Langfuse server, in both API generations."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import Fault, LangfuseServer, synthetic_trace
from tracejudge.write import LangfuseApiError
from tracejudge_collectors.langfuse import (
    PullOptions,
    detect,
    pull_langfuse,
    refresh_scores,
    stored_scores,
)
from tracejudge_collectors.langfuse._convert import synthetic_root_id

BASE = datetime(2026, 3, 1, tzinfo=UTC)


def seed(server: LangfuseServer, n: int, **kwargs: Any) -> list[dict[str, Any]]:
    traces = [synthetic_trace(i, **kwargs) for i in range(n)]
    for t in traces:
        server.add_trace(t)
    return traces


def stored_counts(store: SqliteStore) -> dict[str, int]:
    return {t.trace_id: t.span_count for t in store.list_traces()}


def detail_requests(server: LangfuseServer) -> list[str]:
    out = []
    for r in server.requests:
        if r.path == "/v2/observations" and r.param("traceId"):
            out.append(str(r.param("traceId")))
        elif r.path.startswith("/traces/"):
            out.append(r.path.removeprefix("/traces/"))
    return out


def test_detects_the_api_generation(server, api_for):
    d = detect(api_for(server))
    assert d.generation == ("v4" if server.generation == "v4" else "legacy")
    assert d.server_version == server.version
    assert d.scores_path == ("/v3/scores" if server.generation == "v4" else "/v2/scores")


def test_v3_server_with_v3_scores_is_still_legacy(api_for):
    srv = LangfuseServer(generation="v3", scores_v3=True).start()
    try:
        d = detect(api_for(srv))
        assert (d.generation, d.scores_path) == ("legacy", "/v3/scores")
    finally:
        srv.stop()


def test_pulls_every_trace_with_its_observations(server, api_for, store):
    traces = seed(server, 12)
    server.add_score(
        {
            "traceId": traces[3]["id"],
            "name": "user-feedback",
            "value": 0,
            "dataType": "BOOLEAN",
            "source": "ANNOTATION",
        }
    )
    report = pull_langfuse(store, api_for(server))
    assert (report.listed, report.fetched, report.skipped) == (12, 12, 0)
    assert report.spans_new == 48
    assert stored_counts(store) == {t["id"]: 4 for t in traces}

    spans = {s.name: s for s in store.get_spans(traces[3]["id"])}
    root, retriever, gen = spans["rag-answer"], spans["vector-search"], spans["answer"]
    assert all(s.source == "langfuse" for s in spans.values())
    assert root.parent_span_id is None
    assert retriever.parent_span_id == root.span_id
    assert root.attributes["langfuse.observation.type"] == "AGENT"
    assert root.attributes["langfuse.trace.name"] == "rag-answer"
    assert root.attributes["langfuse.trace.tags"] == ["prod"]
    assert root.attributes["langfuse.environment"] == "production"
    assert root.attributes["user.id"] == "user-3"
    assert root.attributes["session.id"] == "session-3"
    assert json.loads(root.attributes["langfuse.trace.input"]) == traces[3]["input"]
    assert root.attributes["langfuse.trace.output"] == traces[3]["output"]
    assert retriever.attributes["langfuse.observation.type"] == "RETRIEVER"
    docs = json.loads(retriever.attributes["langfuse.observation.output"])
    assert docs[0]["metadata"] == {"doc_id": "C-17/attachment", "version": "v2"}
    assert retriever.attributes["langfuse.observation.metadata"]["top_k"] == 2
    assert gen.attributes["langfuse.observation.type"] == "GENERATION"
    assert gen.attributes["langfuse.observation.model.name"] == "gpt-4.1-mini"
    assert gen.attributes["langfuse.observation.usage_details"] == {"input": 120, "output": 12, "total": 132}
    assert gen.attributes["langfuse.observation.prompt.name"] == "procurement-agent"
    assert gen.attributes["langfuse.observation.prompt.version"] == 12
    messages = json.loads(gen.attributes["langfuse.observation.input"])
    assert messages[1]["role"] == "user"
    assert gen.start_time_unix_nano == int(BASE.timestamp()) * 10**9 + 3_100_000_000
    assert gen.end_time_unix_nano - gen.start_time_unix_nano == 700 * 10**6
    (score,) = root.attributes["langfuse.scores"]
    assert (score["name"], score["value"], score["source"]) == ("user-feedback", False, "ANNOTATION")
    assert (stored_scores(store, traces[3]["id"]) or [{}])[0]["name"] == "user-feedback"
    assert server.request_errors == []


def test_list_pages_are_followed(server, api_for, store):
    traces = seed(server, 23)
    report = pull_langfuse(store, api_for(server), PullOptions(list_page_size=5))
    assert report.fetched == 23
    assert set(stored_counts(store)) == {t["id"] for t in traces}
    listing = [
        r
        for r in server.requests
        if (r.path == "/v2/observations" and r.param("isRootObservation")) or r.path == "/traces"
    ]
    assert len(listing) == 5
    assert all(r.param("limit") == "5" for r in listing)


def test_observation_pages_within_a_trace_are_followed(api_for, store):
    srv = LangfuseServer(generation="v4").start()
    try:
        t = synthetic_trace(0)
        t["observations"] += [
            {
                "id": f"extra{i:011d}",
                "type": "EVENT",
                "name": f"e{i}",
                "parentObservationId": t["observations"][0]["id"],
                "startTime": "2026-03-01T00:00:00.500Z",
            }
            for i in range(9)
        ]
        srv.add_trace(t)
        report = pull_langfuse(store, api_for(srv), PullOptions(detail_page_size=4))
        assert report.spans_new == 13
        assert len([r for r in srv.requests if r.param("traceId")]) >= 4
    finally:
        srv.stop()
        assert srv.response_errors == []


def test_filters(server, api_for, store):
    seed(server, 6)
    other = synthetic_trace(50, name="other-agent", tags=("prod", "beta"), environment="staging")
    server.add_trace(other)
    late = synthetic_trace(200)
    server.add_trace(late)

    api = api_for(server)
    assert pull_langfuse(store, api, PullOptions(name="other-agent")).fetched == 1
    assert set(stored_counts(store)) == {other["id"]}

    assert pull_langfuse(store, api, PullOptions(tags=("beta", "prod"))).fetched == 0  # already stored
    assert pull_langfuse(store, api, PullOptions(tags=("beta", "nope"))).listed == 0
    assert pull_langfuse(store, api, PullOptions(environments=("staging",))).listed == 1

    window = PullOptions(from_time=BASE + timedelta(seconds=2), to_time=BASE + timedelta(seconds=5))
    report = pull_langfuse(store, api, window)
    assert report.fetched == 3  # traces 2, 3, 4
    assert late["id"] not in stored_counts(store)


def test_second_run_fetches_nothing_and_a_new_trace_only_itself(server, api_for, store):
    seed(server, 10)
    api = api_for(server)
    first = pull_langfuse(store, api)
    assert first.fetched == 10
    server.clear_requests()

    second = pull_langfuse(store, api)
    assert (second.fetched, second.spans_new) == (0, 0)
    assert detail_requests(server) == []

    new = synthetic_trace(10)
    server.add_trace(new)
    server.clear_requests()
    third = pull_langfuse(store, api)
    assert (third.fetched, third.spans_new) == (1, 4)
    assert detail_requests(server) == [new["id"]]
    assert len(stored_counts(store)) == 11


def test_watermark_lists_only_from_the_last_trace_minus_lag(api_for, store):
    srv = LangfuseServer(generation="v3").start()
    try:
        seed(srv, 5, spacing=timedelta(hours=1))
        api = api_for(srv)
        pull_langfuse(store, api)
        srv.clear_requests()
        pull_langfuse(store, api)
        (listing,) = [r for r in srv.requests if r.path == "/traces"]
        assert listing.param("fromTimestamp") == "2026-03-01T03:50:00.000Z"  # trace 4 at 04:00, minus 10 min
        # Covered from the beginning: an explicit earlier --from changes nothing.
        assert pull_langfuse(store, api, PullOptions(from_time=BASE - timedelta(days=1))).listed == 1
    finally:
        srv.stop()


def test_an_earlier_from_than_the_covered_window_lists_it_again(api_for, tmp_path):
    srv = LangfuseServer(generation="v4").start()
    st = SqliteStore(tmp_path / "w.db")
    try:
        seed(srv, 5, spacing=timedelta(hours=1))
        api = api_for(srv)
        assert pull_langfuse(st, api, PullOptions(from_time=BASE + timedelta(hours=2))).fetched == 3
        report = pull_langfuse(st, api, PullOptions(from_time=BASE - timedelta(days=1)))
        assert (report.listed, report.fetched, report.skipped) == (5, 2, 3)
    finally:
        st.close()
        srv.stop()


def test_limit_stops_early_and_the_next_run_continues(server, api_for, store):
    traces = seed(server, 9)
    api = api_for(server)
    first = pull_langfuse(store, api, PullOptions(limit=4))
    assert (first.fetched, first.complete) == (4, False)
    assert first.watermark is None
    second = pull_langfuse(store, api)
    assert (second.fetched, second.skipped, second.complete) == (5, 4, True)
    assert stored_counts(store) == {t["id"]: 4 for t in traces}


def test_rate_limits_honour_retry_after(server, api_for, store, sleep):
    seed(server, 4)
    server.inject(Fault("429", path="observations|traces", after=2, times=2, retry_after=7))
    report = pull_langfuse(store, api_for(server))
    assert report.fetched == 4
    # Two fetches in flight may both get a 429: the second waits for the first's wait and answer
    # (the client's pause) instead of sleeping 7 s of its own.
    assert sleep.calls.count(7.0) in (1, 2)
    assert report.retries == 2
    assert [r.status for r in server.requests].count(429) == 2


def test_server_errors_drops_and_slow_pages_are_retried(server, api_for, store, sleep):
    traces = seed(server, 6)
    server.inject(
        Fault("500", path="observations|traces", after=1, times=2),
        Fault("drop", path="observations|traces", after=3, times=2),
        Fault("slow", path="observations|traces", after=5, times=1, delay=0.2),
    )
    report = pull_langfuse(store, api_for(server))
    assert report.fetched == 6
    assert report.retries == 4
    assert len(sleep.calls) == 4
    assert [r.status for r in server.requests].count(500) == 2
    assert [r.status for r in server.requests].count(0) == 2  # dropped
    assert stored_counts(store) == {t["id"]: 4 for t in traces}


def test_persistent_failure_raises_keeps_what_was_stored_and_a_rerun_completes(server, api_for, store):
    traces = seed(server, 8)
    server.inject(Fault("500", path="observations|traces/", after=4, times=None))
    api = api_for(server, max_retries=2)
    with pytest.raises(LangfuseApiError) as err:
        pull_langfuse(store, api, PullOptions(concurrency=1))
    assert err.value.status == 500
    partial = stored_counts(store)
    assert 0 < len(partial) < 8
    assert all(n == 4 for n in partial.values())
    server.faults.clear()
    report = pull_langfuse(store, api)
    assert report.fetched == 8 - len(partial)
    assert stored_counts(store) == {t["id"]: 4 for t in traces}


def test_interrupted_pull_resumes_without_duplicates(server, api_for, store):
    traces = seed(server, 15)
    api = api_for(server)

    class Crash(Exception):
        pass

    seen = []

    def crash_after_six(trace_id: str, fetched: bool) -> None:
        seen.append(trace_id)
        if len(seen) == 6:
            raise Crash

    with pytest.raises(Crash):
        pull_langfuse(store, api, PullOptions(concurrency=3), on_trace=crash_after_six)
    assert len(stored_counts(store)) >= 6
    server.clear_requests()
    report = pull_langfuse(store, api)
    assert report.fetched + report.skipped == 15
    assert report.skipped >= 6
    assert stored_counts(store) == {t["id"]: 4 for t in traces}
    assert len(set(detail_requests(server))) == len(detail_requests(server)) == report.fetched


def test_legacy_trace_without_a_single_root_gets_a_synthetic_root(api_for, store):
    srv = LangfuseServer(generation="v3").start()
    try:
        srv.add_trace(
            {
                "id": "Trace-ABC",
                "name": "two-roots",
                "timestamp": "2026-03-01T00:00:00Z",
                "input": {"q": "hi"},
                "output": "bye",
                "userId": "u1",
                "observations": [
                    {
                        "id": "OBS-1",
                        "type": "RETRIEVER",
                        "startTime": "2026-03-01T00:00:01Z",
                        "endTime": "2026-03-01T00:00:02Z",
                    },
                    {
                        "id": "OBS-2",
                        "type": "GENERATION",
                        "startTime": "2026-03-01T00:00:03Z",
                        "endTime": "2026-03-01T00:00:04Z",
                        "level": "ERROR",
                        "statusMessage": "boom",
                    },
                ],
            }
        )
        pull_langfuse(store, api_for(srv))
        spans = {s.span_id: s for s in store.get_spans("trace-abc")}
        root_id = synthetic_root_id("trace-abc")
        assert set(spans) == {root_id, "obs-1", "obs-2"}
        root = spans[root_id]
        assert root.attributes["langfuse.synthetic_root"] is True
        assert root.attributes["langfuse.trace.input"] == '{"q": "hi"}'
        assert root.attributes["langfuse.trace.id"] == "Trace-ABC"
        assert root.end_time_unix_nano > root.start_time_unix_nano
        assert spans["obs-1"].parent_span_id == spans["obs-2"].parent_span_id == root_id
        assert spans["obs-2"].status_code == 2
        assert spans["obs-2"].attributes["langfuse.observation.status_message"] == "boom"
        assert spans["obs-1"].attributes["langfuse.observation.id"] == "OBS-1"
    finally:
        srv.stop()
        assert srv.response_errors == []


def test_long_metadata_of_other_conventions_is_not_truncated(api_for, store):
    srv = LangfuseServer(generation="v4").start()
    try:
        t = synthetic_trace(0)
        long_docs = [{"document.content": "x" * 500}]
        t["observations"][1]["metadata"] = {
            "attributes": {"retrieval.documents": long_docs},
            "note": "y" * 300,
        }
        srv.add_trace(t)
        pull_langfuse(store, api_for(srv))
        (retriever,) = [s for s in store.get_spans(t["id"]) if s.name == "vector-search"]
        meta = retriever.attributes["langfuse.observation.metadata"]
        assert meta["attributes"] == {"retrieval.documents": long_docs}
        assert len(meta["note"]) == 200  # the server cuts keys that were not asked for
    finally:
        srv.stop()


def test_scores_given_after_the_pull_arrive_with_a_refresh(server, api_for, store):
    traces = seed(server, 4)
    api = api_for(server)
    server.add_score({"traceId": traces[0]["id"], "name": "user-feedback", "value": 1, "dataType": "NUMERIC"})
    pull_langfuse(store, api)
    queue = server.add_annotation_queue("wrong answers")
    # Reviewers work the queue after the pull; one trace is not pulled at all.
    late = synthetic_trace(9)
    server.add_trace(late)
    for trace, value in ((traces[1], 0), (traces[2], 1), (late, 0)):
        server.add_score(
            {
                "traceId": trace["id"],
                "name": "correct",
                "value": value,
                "dataType": "BOOLEAN",
                "source": "ANNOTATION",
                "queueId": queue,
                "authorUserId": "reviewer-7",
                "comment": "v2 caps it at 30,000" if value == 0 else None,
            }
        )
    server.add_score({"traceId": traces[3]["id"], "name": "correct", "value": 0, "dataType": "BOOLEAN"})
    # A pull does not fetch a stored trace again, so it cannot see them.
    pull_langfuse(store, api, PullOptions(to_time=BASE + timedelta(seconds=5)))
    assert [s["name"] for s in stored_scores(store, traces[1]["id"]) or []] == []

    report = refresh_scores(store, api, queue=queue)
    assert (report.seen, report.traces_updated, report.not_pulled) == (3, 2, 1)
    (kept,) = stored_scores(store, traces[1]["id"]) or []
    assert kept["name"] == "correct"
    assert kept["value"] is False
    assert kept["queue_id"] == queue
    assert kept["author_user_id"] == "reviewer-7"
    assert kept["comment"] == "v2 caps it at 30,000"
    assert stored_scores(store, traces[3]["id"]) == []  # not from the queue
    # Scores already kept stay; a second refresh changes nothing.
    assert [s["name"] for s in stored_scores(store, traces[0]["id"]) or []] == ["user-feedback"]
    assert refresh_scores(store, api, queue=queue).traces_updated == 0

    by_name = refresh_scores(store, api, name="correct")
    assert (by_name.seen, by_name.traces_updated) == (4, 1)
    assert [s["value"] for s in stored_scores(store, traces[3]["id"]) or []] == [False]
    assert server.request_errors == []


def test_legacy_listing_reports_the_deprecation_notice(api_for, store):
    srv = LangfuseServer(generation="v3").start()
    try:
        seed(srv, 2)
        report = pull_langfuse(store, api_for(srv))
        assert report.fetched == 2
        assert any("deprecated" in w and "2026-11-16" in w for w in report.warnings)
        assert len(report.warnings) == len(set(report.warnings))
    finally:
        srv.stop()


def test_every_observation_type_becomes_a_step_of_the_task_record(server, api_for, store):
    from tracejudge.normalize import normalize

    t = synthetic_trace(0)
    root = t["observations"][0]["id"]

    def obs(oid: str, kind: str, name: str, ms: int, **extra: Any) -> dict[str, Any]:
        start = BASE + timedelta(milliseconds=ms)
        return {
            "id": oid,
            "type": kind,
            "name": name,
            "parentObservationId": root,
            "startTime": start.isoformat(),
            "endTime": (start + timedelta(milliseconds=3)).isoformat(),
            **extra,
        }

    t["observations"] += [
        obs("c0000000000000a1", "CHAIN", "build-context", 90, input="raw text", output={"k": 1}),
        obs("c0000000000000a2", "EMBEDDING", "embed", 5, model="text-embedding-3-small", input="q"),
        obs("c0000000000000a3", "EVENT", "user-click", 850),
        obs("c0000000000000a4", "GUARDRAIL", "pii-check", 860, level="ERROR", statusMessage="blocked"),
        obs("c0000000000000a5", "EVALUATOR", "self-check", 870),
    ]
    server.add_trace(t)
    assert pull_langfuse(store, api_for(server)).spans_new == 9
    task = normalize(store.get_spans(t["id"]))
    steps = {s.name: (s.step, s.status) for s in task.spans}
    assert steps == {
        "rag-answer": ("agent", "unset"),
        "vector-search": ("retrieval", "unset"),
        "answer": ("model", "unset"),
        "lookup_contract": ("tool", "unset"),
        "build-context": ("chain", "unset"),
        "embed": ("embedding", "unset"),
        "user-click": ("other", "unset"),
        "pii-check": ("guardrail", "error"),
        "self-check": ("other", "unset"),
    }
    (retrieval,) = task.retrievals
    assert [d.doc_id for d in retrieval.documents] == ["C-17/attachment", "C-17/attachment"]
    (call,) = task.model_calls
    assert (call.model, call.prompt, call.usage["total"]) == ("gpt-4.1-mini", "procurement-agent@12", 132)
    assert [(c.name, c.arguments) for c in task.tool_calls] == [("lookup_contract", {"contract": "C-17"})]
    assert task.final_answer == "The prepayment cap is 30,000 RMB."
    assert task.input == "What is the prepayment cap of contract C-17? (#0)"
