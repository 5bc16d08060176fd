"""The local Langfuse server: spec validation both ways, auth, generations, paging, upserts, faults."""

from __future__ import annotations

import httpx
import pytest

from tracejudge.testing.langfuse_server import Fault, LangfuseServer, synthetic_trace


@pytest.fixture
def v4():
    srv = LangfuseServer(generation="v4").start()
    for i in range(7):
        srv.add_trace(synthetic_trace(i))
    yield srv
    srv.stop()


@pytest.fixture
def v3():
    srv = LangfuseServer(generation="v3").start()
    for i in range(7):
        srv.add_trace(synthetic_trace(i))
    yield srv
    srv.stop()


def client(srv: LangfuseServer, secret: str | None = None) -> httpx.Client:
    return httpx.Client(
        base_url=srv.base_url + "/api/public", auth=(srv.public_key, secret or srv.secret_key)
    )


def test_health_needs_no_auth_and_reads_need_the_right_keys(v4):
    assert httpx.get(v4.base_url + "/api/public/health").json() == {"version": "4.0.0", "status": "OK"}
    with client(v4, secret="sk-wrong") as c:
        assert c.get("/v2/observations").status_code == 401
    no_auth = httpx.get(v4.base_url + "/api/public/v2/observations")
    assert no_auth.status_code == 401


def test_requests_the_spec_rejects_get_400_and_are_recorded(v4):
    with client(v4) as c:
        r = c.post("/scores", json={"value": 1})
        assert r.status_code == 400
        assert "name" in r.json()["message"]
        assert c.get("/v2/observations", params={"limit": "many"}).status_code == 400
        assert c.get("/v2/observations", params={"limit": 1001}).status_code == 400
        assert (
            c.post("/scores", json=[{"name": "a", "value": 1}]).status_code == 400
        )  # arrays: not in the spec
    assert len(v4.request_errors) == 4
    assert v4.response_errors == []


def test_a_response_that_breaks_the_spec_is_caught(v4, monkeypatch):
    original = v4._render_v2

    def broken(o, groups, expand):
        out = original(o, groups, expand)
        del out["projectId"]
        return out

    monkeypatch.setattr(v4, "_render_v2", broken)
    with client(v4) as c:
        r = c.get("/v2/observations", params={"limit": 1})
    assert r.status_code == 500
    assert "projectId" in v4.response_errors[0]


def test_generations_answer_like_the_real_ones(v4, v3):
    with client(v3) as c:
        r = c.get("/v2/observations", params={"limit": 1})
        assert r.status_code == 404
        assert "v4" in r.json()["message"]
        assert c.get("/v3/scores").status_code == 404
        page = c.get("/traces", params={"limit": 3, "page": 3}).json()
        assert page["meta"] == {"page": 3, "limit": 3, "totalItems": 7, "totalPages": 3}
        assert len(page["data"]) == 1
        assert "_deprecation" in page
        assert c.get("/traces", params={"limit": 101}).status_code == 400
        full = c.get(f"/traces/{synthetic_trace(2)['id']}").json()
        assert len(full["observations"]) == 4
        assert isinstance(full["observations"][1]["output"], list)  # legacy I/O is structured
    with client(v4) as c:
        assert c.get("/traces").status_code == 404
        obs = c.get(
            "/v2/observations", params={"traceId": synthetic_trace(2)["id"], "fields": "core,io"}
        ).json()
        assert all(isinstance(o["input"], str) for o in obs["data"])  # v2 I/O is raw strings
        assert "name" not in obs["data"][0]  # unrequested groups are absent
    assert v3.response_errors == v4.response_errors == []


def test_cursor_pages_cover_every_root_once_newest_first(v4):
    seen: list[str] = []
    cursor = None
    with client(v4) as c:
        while True:
            params = {"isRootObservation": "true", "limit": 3, **({"cursor": cursor} if cursor else {})}
            page = c.get("/v2/observations", params=params).json()
            seen += [o["traceId"] for o in page["data"]]
            cursor = page["meta"].get("cursor")
            if not cursor:
                break
    assert seen == [synthetic_trace(i)["id"] for i in reversed(range(7))]


def test_score_upsert_on_id_name_and_day(v4):
    tid = synthetic_trace(0)["id"]
    body = {
        "id": "s1",
        "traceId": tid,
        "name": "q",
        "value": 0.5,
        "dataType": "NUMERIC",
        "timestamp": "2026-03-01T10:00:00Z",
    }
    with client(v4) as c:
        for value in (0.5, 0.7):
            assert c.post("/scores", json={**body, "value": value}).json() == {"id": "s1"}
        assert len(v4.scores) == 1
        assert v4.scores[0]["value"] == 0.7
        c.post("/scores", json={**body, "timestamp": "2026-03-02T10:00:00Z"})  # another day: a second row
        assert len(v4.scores) == 2
        got = c.get("/v3/scores", params={"traceId": tid}).json()["data"]
        assert {s["subject"]["kind"] for s in got} == {"trace"}
        bad = c.post("/scores", json={**body, "dataType": "BOOLEAN", "value": 0.5})
        assert bad.status_code == 400
    assert v4.response_errors == []


def test_faults_429_500_and_drop(v4):
    v4.inject(
        Fault("429", path="observations", retry_after=4),
        Fault("500", path="observations"),
        Fault("drop", path="observations"),
    )
    with client(v4) as c:
        r = c.get("/v2/observations")
        assert r.status_code == 429
        assert r.headers["Retry-After"] == "4"
        assert r.json()["details"]["retryAfterSeconds"] == 4
        assert c.get("/v2/observations").status_code == 500
        with pytest.raises(httpx.RemoteProtocolError):
            c.get("/v2/observations")
        assert c.get("/v2/observations").status_code == 200
    assert [r.status for r in v4.requests] == [429, 500, 0, 200]


def test_annotation_queues_and_items_follow_the_spec(v4):
    queue_id = v4.add_annotation_queue("to-label", description="near the threshold")
    with client(v4) as c:
        assert c.get(f"/annotation-queues/{queue_id}").json()["name"] == "to-label"
        made = c.post("/annotation-queues", json={"name": "second", "scoreConfigIds": []})
        assert made.status_code == 200
        assert c.get("/annotation-queues").json()["meta"]["totalItems"] == 2
        item = c.post(f"/annotation-queues/{queue_id}/items", json={"objectId": "t1", "objectType": "TRACE"})
        assert item.status_code == 200
        assert item.json()["status"] == "PENDING"
        assert c.post(f"/annotation-queues/{queue_id}/items", json={"objectId": "t1"}).status_code == 400
        listed = c.get(f"/annotation-queues/{queue_id}/items", params={"status": "PENDING"}).json()
        assert [i["objectId"] for i in listed["data"]] == ["t1"]
        assert c.get("/annotation-queues/nope/items").status_code == 404
        assert (
            c.post("/annotation-queues/nope/items", json={"objectId": "t", "objectType": "TRACE"}).status_code
            == 404
        )
    assert v4.response_errors == []
    assert [i["queueId"] for i in v4.annotation_queue_items] == [queue_id]
