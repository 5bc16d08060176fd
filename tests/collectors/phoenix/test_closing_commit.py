"""A complete pull's watermark (and its list of traces to fetch again) commits with its last batch:
one commit and fsync after the last answer instead of two, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tracejudge.store import open_store
from tracejudge.testing.phoenix_server import synthetic_spans
from tracejudge_collectors._pull_common import scope_key, unsettled_key
from tracejudge_collectors.phoenix import PullOptions, pull_phoenix


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request, tmp_path):
    url = (
        f"sqlite:///{tmp_path}/t.db" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    )
    st = open_store(url)
    yield st
    st.close()


class _Commits:
    """A store noting each write a pull makes after its fetches: span writes (with their swaps) and
    compare-and-sets of their own. ``meanwhile(store)`` runs just before the first span write that
    carries swaps: another puller of the same scope finishing in between."""

    def __init__(self, store, meanwhile=None):
        self._store = store
        self._meanwhile = meanwhile
        self.writes: list[tuple[str, list[str]]] = []
        self.at_last_commit: dict[str, str | None] = {}
        self.traces_at_last_commit = 0

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put_spans(self, spans, *, meta=None, swaps=()):
        if swaps and self._meanwhile is not None:
            self._meanwhile(self._store)
            self._meanwhile = None
        new = self._store.put_spans(spans, meta=meta, swaps=swaps)
        self.writes.append(("put_spans", [key for key, _, _ in swaps]))
        if swaps:
            self.at_last_commit = {key: self._store.get_meta(key) for key, _, _ in swaps}
            self.traces_at_last_commit = len(self._store.list_traces())
        return new

    def compare_and_set_meta(self, key, expected, value):
        self.writes.append(("compare_and_set_meta", [key]))
        return self._store.compare_and_set_meta(key, expected, value)


def seed(srv, indexes, **kwargs):
    for i in indexes:
        for span in synthetic_spans(i, **kwargs):
            srv.add_span("default", span)


def keys(server):
    return scope_key("phoenix", [server.base_url, "default"]), unsettled_key(
        "phoenix", scope_key("phoenix", [server.base_url, "default"])
    )


@pytest.mark.parametrize("concurrency", [1, 4])
def test_the_watermark_and_the_unsettled_list_commit_with_the_last_batch(
    server, api_for, any_store, concurrency
):
    # Six old traces (settled) and two of a minute ago (fetched again by later runs: unsettled).
    seed(server, range(6))
    recent = datetime.now(UTC) - timedelta(minutes=1)
    seed(server, range(100, 102), base_time=recent - timedelta(seconds=100))
    commits = _Commits(any_store)
    with api_for(server) as api:
        # Batches of 3, 3 and 2 traces, the last submitted once the listing is done.
        report = pull_phoenix(commits, api, PullOptions(trace_batch=3, concurrency=concurrency))
    watermark, unsettled = keys(server)
    assert (report.fetched, report.complete, report.unsettled) == (8, True, 2)
    # Every write is a span write (batches that arrive together share one); the last carried the
    # unsettled list, then the watermark.
    assert {w for w, _ in commits.writes} == {"put_spans"}
    assert [k for _, k in commits.writes][-1] == [unsettled, watermark]
    assert all(k == [] for _, k in commits.writes[:-1])
    assert commits.traces_at_last_commit == 8  # never a watermark beyond what is stored
    assert json.loads(any_store.get_meta(watermark))["upto"] == report.watermark
    assert len(json.loads(any_store.get_meta(unsettled))) == 2
    assert commits.at_last_commit == {
        watermark: any_store.get_meta(watermark),
        unsettled: any_store.get_meta(unsettled),
    }
    assert len(any_store.list_traces()) == 8


def test_a_watermark_moved_meanwhile_leaves_the_spans_stored_and_is_then_set_as_before(
    server, api_for, any_store
):
    seed(server, range(6))
    watermark, _ = keys(server)
    # Another puller of the scope covered less (up to trace 2) and finished just before the last write.
    theirs = json.dumps({"from": None, "upto": "2026-03-01T00:00:02.000000Z"})
    commits = _Commits(any_store, meanwhile=lambda st: st.set_meta(watermark, theirs))
    with api_for(server) as api:
        report = pull_phoenix(commits, api, PullOptions(trace_batch=2))
    # The last batch committed with the watermark unmoved (its swap expected the key unset) ...
    assert commits.at_last_commit == {watermark: theirs}
    assert len(any_store.list_traces()) == 6
    assert all(
        any_store.get_meta("phoenix.trace:" + s[0]["trace_id"]) for s in map(synthetic_spans, range(6))
    )
    # ... and the run then moved it with a compare-and-set of its own, as every run did before.
    assert commits.writes[-1] == ("compare_and_set_meta", [watermark])
    assert report.watermark == "2026-03-01T00:00:05.000000Z"
    assert json.loads(any_store.get_meta(watermark))["upto"] == report.watermark


def test_a_better_watermark_set_meanwhile_is_kept(server, api_for, any_store):
    seed(server, range(6))
    watermark, _ = keys(server)
    theirs = json.dumps({"from": None, "upto": "2026-03-01T00:00:09.000000Z"})
    commits = _Commits(any_store, meanwhile=lambda st: st.set_meta(watermark, theirs))
    with api_for(server) as api:
        report = pull_phoenix(commits, api, PullOptions(trace_batch=2))
    assert len(any_store.list_traces()) == 6
    assert any_store.get_meta(watermark) == theirs
    assert report.watermark == "2026-03-01T00:00:09.000000Z"
    assert [w for w, _ in commits.writes].count("compare_and_set_meta") == 0


class _ListingEndsLast(_Commits):
    """A store whose read of the unsettled list (the listing's last step) waits until every batch has
    been answered (at most 10 s): fetches faster than the listing."""

    def __init__(self, store, answered, ukey):
        super().__init__(store)
        self._answered = answered
        self._ukey = ukey

    def get_meta(self, key):
        if key == self._ukey and self._answered.wait(10):
            time.sleep(0.2)  # the answer converted into its batch
        return self._store.get_meta(key)


class _CountingAnswers:
    def __init__(self, api, batches, answered):
        self._api = api
        self._left = batches
        self._answered = answered

    def __getattr__(self, name):
        return getattr(self._api, name)

    def get(self, path, params=None):
        page = self._api.get(path, params)
        if (params or {}).get("trace_id"):
            self._left -= 1
            if self._left == 0:
                self._answered.set()
        return page


@pytest.mark.parametrize("concurrency", [1, 4])
def test_the_last_batch_waits_for_the_listing_to_carry_the_watermark(server, api_for, any_store, concurrency):
    seed(server, range(6))
    watermark, unsettled = keys(server)
    answered = threading.Event()
    commits = _ListingEndsLast(any_store, answered, unsettled)
    with api_for(server) as api:
        counting = _CountingAnswers(api, 3, answered)
        report = pull_phoenix(commits, counting, PullOptions(trace_batch=2, concurrency=concurrency))
    assert answered.is_set()
    assert (report.fetched, report.complete) == (6, True)
    assert {w for w, _ in commits.writes} == {"put_spans"}
    assert [k for _, k in commits.writes][-1] == [watermark]
    assert commits.traces_at_last_commit == 6
