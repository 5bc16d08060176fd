"""Log events (OTLP log records correlated with a span) on SQLite and PostgreSQL: stored once, merged
into their span's events in time order, whether they arrive before or after the span."""

from __future__ import annotations

from collections.abc import Callable

from tracejudge.schema import RawSpan, SpanEvent
from tracejudge.store import LogEvent, SqlStore

MakeStore = Callable[[], SqlStore]

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER = "0af7651916cd43dd8448eb211c80319c"
SPAN = "00f067aa0ba902b7"
SIBLING = "00f067aa0ba902b8"
T0 = 1_700_000_000_000_000_000


def span(span_id: str = SPAN, trace_id: str = TRACE, name: str = "chat gpt-4o", **extra: object) -> RawSpan:
    return RawSpan(
        trace_id=trace_id,
        span_id=span_id,
        name=name,
        start_time_unix_nano=T0,
        end_time_unix_nano=T0 + 1000,
        **extra,  # type: ignore[arg-type]
    )


def user(content: str, at: int, span_id: str = SPAN, trace_id: str = TRACE) -> LogEvent:
    return LogEvent(
        trace_id=trace_id,
        span_id=span_id,
        name="gen_ai.user.message",
        time_unix_nano=at,
        body={"content": content},
        attributes={"gen_ai.system": "openai"},
    )


def test_the_same_record_twice_is_stored_once(make_store: MakeStore) -> None:
    store = make_store()
    a, b = user("hello", T0 + 1), user("again", T0 + 2)
    assert store.put_log_events([a, a, b]) == 2
    assert store.put_log_events([b, user("hello", T0 + 1)]) == 0
    assert store.put_log_events([]) == 0
    # A record differing only in its body is another record.
    assert store.put_log_events([user("hello!", T0 + 1)]) == 1
    store.put_spans([span()])
    contents = [e.attributes["content"] for e in store.get_spans(TRACE)[0].events]
    assert contents == ["hello", "hello!", "again"]


def test_events_before_their_span_are_merged_once_it_arrives(make_store: MakeStore) -> None:
    store = make_store()
    choice = LogEvent(
        trace_id=TRACE,
        span_id=SPAN,
        name="gen_ai.choice",
        time_unix_nano=T0 + 900,
        body={"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "30,000"}},
    )
    assert store.put_log_events([choice, user("cap?", T0 + 10)]) == 2
    assert store.get_spans(TRACE) == []
    assert store.list_traces() == []  # events alone do not make a trace
    own = SpanEvent(name="exception", time_unix_nano=T0 + 500, attributes={"exception.type": "Timeout"})
    assert store.put_spans([span(events=(own,)), span(SIBLING, name="retrieve")]) == 2
    spans = {s.span_id: s for s in make_store().get_spans(TRACE.upper())}
    assert [e.name for e in spans[SPAN].events] == ["gen_ai.user.message", "exception", "gen_ai.choice"]
    merged = spans[SPAN].events
    assert merged[0].attributes == {"gen_ai.system": "openai", "content": "cap?"}
    assert merged[2].attributes["message"] == {"role": "assistant", "content": "30,000"}
    assert merged[2].attributes["finish_reason"] == "stop"
    assert spans[SIBLING].events == ()
    assert [t.span_count for t in store.list_traces()] == [2]


def test_first_copy_of_a_span_still_wins_and_keeps_its_events(make_store: MakeStore) -> None:
    store = make_store()
    store.put_spans([span(attributes={"copy": 1})])
    store.put_log_events([user("first", T0 + 5)])
    assert store.put_spans([span(attributes={"copy": 2})]) == 0
    store.put_log_events([user("second", T0 + 6)])
    (got,) = store.get_spans(TRACE)
    assert got.attributes == {"copy": 1}
    assert [e.attributes["content"] for e in got.events] == ["first", "second"]


def test_events_stay_with_their_own_span_and_trace(make_store: MakeStore) -> None:
    store = make_store()
    store.put_spans([span(), span(SIBLING), span(trace_id=OTHER)])
    store.put_log_events(
        [user("a", T0 + 1), user("b", T0 + 1, span_id=SIBLING), user("c", T0 + 1, trace_id=OTHER)]
    )
    by_id = {s.span_id: [e.attributes["content"] for e in s.events] for s in store.get_spans(TRACE)}
    assert by_id == {SPAN: ["a"], SIBLING: ["b"]}
    assert [e.attributes["content"] for e in store.get_spans(OTHER)[0].events] == ["c"]


def test_equal_times_keep_arrival_order_across_batches_and_reopen(make_store: MakeStore) -> None:
    store = make_store()
    store.put_spans([span()])
    # SDKs that leave the record time unset give several records the same observed-time tick.
    names = ["system", "user", "assistant", "tool", "user2"]
    store.put_log_events([user(n, T0 + 7) for n in names[:3]])
    store.put_log_events([user(n, T0 + 7) for n in names[3:]])
    reopened = make_store()
    assert [e.attributes["content"] for e in reopened.get_spans(TRACE)[0].events] == names


def test_non_map_bodies_and_attribute_precedence() -> None:
    text = LogEvent(trace_id=TRACE, span_id=SPAN, name="log", body="plain line").to_span_event()
    assert text.attributes == {"body": "plain line"}
    clash = LogEvent(
        trace_id=TRACE, span_id=SPAN, name="e", body={"role": "body-role"}, attributes={"role": "attr-role"}
    )
    assert clash.to_span_event().attributes == {"role": "attr-role"}
    assert LogEvent(trace_id=TRACE, span_id=SPAN, name="e").to_span_event().attributes == {}
    # The content key ignores nothing that tells two records apart.
    base = user("x", T0)
    assert base.event_id == user("x", T0).event_id
    assert base.event_id != user("x", T0 + 1).event_id
    assert base.event_id != base.model_copy(update={"name": "gen_ai.system.message"}).event_id
    assert base.event_id != base.model_copy(update={"attributes": {}}).event_id
