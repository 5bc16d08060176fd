"""Pulling from the local Phoenix server: whole traces, paging, windows, incremental runs, faults."""

from __future__ import annotations

import gc
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from tracejudge import InputError
from tracejudge.testing.phoenix_server import Fault, synthetic_spans
from tracejudge_collectors.phoenix import LAG, PullOptions, pull_phoenix
from tracejudge_collectors.phoenix import _pull as phoenix_pull

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def seed(srv, indexes, project="default", **kwargs):
    for i in indexes:
        for span in synthetic_spans(i, **kwargs):
            srv.add_span(project, span)


def trace_id(i, **kwargs):
    return synthetic_spans(i, **kwargs)[0]["trace_id"]


def test_pulls_whole_traces_across_pages(server, api_for, store):
    seed(server, range(12))
    with api_for(server) as api:
        report = pull_phoenix(store, api, PullOptions(page_size=5, trace_batch=4))
    assert (report.listed, report.fetched, report.skipped, report.spans_new) == (12, 12, 0, 48)
    assert report.complete
    assert report.watermark == "2026-03-01T00:00:11.000000Z"
    assert {t.trace_id for t in store.list_traces()} == {trace_id(i) for i in range(12)}
    spans = store.get_spans(trace_id(3))
    assert sorted(s.name for s in spans) == ["answer", "lookup_contract", "rag-answer", "vector-search"]
    assert all(s.source == "phoenix" for s in spans)
    # Roots listed by start time, page by page; spans fetched by batches of trace ids.
    listing = [r for r in server.requests if r.param("parent_id") == "null"]
    assert len(listing) == 3
    assert all(r.param("sort") == "start_time" and r.param("limit") == "5" for r in listing)
    batches = [r for r in server.requests if r.param("trace_id")]
    assert max(sum(1 for k, _ in r.query if k == "trace_id") for r in batches) == 4


def test_window_and_project(server, api_for, store):
    seed(server, range(6))
    seed(server, range(100, 103), project="other")
    opts = PullOptions(from_time=T0 + timedelta(seconds=2), to_time=T0 + timedelta(seconds=4))
    with api_for(server) as api:
        report = pull_phoenix(store, api, opts)
        assert {t.trace_id for t in store.list_traces()} == {trace_id(2), trace_id(3)}
        assert report.fetched == 2
        other = pull_phoenix(store, api, PullOptions(project="other"))
    assert other.fetched == 3
    assert trace_id(101) in {t.trace_id for t in store.list_traces()}


def test_second_run_is_incremental_and_picks_up_new_traces(server, api_for, store):
    seed(server, range(5))
    with api_for(server) as api:
        first = pull_phoenix(store, api)
        again = pull_phoenix(store, api)
        assert (again.fetched, again.skipped, again.spans_new) == (0, 5, 0)
        server.clear_requests()
        late = T0 + LAG * 3
        seed(server, [50, 51], base_time=late)
        third = pull_phoenix(store, api)
    assert first.fetched == 5
    # The old traces are still inside the lag allowance: listed again, skipped, not fetched.
    assert (third.fetched, third.skipped) == (2, 5)
    # The third run listed from the watermark minus the lag, not from the beginning.
    (listing,) = [r for r in server.requests if r.param("parent_id") == "null"]
    assert listing.param("start_time") == "2026-02-28T23:50:04.000000Z"
    assert third.watermark == "2026-03-01T00:30:51.000000Z"


def test_limit_stops_early_and_the_next_run_continues(server, api_for, store):
    seed(server, range(7))
    with api_for(server) as api:
        first = pull_phoenix(store, api, PullOptions(limit=3, trace_batch=2))
        assert (first.fetched, first.complete, first.watermark) == (3, False, None)
        rest = pull_phoenix(store, api)
    assert (rest.fetched, rest.skipped, rest.complete) == (4, 3, True)
    assert len(store.list_traces()) == 7


def test_rate_limits_server_errors_and_dropped_connections_are_retried(server, api_for, store, sleeps):
    seed(server, range(4))
    server.inject(
        Fault("429", path="/spans", retry_after=2),
        Fault("500", path="/spans", after=1),
        Fault("drop", path="/spans", after=2),
    )
    with api_for(server) as api:
        report = pull_phoenix(store, api, PullOptions(page_size=2, trace_batch=2))
    assert report.fetched == 4
    assert report.retries == 3
    assert sleeps[0] == 2.0
    assert len(store.list_traces()) == 4


def test_a_server_that_keeps_failing_raises_and_a_rerun_completes(server, api_for, store):
    seed(server, range(4))
    # One page of roots, four pages of their spans, then the next page of roots fails (serially:
    # with concurrency 1 the listing waits for each batch's fetch).
    server.inject(Fault("500", path="/spans", times=None, after=5))
    with api_for(server, max_retries=1) as api:
        with pytest.raises(Exception, match="500"):
            pull_phoenix(store, api, PullOptions(page_size=2, trace_batch=2, concurrency=1))
        stored = len(store.list_traces())
        server.faults.clear()
        report = pull_phoenix(store, api, PullOptions(page_size=2, trace_batch=2, concurrency=1))
    assert stored == 2
    assert (report.fetched, report.skipped) == (2, 2)
    assert sum(len(store.get_spans(t.trace_id)) for t in store.list_traces()) == 16


def test_a_failure_while_batches_are_fetched_at_once_keeps_what_was_stored(server, api_for, store):
    seed(server, range(12))
    server.inject(Fault("500", path="/spans", times=None, after=6))
    with api_for(server, max_retries=0) as api:
        with pytest.raises(Exception, match="500"):
            pull_phoenix(store, api, PullOptions(page_size=2, trace_batch=2, concurrency=4))
        stored = {t.trace_id for t in store.list_traces()}
        # A trace is stored whole or not at all, and marked only once stored.
        assert all(len(store.get_spans(t)) == 4 for t in stored)
        assert all(store.get_meta("phoenix.trace:" + t) is not None for t in stored)
        server.faults.clear()
        report = pull_phoenix(store, api, PullOptions(page_size=2, trace_batch=2, concurrency=4))
    assert report.skipped == len(stored)
    assert report.fetched == 12 - len(stored)
    assert sum(len(store.get_spans(t.trace_id)) for t in store.list_traces()) == 48


def test_unknown_project_names_the_known_ones(server, api_for, store):
    seed(server, range(1), project="rag-prod")
    with api_for(server) as api, pytest.raises(InputError) as err:
        pull_phoenix(store, api, PullOptions(project="rag-prd"))
    assert "rag-prd" in err.value.message
    assert "rag-prod" in (err.value.hint or "")


def test_empty_window_warns(server, api_for, store):
    with api_for(server) as api:
        report = pull_phoenix(store, api)
    assert report.listed == 0
    assert report.warnings


class _StoreWaitingForTheListing:
    """A store whose first span write waits until the server has been asked for the second page of
    roots (at most 10 s), and says whether it was: the listing must not wait for the run's writes."""

    def __init__(self, store, server):
        self._store = store
        self._server = server
        self.second_page_asked_during_a_write: bool | None = None

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put_spans(self, spans, **kwargs):
        if self.second_page_asked_during_a_write is None:
            deadline = time.monotonic() + 10
            while not self._second_page_asked() and time.monotonic() < deadline:
                time.sleep(0.01)
            self.second_page_asked_during_a_write = self._second_page_asked()
        return self._store.put_spans(spans, **kwargs)

    def _second_page_asked(self):
        return any(r.param("parent_id") == "null" and r.param("cursor") for r in self._server.requests)


def test_the_next_page_of_roots_is_asked_for_while_the_run_stores(server, api_for, store):
    # 10 roots a page, one trace a batch, 2 at once: the run must store (at most 4 batches
    # pending) before it has gone through the first page.
    seed(server, range(14))
    waiting = _StoreWaitingForTheListing(store, server)
    with api_for(server) as api:
        report = pull_phoenix(waiting, api, PullOptions(page_size=10, trace_batch=1, concurrency=2))
    assert waiting.second_page_asked_during_a_write is True
    assert (report.listed, report.fetched, report.spans_new) == (14, 14, 56)
    listing = [r for r in server.requests if r.param("parent_id") == "null"]
    assert len(listing) == 2  # no page asked for twice, none past the last


class _CountingMarkerReads:
    """A store that counts how the pull reads trace markers: one by one or a page at a time."""

    def __init__(self, store):
        self._store = store
        self.single: list[str] = []
        self.pages: list[int] = []

    def __getattr__(self, name):
        return getattr(self._store, name)

    def get_meta(self, key):
        if key.startswith("phoenix.trace:"):
            self.single.append(key)
        return self._store.get_meta(key)

    def get_metas(self, keys):
        self.pages.append(len(keys))
        return self._store.get_metas(keys)


def test_markers_are_read_a_listing_page_at_a_time(server, api_for, store):
    seed(server, range(12))
    counting = _CountingMarkerReads(store)
    with api_for(server) as api:
        first = pull_phoenix(counting, api, PullOptions(page_size=5, trace_batch=4))
        assert counting.pages == [5, 5, 2]  # one read per page of roots, none per trace
        counting.pages.clear()
        again = pull_phoenix(counting, api, PullOptions(page_size=5, trace_batch=4))
    assert counting.single == []
    assert counting.pages == [5, 5, 2]
    assert (first.fetched, again.fetched, again.skipped) == (12, 0, 12)


class _FirstBatchHeld:
    """A Phoenix client whose first batch of traces is answered only once the store has stored
    something (at most 10 s): a batch that arrives must not wait for one listed before it."""

    def __init__(self, api, first_trace):
        self._api = api
        self._first_trace = first_trace
        self.stored = threading.Event()
        self.held_until_a_store: bool | None = None

    def __getattr__(self, name):
        return getattr(self._api, name)

    def get(self, path, params=None):
        if self.held_until_a_store is None and self._first_trace in (params or {}).get("trace_id", ()):
            self.held_until_a_store = self.stored.wait(10)
        return self._api.get(path, params)


class _StoreNoting:
    def __init__(self, store, stored):
        self._store = store
        self._stored = stored
        self.writes: list[set[str]] = []

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put_spans(self, spans, **kwargs):
        spans = list(spans)
        self.writes.append({s.trace_id for s in spans})
        new = self._store.put_spans(spans, **kwargs)
        self._stored.set()
        return new


def test_a_batch_is_stored_when_it_arrives_not_after_those_listed_before_it(server, api_for, store):
    # Two traces a batch, two at once; the first batch is answered only after a store.
    seed(server, range(4))
    with api_for(server) as api:
        held = _FirstBatchHeld(api, trace_id(0))
        noting = _StoreNoting(store, held.stored)
        report = pull_phoenix(noting, held, PullOptions(trace_batch=2, concurrency=2))
    assert held.held_until_a_store is True
    assert noting.writes[0] == {trace_id(2), trace_id(3)}
    assert set().union(*noting.writes) == {trace_id(i) for i in range(4)}
    assert (report.fetched, report.spans_new, report.complete) == (4, 16, True)
    assert all(store.get_meta("phoenix.trace:" + trace_id(i)) is not None for i in range(4))


class _StoreSeeingTheGc:
    """A store noting whether Python's cyclic garbage collector runs on its own at each write."""

    def __init__(self, store):
        self._store = store
        self.gc_enabled: list[bool] = []

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put_spans(self, spans, **kwargs):
        self.gc_enabled.append(gc.isenabled())
        return self._store.put_spans(spans, **kwargs)


def test_the_cyclic_gc_is_held_off_while_a_pull_stores_and_put_back_after(
    server, api_for, store, monkeypatch
):
    seed(server, range(6))
    seeing = _StoreSeeingTheGc(store)
    # Young objects are still collected every _GC_EVERY batches while it is off.
    monkeypatch.setattr(phoenix_pull, "_GC_EVERY", 1, raising=False)
    collected: list[int] = []

    def note(phase, info):
        if phase == "start" and not gc.isenabled():
            collected.append(info["generation"])

    gc.callbacks.append(note)
    try:
        assert gc.isenabled()
        with api_for(server) as api:
            report = pull_phoenix(seeing, api, PullOptions(trace_batch=2, concurrency=2))
    finally:
        gc.callbacks.remove(note)
    assert report.fetched == 6
    assert seeing.gc_enabled
    assert not any(seeing.gc_enabled)
    assert gc.isenabled()
    assert len(collected) >= len(seeing.gc_enabled)
    assert set(collected) == {0}


def test_the_gc_is_put_back_after_a_failed_pull_and_left_off_when_the_caller_had_it_off(
    server, api_for, store
):
    seed(server, range(6))
    server.inject(Fault("500", path="/spans", times=1, after=2))
    with api_for(server, max_retries=0) as api:
        with pytest.raises(Exception, match="500"):
            pull_phoenix(store, api, PullOptions(trace_batch=2, concurrency=2))
        assert gc.isenabled()
        gc.disable()
        try:
            report = pull_phoenix(store, api, PullOptions(trace_batch=2, concurrency=2))
            assert not gc.isenabled()
        finally:
            gc.enable()
    assert report.complete
    assert sum(len(store.get_spans(trace_id(i))) for i in range(6)) == 24
