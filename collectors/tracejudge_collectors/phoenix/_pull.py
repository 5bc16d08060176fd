"""Pull traces from a Phoenix project into the store: list root spans, fetch whole traces, resume.

A trace is pulled whole: root spans (``parent_id=null``) are listed by start time in the window,
then every span of a batch of those traces is fetched by ``trace_id``. A root span is exported
when it ends, after its children, so a listed root means its trace is complete.

Resuming without duplicates rests on the same three things as the Langfuse collector:
* each trace is stored in one ``put_spans`` transaction (the store dedups on (trace_id, span_id));
* a per-trace marker (meta ``phoenix.trace:<id>``) is set only after its spans are stored, and a
  listed trace with a marker is not fetched again;
* the watermark (meta ``phoenix.watermark:<scope>``, scope = server and project) advances only when
  a run listed and stored everything in its window; the next run lists from the watermark minus
  :data:`LAG` (Phoenix inserts spans asynchronously, and a long trace's root arrives at its end).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from tracejudge import InputError
from tracejudge.schema import RawSpan
from tracejudge.store import Store
from tracejudge.write import PhoenixApi, PhoenixApiError
from tracejudge_collectors._pull_common import PullCounts, Window, marker_key, scope_key, summary_tail
from tracejudge_collectors._time import parse_time
from tracejudge_collectors.phoenix._convert import span_to_raw

__all__ = ["LAG", "PullOptions", "PullReport", "pull_phoenix", "pull_summary"]

log = logging.getLogger("tracejudge.collect.phoenix")

LAG = timedelta(minutes=10)
"""How far before the watermark a run lists again (late inserts, long traces)."""
MAX_PAGE = 1000
"""Phoenix's largest page of spans."""


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


class _Puller:
    def __init__(self, api: PhoenixApi, options: PullOptions) -> None:
        self.api = api
        self.options = options
        self.path = f"/v1/projects/{options.project}/spans"
        self.page_size = min(max(options.page_size, 1), MAX_PAGE)

    def roots(self, lower: datetime | None) -> Iterator[tuple[str, datetime | None]]:
        params: dict[str, Any] = {
            "parent_id": "null",
            "sort": "start_time",
            "order": "asc",
            "limit": self.page_size,
            "start_time": _iso(lower) if lower else None,
            "end_time": _iso(self.options.to_time) if self.options.to_time else None,
        }
        try:
            for rows in _pages(self.api, self.path, params):
                for row in rows:
                    context = row.get("context") or {}
                    trace_id = context.get("trace_id")
                    if isinstance(trace_id, str) and trace_id:
                        yield trace_id.lower(), parse_time(row.get("start_time"))
        except PhoenixApiError as exc:
            if exc.status != 404:
                raise
            known = _project_names(self.api)
            raise InputError(
                f"Phoenix has no project {self.options.project!r}",
                hint="pass --project with one of: " + (", ".join(known[:20]) or "(no projects yet)"),
            ) from None

    def fetch(self, trace_ids: Sequence[str]) -> dict[str, list[RawSpan]]:
        spans: dict[str, list[RawSpan]] = {t: [] for t in trace_ids}
        params = {"trace_id": list(trace_ids), "sort": "id", "order": "asc", "limit": self.page_size}
        for rows in _pages(self.api, self.path, params):
            for row in rows:
                raw = span_to_raw(row, project=self.options.project)
                spans.setdefault(raw.trace_id, []).append(raw)
        return spans


def _in_flight(pending: deque[tuple[list[str], Future[dict[str, list[RawSpan]]]]]) -> int:
    return sum(len(ids) for ids, _ in pending)


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
    window = Window(
        store, scope_key("phoenix", [api.credentials.base_url, options.project]), options.from_time, LAG
    )

    listed = fetched = skipped = spans_new = 0
    latest = window.watermark
    complete = True
    batch: list[str] = []
    seen: set[str] = set()
    # Batches being fetched while the listing goes on; stored in listing order, by this thread only.
    pending: deque[tuple[list[str], Future[dict[str, list[RawSpan]]]]] = deque()
    max_pending = max(1, options.concurrency) * 2

    def store_one() -> None:
        """Store the oldest fetched batch, with every batch after it that is fetched already: one
        transaction for their spans (each trace whole) and markers, so the store keeps up."""
        nonlocal fetched, spans_new
        ids: list[str] = []
        spans: list[RawSpan] = []
        while pending and (not ids or pending[0][1].done()):
            trace_ids, future = pending.popleft()
            by_trace = future.result()
            ids.extend(trace_ids)
            spans.extend(s for t in trace_ids for s in by_trace.get(t, []))
        marker = json.dumps({"project": options.project})
        spans_new += store.put_spans(spans, meta={_marker_key(t): marker for t in ids})
        fetched += len(ids)
        if on_trace is not None:
            for trace_id in ids:
                on_trace(trace_id, True)

    def submit(pool: ThreadPoolExecutor) -> None:
        if not batch:
            return
        ids = list(batch)
        batch.clear()
        if options.concurrency > 1:
            pending.append((ids, pool.submit(puller.fetch, ids)))
        else:  # no overlap: fetch here, between listing pages, as a serial pull does
            done: Future[dict[str, list[RawSpan]]] = Future()
            done.set_result(puller.fetch(ids))
            pending.append((ids, done))
        while len(pending) > max_pending or (pending and pending[0][1].done()):
            store_one()

    with ThreadPoolExecutor(max_workers=max(1, options.concurrency), thread_name_prefix="phoenix") as pool:
        try:
            for trace_id, started in puller.roots(window.lower):
                if started is not None and (latest is None or started > latest):
                    latest = started
                if trace_id in seen:
                    continue  # a trace with several root spans is listed once
                seen.add(trace_id)
                listed += 1
                if store.get_meta(_marker_key(trace_id)) is not None:
                    skipped += 1
                    if on_trace is not None:
                        on_trace(trace_id, False)
                    continue
                if options.limit is not None and fetched + _in_flight(pending) + len(batch) >= options.limit:
                    complete = False
                    listed -= 1
                    break
                batch.append(trace_id)
                if len(batch) >= max(1, options.trace_batch):
                    submit(pool)
            submit(pool)
        except BaseException:
            # Keep what was fetched before the failure (a rerun then skips it), then fail.
            while pending:
                if pending[0][1].cancel() or pending[0][1].exception() is not None:
                    pending.popleft()
                else:
                    store_one()
            raise
        while pending:
            store_one()

    warnings: list[str] = []
    if listed == 0:
        warnings.append(f"no root spans in project {options.project!r} in the window")
    new_watermark = window.advance(complete=complete, latest=latest, iso=_iso)
    return PullReport(
        base_url=api.credentials.base_url,
        project=options.project,
        listed=listed,
        fetched=fetched,
        skipped=skipped,
        spans_new=spans_new,
        retries=api.retries,
        complete=complete,
        watermark=_iso(new_watermark) if new_watermark else None,
        warnings=tuple(warnings),
    )


def pull_summary(report: PullReport) -> Sequence[str]:
    """Lines for people."""
    return [f"Phoenix at {report.base_url}, project {report.project}", *summary_tail(report)]
