"""The session index on SQLite and PostgreSQL: turns of one conversation found by their session id,
oldest first, from any convention's attribute, late spans included, and backfilled in a store
written before the index existed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracejudge.schema import RawSpan
from tracejudge.store import SqlStore

MakeStore = Callable[[], SqlStore]


def _span(trace: int, span: int, start: int, parent: int | None = None, **attrs: Any) -> RawSpan:
    return RawSpan(
        trace_id=f"{trace:032x}",
        span_id=f"{span:016x}",
        parent_span_id=None if parent is None else f"{parent:016x}",
        name=f"turn-{trace}",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 5,
        attributes=attrs,
    )


def test_turns_of_a_session_oldest_first_whatever_the_convention(make_store: MakeStore) -> None:
    store = make_store()
    store.put_spans(
        [
            _span(3, 30, start=3_000, **{"gen_ai.conversation.id": "conv-1"}),
            _span(1, 10, start=1_000, **{"session.id": "conv-1"}),
            _span(2, 20, start=2_000, **{"langfuse.session.id": "conv-1"}),
            _span(4, 40, start=1_500, **{"session.id": "conv-2"}),
            _span(5, 50, start=500),
        ]
    )
    assert [t.trace_id for t in store.session_traces("conv-1")] == [f"{n:032x}" for n in (1, 2, 3)]
    assert [t.trace_id for t in store.session_traces("conv-2")] == [f"{4:032x}"]
    assert store.session_traces("nope") == []
    assert store.trace_session(f"{2:032x}") == "conv-1"
    assert store.trace_session(f"{5:032x}") is None


def test_a_late_span_naming_the_session_joins_its_trace(make_store: MakeStore) -> None:
    store = make_store()
    store.put_spans([_span(7, 70, start=100)])  # the root, from a service that records no session
    assert store.trace_session(f"{7:032x}") is None
    store.put_spans([_span(7, 71, start=110, parent=70, **{"session.id": "late"})])
    assert [t.trace_id for t in store.session_traces("late")] == [f"{7:032x}"]
    # Stored again: nothing doubled.
    store.put_spans([_span(7, 71, start=110, parent=70, **{"session.id": "late"})])
    assert len(store.session_traces("late")) == 1


def test_a_store_written_before_the_index_is_backfilled_once(make_store: MakeStore) -> None:
    store = make_store()
    store.put_spans(
        [_span(1, 10, start=1, **{"session.id": "s"}), _span(2, 20, start=2, **{"session.id": "s"})]
    )
    # As an older tracejudge left it: spans stored, no index rows, no marker.
    with store._lock:
        store._execute("DELETE FROM trace_sessions", ())
        store._execute("DELETE FROM meta WHERE key = 'index:sessions'", ())
    store.close()
    reopened = make_store()
    assert [t.trace_id for t in reopened.session_traces("s")] == [f"{1:032x}", f"{2:032x}"]
    assert reopened.get_meta("index:sessions") == "1"
