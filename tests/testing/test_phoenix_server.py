"""The local Phoenix server: spec validation both ways, auth, Phoenix's read shape, paging, filters,
annotation upserts and faults."""

from __future__ import annotations

import httpx
import pytest

from tracejudge.testing.phoenix_server import Fault, PhoenixServer, synthetic_spans


@pytest.fixture
def srv():
    s = PhoenixServer().start()
    for i in range(5):
        for span in synthetic_spans(i):
            s.add_span("default", span)
    yield s
    s.stop()
    assert s.response_errors == []


def client(s: PhoenixServer, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=s.base_url, headers=headers)


def all_pages(c: httpx.Client, path: str, params: dict) -> list[dict]:
    out, cursor = [], None
    while True:
        page = c.get(path, params={**params, **({"cursor": cursor} if cursor else {})}).json()
        out.extend(page["data"])
        cursor = page["next_cursor"]
        if not cursor:
            return out


def test_bearer_key_is_required_when_set():
    with PhoenixServer(api_key="phx-key") as s:
        assert httpx.get(s.base_url + "/v1/projects").status_code == 401
        with client(s, "wrong") as c:
            assert c.get("/v1/projects").status_code == 401
        with client(s, "phx-key") as c:
            assert c.get("/v1/projects").json()["data"][0]["name"] == "default"


def test_requests_the_spec_rejects_get_422_and_are_recorded(srv):
    with client(srv) as c:
        assert c.get("/v1/projects/default/spans", params={"limit": 1001}).status_code == 422
        assert c.get("/v1/projects/default/spans", params={"sort": "name"}).status_code == 422
        bad_kind = {"data": [{"span_id": "ab" * 8, "name": "x", "annotator_kind": "BOT"}]}
        assert c.post("/v1/span_annotations", json=bad_kind).status_code == 422
        assert c.post("/v1/span_annotations", json={"data": [{"name": "x"}]}).status_code == 422
    assert len(srv.request_errors) == 4


def test_a_response_that_breaks_the_spec_is_caught(srv, monkeypatch):
    def broken(row):
        return {"name": row["name"]}  # no context, span_kind, times: the spec requires them

    monkeypatch.setattr(srv, "_render_span", broken)
    with client(srv) as c:
        assert c.get("/v1/projects/default/spans").status_code == 500
    assert len(srv.response_errors) == 1
    srv.response_errors.clear()


def test_spans_read_back_as_phoenix_returns_them(srv):
    retriever = synthetic_spans(0)[1]
    with client(srv) as c:
        (span,) = c.get("/v1/projects/default/spans", params={"span_id": retriever["span_id"]}).json()["data"]
    attrs = span["attributes"]
    assert span["span_kind"] == "RETRIEVER"
    assert "openinference.span.kind" not in attrs
    assert span["context"] == {"trace_id": retriever["trace_id"], "span_id": retriever["span_id"]}
    assert span["parent_id"] == synthetic_spans(0)[0]["span_id"]
    # document.metadata was sent as a JSON string; it comes back parsed and flattened.
    assert attrs["retrieval.documents.0.document.metadata.doc_id"] == "C-17/attachment"
    assert attrs["retrieval.documents.1.document.metadata.version"] == "v1"
    assert "retrieval.documents.0.document.metadata" not in attrs
    # Other JSON strings stay strings.
    assert attrs["tracejudge.retrieval.filter"] == '{"region": "CN"}'
    with client(srv) as c:
        root = c.get(
            "/v1/projects/default/spans", params={"span_id": synthetic_spans(0)[0]["span_id"]}
        ).json()
        tool = c.get("/v1/projects/default/spans", params={"name": "lookup_contract", "limit": 1}).json()
    root_attrs = root["data"][0]["attributes"]
    assert root_attrs["tag.tags"] == ["prod"]  # lists of scalars are kept as lists
    assert root_attrs["metadata.tenant.region"] == "CN"
    assert tool["data"][0]["events"][0]["name"] == "cache.miss"
    assert tool["data"][0]["events"][0]["attributes"] == {"cache.key": "C-17"}


@pytest.mark.parametrize("sort", ["id", "start_time"])
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_cursor_pages_cover_every_span_once_in_order(srv, sort, order):
    with client(srv) as c:
        spans = all_pages(c, "/v1/projects/default/spans", {"limit": 3, "sort": sort, "order": order})
    assert len(spans) == 20
    assert len({s["id"] for s in spans}) == 20
    if sort == "start_time":
        starts = [s["start_time"] for s in spans]
        assert starts == sorted(starts, reverse=order == "desc")


def test_filters(srv):
    first = synthetic_spans(0)[0]["trace_id"]
    second = synthetic_spans(1)[0]["trace_id"]
    with client(srv) as c:

        def get(**params):
            return c.get("/v1/projects/default/spans", params={"limit": 1000, **params}).json()["data"]

        roots = get(parent_id="null")
        assert len(roots) == 5
        assert all(r["parent_id"] is None for r in roots)
        # start_time inclusive, end_time exclusive, on the span start.
        window = get(parent_id="null", start_time="2026-03-01T00:00:01Z", end_time="2026-03-01T00:00:03Z")
        assert [r["start_time"][:19] for r in window] == ["2026-03-01T00:00:02", "2026-03-01T00:00:01"]
        assert {s["context"]["trace_id"] for s in get(trace_id=[first, second])} == {first, second}
        assert len(get(trace_id=[first, second])) == 8
        assert {s["span_kind"] for s in get(span_kind=["LLM", "TOOL"])} == {"LLM", "TOOL"}
        assert len(get(status_code=["ERROR"])) == 0
        assert len(get(attribute=['llm.model_name:"gpt-4.1-mini"'])) == 5
        assert len(get(attribute=["llm.token_count.total:132", 'user.id:"user-1"'])) == 0
        assert c.get("/v1/projects/default/spans", params={"span_kind": ["NOPE"]}).status_code == 422
        assert c.get("/v1/projects/nope/spans").status_code == 404


def annotation(span_id: str, **extra) -> dict:
    return {"span_id": span_id, "name": "faithfulness", "annotator_kind": "LLM", **extra}


def test_span_annotations_upsert_on_name_span_and_identifier(srv):
    span_id = synthetic_spans(0)[2]["span_id"]
    with client(srv) as c:
        first = c.post(
            "/v1/span_annotations",
            params={"sync": "true"},
            json={"data": [annotation(span_id, identifier="a", result={"label": "pass", "score": 1})]},
        ).json()["data"][0]["id"]
        again = c.post(
            "/v1/span_annotations",
            params={"sync": "true"},
            json={"data": [annotation(span_id, identifier="a", result={"label": "fail", "score": 0})]},
        ).json()["data"][0]["id"]
        other = c.post(
            "/v1/span_annotations",
            params={"sync": "true"},
            json={"data": [annotation(span_id, identifier="b")]},
        ).json()["data"][0]["id"]
        listed = c.get("/v1/projects/default/span_annotations", params={"span_ids": [span_id]}).json()
        by_identifier = c.get("/v1/projects/default/span_annotations", params={"identifier": ["a"]}).json()
        assert c.get("/v1/projects/default/span_annotations").status_code == 422
    assert first == again != other
    assert len(srv.span_annotations) == 2
    assert {a["identifier"] for a in listed["data"]} == {"a", "b"}
    (a,) = by_identifier["data"]
    assert a["result"] == {"label": "fail", "score": 0, "explanation": None}
    assert a["source"] == "API"


def test_unknown_span_fails_a_sync_request_whole_and_is_dropped_without_sync(srv):
    known = synthetic_spans(0)[2]["span_id"]
    with client(srv) as c:
        body = {"data": [annotation(known), annotation("0" * 15 + "1")]}
        refused = c.post("/v1/span_annotations", params={"sync": "true"}, json=body)
        assert refused.status_code == 404
        assert srv.span_annotations == []
        quiet = c.post("/v1/span_annotations", json=body)
        assert quiet.json() == {"data": []}
        assert (
            c.post("/v1/span_annotations", json={"data": [annotation(known, name="note")]}).status_code == 400
        )
    assert [a["span_id"] for a in srv.span_annotations] == [known]


def test_trace_annotations_and_their_paging(srv):
    trace_ids = [synthetic_spans(i)[0]["trace_id"] for i in range(5)]
    with client(srv) as c:
        body = {
            "data": [
                {"trace_id": t, "name": "verdict", "annotator_kind": "CODE", "identifier": "x"}
                for t in trace_ids
            ]
        }
        ids = c.post("/v1/trace_annotations", params={"sync": "true"}, json=body).json()["data"]
        assert len(ids) == 5
        unknown = {"data": [{"trace_id": "f" * 32, "name": "verdict", "annotator_kind": "CODE"}]}
        assert c.post("/v1/trace_annotations", params={"sync": "true"}, json=unknown).status_code == 404
        listed = all_pages(c, "/v1/projects/default/trace_annotations", {"identifier": ["x"], "limit": 2})
    assert sorted(a["trace_id"] for a in listed) == sorted(trace_ids)


def test_faults(srv):
    srv.inject(
        Fault("429", path=r"/v1/projects$", retry_after=7),
        Fault("500", path=r"/v1/projects$"),
        Fault("drop", path=r"/v1/projects$"),
    )
    with client(srv) as c:
        limited = c.get("/v1/projects")
        assert (limited.status_code, limited.headers["retry-after"]) == (429, "7")
        assert c.get("/v1/projects").status_code == 500
        with pytest.raises(httpx.TransportError):
            c.get("/v1/projects")
        assert c.get("/v1/projects").status_code == 200
    assert [r.status for r in srv.requests] == [429, 500, 0, 200]
