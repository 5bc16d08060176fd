"""A scoring run shared by workers started anywhere with the same name (``score --run NAME``).

The first worker records the run and its items (the selection, in order); every worker then claims
items a few at a time under a lease it renews while alive. A worker that dies stops renewing, its
lease runs out and the others claim its items. A result is stored once (the first to finish it
wins), and the budget is the run's: each worker checks the totals of all stored results before it
launches an item, and the first to see the budget spent stops the run for everyone. A worker
leaves when nothing is left that it could claim or wait for, and reports the whole run.

When the store's server drops the connection (a PostgreSQL restart, a failover), a worker rides it
out: each store call that finds it gone is made again, backing off, until the store answers or
``ScoreOptions.reconnect_s`` has passed (then it exits as before: a rerun resumes). Every call it
repeats is safe to: an item's result is stored once whoever repeats it (one the worker stored in a
commit whose answer it never got reads as its own), and an item it claimed in such a commit is not
renewed (it renews only the items it holds), so that claim's lease runs out and the item goes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import re
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TypeVar

from tracejudge._errors import InputError, StoreError, StoreUnreachableError
from tracejudge.judge import JudgeClient
from tracejudge.runs._run import (
    Loader,
    ScoreOptions,
    given_loader,
    is_still_arriving,
    make_judge,
    new_run_record,
    projected_over_budget,
    run_client,
    score_source,
    still_arriving_for,
    still_arriving_reason,
    store_loader,
)
from tracejudge.runs._signals import in_thread_to_the_end
from tracejudge.runs._summary import SummaryBuilder
from tracejudge.runs._writeback import write_back
from tracejudge.schema import ItemResult, Rubric, RunRecord, RunStatus, TaskRecord
from tracejudge.store import RunProgress, Store
from tracejudge.write import WriteReport

__all__ = ["score_shared_run_async", "selection_options", "worker_id", "write_back_shared_run"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
# Items claimed at once: small, so a dead worker strands few and live workers share the tail evenly.
_CLAIM = 4
# Waits between tries while the store is gone: doubling from the first to the longest, each shortened
# by up to half at random so that K workers that lost it at once do not all come back at once.
_FIRST_WAIT = 0.1
_LONGEST_WAIT = 2.0

_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass
class _RideOut:
    """A worker's patience with a store whose server dropped the connection: a call that finds it
    gone (:class:`StoreUnreachableError`) is made again, backing off, until the store answers or
    ``limit_s`` seconds have passed since it stopped answering — counted once for all the worker's
    calls, so that its concurrent items do not each wait the whole time. Only for calls safe to
    repeat (see the module docstring)."""

    limit_s: float
    down_since: float | None = None

    def _wait(self, exc: StoreUnreachableError, attempt: int, started: float) -> float:
        """Seconds to wait before trying again; the error to exit with once the time is up. The time
        counts from when the call that failed began: a server that stopped answering at the network
        level holds a statement until the connection's bounds end it (store._postgres)."""
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = started
        left = self.down_since + self.limit_s - now
        if left <= 0:
            if self.limit_s <= 0:
                raise exc
            raise StoreUnreachableError(
                f"{exc.message} (waited {now - self.down_since:.0f} s for it to come back)",
                hint="check that PostgreSQL is up, then run the command again: `score --run` resumes its"
                " run. To wait longer for a restart, raise --reconnect-timeout"
                " (env TRACEJUDGE_SCORE_RECONNECT_TIMEOUT)",
            ) from None
        return min(left, _LONGEST_WAIT, _FIRST_WAIT * 2.0 ** min(attempt, 8)) * random.uniform(0.5, 1.0)

    async def run(self, attempt_once: Callable[[], Awaitable[_T]]) -> _T:
        """``attempt_once()`` until it does not find the store gone."""
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                result = await attempt_once()
            except StoreUnreachableError as exc:
                await asyncio.sleep(self._wait(exc, attempt, started))
                attempt += 1
                continue
            self.down_since = None
            return result

    async def call(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` in a thread, until it does not find the store gone."""
        return await self.run(lambda: asyncio.to_thread(fn, *args, **kwargs))

    def call_sync(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` here, until it does not find the store gone."""
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                result = fn(*args, **kwargs)
            except StoreUnreachableError as exc:
                time.sleep(self._wait(exc, attempt, started))
                attempt += 1
                continue
            self.down_since = None
            return result


def worker_id() -> str:
    """This worker, as other workers and the store see it: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise InputError(
            f"--run {name!r} is not a usable run name",
            hint="use letters, digits and . _ : @ - (up to 128), e.g. --run nightly-2026-03-01",
        )


def _check_same_run(stored: RunRecord, mine: RunRecord) -> None:
    """A worker joins a run only with the run's rubric, repeat, index manifest and budget: the run's
    results and its budget stop would otherwise depend on which workers happened to score or be alive."""
    theirs, ours = stored.provenance, mine.provenance
    if (theirs.rubric_hash, theirs.repeat) != (ours.rubric_hash, ours.repeat):
        raise InputError(
            f"run {stored.run_id} was started with rubric {theirs.rubric_name} v{theirs.rubric_version}"
            f" (hash {theirs.rubric_hash[:12]}, repeat {theirs.repeat}); this worker has"
            f" {ours.rubric_name} v{ours.rubric_version} (hash {ours.rubric_hash[:12]},"
            f" repeat {ours.repeat})",
            hint="start every worker of a run with the same rubric file and --repeat,"
            " or give --run a new name",
        )
    # The permission check reads the manifest: without it (or with another) a worker's items would
    # be indeterminate (or decided otherwise) beside the others' in one run's summary.
    if theirs.manifest_hash != ours.manifest_hash:
        raise InputError(
            f"run {stored.run_id} was started with {_manifest_text(theirs.manifest_hash)};"
            f" this worker has {_manifest_text(ours.manifest_hash)}",
            hint="start every worker of a run with the same --manifest file, or give --run a new name",
        )
    # Each worker checks the run's spend against its own options: a worker with a larger budget, or
    # none, left alone (the others done or dead) would go on past the budget the run was started with.
    if stored.budget != mine.budget:
        raise InputError(
            f"run {stored.run_id} was started with {_budget_text(stored.budget)};"
            f" this worker has {_budget_text(mine.budget)}",
            hint="the budget is the run's: start every worker of a run with the same --budget-usd and"
            " --budget-tokens, or give --run a new name",
        )
    # The first worker's selection is the run's items: a worker started with another one (--from 48h
    # for 24h, another --sample) was let in and scored the run's items, not the ones it was asked for.
    if not _same_selection(stored, mine):
        raise InputError(
            f"run {stored.run_id} was started with {_selection_text(stored.selection)};"
            f" this worker has {_selection_text(mine.selection)}",
            hint="the first worker's selection is the run's: start every worker of a run with the same"
            " trace ids, --name, --from, --to, --sample and --limit (a relative --from such as 24h is the"
            " same however far apart the workers start), or give --run a new name",
        )


# A relative --from/--to (24h) is read as each worker starts, so the same option gives workers started
# apart times that far apart: a time that moved forward by no more than the run's age (give or take the
# minute a worker may take from reading its options to joining, and clocks a little apart) is the same.
_SLACK = timedelta(minutes=1)
_TIMES = ("since", "until")


def _same_selection(stored: RunRecord, mine: RunRecord) -> bool:
    theirs, ours = stored.selection, mine.selection
    if any(theirs.get(k) != ours.get(k) for k in set(theirs) | set(ours) if k not in _TIMES):
        return False
    age = mine.created_at - stored.created_at
    for key in _TIMES:
        then, now = theirs.get(key), ours.get(key)
        if then is None or now is None:
            if then != now:
                return False
            continue
        moved = datetime.fromisoformat(now) - datetime.fromisoformat(then)
        if not -_SLACK <= moved <= age + _SLACK:
            return False
    return True


def selection_options(selection: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A run's selection (but its trace ids) as the ``score`` options that make it: (flag, value)."""
    options = {"name": "--name", "since": "--from", "until": "--to", "sample": "--sample", "limit": "--limit"}
    return [(flag, str(selection[key])) for key, flag in options.items() if selection.get(key) is not None]


def _selection_text(selection: dict[str, Any]) -> str:
    """A run's selection as the options that make it."""
    parts = [f"{len(selection['trace_ids'])} trace id(s)"] if selection.get("trace_ids") else []
    parts += [f"{flag} {value}" for flag, value in selection_options(selection)]
    return " ".join(parts) or "no selection (every stored trace)"


def _manifest_text(digest: str | None) -> str:
    return f"the index manifest sha256 {digest[:12]}" if digest else "no --manifest"


def _budget_text(budget: dict[str, float]) -> str:
    parts = [f"--budget-usd {budget['usd']:g}"] if "usd" in budget else []
    parts += [f"--budget-tokens {budget['tokens']:.0f}"] if "tokens" in budget else []
    return " ".join(parts) or "no budget"


def _trace_ids(sources: Iterable[str | TaskRecord]) -> list[str]:
    ids = []
    for src in sources:
        if isinstance(src, TaskRecord):
            raise InputError("a shared run scores stored traces", hint="give trace ids, not task records")
        ids.append(src)
    return ids


def _over_budget(p: RunProgress, options: ScoreOptions) -> bool:
    """Would the run pass its budget if every item in flight costs what the finished ones did on average?"""
    # every live worker's items in flight, and this one
    return projected_over_budget(options, usd=p.usd, tokens=p.tokens, done=p.done, ahead=p.claimed + 1)


class _Membership:
    """This worker's place in the run as the store holds it (joined, holding claimed items) and its
    leaving, which hands the items back to the others at once.

    A join or claim runs in a thread that an interruption cannot stop: Ctrl-C or SIGTERM cancels the
    task waiting for it, and the call goes on and may commit after the worker left — its items then
    stayed claimed by a worker that was gone until their lease ran out (a rerun or the others waited
    that long; on SQLite a join left the run refused to a rerun for the lease). So a join or claim
    sent once leaving began takes nothing; one under way that commits after the worker left leaves
    again at once; and leaving returns only when every such call is done, so that the items are back
    before the worker goes on to exit (and its store is closed)."""

    def __init__(self, store: Store, name: str, worker: str) -> None:
        self.store = store
        self.name = name
        self.worker = worker
        self._cond = threading.Condition()
        self._under_way = 0
        self._leaving = False

    def join(self, mine: RunRecord, ids: list[str] | None, *, lease_s: float) -> RunRecord:
        """Join the run (creating it with ``ids`` when no worker has); the run as stored."""
        with self._cond:
            self._under_way += 1
        return self._under_way_call(
            lambda: self.store.join_run(mine, ids, worker=self.worker, lease_s=lease_s)
        )

    def claim(self, n: int, *, lease_s: float) -> list[str]:
        """Up to ``n`` items claimed under a lease of ``lease_s``; none once leaving began."""
        with self._cond:
            if self._leaving:
                return []
            self._under_way += 1
        return self._under_way_call(
            lambda: self.store.claim_run_items(self.name, worker=self.worker, n=n, lease_s=lease_s)
        )

    def _under_way_call(self, take: Callable[[], _T]) -> _T:
        try:
            return take()
        finally:
            # Read once the call is over: leaving began before its leave_run did, so a call that
            # committed after leave_run sees it here, and one that committed before, leave_run handed
            # back. A call that failed too: a dropped connection may have committed what it took.
            with self._cond:
                late = self._leaving
            try:
                if late:
                    with contextlib.suppress(StoreError):
                        self.store.leave_run(self.name, worker=self.worker)
            finally:
                with self._cond:
                    self._under_way -= 1
                    self._cond.notify_all()

    def leave(self) -> None:
        """Leave the run (again: safe to repeat) once no join or claim is under way."""
        with self._cond:
            self._leaving = True
        try:
            self.store.leave_run(self.name, worker=self.worker)
        finally:
            with self._cond:
                while self._under_way:
                    self._cond.wait()


@dataclass(frozen=True)
class _Later:
    """An item not scored yet: its trace may still be arriving (the item, indeterminate, says why). It is
    kept as not final and claimed again, by any worker of the run, once ``after_s`` seconds have passed."""

    item: ItemResult
    after_s: float


@dataclass
class _SharedWorker:
    """This worker's part in a shared run: it claims a few items at a time (one at a time under a
    budget, checked before each launch), scores them through ``score`` and renews its lease while alive
    — on the items it holds (claimed, or being scored) only."""

    store: Store
    name: str
    member: _Membership
    options: ScoreOptions
    score: Callable[[str], Awaitable[ItemResult | _Later]]
    on_item: Callable[[ItemResult], None] | None
    ride: _RideOut
    claimed: deque[str] = field(default_factory=deque)
    refill: asyncio.Lock = field(default_factory=asyncio.Lock)
    scoring: set[str] = field(default_factory=set)
    stopped: bool = False

    @property
    def in_flight(self) -> int:
        return len(self.scoring)

    @property
    def budgeted(self) -> bool:
        return self.options.budget_usd is not None or self.options.budget_tokens is not None

    @property
    def lease(self) -> float:
        return self.options.lease_s

    async def take(self) -> str | None:
        """The next item to score; None when nothing is left to claim or the budget is spent."""
        async with self.refill:
            if not await self._refill():
                return None
            if self.budgeted and await self._budget_spent():
                return None
            return self.claimed.popleft()

    async def _refill(self) -> bool:
        """Claim items when none are left in hand, waiting while other live workers hold some;
        False when there is nothing left to claim or wait for (or the run was stopped)."""
        poll = max(0.05, min(1.0, self.lease / 4))
        while not self.claimed:
            if self.stopped:
                return False
            n = 1 if self.budgeted else _CLAIM
            got = await self.ride.call(self.member.claim, n, lease_s=self.lease)
            # A claim takes any item whose lease ran out, this worker's own among them when it was
            # starved past its lease (a loaded machine, its heartbeat late): one it holds stays with
            # the task that has it, or it was scored twice and, both stores its own, reported twice.
            got = [t for t in got if t not in self.scoring and t not in self.claimed]
            if got:
                self.claimed.extend(got)
                return True
            if await self._nothing_to_wait_for():
                return False
            await asyncio.sleep(poll)
        return True

    async def _nothing_to_wait_for(self) -> bool:
        """Nothing to claim: done when no other live worker holds items (a dead one's run out and are
        claimable, so this waits for them rather than leaving them behind)."""
        progress = await self.ride.call(self.store.run_progress, self.name)
        return progress.stopped or (progress.pending == 0 and progress.claimed <= self.in_flight)

    async def _budget_spent(self) -> bool:
        """Whether the run's totals leave no budget for one more item; the first to see it stops the run."""
        progress = await self.ride.call(self.store.run_progress, self.name)
        if not _over_budget(progress, self.options):
            return False
        self.stopped = True
        await self.ride.call(self.store.stop_run, self.name)
        return True

    async def work(self) -> None:
        while (trace_id := await self.take()) is not None:
            self.scoring.add(trace_id)
            try:
                # Scored again if loading it (or its cached reply) found the store gone: no reply was
                # had then, or its caching failed and only that call is made again.
                scored = await self.ride.run(functools.partial(self.score, trace_id))
                if isinstance(scored, _Later):
                    item = scored.item
                    stored = await self.ride.run(functools.partial(self._defer, scored))
                else:
                    item = scored
                    stored = await self.ride.run(functools.partial(self._finish, item))
            finally:
                self.scoring.discard(trace_id)
            if stored and self.on_item is not None:
                self.on_item(item)

    async def _finish(self, item: ItemResult) -> bool:
        """Store the item's result (False: another worker had). Once sent, the store call is waited for
        even when the worker is stopped meanwhile (the stop then goes on): the judge was paid for the
        result, so it is kept rather than scored again by a rerun, and the worker leaves the run only
        once the item is done."""
        return await in_thread_to_the_end(self.store.finish_run_item, item, worker=self.member.worker)

    async def _defer(self, later: _Later) -> bool:
        """Keep the item as not final, to be claimed again once its trace has had time to arrive (False:
        this worker no longer held it). Waited for once sent, as :meth:`_finish` is."""
        return await in_thread_to_the_end(
            self.store.defer_run_item, later.item, worker=self.member.worker, after_s=later.after_s
        )

    async def heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            # One failed renewal (a dropped connection; the next statement reconnects) must not end
            # the heartbeat: the leases would run out and the others score this worker's items again.
            # A store that stays down fails the worker's own claims and writes, which say so.
            held = [*self.claimed, *self.scoring]
            with contextlib.suppress(StoreError):
                await asyncio.to_thread(
                    self.store.renew_run_lease,
                    self.name,
                    worker=self.member.worker,
                    lease_s=self.lease,
                    items=held,
                )


async def score_shared_run_async(
    rubric: Rubric,
    store: Store,
    sources: Iterable[str | TaskRecord],
    *,
    client: JudgeClient | None = None,
    options: ScoreOptions,
    loader: Loader | None = None,
    on_item: Callable[[ItemResult], None] | None = None,
) -> RunRecord:
    """Work on the shared run ``options.run_name``: join it (creating it from ``sources`` if no worker
    has), score claimed items until none is left, and return the whole run's record as it stands.

    ``on_item`` sees the items this worker stored. Only trace ids can be shared (not task records)."""
    name = options.run_name
    assert name is not None
    _check_name(name)
    repeat = options.repeat or rubric.repeat
    ride = _RideOut(options.reconnect_s)
    mine = await ride.call(new_run_record, rubric, store, options, run_id=name, repeat=repeat)
    # The selection matters only to the worker that creates the run.
    ids = _trace_ids(sources) if await ride.call(store.get_run, name) is None else None
    member = _Membership(store, name, worker_id())
    try:
        run = await ride.call(member.join, mine, ids, lease_s=options.lease_s)
        _check_same_run(run, mine)
        await _take_part(member, rubric, client, options, loader, on_item, ride, repeat)
    except InputError:
        await ride.call(member.leave)
        raise
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM) or failed: leaving hands its claimed items to the others at
        # once, those of a claim still under way included (see _Membership); a store gone for good
        # (or a second Ctrl-C meanwhile) is not waited for again here: the leases run out instead.
        with contextlib.suppress(StoreError):
            await asyncio.to_thread(member.leave)
        raise
    await ride.call(member.leave)
    await _settled(store, name, options.lease_s, ride)
    return await ride.call(run_state, store, run)


async def _take_part(
    member: _Membership,
    rubric: Rubric,
    client: JudgeClient | None,
    options: ScoreOptions,
    loader: Loader | None,
    on_item: Callable[[ItemResult], None] | None,
    ride: _RideOut,
    repeat: int,
) -> None:
    """Score the run's items with the others until none is left to claim or wait for."""
    store, name = member.store, member.name
    load = loader or store_loader(store)
    # Items kept while their trace was still arriving, whose trace has arrived since: scored now, not
    # once the rest of their wait is over.
    await ride.call(_wake_arrived, store, name, load)
    async with run_client(rubric, client, options) as client:
        judge = make_judge(rubric, client, store, options)

        async def score(trace_id: str) -> ItemResult | _Later:
            # Loaded in a thread: on the loop's thread the store's read (a PostgreSQL round trip) and
            # the normalizing held up every reply in flight, and it was where a SIGTERM raised
            # KeyboardInterrupt inside this worker's own task.
            loaded = await asyncio.to_thread(load, trace_id)
            item = await score_source(
                trace_id,
                rubric,
                run_id=name,
                load=given_loader(loaded),
                judge=judge,
                repeat=repeat,
                manifest=options.manifest,
            )
            # Not final: a later worker of the run (or this one) scores it once the trace has arrived.
            if is_still_arriving(item) and isinstance(loaded, TaskRecord):
                return _Later(item, still_arriving_for(loaded))
            return item

        me = _SharedWorker(store, name, member, options, score, on_item, ride)
        beat = asyncio.create_task(me.heartbeat())
        try:
            await asyncio.gather(*(me.work() for _ in range(max(1, options.concurrency))))
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat


def _wake_arrived(store: Store, name: str, load: Loader) -> None:
    """End the wait of the run's kept items whose trace is no longer arriving (the rest came, or is lost)."""
    arrived = []
    for trace_id in store.run_waiting(name):
        loaded = load(trace_id)
        if not isinstance(loaded, TaskRecord) or still_arriving_reason(loaded) is None:
            arrived.append(trace_id)
    store.wake_run_items(name, arrived)


async def _settled(store: Store, name: str, lease_s: float, ride: _RideOut) -> None:
    """Once the budget stopped the run, wait for the items other live workers still have in flight
    (a dead worker's lease runs out), so every worker reports, and records, the same final run —
    not a snapshot that the others' last items change after it was printed."""
    poll = max(0.05, min(1.0, lease_s / 4))
    while (progress := await ride.call(store.run_progress, name)).stopped and progress.claimed:
        await asyncio.sleep(poll)


# Items written back per store round trip: few enough that a writer that dies strands little, and
# that writing them (about seven Langfuse scores each, one request apiece) ends well within a lease,
# after which another worker may take them again.
_WRITE_BACK_CHUNK = 20


def write_back_shared_run(
    store: Store,
    run: RunRecord,
    targets: Sequence[str],
    *,
    lease_s: float,
    reconnect_s: float = ScoreOptions.reconnect_s,
    write: Callable[[str, RunRecord, Sequence[ItemResult]], WriteReport] = write_back,
) -> tuple[WriteReport, ...]:
    """Write back the shared run's stored items that no worker has: the ones this worker stored, and
    those a worker that was stopped (Ctrl-C) or died (``kill -9``) left — each item taken by one
    worker, so written once. Items whose write fails are left for the next worker (or a rerun).

    A store that drops the connection is waited for up to ``reconnect_s`` seconds, as by the scoring;
    items taken in a commit whose answer never came are this worker's next take (the store hands a
    worker back what it took and did not finish), so they are written here, once."""
    reports = {t: WriteReport(target=t) for t in targets}
    if not targets:
        return ()
    worker = worker_id()
    ride = _RideOut(reconnect_s)
    stored: dict[str, ItemResult] | None = None
    while taken := ride.call_sync(
        store.take_run_write_backs, run.run_id, worker=worker, n=_WRITE_BACK_CHUNK, lease_s=lease_s
    ):
        if stored is None or any(t not in stored for t in taken):
            # Read again when a take holds an item stored since: another worker's, stored after the
            # last read and then left by it (stopped, or its lease ran out).
            stored = ride.call_sync(lambda: {i.trace_id: i for i in store.iter_score_items(run.run_id)})
        items = [stored[t] for t in taken if t in stored]
        written = False
        try:
            for target in targets:
                got = write(target, run, items)
                had = reports[target]
                reports[target] = had.model_copy(
                    update={
                        "written": had.written + got.written,
                        "ids": had.ids + got.ids,
                        "failed": had.failed + got.failed,
                    }
                )
            written = all(r.ok for r in reports.values())
        finally:
            ride.call_sync(store.finish_run_write_backs, run.run_id, taken, written=written)
        if not written:
            break  # the rest stay for the next worker; taking them again now would fail again
    return tuple(reports.values())


def run_state(store: Store, run: RunRecord) -> RunRecord:
    """The shared run as it stands, summarized over every stored item; recorded when it is over (every
    item done, or the budget stopped it) or at rest with items kept as not final (no live worker holds
    any, none claimable: it stays ``running`` until a later worker has scored them). While other workers
    go on it stays ``running`` and is not recorded."""
    progress = store.run_progress(run.run_id)
    summary = SummaryBuilder()
    for item in store.iter_score_items(run.run_id):
        summary.add(item)
    at_rest = progress.pending == 0 and progress.claimed == 0
    status: RunStatus = "running"
    if progress.stopped:
        status = "stopped_budget"
    elif at_rest and not progress.waiting:
        status = "complete"
    current = store.get_run(run.run_id) or run
    state = current.model_copy(
        update={
            "status": status,
            # Stopped: whatever is not scored now will not be (an item still claimed was in flight).
            "summary": summary.build(
                not_scored=progress.pending + progress.claimed if progress.stopped else 0
            ),
            "finished_at": current.finished_at or (datetime.now(UTC) if status != "running" else None),
            # At rest and running: what keeps it so, recorded (audit's drift compares with such a run).
            "left_waiting": progress.waiting if at_rest and status == "running" else 0,
        }
    )
    if status != "running" or at_rest:
        store.put_run(state)
    return state
