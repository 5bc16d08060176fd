"""A pull's last batches shrink toward the end (closing_batches): after the last answer only a small
batch is left to convert and store. Every trace is still fetched once, the watermark still commits
with the last batch, and a pull that fails among the closing batches resumes."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracejudge.testing.phoenix_server import Fault, synthetic_spans
from tracejudge_collectors._pull_common import scope_key
from tracejudge_collectors.phoenix import PullOptions, pull_phoenix
from tracejudge_collectors.phoenix._pull import closing_batches


def seed(srv, indexes):
    for i in indexes:
        for span in synthetic_spans(i):
            srv.add_span("default", span)


def batch_requests(server):
    """The trace ids each batch named, in the order the server took them (its first page: a batch
    of more spans than a page holds is fetched in pages)."""
    return [
        [v for k, v in r.query if k == "trace_id"]
        for r in server.requests
        if r.param("trace_id") and not r.param("cursor")
    ]


@given(st.integers(0, 3000), st.integers(1, 200))
def test_closing_batches_cover_the_traces_in_batches_that_shrink_to_the_end(traces, batch):
    sizes = closing_batches(traces, batch)
    assert sum(sizes) == traces
    assert all(0 < n <= batch for n in sizes)
    assert sizes == sorted(sizes, reverse=True)  # the smallest asked for last
    # As few batches as `batch` allows, plus closing ones of batch / 2, / 4, ... of at least 4 traces.
    fewest = -(-traces // batch)
    halvings = max(0, (batch // 4).bit_length() - 1)
    assert len(sizes) <= fewest + halvings
    assert len(sizes) == fewest or min(sizes) >= 4


@pytest.mark.parametrize(
    ("traces", "batch", "sizes"),
    [
        (400, 50, [45, 45, 45, 45, 45, 44, 44, 44, 25, 12, 6]),
        (50, 50, [32, 12, 6]),
        (10, 50, [10]),  # too few to split
        (40, 2, [2] * 20),  # batches too small to shrink
        (0, 50, []),
    ],
)
def test_closing_batch_sizes(traces, batch, sizes):
    assert closing_batches(traces, batch) == sizes


def test_the_last_page_is_fetched_in_closing_batches_and_the_last_one_carries_the_watermark(
    server, api_for, store
):
    seed(server, range(100))
    with api_for(server) as api:
        report = pull_phoenix(store, api, PullOptions(trace_batch=16, concurrency=4))
    assert (report.listed, report.fetched, report.spans_new, report.complete) == (100, 100, 400, True)
    requests = batch_requests(server)
    assert Counter(len(ids) for ids in requests) == Counter(closing_batches(100, 16))
    assert sorted(closing_batches(100, 16)) == [4, 8, 14, 14, 15, 15, 15, 15]
    fetched = [t for ids in requests for t in ids]
    assert len(fetched) == len(set(fetched)) == 100  # each trace asked for once
    watermark = scope_key("phoenix", [server.base_url, "default"])
    assert json.loads(store.get_meta(watermark))["upto"] == report.watermark
    assert all(t.span_count == 4 for t in store.list_traces())


def test_pages_before_the_last_are_fetched_in_full_batches_as_they_are_listed(server, api_for, store):
    # Pages of 40, 40 and 20 roots: 16-trace batches as the first two are listed (the 8 left
    # over from the first go with the second), the last page's 20 in closing batches.
    seed(server, range(100))
    with api_for(server) as api:
        report = pull_phoenix(store, api, PullOptions(page_size=40, trace_batch=16, concurrency=4))
    assert (report.fetched, report.spans_new) == (100, 400)
    assert len([r for r in server.requests if r.param("parent_id") == "null"]) == 3
    sizes = Counter(len(ids) for ids in batch_requests(server))
    assert sizes == Counter([16] * 5 + closing_batches(20, 16))
    assert closing_batches(20, 16) == [8, 8, 4]


def test_a_pull_failing_among_its_closing_batches_keeps_what_arrived_and_a_rerun_completes(
    server, api_for, store
):
    seed(server, range(100))
    # The listing and six batches answer; every request after them fails.
    server.inject(Fault("500", path="/spans", times=None, after=7))
    watermark = scope_key("phoenix", [server.base_url, "default"])
    with api_for(server, max_retries=0) as api:
        with pytest.raises(Exception, match="500"):
            pull_phoenix(store, api, PullOptions(trace_batch=16, concurrency=4))
        stored = {t.trace_id: t.span_count for t in store.list_traces()}
        # What arrived is stored whole and marked; no watermark without the closing batch.
        assert 0 < len(stored) < 100
        assert set(stored.values()) == {4}
        assert all(store.get_meta("phoenix.trace:" + t) is not None for t in stored)
        assert store.get_meta(watermark) is None
        server.faults.clear()
        report = pull_phoenix(store, api, PullOptions(trace_batch=16, concurrency=4))
    assert (report.fetched, report.skipped, report.complete) == (100 - len(stored), len(stored), True)
    assert report.spans_new == 4 * (100 - len(stored))
    assert len(store.list_traces()) == 100
    assert sum(t.span_count for t in store.list_traces()) == 400
    assert json.loads(store.get_meta(watermark))["upto"] == report.watermark
