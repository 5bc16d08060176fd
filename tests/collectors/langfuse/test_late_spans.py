"""Langfuse pulls that finish traces and fetch a whole session (issue 12), in both API generations:
observations sent after the first pull are fetched on the next one, only the new ones stored; a
settled trace is not fetched again; --session fetches every turn of one conversation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tracejudge.normalize import normalize
from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import LangfuseServer, synthetic_trace
from tracejudge_collectors.langfuse import PullOptions, pull_langfuse


def _without(trace: dict[str, Any], names: set[str]) -> dict[str, Any]:
    return {**trace, "observations": [o for o in trace["observations"] if o["name"] not in names]}


def test_observations_sent_late_are_fetched_on_the_next_pull(
    server: LangfuseServer, api_for: Any, store: SqliteStore
) -> None:
    trace = synthetic_trace(0, base_time=datetime.now(UTC) - timedelta(minutes=2))
    server.add_trace(_without(trace, {"answer", "lookup_contract"}))  # the model service is late
    api = api_for(server)
    one = pull_langfuse(store, api)
    assert (one.fetched, one.unsettled) == (1, 1)
    early = normalize(store.get_spans(trace["id"]))
    assert not early.model_calls
    first_count = len(store.get_spans(trace["id"]))
    server.add_trace(trace)  # the rest has arrived
    two = pull_langfuse(store, api)
    assert (two.fetched, two.refetched, two.spans_new) == (1, 1, 2)
    spans = store.get_spans(trace["id"])
    assert len(spans) == first_count + 2
    assert len({s.span_id for s in spans}) == len(spans)
    assert normalize(spans).model_calls


def test_a_settled_trace_is_not_fetched_again(
    server: LangfuseServer, api_for: Any, store: SqliteStore
) -> None:
    server.add_trace(synthetic_trace(1))  # 2026-03-01: long past the look-back, whole
    api = api_for(server)
    one = pull_langfuse(store, api)
    two = pull_langfuse(store, api)
    assert (one.fetched, one.unsettled) == (1, 0)
    assert (two.fetched, two.skipped, two.refetched) == (0, 1, 0)


def test_session_fetches_every_turn_of_one_conversation(
    server: LangfuseServer, api_for: Any, store: SqliteStore
) -> None:
    for i in range(30):
        server.add_trace(synthetic_trace(i))  # sessionId session-(i % 11)
    report = pull_langfuse(store, api_for(server), PullOptions(session_id="session-3"))
    wanted = {synthetic_trace(i)["id"] for i in (3, 14, 25)}
    assert report.fetched == 3
    assert {t.trace_id for t in store.list_traces()} == wanted
    assert [t.trace_id for t in store.session_traces("session-3")] == [
        synthetic_trace(i)["id"] for i in (3, 14, 25)
    ]
