"""Pulls that finish traces (issue 12): spans another service sends after the first pull are
fetched on the next one — a recent trace, or one with a span whose parent has not arrived, is
fetched again (listed or not), only its new spans stored; a settled trace is not fetched again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tracejudge.localize import localize
from tracejudge.normalize import incompleteness, normalize
from tracejudge.schema import Material, Ticket
from tracejudge.testing.phoenix_server import synthetic_spans
from tracejudge_collectors._pull_common import MAX_ATTEMPTS
from tracejudge_collectors.phoenix import LAG, pull_phoenix

TICKET = Ticket(
    ticket="LATE-1",
    required=(
        Material(
            doc_id="C-17/attachment",
            version="v2",
            clause="Prepayment shall not exceed 30,000 RMB",
            facts={"prepayment_cap_rmb": 30000},
        ),
    ),
    superseded=(Material(doc_id="C-17/attachment", version="v1", facts={"prepayment_cap_rmb": 50000}),),
)


def _split(index: int, base_time: datetime) -> tuple[list[dict], list[dict]]:
    """A trace as two services send it: the agent (root + retriever), then the model service."""
    spans = synthetic_spans(index, base_time=base_time)
    first = [s for s in spans if s["name"] in ("rag-answer", "vector-search")]
    late = [s for s in spans if s["name"] not in ("rag-answer", "vector-search")]
    return first, late


def test_a_recent_trace_is_fetched_again_and_its_late_spans_stored(server, api_for, store):
    first, late = _split(0, datetime.now(UTC) - timedelta(minutes=2))
    for s in first:
        server.add_span("default", s)
    with api_for(server) as api:
        one = pull_phoenix(store, api)
        tid = first[0]["trace_id"]
        assert (one.fetched, one.spans_new, one.unsettled) == (1, 2, 1)
        # Before the late part: no model call in the trace — never a definite wrong verdict.
        early = localize(normalize(store.get_spans(tid)), TICKET)
        assert early.verdict == "unconfirmed"
        for s in late:
            server.add_span("default", s)
        two = pull_phoenix(store, api)
    assert (two.fetched, two.refetched, two.skipped, two.spans_new) == (1, 1, 0, 2)
    spans = store.get_spans(tid)
    assert sorted(s.name for s in spans) == ["answer", "lookup_contract", "rag-answer", "vector-search"]
    assert len({s.span_id for s in spans}) == len(spans) == 4
    assert store.list_traces()[0].span_count == 4
    after = localize(normalize(spans), TICKET)
    assert after.verdict == "no_fault"


def test_an_old_trace_missing_a_parent_is_fetched_again_after_the_window_moved(server, api_for, store):
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    spans = synthetic_spans(1, base_time=t0)
    # The model call hangs under a "plan" span that another service sends late.
    plan = {**spans[0], "name": "plan", "span_id": "ab" * 8, "parent_id": spans[0]["span_id"]}
    plan["attributes"] = {"openinference.span.kind": "CHAIN"}
    llm = next(s for s in spans if s["name"] == "answer")
    llm["parent_id"] = plan["span_id"]
    for s in spans:
        server.add_span("default", s)
    with api_for(server) as api:
        one = pull_phoenix(store, api)
        tid = spans[0]["trace_id"]
        assert one.unsettled == 1
        assert incompleteness(normalize(store.get_spans(tid))) == [
            f"the trace may be incomplete: parent span {plan['span_id']} not received"
        ]
        # A newer trace moves the watermark far past the old one.
        for s in synthetic_spans(2, base_time=t0 + LAG * 6):
            server.add_span("default", s)
        two = pull_phoenix(store, api)
        assert two.refetched == 1  # the old trace, from the unsettled list: not listed any more
        server.add_span("default", plan)
        three = pull_phoenix(store, api)
        assert (three.refetched, three.spans_new, three.unsettled) == (1, 1, 0)
        assert incompleteness(normalize(store.get_spans(tid))) == []
        four = pull_phoenix(store, api)
    # Settled: neither listed-and-fetched nor fetched from the unsettled list again.
    assert (four.fetched, four.refetched) == (0, 0)


def test_a_parent_that_never_arrives_is_given_up_on(server, api_for, store):
    spans = synthetic_spans(3, base_time=datetime(2026, 3, 1, tzinfo=UTC))
    llm = next(s for s in spans if s["name"] == "answer")
    llm["parent_id"] = "cd" * 8
    for s in spans:
        server.add_span("default", s)
    with api_for(server) as api:
        runs = [pull_phoenix(store, api) for _ in range(MAX_ATTEMPTS + 1)]
    assert [r.fetched for r in runs] == [1] * MAX_ATTEMPTS + [0]
    assert runs[MAX_ATTEMPTS - 1].unsettled == 0
    # Still visibly incomplete to triage and traces show.
    assert incompleteness(normalize(store.get_spans(spans[0]["trace_id"])))


def test_session_fetches_every_turn_of_one_conversation(server, api_for, store):
    from tracejudge_collectors.phoenix import PullOptions

    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    for i in range(30):
        for s in synthetic_spans(i, base_time=t0):  # session.id session-(i % 11) on the root
            server.add_span("default", s)
    with api_for(server) as api:
        report = pull_phoenix(store, api, PullOptions(session_id="session-3"))
    wanted = [synthetic_spans(i, base_time=t0)[0]["trace_id"] for i in (3, 14, 25)]
    assert report.fetched == 3
    assert sorted(t.trace_id for t in store.list_traces()) == sorted(wanted)
    assert [t.trace_id for t in store.session_traces("session-3")] == wanted
