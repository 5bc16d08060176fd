"""The Langfuse writer against the local, spec-validated server: upserts, failures, retries, datasets."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from tracejudge import InputError
from tracejudge.schema import Evidence, Localization, StageResult
from tracejudge.testing.langfuse_server import Fault, LangfuseServer, synthetic_trace
from tracejudge.write import (
    TRIAGE_SCORE_NAME,
    DatasetItemRecord,
    LangfuseApi,
    LangfuseCredentials,
    LangfuseWriter,
    RecordingWriter,
    ScoreRecord,
    WriteReport,
    write_triage,
)

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


@pytest.fixture(params=["v4", "v3"])
def server(request):
    srv = LangfuseServer(generation=request.param).start()
    srv.add_trace(synthetic_trace(0))
    yield srv
    srv.stop()
    assert srv.response_errors == []


def creds_for(srv: LangfuseServer) -> LangfuseCredentials:
    return LangfuseCredentials.model_validate(
        {"base_url": srv.base_url, "public_key": srv.public_key, "secret_key": srv.secret_key}
    )


def writer_for(
    srv: LangfuseServer, sleeps: list[float] | None = None, *, concurrency: int = 8
) -> LangfuseWriter:
    return LangfuseWriter(
        LangfuseApi(creds_for(srv), sleep=(sleeps if sleeps is not None else []).append, backoff=0.01),
        concurrency=concurrency,
    )


def scores(trace_id: str, obs_id: str, *, timestamp: datetime | None = T0) -> list[ScoreRecord]:
    common = {
        "trace_id": trace_id,
        "rubric_name": "answer-correctness",
        "rubric_version": 3,
        "judge_model": "gpt-4.1-mini",
        "prompt_hash": "sha256:abc",
        "temperature": 0.0,
        "timestamp": timestamp,
    }
    return [
        ScoreRecord(name="correctness", value=8.5, data_type="NUMERIC", comment="cites v2", **common),
        ScoreRecord(name="no_submit", value=True, data_type="BOOLEAN", observation_id=obs_id, **common),
        ScoreRecord(name="verdict", value="pass", data_type="CATEGORICAL", **common),
    ]


def test_write_then_write_again_keeps_one_score_each(server):
    trace = synthetic_trace(0)
    obs_id = trace["observations"][2]["id"]
    with writer_for(server) as w:
        first = w.write_scores(scores(trace["id"], obs_id))
        assert (first.written, first.ok) == (3, True)
        assert len(server.scores) == 3
        second = w.write_scores(scores(trace["id"], obs_id))
    assert second.ids == first.ids
    assert len(server.scores) == 3
    by_name = {s["name"]: s for s in server.scores}
    assert by_name["correctness"]["value"] == 8.5
    assert by_name["correctness"]["comment"] == "cites v2"
    assert by_name["no_submit"]["value"] == 1
    assert by_name["no_submit"]["dataType"] == "BOOLEAN"
    assert by_name["no_submit"]["observationId"] == obs_id
    assert by_name["verdict"]["value"] == "pass"
    assert by_name["verdict"]["dataType"] == "CATEGORICAL"
    meta = by_name["correctness"]["metadata"]
    assert meta["rubric"] == "answer-correctness"
    assert meta["rubric_version"] == "3"
    assert meta["judge_model"] == "gpt-4.1-mini"
    assert meta["prompt_hash"] == "sha256:abc"
    assert meta["temperature"] == 0.0
    assert "tracejudge_version" in meta
    assert by_name["correctness"]["timestamp"] == "2026-03-01T09:30:00.000Z"
    assert server.request_errors == []


def test_a_new_rubric_version_is_a_new_score():
    a = ScoreRecord(trace_id="t", name="c", value=1.0, data_type="NUMERIC", rubric_version=3)
    assert a.score_id == a.model_copy().score_id
    assert a.score_id != a.model_copy(update={"rubric_version": 4}).score_id
    assert a.score_id != a.model_copy(update={"observation_id": "o"}).score_id


def test_without_a_timestamp_a_rewrite_reuses_the_stored_one(server):
    trace_id = synthetic_trace(0)["id"]
    record = [ScoreRecord(trace_id=trace_id, name="c", value=1.0, data_type="NUMERIC")]
    with writer_for(server) as w:
        w.write_scores(record)
        stamp = server.scores[0]["timestamp"]
        w.write_scores(record)
    assert len(server.scores) == 1
    assert server.scores[0]["timestamp"] == stamp


def test_failures_are_reported_per_item(server):
    trace_id = synthetic_trace(0)["id"]
    good = ScoreRecord(trace_id=trace_id, name="ok", value=1.0, data_type="NUMERIC", timestamp=T0)
    bad_value = ScoreRecord(trace_id=trace_id, name="bad", value="", data_type="CATEGORICAL", timestamp=T0)
    bad_bool = ScoreRecord(trace_id=trace_id, name="bad2", value=0.5, data_type="BOOLEAN", timestamp=T0)
    creds = LangfuseCredentials.model_validate(
        {"base_url": server.base_url, "public_key": server.public_key, "secret_key": server.secret_key}
    )
    rejected_env = LangfuseWriter(LangfuseApi(creds, sleep=lambda s: None), environment="Langfuse-Prod")
    with writer_for(server) as w:
        report = w.write_scores([good, bad_value, bad_bool])
    assert report.written == 1
    assert [f.key for f in report.failed] == [bad_value.score_id, bad_bool.score_id]
    with rejected_env:
        report = rejected_env.write_scores([good])
    assert report.written == 0
    (failure,) = report.failed
    assert failure.status == 400
    assert "environment" in failure.reason
    assert server.secret_key not in failure.reason


def test_writes_retry_on_rate_limits_and_resets(server):
    sleeps: list[float] = []
    server.inject(
        Fault("429", path="^/scores$", method="POST", retry_after=3),
        Fault("drop", path="^/scores$", method="POST", after=1),
    )
    trace = synthetic_trace(0)
    with writer_for(server, sleeps) as w:
        report = w.write_scores(scores(trace["id"], trace["observations"][1]["id"]))
    assert report.written == 3
    # The three are in flight together: the 429's wait is one of the two, not always the first.
    assert sleeps.count(3.0) == 1
    assert len(sleeps) == 2
    assert len(server.scores) == 3


def many_scores(n: int) -> list[ScoreRecord]:
    """``n`` scores on the stand-in's trace: every third without a timestamp (so it is looked up)."""
    trace = synthetic_trace(0)
    obs_ids = [o["id"] for o in trace["observations"]]
    return [
        ScoreRecord(
            trace_id=trace["id"],
            observation_id=obs_ids[i % len(obs_ids)] if i % 2 else None,
            name=f"criterion-{i}",
            value=float(i % 10),
            data_type="NUMERIC",
            comment=f"reason {i}",
            rubric_name="answer-correctness",
            rubric_version=3,
            timestamp=None if i % 3 == 0 else T0,
        )
        for i in range(n)
    ]


def posted(srv: LangfuseServer) -> dict[str, dict[str, Any]]:
    """The score bodies POSTed, by id, a looked-up timestamp left out (it is the time of writing)."""
    out = {}
    for r in srv.requests:
        if (r.method, r.path) == ("POST", "/scores") and r.status == 200:
            body = dict(r.body)
            if body["timestamp"] != "2026-03-01T09:30:00.000Z":
                body.pop("timestamp")
            out[body["id"]] = body
    return out


def test_concurrent_writes_send_and_report_what_one_after_another_does(server):
    records = many_scores(40)
    other = LangfuseServer(generation=server.generation).start()
    try:
        with writer_for(other, concurrency=1) as w:
            serial = w.write_scores(records)
        with writer_for(server) as w:
            concurrent = w.write_scores(records)
            stamps = {s["id"]: s["timestamp"] for s in server.scores}
            server.clear_requests()
            again = w.write_scores(records)
        assert posted(server) == posted(other)
        assert other.response_errors == []
    finally:
        other.stop()
    assert concurrent == serial == again
    assert concurrent.ids == tuple(r.score_id for r in records)
    # The rerun replaced each score: the looked-up ones kept the timestamp they were stored with.
    assert len(server.scores) == 40
    assert {s["id"]: s["timestamp"] for s in server.scores} == stamps
    assert server.request_errors == []


def test_scores_are_written_several_at_once():
    srv = LangfuseServer().start()
    in_flight = threading.Barrier(4, timeout=30)

    class Gated(LangfuseApi):
        def post(self, path: str, body: Any) -> Any:
            # The first four posts wait for one another: written one after another, the first
            # would wait alone and the barrier would break.
            if body["name"] in {"criterion-1", "criterion-2", "criterion-4", "criterion-5"}:
                in_flight.wait()
            return super().post(path, body)

    try:
        with LangfuseWriter(Gated(creds_for(srv)), concurrency=4) as w:
            report = w.write_scores([r for r in many_scores(12) if r.timestamp is not None])
    finally:
        srv.stop()
    assert report.written == 8
    assert not in_flight.broken


def test_an_interrupted_batch_stops_starting_scores():
    srv = LangfuseServer(record=False, validate=False).start()
    posted_names: list[str] = []

    class Interrupted(LangfuseApi):
        def post(self, path: str, body: Any) -> Any:
            posted_names.append(body["name"])
            if body["name"] == "criterion-1":
                raise KeyboardInterrupt
            return super().post(path, body)

    records = [r for r in many_scores(450) if r.timestamp is not None]
    try:
        with (
            LangfuseWriter(Interrupted(creds_for(srv)), concurrency=2) as w,
            pytest.raises(KeyboardInterrupt),
        ):
            w.write_scores(records)
    finally:
        srv.stop()
    # Ctrl-C reaches the caller and the scores not yet started stay unwritten, not all 300 sent
    # (each is a round trip; only the one other in flight, and what starts before the cancel, go on).
    assert len(posted_names) < 100


def test_the_scores_route_is_probed_once_for_a_batch():
    srv = LangfuseServer(generation="v3").start()  # no /v3/scores: the probe answers 404
    try:
        with writer_for(srv) as w:
            report = w.write_scores([r for r in many_scores(60) if r.timestamp is None])
    finally:
        srv.stop()
    assert report.written == 20
    gets = [r.path for r in srv.requests if r.method == "GET"]
    assert gets.count("/v3/scores") == 1
    assert gets.count("/v2/scores") == 20
    assert srv.response_errors == []


def test_a_rate_limit_mid_batch_is_honoured(server):
    sleeps: list[float] = []
    server.inject(Fault("429", path="^/scores$", method="POST", retry_after=2, after=10, times=3))
    records = many_scores(30)
    with writer_for(server, sleeps) as w:
        report = w.write_scores(records)
    assert report == WriteReport(target="langfuse", written=30, ids=tuple(r.score_id for r in records))
    # The 429s met by scores in flight while another's wait runs wait for that one, not 2 s each.
    assert sleeps in ([2.0], [2.0, 2.0], [2.0, 2.0, 2.0])
    rejected = [r for r in server.requests if r.path == "/scores" and r.status == 429]
    assert len(rejected) == 3
    assert w.api.retries == 3
    # Each rate-limited score was sent again and stored.
    assert len(server.scores) == 30


def test_a_failed_score_loses_none_of_the_others(server):
    records = many_scores(30)
    bad = ScoreRecord(trace_id="t", name="bad", value="", data_type="CATEGORICAL", timestamp=T0)
    records.insert(7, bad)
    # The fifth POST is refused (a 400 is not retried), whichever score it carries.
    server.inject(Fault("echo", path="^/scores$", method="POST", status=400, after=4))
    with writer_for(server) as w:
        report = w.write_scores(records)
    refused = next(r for r in server.requests if r.path == "/scores" and r.status == 400)
    failing = {bad.score_id: None, refused.body["id"]: 400}
    # Failures in input order, each with its status, as one after another reports them.
    assert [(f.key, f.status) for f in report.failed] == [
        (r.score_id, failing[r.score_id]) for r in records if r.score_id in failing
    ]
    assert report.written == 29
    assert report.ids == tuple(
        r.score_id for r in records if r.score_id not in {bad.score_id, refused.body["id"]}
    )
    assert len(server.scores) == 29
    assert server.secret_key not in "".join(f.reason for f in report.failed)


def test_dataset_items_upsert_on_deterministic_ids(server):
    trace = synthetic_trace(0)
    items = [
        DatasetItemRecord(
            key="rs-7f3c2a",
            input={"messages": [{"role": "user", "content": "cap?"}]},
            expected_output={"behavior": "cite v2"},
            source_trace_id=trace["id"],
            source_observation_id=trace["observations"][2]["id"],
        ),
        DatasetItemRecord(key="rs-000001", input={"q": "x"}, source_trace_id=trace["id"]),
    ]
    with writer_for(server) as w:
        first = w.write_dataset_items("regressions", items)
        second = w.write_dataset_items("regressions", items)
    assert first.ok
    assert second.ids == first.ids
    assert set(server.datasets) == {"regressions"}
    stored = {i["id"]: i for i in server.dataset_items}
    assert len(stored) == 2
    one = stored[items[0].item_id("regressions")]
    assert one["sourceTraceId"] == trace["id"]
    assert one["sourceObservationId"] == trace["observations"][2]["id"]
    assert one["expectedOutput"] == {"behavior": "cite v2"}
    assert items[0].item_id("regressions") != items[0].item_id("other")


def many_items(n: int) -> list[DatasetItemRecord]:
    trace = synthetic_trace(0)
    return [
        DatasetItemRecord(key=f"rs-{i:06d}", input={"q": f"question {i}"}, source_trace_id=trace["id"])
        for i in range(n)
    ]


def test_dataset_items_are_written_several_at_once():
    srv = LangfuseServer().start()
    in_flight = threading.Barrier(4, timeout=30)

    class Gated(LangfuseApi):
        def post(self, path: str, body: Any) -> Any:
            # The first four items wait for one another: written one after another, the first
            # would wait alone and the barrier would break.
            if path == "/dataset-items" and body["metadata"]["key"] in {f"rs-{i:06d}" for i in range(4)}:
                in_flight.wait()
            return super().post(path, body)

    try:
        with LangfuseWriter(Gated(creds_for(srv)), concurrency=4) as w:
            report = w.write_dataset_items("regressions", many_items(12))
    finally:
        srv.stop()
    assert report.written == 12
    assert not in_flight.broken
    assert len(srv.dataset_items) == 12


def test_concurrent_dataset_items_report_what_one_after_another_does(server):
    items = many_items(30)
    # The ninth item POSTed is refused (a 400 is not retried), whichever item it carries.
    server.inject(Fault("echo", path="^/dataset-items$", method="POST", status=400, after=8))
    with writer_for(server) as w:
        report = w.write_dataset_items("regressions", items)
    refused = next(r for r in server.requests if r.path == "/dataset-items" and r.status == 400)
    bad_key = refused.body["metadata"]["key"]
    # Ids in input order, the failure with its key and status, as one after another reports them.
    assert report.ids == tuple(i.item_id("regressions") for i in items if i.key != bad_key)
    assert [(f.key, f.status) for f in report.failed] == [(bad_key, 400)]
    assert len(server.dataset_items) == 29
    other = LangfuseServer(generation=server.generation).start()
    try:
        with writer_for(other, concurrency=1) as w:
            serial = w.write_dataset_items("regressions", items)
        bodies = {r.body["id"]: r.body for r in other.requests if r.path == "/dataset-items"}
    finally:
        other.stop()
    assert serial.ids == tuple(i.item_id("regressions") for i in items)
    # The same bodies, whichever way they were sent.
    assert {r.body["id"]: r.body for r in server.requests if r.path == "/dataset-items"} == bodies


def localization(trace_id: str, verdict: str = "dropped_in_context") -> Localization:
    return Localization(
        ticket="EXP-311",
        trace_id=trace_id,
        task_time=T0,
        verdict=verdict,  # type: ignore[arg-type]
        summary="the clause was retrieved but not in the model input",
        stages=(
            StageResult(
                name="indexed",
                status="pass",
                detail="retrieved",
                evidence=(Evidence(span_id="abc", note="doc C-17 v2"),),
            ),
            StageResult(name="retrieved", status="pass"),
            StageResult(name="in_context", status="fail", detail="clause not in model input"),
            StageResult(name="used_by_model", status="skipped"),
        ),
    )


def test_write_triage_to_a_recording_writer():
    rec = RecordingWriter()
    report = write_triage("langfuse", [localization("t1"), localization("t2", "no_fault")], writer=rec)
    assert report.written == 2
    by_trace = {s.trace_id: s for s in rec.scores.values()}
    s = by_trace["t1"]
    assert (s.name, s.value, s.data_type, s.timestamp) == (
        TRIAGE_SCORE_NAME,
        "dropped_in_context",
        "CATEGORICAL",
        T0,
    )
    assert "in_context: fail — clause not in model input" in (s.comment or "")
    assert "[span abc]: doc C-17 v2" in (s.comment or "")
    assert by_trace["t2"].value == "no_fault"


def test_write_triage_rejects_unknown_targets():
    with pytest.raises(InputError) as err:
        write_triage("phoenixx", [localization("t1")], writer=RecordingWriter())
    assert "phoenixx" in str(err.value)
    assert "langfuse" in str(err.value)


def test_write_triage_to_langfuse_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("LANGFUSE_BASE_URL", server.base_url)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", server.public_key)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", server.secret_key)
    trace_id = synthetic_trace(0)["id"]
    for _ in range(2):
        report = write_triage("langfuse", [localization(trace_id)])
        assert report.written == 1
    (score,) = server.scores
    assert (score["name"], score["value"], score["dataType"], score["traceId"]) == (
        TRIAGE_SCORE_NAME,
        "dropped_in_context",
        "CATEGORICAL",
        trace_id,
    )
    assert "clause not in model input" in score["comment"]
    assert score["metadata"]["ticket"] == "EXP-311"


def test_recording_writer_replaces_like_the_backend():
    rec = RecordingWriter()
    record = ScoreRecord(trace_id="t", name="c", value=1.0, data_type="NUMERIC")
    rec.write_scores([record, record])
    rec.write_dataset_items("d", [DatasetItemRecord(key="k")])
    rec.write_dataset_items("d", [DatasetItemRecord(key="k")])
    assert len(rec.scores) == 1
    assert len(rec.items) == 1
    assert rec.calls == ["write_scores", "write_dataset_items", "write_dataset_items"]


def test_credentials_hide_the_secret():
    creds = LangfuseCredentials.from_env(
        {
            "LANGFUSE_HOST": "http://127.0.0.1:1/",
            "LANGFUSE_PUBLIC_KEY": "pk",
            "LANGFUSE_SECRET_KEY": "sk-hidden-42",
        }
    )
    assert creds.base_url == "http://127.0.0.1:1"
    assert "sk-hidden-42" not in repr(creds)
    assert "sk-hidden-42" not in creds.model_dump_json()
    with pytest.raises(InputError):
        LangfuseCredentials.from_env(
            {
                "LANGFUSE_BASE_URL": "cloud.langfuse.com",
                "LANGFUSE_PUBLIC_KEY": "p",
                "LANGFUSE_SECRET_KEY": "s",
            }
        )
