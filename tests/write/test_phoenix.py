"""The Phoenix writer against the local, spec-validated server: annotation shape, upserts, per-item
failures, retries; write-back targets for triage and score."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tracejudge import InputError
from tracejudge.schema import Localization, StageResult
from tracejudge.testing.phoenix_server import Fault, PhoenixServer, synthetic_spans
from tracejudge.write import (
    TARGETS,
    TRIAGE_SCORE_NAME,
    PhoenixApi,
    PhoenixCredentials,
    PhoenixWriter,
    ScoreRecord,
    annotation_for,
    open_dataset_writer,
    write_triage,
)

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
TRACE = synthetic_spans(0)[0]["trace_id"]
LLM_SPAN = synthetic_spans(0)[2]["span_id"]
KEY = "phx-secret-4f1c"


@pytest.fixture
def server():
    srv = PhoenixServer(api_key=KEY).start()
    for span in synthetic_spans(0):
        srv.add_span("default", span)
    yield srv
    srv.stop()
    assert srv.response_errors == []
    assert srv.request_errors == []


def writer_for(srv: PhoenixServer, **kwargs) -> PhoenixWriter:
    creds = PhoenixCredentials.from_env({"PHOENIX_COLLECTOR_ENDPOINT": srv.base_url, "PHOENIX_API_KEY": KEY})
    sleeps: list[float] = []
    return PhoenixWriter(PhoenixApi(creds, sleep=sleeps.append, backoff=0.01, **kwargs))


def records(version: int = 3, score: float = 8.0) -> list[ScoreRecord]:
    common = {"trace_id": TRACE, "rubric_name": "answer-correctness", "rubric_version": version}
    return [
        ScoreRecord(
            **common,
            observation_id=LLM_SPAN,
            name="answer-correctness.correctness",
            value=score,
            data_type="NUMERIC",
            comment="grounded in C-17 v2",
            judge_model="gpt-4.1-mini",
            prompt_hash="sha256:abc",
            temperature=0.0,
            metadata={"decided_by": "judge", "verdict": "pass" if score >= 7 else "fail"},
        ),
        ScoreRecord(
            **common,
            observation_id=LLM_SPAN,
            name="answer-correctness.states_cap",
            value="pass",
            data_type="CATEGORICAL",
            metadata={"decided_by": "check:states_cap", "verdict": "pass"},
        ),
        ScoreRecord(**common, name="answer-correctness.verdict", value="pass", data_type="CATEGORICAL"),
    ]


def test_annotation_shape_kind_and_identifier():
    judged, checked, overall = records()
    kind, body = annotation_for(judged)
    assert kind == "span"
    assert body["span_id"] == LLM_SPAN
    assert body["annotator_kind"] == "LLM"
    assert body["identifier"] == "tracejudge:answer-correctness.correctness:3"
    assert body["result"] == {"score": 8.0, "label": "pass", "explanation": "grounded in C-17 v2"}
    meta = body["metadata"]
    assert (meta["judge_model"], meta["prompt_hash"], meta["rubric_version"]) == (
        "gpt-4.1-mini",
        "sha256:abc",
        "3",
    )
    assert meta["score_id"] == judged.score_id
    assert annotation_for(checked)[1]["annotator_kind"] == "CODE"
    kind, body = annotation_for(overall)
    assert kind == "trace"
    assert body["trace_id"] == TRACE
    assert body["annotator_kind"] == "CODE"
    assert body["result"] == {"label": "pass"}
    boolean = ScoreRecord(trace_id=TRACE, name="b", value=False, data_type="BOOLEAN")
    assert annotation_for(boolean)[1]["result"] == {"score": 0.0, "label": "false"}
    with pytest.raises(ValueError, match="needs a number"):
        annotation_for(ScoreRecord(trace_id=TRACE, name="n", value="high", data_type="NUMERIC"))
    with pytest.raises(ValueError, match="reserved"):
        annotation_for(ScoreRecord(trace_id=TRACE, name="note", value="x", data_type="CATEGORICAL"))


def test_writing_again_updates_in_place_and_versions_stay_apart(server):
    with writer_for(server) as w:
        first = w.write_scores(records())
        second = w.write_scores(records(score=4.0))
        assert first.ok
        assert second.ok
        assert first.written == 3
        assert first.ids == second.ids
        assert len(server.span_annotations) == 2
        assert len(server.trace_annotations) == 1
        correctness = next(a for a in server.span_annotations if a["name"].endswith("correctness"))
        assert correctness["result"]["score"] == 4.0
        assert correctness["result"]["label"] == "fail"
        w.write_scores(records(version=4))
    assert len(server.span_annotations) == 4
    assert len(server.trace_annotations) == 2


def test_only_the_items_phoenix_cannot_take_fail(server):
    good = records()
    unknown_span = good[0].model_copy(update={"observation_id": "00000000000000ab", "name": "x.y"})
    unknown_trace = good[2].model_copy(update={"trace_id": "f" * 32})
    bad_value = ScoreRecord(trace_id=TRACE, name="n", value="high", data_type="NUMERIC")
    with writer_for(server) as w:
        report = w.write_scores([*good, unknown_span, unknown_trace, bad_value])
    assert report.written == 3
    failed = {f.key: f for f in report.failed}
    assert set(failed) == {unknown_span.score_id, unknown_trace.score_id, bad_value.score_id}
    assert failed[unknown_span.score_id].status == 404
    assert "00000000000000ab" in failed[unknown_span.score_id].reason
    assert failed[bad_value.score_id].status is None
    server.request_errors.clear()


def test_rate_limits_and_server_errors_are_retried(server):
    server.inject(
        Fault("429", path="span_annotations", retry_after=3), Fault("500", path="trace_annotations")
    )
    with writer_for(server) as w:
        report = w.write_scores(records())
        assert report.ok
        assert w.api.retries == 2
        assert w.api.waits[0] == 3.0
    server.inject(Fault("500", path="span_annotations", times=None))
    with writer_for(server, max_retries=1) as w:
        report = w.write_scores(records()[:2])
    assert report.written == 0
    assert [f.status for f in report.failed] == [500, 500]


def test_phoenix_takes_no_dataset_items(server, monkeypatch):
    # Phoenix dataset uploads are not idempotent per item: the registry offers no dataset writer, so
    # a push to Phoenix is refused before anything is sent, naming where datasets can go.
    monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", server.base_url)
    assert not hasattr(PhoenixWriter, "write_dataset_items")
    assert not TARGETS["phoenix"].writes("datasets")
    with pytest.raises(InputError, match="phoenix does not take datasets") as info:
        open_dataset_writer("phoenix")
    assert "langfuse" in str(info.value)
    assert server.requests == []


def test_credentials_from_env_and_the_key_never_shows():
    creds = PhoenixCredentials.from_env(
        {"PHOENIX_COLLECTOR_ENDPOINT": "http://127.0.0.1:6006/v1/traces", "PHOENIX_API_KEY": KEY}
    )
    assert creds.base_url == "http://127.0.0.1:6006"
    assert KEY not in repr(creds)
    assert KEY not in creds.model_dump_json()
    assert PhoenixCredentials.from_env({"PHOENIX_BASE_URL": "http://h:1/"}).api_key is None
    with pytest.raises(InputError, match="PHOENIX_COLLECTOR_ENDPOINT"):
        PhoenixCredentials.from_env({})
    with pytest.raises(InputError, match="http"):
        PhoenixCredentials.from_env({"PHOENIX_COLLECTOR_ENDPOINT": "127.0.0.1:6006"})


def test_a_wrong_key_is_refused_without_echoing_it(server):
    creds = PhoenixCredentials.from_env(
        {"PHOENIX_COLLECTOR_ENDPOINT": server.base_url, "PHOENIX_API_KEY": "wrong-key-9"}
    )
    with PhoenixWriter(PhoenixApi(creds)) as w:
        report = w.write_scores(records()[:1])
    (failure,) = report.failed
    assert failure.status == 401
    assert "wrong-key-9" not in failure.reason


def test_triage_write_back_target_is_a_code_trace_annotation(server, monkeypatch):
    monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", server.base_url)
    monkeypatch.setenv("PHOENIX_API_KEY", KEY)
    result = Localization(
        trace_id=TRACE,
        task_time=T0,
        verdict="dropped_in_context",
        ticket="EXP-311",
        stages=(StageResult(name="in_context", status="fail", detail="clause missing"),),
    )
    for _ in range(2):
        report = write_triage("phoenix", [result])
        assert report.ok
        assert report.written == 1
    (a,) = server.trace_annotations
    assert (a["name"], a["annotator_kind"], a["trace_id"]) == (TRIAGE_SCORE_NAME, "CODE", TRACE)
    assert a["result"]["label"] == "dropped_in_context"
    assert "clause missing" in a["result"]["explanation"]
    assert a["metadata"]["ticket"] == "EXP-311"
