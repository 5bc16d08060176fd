"""Pull traces from a Phoenix project into the store: list root spans, fetch whole traces, resume.

A trace is pulled whole: root spans (``parent_id=null``) are listed by start time in the window,
then every span of a batch of those traces is fetched by ``trace_id``. A listed root does not mean
the trace is complete: spans another service exports (or a late flush) can arrive after it.

Resuming without duplicates rests on the same three things as the Langfuse collector:
* each trace is stored in one ``put_spans`` transaction (the store dedups on (trace_id, span_id));
* a per-trace marker (meta ``phoenix.trace:<id>``) is set only after its spans are stored, and a
  listed trace whose marker says it is settled is not fetched again; a recent or incomplete one
  (a span whose parent has not arrived: another service, a late flush) is fetched again on later
  runs, listed or not, and only its new spans are stored (``_pull_common``);
* the watermark (meta ``phoenix.watermark:<scope>``, scope = server and project) advances only when
  a run listed and stored everything in its window, in its last batch's transaction (one commit
  after the last answer, not two); the next run lists from the watermark minus :data:`LAG`
  (Phoenix inserts spans asynchronously, and a long trace's root arrives at its end).
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict

from tracejudge import InputError
from tracejudge.schema import RawSpan
from tracejudge.store import MetaSwap, Store
from tracejudge.write import PhoenixApi, PhoenixApiError
from tracejudge_collectors._pull_common import (
    ListingTally,
    PullCounts,
    Seen,
    Window,
    marker_key,
    needs_fetch,
    read_seen,
    read_unsettled,
    scope_key,
    seen,
    summary_tail,
    unsettled_key,
    unsettled_swap,
    write_unsettled,
)
from tracejudge_collectors._time import parse_time
from tracejudge_collectors.phoenix._convert import span_to_raw

__all__ = ["LAG", "PullOptions", "PullReport", "pull_phoenix", "pull_summary"]

log = logging.getLogger("tracejudge.collect.phoenix")

LAG = timedelta(minutes=10)
"""How far before the watermark a run lists again (late inserts, long traces)."""
MAX_PAGE = 1000
"""Phoenix's largest page of spans."""
_GC_EVERY = 100
"""Batches stored between two collections of the young objects while a pull holds the cyclic
garbage collector off (see :class:`_GcPaused`)."""


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class PullOptions(BaseModel):
    """What to pull."""

    model_config = ConfigDict(frozen=True)

    project: str = "default"
    """Phoenix project name (or id)."""
    from_time: datetime | None = None
    """Only traces whose root span started at or after this time."""
    to_time: datetime | None = None
    """Only traces whose root span started before this time."""
    session_id: str | None = None
    """Only the traces (turns) of this session: every trace with a span whose ``session.id`` is it."""
    limit: int | None = None
    """Fetch at most this many new traces."""
    page_size: int = MAX_PAGE
    """Spans per page (at most 1000)."""
    trace_batch: int = 50
    """Traces fetched per request (their ids repeat ``trace_id`` in the query)."""
    concurrency: int = 4
    """Batches of traces fetched at once, beside the listing."""


class PullReport(PullCounts):
    """What a pull did."""

    project: str
    """The project pulled."""


def _marker_key(trace_id: str) -> str:
    return marker_key("phoenix", trace_id)


def _pages(api: PhoenixApi, path: str, params: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    cursor: str | None = None
    while True:
        page = api.get(path, {**params, "cursor": cursor})
        data = page.get("data") if isinstance(page, dict) else None
        rows = [r for r in data or [] if isinstance(r, dict)]
        yield rows
        cursor = page.get("next_cursor") if isinstance(page, dict) else None
        if not cursor or not rows:
            return


def _project_names(api: PhoenixApi) -> list[str]:
    names: list[str] = []
    for rows in _pages(api, "/v1/projects", {"limit": 100}):
        names.extend(str(r.get("name")) for r in rows)
        if len(names) >= 1000:
            break
    return names


def _ahead(pages: Iterator[list[dict[str, Any]]]) -> Iterator[list[dict[str, Any]]]:
    """The pages, each next one asked for as soon as the one before arrives (its cursor known),
    in a thread of its own: the listing then runs at the server's pace, not waiting while the run
    stores what was fetched (a store's commit waits for the disk), and the batch fetches never wait
    for a listing page the run could have asked for already. The generator is only ever advanced
    by one thread at a time."""
    lister = ThreadPoolExecutor(max_workers=1, thread_name_prefix="phoenix-list")
    try:
        following = lister.submit(next, pages, None)
        while (rows := following.result()) is not None:
            following = lister.submit(next, pages, None)
            yield rows
    finally:
        # Stopped early (--limit, a failure): no more pages; the one in flight is not waited for.
        lister.shutdown(wait=False, cancel_futures=True)


def _root_traces(rows: list[dict[str, Any]]) -> Iterator[tuple[str, datetime | None]]:
    """(trace id, start) of each root span that names its trace."""
    for row in rows:
        trace_id = (row.get("context") or {}).get("trace_id")
        if isinstance(trace_id, str) and trace_id:
            yield trace_id.lower(), parse_time(row.get("start_time"))


class _Puller:
    def __init__(self, api: PhoenixApi, options: PullOptions) -> None:
        self.api = api
        self.options = options
        self.path = f"/v1/projects/{options.project}/spans"
        self.page_size = min(max(options.page_size, 1), MAX_PAGE)

    def roots(self, lower: datetime | None) -> Iterator[list[tuple[str, datetime | None]]]:
        """The listing, a page at a time: (trace id, start) of each root span."""
        pages = _pages(self.api, self.path, self._root_params(lower))
        if self.options.concurrency > 1:
            pages = _ahead(pages)  # a serial pull (--concurrency 1) keeps its one request at a time
        try:
            for rows in pages:
                yield list(_root_traces(rows))
        except PhoenixApiError as exc:
            if exc.status != 404:
                raise
            known = _project_names(self.api)
            raise InputError(
                f"Phoenix has no project {self.options.project!r}",
                hint="pass --project with one of: " + (", ".join(known[:20]) or "(no projects yet)"),
            ) from None

    def _root_params(self, lower: datetime | None) -> dict[str, Any]:
        session = self.options.session_id
        to_time = self.options.to_time
        return {
            # A session's turns: any span may carry session.id (an instrumentor's, not the root).
            "parent_id": "null" if session is None else None,
            "attribute": None if session is None else f"session.id:{json.dumps(session)}",
            "sort": "start_time",
            "order": "asc",
            "limit": self.page_size,
            "start_time": _iso(lower) if lower else None,
            "end_time": _iso(to_time) if to_time else None,
        }

    def fetch(self, trace_ids: Sequence[str]) -> dict[str, list[RawSpan]]:
        spans: dict[str, list[RawSpan]] = {t: [] for t in trace_ids}
        params = {"trace_id": list(trace_ids), "sort": "id", "order": "asc", "limit": self.page_size}
        for rows in _pages(self.api, self.path, params):
            for row in rows:
                raw = span_to_raw(row, project=self.options.project)
                spans.setdefault(raw.trace_id, []).append(raw)
        return spans


class _GcPaused:
    """Holds Python's cyclic garbage collector off during a pull, and puts it back as it was.

    A pull makes a few dozen container objects per span (its JSON, the record, its attributes),
    held until its batch is stored and then freed by reference counting: the collector's passes
    only walk them, and every pass that finds them alive moves them to an older generation that
    is walked again, up to full collections over everything the process holds. That was a tenth
    of a pull's CPU (400 traces: 97 -> 88 ms, interleaved, load 5). The little the pull leaves
    in cycles (about one object per trace, from the HTTP client) is collected every
    :data:`_GC_EVERY` batches, and by the collector's next pass once the pull ends; a collector
    the caller had turned off stays off and is not run."""

    def __init__(self) -> None:
        self.paused = False
        self.stored = 0

    def __enter__(self) -> _GcPaused:
        self.paused = gc.isenabled()
        gc.disable()
        return self

    def stored_batch(self) -> None:
        self.stored += 1
        if self.paused and self.stored % _GC_EVERY == 0:
            gc.collect(0)

    def __exit__(self, *exc: object) -> None:
        if self.paused:
            gc.enable()


class _Fetched(NamedTuple):
    """A batch of traces as fetched, ready to store: their spans (each trace whole) and markers."""

    spans: list[RawSpan]
    markers: dict[str, str]
    """Each trace's marker by its meta key."""
    settled: list[str]
    unsettled: list[str]


_Pending = list[tuple[list[str], Future[_Fetched]]]


class _Run(ListingTally):
    """One pull's state: what was listed and fetched, the batches in flight, what each trace's
    marker said before (a trace fetched again keeps counting its attempts)."""

    def __init__(
        self, store: Store, puller: _Puller, window: Window, on_trace: Callable[[str, bool], None] | None
    ) -> None:
        self.store = store
        self.window = window
        self.gc = _GcPaused()
        self.puller = puller
        self.options = puller.options
        self.on_trace = on_trace
        self.listed = self.fetched = self.skipped = self.spans_new = self.refetched = 0
        self.latest = window.watermark
        self.complete = True
        self.batch: list[str] = []
        self.listed_ids: set[str] = set()
        self.before: dict[str, Seen | None] = {}
        self.settled: list[str] = []
        self.unsettled: list[str] = []
        self.ukey = unsettled_key("phoenix", window.key)
        self.now = datetime.now(UTC)
        # Batches being fetched while the listing goes on; stored as they arrive, by this thread only.
        self.pending: _Pending = []
        self.max_pending = max(1, self.options.concurrency) * 2
        self.listing_done = False
        """Every trace the run will fetch is listed: a store that leaves nothing to fetch is the last."""
        self.abandoned = False
        """The run failed: what arrived is stored, with no closing writes."""

    def markers(self, trace_ids: Iterable[str]) -> dict[str, str]:
        """The markers of these traces that are set, by trace id: one read for a page of the listing
        instead of one per trace."""
        keys = {_marker_key(t): t for t in trace_ids}
        if not keys:
            return {}
        return {keys[k]: v for k, v in self.store.get_metas(list(keys)).items()}

    def want(self, trace_id: str, marker_json: str | None) -> bool:
        """Whether to fetch a trace: never stored, or its marker says spans may still arrive."""
        marker = read_seen(marker_json)
        if not needs_fetch(marker):
            return False
        self.before[trace_id] = marker
        if marker is not None:
            self.refetched += 1
        return True

    def full(self) -> bool:
        """Whether ``--limit`` allows no more traces."""
        limit = self.options.limit
        if limit is None:
            return False  # asked once per listed trace: no walk over the batches in flight
        in_flight = sum(len(ids) for ids, _ in self.pending)
        return self.fetched + in_flight + len(self.batch) >= limit

    def take(self, trace_id: str, pool: ThreadPoolExecutor) -> None:
        self.batch.append(trace_id)
        if len(self.batch) >= max(1, self.options.trace_batch):
            self.submit(pool)

    def store_fetched(self, *, wait: bool) -> None:
        """Store every batch fetched so far, in the order they arrived rather than the order they
        were listed (a batch answered early is not held for a slower one listed before it, so after
        the last answer only that batch is left to store; while the listing goes on, the one
        submitted last is held: see :meth:`_storable`): one transaction for their spans (each
        trace whole) and markers. ``wait``: when none has arrived yet, wait for the first. A batch
        whose fetch failed raises here, after the others that arrived are stored."""
        storable = self._storable()
        if wait and storable and not any(f.done() for _, f in storable):
            futures_wait([f for _, f in storable], return_when=FIRST_COMPLETED)
        arrived = [(ids, f) for ids, f in storable if f.done()]
        if not arrived:
            return
        taken = {id(f) for _, f in arrived}
        self.pending = [(ids, f) for ids, f in self.pending if id(f) not in taken]
        failed = next((exc for _, f in arrived if (exc := f.exception()) is not None), None)
        batches = [(ids, f.result()) for ids, f in arrived if f.exception() is None]
        # The last store: no batch left to fetch or store after it (one that failed: none is last).
        last = (
            self.listing_done
            and not self.abandoned
            and not self.pending
            and not self.batch
            and failed is None
        )
        self._store(batches, last=last)
        if failed is not None:
            raise failed

    def _storable(self) -> _Pending:
        """The batches :meth:`store_fetched` may store. While the listing goes on, all but the one
        submitted last: however fast the fetches, a batch is then left to store once the listing is
        done, and carries the run's closing writes (see :meth:`_closing`)."""
        if self.listing_done or self.abandoned:
            return self.pending
        return self.pending[:-1]

    def fetch(self, trace_ids: list[str], before: dict[str, Seen | None]) -> _Fetched:
        """Fetch a batch and make its markers, in the fetching thread: after the last answer, only
        its store is left to the run."""
        by_trace = self.puller.fetch(trace_ids)
        batch = _Fetched([], {}, [], [])
        project = self.options.project
        for t in trace_ids:
            trace_spans = by_trace.get(t, [])
            batch.spans.extend(trace_spans)
            now_seen = seen(trace_spans, before=before.get(t), now=self.now, lag=LAG)
            (batch.settled if now_seen.settled else batch.unsettled).append(t)
            marker = {"project": project, **now_seen.model_dump()}
            batch.markers[_marker_key(t)] = orjson.dumps(marker).decode()  # a sixth of json.dumps' time
        return batch

    def _store(self, batches: Sequence[tuple[list[str], _Fetched]], *, last: bool = False) -> None:
        if not batches:
            return
        spans = [s for _, b in batches for s in b.spans]
        markers = {k: v for _, b in batches for k, v in b.markers.items()}
        swaps = self._closing(batches) if last else []
        self.spans_new += self.store.put_spans(spans, meta=markers, swaps=swaps)
        self.gc.stored_batch()
        for ids, b in batches:
            self.settled.extend(b.settled)
            self.unsettled.extend(b.unsettled)
            self.fetched += len(ids)
            if self.on_trace is not None:
                for trace_id in ids:
                    self.on_trace(trace_id, True)

    def _closing(self, batches: Sequence[tuple[list[str], _Fetched]]) -> list[MetaSwap]:
        """What the run writes after its last batch, made in that batch's transaction (one commit and
        fsync after the last answer instead of two): the unsettled list, then the watermark when the
        window is covered. In that order, as :func:`pull_phoenix` writes them: a swap that fails
        stops those after it, so the watermark never passes a trace the list does not name yet;
        :func:`pull_phoenix` then writes them on their own, as it does when no batch was fetched
        (and finds nothing left to do when they were made)."""
        add = self.unsettled + [t for _, b in batches for t in b.unsettled]
        remove = self.settled + [t for _, b in batches for t in b.settled]
        unsettled = unsettled_swap(self.store, self.ukey, add=add, remove=remove)
        watermark = self.window.swap(complete=self.complete, latest=self.latest, iso=_iso)
        return [s for s in (unsettled, watermark) if s is not None]

    def submit(self, pool: ThreadPoolExecutor) -> None:
        if not self.batch:
            return
        ids = list(self.batch)
        self.batch.clear()
        before = {t: self.before.get(t) for t in ids}
        if self.options.concurrency > 1:
            self.pending.append((ids, pool.submit(self.fetch, ids, before)))
        else:  # no overlap: fetch here, between listing pages, as a serial pull does
            done: Future[_Fetched] = Future()
            done.set_result(self.fetch(ids, before))
            self.pending.append((ids, done))
        while len(self.pending) > self.max_pending or any(f.done() for _, f in self._storable()):
            self.store_fetched(wait=len(self.pending) > self.max_pending)

    def admit(self, trace_id: str, pool: ThreadPoolExecutor) -> bool:
        """Queue a trace to fetch; False, the run left incomplete, when ``--limit`` allows no more."""
        if self.full():
            self.complete = False
            return False
        self.take(trace_id, pool)
        return True

    def list_and_fetch(self, lower: datetime | None, pool: ThreadPoolExecutor) -> None:
        for page in self.puller.roots(lower):
            markers = self.markers(t for t, _ in page if t not in self.listed_ids)
            for trace_id, started in page:
                self.note_start(started)
                if trace_id in self.listed_ids:
                    continue  # a trace with several root spans is listed once
                self.listed_ids.add(trace_id)
                self.listed += 1
                if not self.want(trace_id, markers.get(trace_id)):
                    self.skip(trace_id)
                elif not self.admit(trace_id, pool):
                    self.listed -= 1  # the trace that did not fit is listed again by the next run
                    return
        # Traces an earlier run left unsettled, now outside the listing window: fetched again.
        again = [t for t in read_unsettled(self.store, self.ukey) if t not in self.listed_ids]
        markers = self.markers(again)
        for trace_id in again:
            if self.want(trace_id, markers.get(trace_id)) and not self.admit(trace_id, pool):
                return

    def abandon(self) -> None:
        """Keep what was fetched before a failure (a rerun then skips it): batches not started are
        cancelled, those under way waited for, and every one that arrived whole is stored."""
        self.abandoned = True
        for _, future in self.pending:
            future.cancel()
        self.pending = [(ids, f) for ids, f in self.pending if not f.cancelled()]
        futures_wait([f for _, f in self.pending])
        self.pending = [(ids, f) for ids, f in self.pending if f.exception() is None]
        self.store_fetched(wait=False)


def pull_phoenix(
    store: Store,
    api: PhoenixApi,
    options: PullOptions | None = None,
    *,
    on_trace: Callable[[str, bool], None] | None = None,
) -> PullReport:
    """Pull the traces ``options`` select from Phoenix into ``store``; resumable and incremental.

    ``on_trace(trace_id, fetched)`` is called once per listed trace (for progress bars)."""
    options = options or PullOptions()
    puller = _Puller(api, options)
    scope: list[Any] = [api.credentials.base_url, options.project]
    if options.session_id is not None:
        scope.append({"session": options.session_id})  # scopes without a session keep their old keys
    window = Window(store, scope_key("phoenix", scope), options.from_time, LAG)
    run = _Run(store, puller, window, on_trace)
    pool = ThreadPoolExecutor(max_workers=max(1, options.concurrency), thread_name_prefix="phoenix")
    try:
        with run.gc:
            run.list_and_fetch(window.lower, pool)
            run.listing_done = True
            run.submit(pool)
            while run.pending:
                run.store_fetched(wait=True)
    except BaseException:
        run.abandon()
        raise
    finally:
        # No fetch is under way any more (each was stored, or waited for by abandon): the idle
        # threads end on their own instead of the run waiting for each to wake up and end.
        pool.shutdown(wait=False)
    write_unsettled(store, run.ukey, add=run.unsettled, remove=run.settled)
    warnings: list[str] = []
    if run.listed == 0:
        warnings.append(f"no root spans in project {options.project!r} in the window")
    new_watermark = window.advance(complete=run.complete, latest=run.latest, iso=_iso)
    return PullReport(
        base_url=api.credentials.base_url,
        project=options.project,
        listed=run.listed,
        fetched=run.fetched,
        skipped=run.skipped,
        refetched=run.refetched,
        unsettled=len(run.unsettled),
        spans_new=run.spans_new,
        retries=api.retries,
        complete=run.complete,
        watermark=_iso(new_watermark) if new_watermark else None,
        warnings=tuple(warnings),
    )


def pull_summary(report: PullReport) -> Sequence[str]:
    """Lines for people."""
    return [f"Phoenix at {report.base_url}, project {report.project}", *summary_tail(report)]
