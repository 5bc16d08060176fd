"""A scoring run: stored traces -> task records -> hard checks + judge -> item results, recorded with
provenance; bounded concurrency, a reply cache, repeats and a budget that stops the run cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from tracejudge import __version__
from tracejudge._errors import StoreDamageError
from tracejudge.checks import evaluated_span, run_checks, task_category
from tracejudge.judge import (
    Judge,
    JudgeClient,
    OpenAIJudgeClient,
    ReplyCache,
    aggregate_criterion,
    criterion_from_check,
    item_verdict,
    prompt_template_hash,
    resolved_base_url,
    rubric_hash,
)
from tracejudge.runs._prefetch import Prefetch
from tracejudge.runs._quiet import Quiet
from tracejudge.runs._results import ResultWriter
from tracejudge.runs._summary import SummaryBuilder
from tracejudge.schema import (
    CheckResult,
    Criterion,
    CriterionResult,
    ItemResult,
    JudgeReply,
    ManifestEntry,
    Provenance,
    Rubric,
    RunRecord,
    RunStatus,
    ScoreVerdict,
    TaskRecord,
)
from tracejudge.store import Store

__all__ = [
    "STILL_ARRIVING_REASON",
    "Loader",
    "ScoreOptions",
    "given_loader",
    "is_still_arriving",
    "left_waiting",
    "make_judge",
    "new_run_id",
    "new_run_record",
    "projected_over_budget",
    "provenance",
    "run_client",
    "score_run",
    "score_run_async",
    "score_source",
    "score_task",
    "series_key",
    "still_arriving_for",
    "still_arriving_reason",
    "store_loader",
]

Loader = Callable[[str], TaskRecord | str]
"""Turns a trace id into its task record, or a reason it cannot (shown as indeterminate)."""


@dataclass(frozen=True)
class ScoreOptions:
    """How a run goes; resolved at the edge (CLI or caller). Its defaults are the one place for them:
    ``score``'s options and :func:`write_back_shared_run`'s arguments take theirs from here."""

    concurrency: int = 8
    """Judge calls in flight at most."""
    repeat: int | None = None
    """Judge calls per item; None: the rubric's ``repeat``."""
    budget_usd: float | None = None
    """Stop launching items once the judge cost would pass this."""
    budget_tokens: int | None = None
    """Stop launching items once judge tokens (prompt + completion) would pass this."""
    use_cache: bool = True
    """Reuse cached replies of an identical judge configuration and prompt."""
    manifest: Sequence[ManifestEntry] | None = None
    """The index manifest, for the permission check."""
    selection: Mapping[str, Any] = field(default_factory=dict)
    """How the traces were chosen, recorded with the run."""
    rerun_of: str | None = None
    """The run whose selection this run repeats."""
    run_name: str | None = None
    """Share the run of this name with every worker started with it (``score --run NAME``)."""
    lease_s: float = 30.0
    """In a shared run, how long a worker that stops renewing (it died) keeps its claimed items."""
    reconnect_s: float = 60.0
    """In a shared run, how long a worker waits for a store that dropped its connection (a PostgreSQL
    restart) to take a new one before it exits; 0: at once."""


def series_key(rubric: Rubric) -> str:
    """Runs that compare: same rubric name and version, judge model, temperature and prompt."""
    judge = rubric.judge
    canon = json.dumps(
        [
            rubric.name,
            str(rubric.version),
            judge.model if judge else None,
            judge.temperature if judge else None,
            prompt_template_hash(rubric),
        ]
    )
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def _manifest_hash(manifest: Sequence[ManifestEntry] | None) -> str | None:
    """sha256 of the index manifest's entries as read (None without one): the permission check's input."""
    if manifest is None:
        return None
    canon = json.dumps([e.model_dump(mode="json") for e in manifest], sort_keys=True)
    return hashlib.sha256(canon.encode()).hexdigest()


def provenance(rubric: Rubric, *, repeat: int, manifest: Sequence[ManifestEntry] | None = None) -> Provenance:
    """What produces a run's scores."""
    judge = rubric.judge
    host = None
    if judge is not None:
        url = resolved_base_url(judge)
        # Only scheme and host: a URL may carry credentials or tokens in its path or query.
        host = (
            f"{urlsplit(url).scheme}://{urlsplit(url).hostname}:{urlsplit(url).port or ''}" if url else None
        )
    return Provenance(
        rubric_name=rubric.name,
        rubric_version=str(rubric.version),
        rubric_hash=rubric_hash(rubric),
        prompt_hash=prompt_template_hash(rubric),
        judge_model=judge.model if judge else None,
        judge_base_url=host,
        temperature=judge.temperature if judge else None,
        repeat=repeat,
        tracejudge_version=__version__,
        manifest_hash=_manifest_hash(manifest),
    )


def new_run_id() -> str:
    """Sortable and unique: UTC time plus randomness."""
    return f"run-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


def _cost(rubric: Rubric, input_tokens: int, output_tokens: int) -> float:
    j = rubric.judge
    if j is None:
        return 0.0
    return (input_tokens * j.input_cost_per_mtok + output_tokens * j.output_cost_per_mtok) / 1e6


def _deciding_checks(rubric: Rubric, checks: Mapping[str, CheckResult]) -> dict[str, str]:
    """criterion -> the check that decides it, among the checks that ran."""
    return {s.criterion: s.name for s in rubric.checks if s.criterion and s.name in checks}


def _criterion_result(
    criterion: Criterion,
    check: str | None,
    checks: Mapping[str, CheckResult],
    judged: bool,
    replies: Sequence[JudgeReply],
) -> CriterionResult:
    """A criterion decided by its check, else by the judge's replies, else indeterminate (no judge)."""
    if check is not None:
        return criterion_from_check(check, checks[check])
    if not judged:
        return CriterionResult(score=None, verdict="indeterminate", reason="no_judge")
    return aggregate_criterion(criterion, replies)


def _mean_judged(scores: Sequence[float | None]) -> float | None:
    """The mean of the judged criteria's scores; None when one has none (or none was judged)."""
    if not scores or None in scores:
        return None
    return sum(s for s in scores if s is not None) / len(scores)


def _verdict(
    rubric: Rubric,
    criteria: Mapping[str, CriterionResult],
    checks: Mapping[str, CheckResult],
    deciding: Mapping[str, str],
    mean: float | None,
) -> tuple[ScoreVerdict, str]:
    """The item's verdict from its criteria and the checks that decide no criterion."""
    plain_checks = {k: v for k, v in checks.items() if k not in deciding.values()}
    return item_verdict(
        criteria,
        plain_checks,
        thresholds={c.name: c.threshold for c in rubric.criteria},
        mean_score=mean,
        overall_threshold=rubric.overall_threshold,
    )


async def score_task(
    task: TaskRecord,
    rubric: Rubric,
    *,
    run_id: str,
    judge: Judge | None,
    repeat: int = 1,
    manifest: Sequence[ManifestEntry] | None = None,
) -> ItemResult:
    """Score one task record: checks first, the judge only for criteria no check decides."""
    t0 = time.perf_counter()
    category = task_category(task, rubric.category_key)
    checks = run_checks(rubric.checks, task, category=category, manifest=manifest)
    deciding = _deciding_checks(rubric, checks)
    ask = [c for c in rubric.criteria if c.name not in deciding]
    replies: list[JudgeReply] = []
    if ask and judge is not None:
        replies = await judge.judge(task, ask, category=category, repeat=repeat)
    criteria = {
        c.name: _criterion_result(c, deciding.get(c.name), checks, judge is not None, replies)
        for c in rubric.criteria
    }
    mean = _mean_judged([criteria[c.name].score for c in ask])
    verdict, reason = _verdict(rubric, criteria, checks, deciding, mean)
    tin = sum(r.input_tokens for r in replies)
    tout = sum(r.output_tokens for r in replies)
    return ItemResult(
        run_id=run_id,
        trace_id=task.trace_id,
        span_id=evaluated_span(task),
        category=category,
        verdict=verdict,
        reason=reason,
        criteria=criteria,
        checks=checks,
        mean_score=mean,
        replies=tuple(replies),
        input_tokens=tin,
        output_tokens=tout,
        cost_usd=_cost(rubric, tin, tout),
        latency_ms=(time.perf_counter() - t0) * 1000,
        scored_at=datetime.now(UTC),
        # Its spans' times are UTC: the stamp the item's write-back scores carry (ItemResult.task_time).
        task_time=task.start_time,
    )


def _unloadable(run_id: str, trace_id: str, why: str) -> ItemResult:
    return ItemResult(
        run_id=run_id,
        trace_id=trace_id,
        verdict="indeterminate",
        reason=why,
        scored_at=datetime.now(UTC),
    )


def store_loader(store: Store) -> Loader:
    """Load a trace from the store and normalize it."""
    from tracejudge.normalize import normalize

    def load(trace_id: str) -> TaskRecord | str:
        try:
            spans = store.get_spans(trace_id)
        except StoreDamageError as exc:
            # This trace alone is lost to damage: the run scores the rest (the item is indeterminate).
            return exc.reason
        if not spans:
            return f"no spans stored for trace {trace_id}"
        try:
            return normalize(spans)
        except (ValueError, TypeError, KeyError) as exc:
            return f"normalize_error: {exc}"

    return load


async def score_source(
    src: str | TaskRecord,
    rubric: Rubric,
    *,
    run_id: str,
    load: Loader | None = None,
    judge: Judge | None,
    repeat: int,
    manifest: Sequence[ManifestEntry] | None,
    now: datetime | None = None,
) -> ItemResult:
    """Score one trace id (loaded through ``load``) or task record — unless it may still be arriving
    at ``now`` (None: when scored) with an answer that may be a draft: then the item is indeterminate,
    its reason saying why (:func:`still_arriving_reason`)."""
    if isinstance(src, TaskRecord):
        task: TaskRecord | str = src
    elif load is None:  # pragma: no cover - caller bug
        raise TypeError("score_source needs a loader for a trace id")
    else:
        task = load(src)
    if isinstance(task, str):
        return _unloadable(run_id, str(src), task)
    late = still_arriving_reason(task, now)
    if late is not None:
        return _unloadable(run_id, task.trace_id, late)
    return await score_task(task, rubric, run_id=run_id, judge=judge, repeat=repeat, manifest=manifest)


STILL_ARRIVING_REASON = "still_arriving"
"""How the reason of an item not scored because its trace may still be arriving begins."""


def still_arriving_reason(task: TaskRecord, now: datetime | None = None) -> str | None:
    """Why a stored trace is not scored yet: it may still be arriving at ``now`` (None: the present;
    exporters send spans as they end, the root last) and its answer was read from a model call — maybe a
    draft the user never got, which no check or judge should pass or fail. A later run scores it
    (DESIGN 5.5: :func:`~tracejudge.localize.answer_still_arriving`, the rule triage and the sweep read).
    None when it may be scored."""
    # Imported at the first item, not at start-up (the score command loads only what scoring uses).
    from tracejudge.localize import answer_still_arriving

    late = answer_still_arriving(task, now or datetime.now(UTC))
    if late is None:
        return None
    return (
        f"{STILL_ARRIVING_REASON}: the answer was read from span {task.final_answer_span_id}, not the root,"
        f" and {late}: score it again once the rest of the trace has arrived"
    )


def still_arriving_for(task: TaskRecord, now: datetime | None = None) -> float:
    """Seconds from ``now`` (None: the present) until ``task``'s trace, if still arriving, is past
    :data:`~tracejudge.localize.STILL_ARRIVING` after its last span ended — by then it has arrived, or what
    it lacks is not on its way and it is scored as it is. At least a second; at most the whole window."""
    from tracejudge.localize import STILL_ARRIVING

    window = STILL_ARRIVING.total_seconds()
    end = task.end_time
    if end is None:
        return window
    at = now or datetime.now(UTC)
    left = ((end if end.tzinfo else end.replace(tzinfo=UTC)) + STILL_ARRIVING - at).total_seconds()
    return min(max(left, 1.0), window)


def is_still_arriving(item: ItemResult) -> bool:
    """Whether ``item`` was left unscored because its trace may still have been arriving
    (:func:`still_arriving_reason`): a later run (or worker of a shared run) scores it."""
    return item.verdict == "indeterminate" and item.reason.startswith(f"{STILL_ARRIVING_REASON}:")


def left_waiting(run: RunRecord) -> bool:
    """Whether a recorded run is at rest with items kept as not final, their trace still arriving (it stays
    ``running`` until they are scored): ``RunRecord.left_waiting``, stored when the run came to rest so —
    not read from a summary recorded while ``running``, which a record of a run in flight may hold too."""
    return run.status == "running" and run.left_waiting > 0


def new_run_record(
    rubric: Rubric, store: Store, opts: ScoreOptions, *, run_id: str, repeat: int
) -> RunRecord:
    """The record of a run about to start, linked to the previous run of its series."""
    series = series_key(rubric)
    previous = store.list_runs(series=series, limit=1)
    return RunRecord(
        run_id=run_id,
        series=series,
        previous_run_id=previous[0].run_id if previous else None,
        rerun_of=opts.rerun_of,
        created_at=datetime.now(UTC),
        provenance=provenance(rubric, repeat=repeat, manifest=opts.manifest),
        selection=dict(opts.selection),
        budget={
            k: float(v)
            for k, v in (("usd", opts.budget_usd), ("tokens", opts.budget_tokens))
            if v is not None
        },
    )


def make_judge(
    rubric: Rubric,
    client: JudgeClient | None,
    store: Store,
    opts: ScoreOptions,
    *,
    cache: ReplyCache | None = None,
) -> Judge | None:
    """The judge of a run: None when the rubric has no judge (checks only) or there is no client.
    Its replies are cached in ``cache`` (default: the store) unless the options say not to."""
    if client is None or rubric.judge is None:
        return None
    return Judge(
        rubric, client, cache=(cache or store) if opts.use_cache else None, concurrency=opts.concurrency
    )


def projected_over_budget(opts: ScoreOptions, *, usd: float, tokens: int, done: int, ahead: int) -> bool:
    """Would the spend pass a budget if each of the ``ahead`` items not yet finished costs what the
    ``done`` ones did on average?"""
    per_usd = usd / done if done else 0.0
    per_tok = tokens / done if done else 0.0
    if opts.budget_usd is not None and usd + per_usd * ahead > opts.budget_usd:
        return True
    return opts.budget_tokens is not None and tokens + per_tok * ahead > opts.budget_tokens


@contextlib.asynccontextmanager
async def run_client(
    rubric: Rubric, client: JudgeClient | None, opts: ScoreOptions
) -> AsyncIterator[JudgeClient | None]:
    """The judge client of a run: the one given, else one made for the rubric's judge (None for a
    checks-only rubric) and closed when the run ends. Made on entry, so a judge that cannot be
    reached at all is an input error before anything is recorded."""
    if client is not None or rubric.judge is None:
        yield client
        return
    own = OpenAIJudgeClient(rubric.judge, concurrency=opts.concurrency)
    try:
        yield own
    finally:
        await own.aclose()


@dataclass
class _Progress:
    """A local run's tally as its workers go: what is in flight, done and spent, and whether the
    budget stopped launching."""

    in_flight: int = 0
    done: int = 0
    usd: float = 0.0
    tokens: int = 0
    stopped: bool = False

    def add(self, item: ItemResult) -> None:
        self.done += 1
        self.usd += item.cost_usd
        self.tokens += item.input_tokens + item.output_tokens

    def over_budget(self, opts: ScoreOptions) -> bool:
        """Whether launching one more item would pass a budget (everything in flight and the new one)."""
        return projected_over_budget(
            opts, usd=self.usd, tokens=self.tokens, done=self.done, ahead=self.in_flight + 1
        )


def given_loader(loaded: TaskRecord | str) -> Loader:
    """A loader for a source loaded already."""
    return lambda _trace_id: loaded


@dataclass(frozen=True)
class _Kept:
    """An item of a local run left unscored, its trace still arriving: kept as not final until the
    monotonic clock reads ``until`` (its trace's last span STILL_ARRIVING old), then a resume scores it."""

    until: float


@dataclass
class _LocalRun:
    """A run scored by this process alone: ``concurrency`` workers launch items one at a time until
    the sources run out or the budget stops launching."""

    rubric: Rubric
    store: Store
    opts: ScoreOptions
    run: RunRecord
    judge: Judge | None
    repeat: int
    sources: Prefetch
    on_item: Callable[[ItemResult], None] | None
    writer: ResultWriter
    summary: SummaryBuilder = field(default_factory=SummaryBuilder)
    progress: _Progress = field(default_factory=_Progress)
    outcomes: dict[str, tuple[float, int] | _Kept] = field(default_factory=dict)
    """Each trace's last item (as the store keeps it): a final one's cost and tokens, or kept."""

    async def worker(self) -> None:
        progress = self.progress
        while not progress.stopped:
            if progress.over_budget(self.opts):
                progress.stopped = True
                return
            taken = self.sources.take()
            if taken is None:
                return
            src, loaded = taken
            progress.in_flight += 1
            try:
                item = await score_source(
                    src,
                    self.rubric,
                    run_id=self.run.run_id,
                    load=given_loader(loaded),
                    judge=self.judge,
                    repeat=self.repeat,
                    manifest=self.opts.manifest,
                )
            finally:
                progress.in_flight -= 1
            progress.add(item)
            # Kept only when a resume can load it again: a trace id, loaded from the store (a task record
            # given whole is final as it is — the caller has the record, not a trace a resume reads).
            if is_still_arriving(item) and isinstance(src, str) and isinstance(loaded, TaskRecord):
                self.outcomes[item.trace_id] = _Kept(time.monotonic() + still_arriving_for(loaded))
            else:
                self.outcomes[item.trace_id] = (item.cost_usd, item.input_tokens + item.output_tokens)
            self.writer.add(item)  # written beside the next judge calls, all of them before the run ends
            self.summary.add(item)
            if self.on_item is not None:
                self.on_item(item)

    def finished(self, status: RunStatus, *, stored: bool) -> RunRecord:
        """The run as it ended (``stored``: every item is in the store); a budget stop counts the sources
        never launched as not scored. One that ended with items kept (:meth:`_keep`) is not done: it stays
        ``running`` (not finished) until a resume has scored them."""
        not_scored = kept = 0
        finished_at: datetime | None = datetime.now(UTC)
        if self.progress.stopped and status == "complete":
            # Not resumed (a stopped run scores nothing more): its items, still-arriving ones too, are
            # final as they are.
            status = "stopped_budget"
            not_scored = self.sources.left()
        elif status == "complete" and stored and (kept := self._keep()):
            status, finished_at = "running", None
        return self.run.model_copy(
            update={
                "status": status,
                "finished_at": finished_at,
                "summary": self.summary.build(not_scored=not_scored),
                "left_waiting": kept,
            }
        )

    def _keep(self) -> int:
        """Make the run resumable when it left items kept as not final (how many; 0 when none): ``score --run
        RUN_ID`` (or this function with ``run_name`` the run's id) then scores them as a later worker of a
        shared run does, once their trace has arrived, and nothing final again."""
        now = time.monotonic()
        waiting = {t: max(o.until - now, 1.0) for t, o in self.outcomes.items() if isinstance(o, _Kept)}
        if not waiting:
            return 0
        done = {t: o for t, o in self.outcomes.items() if not isinstance(o, _Kept)}
        self.store.keep_run_items(
            self.run.run_id,
            done=list(done),
            usd=sum(usd for usd, _ in done.values()),
            tokens=sum(tokens for _, tokens in done.values()),
            waiting=waiting,
        )
        return len(waiting)


async def _one_a_turn(worker: Callable[[], Coroutine[Any, Any, None]], n: int) -> None:
    """Run ``n`` workers, started one a loop turn. Started together, every worker prepared its first
    call before any went out (aiohttp sends a request from a task of its own, on the loop's next turn),
    so the calls went out together, came back together, and each wave of 64 replies waited for the
    CPU it takes to handle them all before its next calls went out. Started a turn apart, each call
    goes out as soon as it is prepared, the replies come back spread as the calls went, and each is
    handled and followed by the next call before the others arrive."""
    tasks: list[asyncio.Task[None]] = []
    try:
        for i in range(n):
            if i:
                await asyncio.sleep(0)
            tasks.append(asyncio.create_task(worker()))
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()  # when one failed or the run was interrupted: the others stop too


async def score_run_async(
    rubric: Rubric,
    store: Store,
    sources: Iterable[str | TaskRecord],
    *,
    client: JudgeClient | None = None,
    options: ScoreOptions | None = None,
    loader: Loader | None = None,
    on_item: Callable[[ItemResult], None] | None = None,
    run_id: str | None = None,
) -> RunRecord:
    """Score traces (ids, loaded through ``loader``, or task records) and record the run in the store.

    ``client`` defaults to :class:`OpenAIJudgeClient` for the rubric's judge. Items are launched one at a
    time by ``concurrency`` workers; once the budget would be passed no more are launched, items in
    flight finish, and the run ends ``stopped_budget``.

    A trace id whose trace may still be arriving (:func:`still_arriving_reason`) is stored indeterminate
    and kept as not final: the run then stays ``running`` and is resumed by this function with
    ``ScoreOptions(run_name=<its run_id>)`` (``score --run RUN_ID``), which scores those items once their
    trace has arrived (:func:`~tracejudge.store.Store.run_progress` says how many wait, and how long) —
    the rule ``score`` follows, decided here. A run its budget stopped keeps them final as they are.
    """
    opts = options or ScoreOptions()
    if opts.run_name is not None:
        from tracejudge.runs._shared import score_shared_run_async

        return await score_shared_run_async(
            rubric, store, sources, client=client, options=opts, loader=loader, on_item=on_item
        )
    repeat = opts.repeat or rubric.repeat
    load = loader or store_loader(store)
    run = new_run_record(rubric, store, opts, run_id=run_id or new_run_id(), repeat=repeat)
    async with run_client(rubric, client, opts) as client:
        store.put_run(run)
        quiet = Quiet()  # what the loading ahead and the result writes wait for
        writer = ResultWriter(store, quiet=quiet)
        local = _LocalRun(
            rubric=rubric,
            store=store,
            opts=opts,
            run=run,
            judge=make_judge(rubric, client, store, opts, cache=writer),
            repeat=repeat,
            sources=Prefetch(iter(sources), load, depth=opts.concurrency, quiet=quiet),
            on_item=on_item,
            writer=writer,
        )
        status: RunStatus = "complete"
        stored = False
        ahead = asyncio.create_task(local.sources.run())
        try:
            await _one_a_turn(local.worker, max(1, opts.concurrency))
            await writer.close()
            stored = True
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "interrupted"
            raise
        finally:
            ahead.cancel()
            writer.close_now()
            run = local.finished(status, stored=stored)
            store.put_run(run)
    return run


def score_run(
    rubric: Rubric,
    store: Store,
    sources: Iterable[str | TaskRecord],
    **kwargs: Any,
) -> RunRecord:
    """Synchronous :func:`score_run_async`."""
    return asyncio.run(score_run_async(rubric, store, sources, **kwargs))
