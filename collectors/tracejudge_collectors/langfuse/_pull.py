"""Pull traces from Langfuse into the store: detect the API generation, list, fetch, store, resume.

Resuming without duplicates rests on three things:
* each trace is stored in one ``put_spans`` transaction (the store dedups on (trace_id, span_id));
* a per-trace marker (meta ``langfuse.trace:<id>``) is set only after its spans are stored, and a
  listed trace whose marker says it is settled is not fetched again; a recent one, one with an
  observation whose parent has not arrived, or one whose root observation was updated since
  (``updatedAt``) is fetched again, listed or from the scope's unsettled list (``_pull_common``);
* the watermark (meta ``langfuse.watermark:<scope>``: the latest trace start of a run) advances only
  when a run listed and stored everything in its window. The next run lists from the watermark
  minus a lag allowance (Langfuse's reads trail its writes), skipping marked traces.

Scores on a trace are kept twice: as ``langfuse.scores`` on the trace's root span and in the
trace's marker (meta ``langfuse.trace:<id>``, JSON ``{"scores": [...]}``), read with
:func:`stored_scores`. Both hold the scores as of the pull that fetched the trace.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tracejudge.schema import RawSpan
from tracejudge.store import Store
from tracejudge.write import LangfuseApi
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
    write_unsettled,
)
from tracejudge_collectors._time import parse_time
from tracejudge_collectors.langfuse._convert import (
    normalize_score,
    trace_fields_from_root,
    trace_to_spans,
)

log = logging.getLogger("tracejudge.collect.langfuse")

LAG = timedelta(minutes=10)
"""How far before the watermark a run lists again: Langfuse's non-v4 reads trail writes by up to 10 min."""

_V2_DETAIL_FIELDS = "core,basic,time,io,metadata,model,usage,prompt,trace_context"
# Metadata values over 200 characters come back cut unless their key is named here; these carry
# other conventions' attributes (retrieval documents, messages) sent through Langfuse's OTel endpoint.
_EXPAND_METADATA = "attributes,resourceAttributes,scope,documents,retrieval,tracejudge"


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _iso_or_none(dt: datetime | None) -> str | None:
    return _iso(dt) if dt else None


def _cursor_pages(api: LangfuseApi, path: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each page of a cursor-paged listing (v4 observations, v3 scores), until a page is empty or
    names no next cursor. A page is asked for only when the one before it has been read."""
    cursor: str | None = None
    while True:
        page = api.get(path, {**params, "cursor": cursor})
        yield page
        cursor = (page.get("meta") or {}).get("cursor")
        if not cursor or not page.get("data"):
            return


def _numbered_pages(api: LangfuseApi, path: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each page of a page-numbered listing (legacy traces, v2 scores), until a page is empty or
    the last of ``meta.totalPages``."""
    page_no = 1
    while True:
        page = api.get(path, {**params, "page": page_no})
        yield page
        if not page.get("data") or page_no >= int((page.get("meta") or {}).get("totalPages") or 0):
            return
        page_no += 1


class PullOptions(BaseModel):
    """What to pull."""

    model_config = ConfigDict(frozen=True)

    from_time: datetime | None = None
    """Only traces that started at or after this time."""
    to_time: datetime | None = None
    """Only traces that started before this time."""
    name: str | None = None
    """Only traces with this name."""
    tags: tuple[str, ...] = ()
    """Only traces carrying every one of these tags."""
    environments: tuple[str, ...] = ()
    """Only traces in one of these environments."""
    session_id: str | None = None
    """Only the traces (turns) of this session."""
    limit: int | None = None
    """Fetch at most this many new traces."""
    concurrency: int = 4
    """Traces fetched at once."""
    list_page_size: int = 100
    """Traces per listing page (legacy API max 100; v4 up to 1000)."""
    detail_page_size: int = 1000
    """Observations per page when fetching one trace (v4; max 1000)."""


class Detection(BaseModel):
    """What the server is."""

    model_config = ConfigDict(frozen=True)

    generation: Literal["v4", "legacy"]
    """v4 (observations API) or legacy (traces API)."""
    server_version: str | None = None
    """From ``GET /health``."""
    scores_path: Literal["/v3/scores", "/v2/scores"] = "/v3/scores"
    """Which scores API answers."""
    warnings: tuple[str, ...] = ()
    """Deprecation notices the server sent."""


class ScoreRefresh(BaseModel):
    """What a score refresh did."""

    model_config = ConfigDict(frozen=True)

    name: str | None = None
    """Only scores with this name."""
    queue: str | None = None
    """Only scores made in this annotation queue."""
    seen: int = 0
    """Matching scores listed."""
    traces_updated: int = 0
    """Stored traces whose kept scores changed."""
    not_pulled: int = 0
    """Traces that carry a matching score but are not in the store (pull them first)."""


class PullReport(PullCounts):
    """What a pull did."""

    generation: str
    """v4 or legacy."""
    server_version: str | None
    """Server version, if it said."""
    scores: ScoreRefresh | None = None
    """The score refresh after the pull (``--feedback`` / ``--queue``), if one was asked for."""


def detect(api: LangfuseApi) -> Detection:
    """The detection sequence of the reference: health, then v2 observations, then v3 scores."""
    warnings: list[str] = []
    health = api.get("/health", allow_404=True)
    version = health.get("version") if isinstance(health, dict) else None
    log.info("Langfuse server version %s", version)
    probe = api.get("/v2/observations", {"limit": 1, "fields": "core"}, allow_404=True)
    generation: Literal["v4", "legacy"] = "v4" if probe is not None else "legacy"
    scores = api.get("/v3/scores", {"limit": 1}, allow_404=True)
    for answer in (probe, scores):
        if isinstance(answer, dict) and isinstance(answer.get("_deprecation"), dict):
            warnings.append(str(answer["_deprecation"].get("message")))
    return Detection(
        generation=generation,
        server_version=str(version) if version is not None else None,
        scores_path="/v3/scores" if scores is not None else "/v2/scores",
        warnings=tuple(warnings),
    )


def _scope_key(base_url: str, options: PullOptions) -> str:
    scope: list[Any] = [base_url, options.name, sorted(options.tags), sorted(options.environments)]
    if options.session_id is not None:
        scope.append({"session": options.session_id})  # scopes without a session keep their old keys
    return scope_key("langfuse", scope)


def _marker_key(trace_id: str) -> str:
    return marker_key("langfuse", trace_id)


Listed = tuple[str, str, dict[str, Any]]
"""(trace id, start time ISO, listing row)."""


class _Puller:
    def __init__(self, store: Store, api: LangfuseApi, options: PullOptions, detection: Detection) -> None:
        self.store = store
        self.api = api
        self.options = options
        self.detection = detection
        self.warnings: list[str] = []
        """Deprecation notices the listing pages carried (Langfuse Cloud marks the legacy routes)."""

    def _note_deprecation(self, page: Any) -> None:
        notice = page.get("_deprecation") if isinstance(page, dict) else None
        if isinstance(notice, dict) and notice.get("message"):
            message = str(notice["message"])
            if notice.get("sunsetAt"):
                message += f" (sunset {notice['sunsetAt']})"
            if message not in self.warnings:
                self.warnings.append(message)
                log.warning("Langfuse: %s", message)

    # listing

    def list_traces(self, lower: datetime | None) -> Iterator[Listed]:
        if self.detection.generation == "v4":
            yield from self._list_v4(lower)
        else:
            yield from self._list_legacy(lower)

    def _list_v4(self, lower: datetime | None) -> Iterator[Listed]:
        o = self.options
        params: dict[str, Any] = {
            "isRootObservation": "true",
            "fields": "core,basic,time,trace_context",
            "sessionId": o.session_id,
            "limit": min(max(o.list_page_size, 1), 1000),
            "fromStartTime": _iso_or_none(lower),
            "toStartTime": _iso_or_none(o.to_time),
            "environment": list(o.environments),  # an empty list is left out of the query
        }
        for page in _cursor_pages(self.api, "/v2/observations", params):
            for row in page.get("data") or []:
                if self._selected(row):
                    yield str(row["traceId"]), str(row["startTime"]), row

    def _selected(self, root: dict[str, Any]) -> bool:
        """Whether a v4 root observation passes the filters the v4 listing cannot ask for (name, tags)."""
        o = self.options
        name = root.get("traceName") or root.get("name")
        name_ok = o.name is None or name == o.name
        return name_ok and set(o.tags) <= set(root.get("tags") or [])

    def _list_legacy(self, lower: datetime | None) -> Iterator[Listed]:
        o = self.options
        params: dict[str, Any] = {
            "limit": min(max(o.list_page_size, 1), 100),
            "orderBy": "timestamp.asc",
            "fields": "core",
            "name": o.name,
            "sessionId": o.session_id,
            "fromTimestamp": _iso_or_none(lower),
            "toTimestamp": _iso_or_none(o.to_time),
            # Empty lists are left out of the query.
            "tags": list(o.tags),
            "environment": list(o.environments),
        }
        for page in _numbered_pages(self.api, "/traces", params):
            self._note_deprecation(page)
            for row in page.get("data") or []:
                yield str(row["id"]), str(row["timestamp"]), row

    # fetching one trace

    def fetch(self, trace_id: str) -> tuple[list[RawSpan], list[dict[str, Any]]]:
        if self.detection.generation == "v4":
            return self._fetch_v4(trace_id)
        return self._fetch_legacy(trace_id)

    def _fetch_v4(self, trace_id: str) -> tuple[list[RawSpan], list[dict[str, Any]]]:
        params = {
            "traceId": trace_id,
            "fields": _V2_DETAIL_FIELDS,
            "expandMetadata": _EXPAND_METADATA,
            "limit": min(max(self.options.detail_page_size, 1), 1000),
        }
        observations = [
            o for page in _cursor_pages(self.api, "/v2/observations", params) for o in page.get("data") or []
        ]
        trace_scores = [
            s for s in self._scores(trace_id) if (s.get("subject") or {}).get("kind") != "session"
        ]
        return trace_to_spans(
            _v4_trace_fields(trace_id, observations), observations, trace_scores
        ), trace_scores

    def _scores(self, trace_id: str) -> list[dict[str, Any]]:
        return list(_list_scores(self.api, self.detection, {"traceId": trace_id}))

    def _fetch_legacy(self, trace_id: str) -> tuple[list[RawSpan], list[dict[str, Any]]]:
        trace = self.api.get(f"/traces/{trace_id}")
        scores = list(trace.get("scores") or [])
        return trace_to_spans(trace, trace.get("observations") or [], scores), scores


def _v4_trace_fields(trace_id: str, observations: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A v4 trace's trace-level fields, from its earliest root observation."""
    roots = sorted(
        (o for o in observations if o.get("isRootObservation") or not o.get("parentObservationId")),
        key=lambda o: str(o.get("startTime")),
    )
    trace = trace_fields_from_root(roots[0]) if roots else {"id": trace_id}
    trace["id"] = trace_id
    if len(roots) != 1:
        # Without a single root the trace's I/O has no observation of its own to sit on.
        trace.pop("input", None)
        trace.pop("output", None)
    return trace


def stored_scores(store: Store, trace_id: str) -> list[dict[str, Any]] | None:
    """The Langfuse scores kept for a pulled trace (``{"id", "name", "value", "data_type", "source",
    "comment", "observation_id", "timestamp", "queue_id", "author_user_id", ...}`` each), or None if
    the trace was not pulled."""
    raw = store.get_meta(_marker_key(trace_id))
    return None if raw is None else _marker_scores(raw)


def _marker_scores(raw: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(raw)
    except ValueError:
        return []
    scores = data.get("scores") if isinstance(data, dict) else None
    return list(scores) if isinstance(scores, list) else []


def _merge_scores(store: Store, trace_id: str, fresh: dict[str, dict[str, Any]]) -> bool | None:
    """Merge ``fresh`` scores into a pulled trace's marker (compare-and-set, so a concurrent pull or
    refresh of the same trace loses nothing); whether it changed, None if the trace was not pulled."""
    key = _marker_key(trace_id)
    while True:
        raw = store.get_meta(key)
        if raw is None:
            return None
        kept = _marker_scores(raw)
        merged = {str(s.get("id")): s for s in kept}
        before = json.dumps(merged, sort_keys=True)
        merged.update(fresh)
        if json.dumps(merged, sort_keys=True) == before:
            return False
        try:
            kept_fields = json.loads(raw)
        except ValueError:
            kept_fields = {}
        others = kept_fields if isinstance(kept_fields, dict) else {}
        value = json.dumps({**others, "scores": list(merged.values())}, separators=(",", ":"))
        if store.compare_and_set_meta(key, raw, value):
            return True


class _Run(ListingTally):
    """One pull's state: what was listed and fetched, the traces in flight, what each trace's marker
    said before (a trace fetched again keeps counting its attempts)."""

    def __init__(
        self, store: Store, puller: _Puller, window: Window, on_trace: Callable[[str, bool], None] | None
    ) -> None:
        self.store = store
        self.puller = puller
        self.options = puller.options
        self.on_trace = on_trace
        self.listed = self.fetched = self.skipped = self.spans_new = self.refetched = 0
        self.latest = window.watermark
        self.complete = True
        self.pending: deque[tuple[str, Future[tuple[list[RawSpan], list[dict[str, Any]]]]]] = deque()
        self.in_batch: set[str] = set()
        self.listed_ids: set[str] = set()
        self.before: dict[str, tuple[Seen | None, str | None]] = {}
        self.settled: list[str] = []
        self.unsettled: list[str] = []
        self.ukey = unsettled_key("langfuse", window.key)
        self.now = datetime.now(UTC)
        self.max_pending = max(1, self.options.concurrency) * 2

    def want(self, trace_id: str, updated: str | None) -> bool:
        """Whether to fetch: never stored, not settled, or its root updated since the last fetch."""
        if trace_id in self.in_batch:
            return False
        marker = read_seen(self.store.get_meta(_marker_key(trace_id)))
        if not needs_fetch(marker, updated=updated):
            return False
        self.before[trace_id] = (marker, updated)
        if marker is not None:
            self.refetched += 1
        return True

    def drain_one(self) -> None:
        trace_id, future = self.pending.popleft()
        spans, scores = future.result()
        before, updated = self.before.get(trace_id, (None, None))
        now_seen = seen(spans, before=before, now=self.now, lag=LAG, updated=updated)
        (self.settled if now_seen.settled else self.unsettled).append(trace_id)
        # The marker (with the trace's scores) in the spans' own transaction: one synced commit.
        marker = json.dumps(
            {"scores": [normalize_score(s) for s in scores], **now_seen.model_dump()}, separators=(",", ":")
        )
        self.spans_new += self.store.put_spans(spans, meta={_marker_key(trace_id): marker})
        self.in_batch.discard(trace_id)
        self.fetched += 1
        if self.on_trace is not None:
            self.on_trace(trace_id, True)

    def take(self, trace_id: str, pool: ThreadPoolExecutor) -> bool:
        """Queue a fetch; False when ``--limit`` allows no more."""
        if self.options.limit is not None and self.fetched + len(self.pending) >= self.options.limit:
            self.complete = False
            return False
        self.in_batch.add(trace_id)
        self.pending.append((trace_id, pool.submit(self.puller.fetch, trace_id)))
        while len(self.pending) >= self.max_pending:
            self.drain_one()
        return True

    def note_listed(self, trace_id: str, start: str) -> None:
        self.listed += 1
        self.listed_ids.add(trace_id)
        self.note_start(parse_time(start))

    def list_and_fetch(self, lower: datetime | None, pool: ThreadPoolExecutor) -> None:
        for trace_id, start, row in self.puller.list_traces(lower):
            self.note_listed(trace_id, start)
            updated = row.get("updatedAt") if isinstance(row.get("updatedAt"), str) else None
            if not self.want(trace_id, updated):
                self.skip(trace_id)
            elif not self.take(trace_id, pool):
                return
        # Traces an earlier run left unsettled, now outside the listing window: fetched again.
        for trace_id in read_unsettled(self.store, self.ukey):
            if (
                trace_id not in self.listed_ids
                and self.want(trace_id, None)
                and not self.take(trace_id, pool)
            ):
                return


def pull_langfuse(
    store: Store,
    api: LangfuseApi,
    options: PullOptions | None = None,
    *,
    on_trace: Callable[[str, bool], None] | None = None,
    detection: Detection | None = None,
) -> PullReport:
    """Pull the traces ``options`` select from Langfuse into ``store``; resumable and incremental.

    ``on_trace(trace_id, fetched)`` is called once per listed trace (for progress bars)."""
    options = options or PullOptions()
    detection = detection or detect(api)
    for warning in detection.warnings:
        log.warning("Langfuse: %s", warning)
    puller = _Puller(store, api, options, detection)
    window = Window(store, _scope_key(api.credentials.base_url, options), options.from_time, LAG)
    run = _Run(store, puller, window, on_trace)
    with ThreadPoolExecutor(max_workers=max(1, options.concurrency), thread_name_prefix="langfuse") as pool:
        try:
            run.list_and_fetch(window.lower, pool)
            while run.pending:
                run.drain_one()
        finally:
            for _trace_id, future in run.pending:
                future.cancel()
    write_unsettled(store, run.ukey, add=run.unsettled, remove=run.settled)
    new_watermark = window.advance(complete=run.complete, latest=run.latest, iso=_iso)
    return PullReport(
        base_url=api.credentials.base_url,
        generation=detection.generation,
        server_version=detection.server_version,
        listed=run.listed,
        fetched=run.fetched,
        skipped=run.skipped,
        refetched=run.refetched,
        unsettled=len(run.unsettled),
        spans_new=run.spans_new,
        retries=api.retries,
        complete=run.complete,
        watermark=_iso(new_watermark) if new_watermark else None,
        warnings=(*detection.warnings, *(w for w in puller.warnings if w not in detection.warnings)),
    )


def _score_trace_id(score: dict[str, Any]) -> str | None:
    trace_id = score.get("traceId")
    subject = score.get("subject") or {}
    if trace_id is None and subject.get("kind") == "trace":
        trace_id = subject.get("id")
    if trace_id is None and subject.get("kind") == "observation":
        trace_id = subject.get("traceId")
    return str(trace_id).lower() if trace_id else None


def _list_scores(api: LangfuseApi, detection: Detection, filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if detection.scores_path == "/v3/scores":
        pages = _cursor_pages(api, "/v3/scores", {**filters, "limit": 100})
    else:
        pages = _numbered_pages(api, "/v2/scores", {**filters, "limit": 100})
    for page in pages:
        yield from page.get("data") or []


def refresh_scores(
    store: Store,
    api: LangfuseApi,
    *,
    name: str | None = None,
    queue: str | None = None,
    detection: Detection | None = None,
) -> ScoreRefresh:
    """Fetch the scores named ``name`` and/or made in the annotation queue ``queue`` and merge them into
    what the store keeps for each trace already pulled (:func:`stored_scores`, by score id).

    A pull fetches a trace once, with the scores it had then; feedback and annotation-queue results
    usually come later, and this brings them in without fetching the traces again."""
    detection = detection or detect(api)
    filters = {"name": name, "queueId": queue}
    by_trace: dict[str, dict[str, dict[str, Any]]] = {}
    seen = 0
    for raw in _list_scores(api, detection, filters):
        trace_id = _score_trace_id(raw)
        if trace_id is None:
            continue  # session and dataset-run scores have no trace to land on
        seen += 1
        score = normalize_score(raw)
        by_trace.setdefault(trace_id, {})[str(score.get("id"))] = score
    updated = not_pulled = 0
    for trace_id, fresh in by_trace.items():
        outcome = _merge_scores(store, trace_id, fresh)
        not_pulled += outcome is None
        updated += outcome is True
    return ScoreRefresh(name=name, queue=queue, seen=seen, traces_updated=updated, not_pulled=not_pulled)


def refresh_summary(report: ScoreRefresh) -> list[str]:
    """The line for people."""
    what = " in ".join(
        w
        for w in (
            f"scores {report.name!r}" if report.name else "scores",
            f"annotation queue {report.queue!r}" if report.queue else "",
        )
        if w
    )
    line = f"{what}: {report.seen} listed, {report.traces_updated} stored traces updated"
    if report.not_pulled:
        line += f"; {report.not_pulled} traces not pulled yet (widen --from to pull them)"
    return [line]


def pull_summary(report: PullReport) -> Sequence[str]:
    """Lines for people."""
    head = f"Langfuse {report.server_version or '?'} ({report.generation} API) at {report.base_url}"
    return [head, *summary_tail(report), *(refresh_summary(report.scores) if report.scores else [])]
