"""``score`` as a library call: select stored traces, score them with a rubric, write the scores
back, judge the gate. The CLI renders a :class:`ScoreOutcome`; :meth:`ScoreOutcome.json` is exactly
what ``tracejudge score --json`` prints, for any other caller (an MCP server) to return.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracejudge._errors import InputError
from tracejudge.checks import read_manifest
from tracejudge.runs._quiet import QuietQueue
from tracejudge.runs._report import run_json
from tracejudge.runs._run import (
    ScoreOptions,
    is_still_arriving,
    score_run_async,
    still_arriving_for,
    store_loader,
)
from tracejudge.runs._select import select_trace_ids
from tracejudge.runs._shared import write_back_shared_run
from tracejudge.runs._signals import run_to_a_safe_stop
from tracejudge.runs._writeback import check_target, write_back
from tracejudge.schema import ItemResult, Rubric, RunRecord, TaskRecord
from tracejudge.store import Store
from tracejudge.write import WriteReport

if TYPE_CHECKING:
    from tracejudge.audit import RunGate

__all__ = ["ScoreOutcome", "score_traces"]


@dataclass(frozen=True)
class ScoreOutcome:
    """What one ``score`` did: the run, its items, what write-back landed, the gate."""

    run: RunRecord
    """The recorded run with its summary and provenance."""
    items: tuple[ItemResult, ...]
    """Every scored item, in trace id order (a shared run: the items this worker scored, as they
    finished)."""
    write_back: tuple[WriteReport, ...] = ()
    """One report per write-back target."""
    gate: RunGate | None = None
    """Whether the run clears ``--gate``, or None without one."""
    write_back_pending: int | None = None
    """A shared run with write-back: how many of the whole run's stored items are not written back
    yet once this worker is done (another worker writing them, or one that stopped or died left
    them to the next); 0: the whole run is written back. None otherwise."""

    waiting: int | None = None
    """How many of the run's items wait for their trace to arrive (kept indeterminate, reason
    ``still_arriving: …``) once this worker is done; a later worker of the run (``score --run NAME``
    again; a local run: ``score --run RUN_ID``) scores them once their trace has arrived or their wait
    is over. None: not known (an outcome made elsewhere)."""
    waiting_s: float | None = None
    """Seconds until the first of them may be scored (None when none wait)."""

    @property
    def gate_failed(self) -> bool:
        """Whether a gate was asked for and the run does not clear it (the command then exits 1)."""
        return self.gate is not None and not self.gate.passed

    def json(self, *, items: bool = True) -> dict[str, Any]:
        """Exactly what ``tracejudge score --json`` prints (``items=False``: with no items, for a
        caller that rendered them already)."""
        data = run_json(self.run, self.items if items else ())
        data["write_back"] = [r.model_dump(mode="json") for r in self.write_back]
        if self.write_back_pending is not None:
            data["write_back_pending"] = self.write_back_pending
        if self.waiting is not None:
            data["waiting"] = {"items": self.waiting, "after_s": self.waiting_s}
        if self.gate is not None:
            data["gate"] = self.gate.json()
        return data


def _rerun_trace_ids(store: Store, rerun_of: str) -> tuple[str, ...]:
    """The traces an earlier run scored, to score again."""
    if store.get_run(rerun_of) is None:
        raise InputError(f"no run {rerun_of} in the store", hint="see the run ids printed by earlier runs")
    return tuple(i.trace_id for i in store.iter_score_items(rerun_of))


def _selection(
    trace_ids: Sequence[str],
    name: str | None,
    from_time: datetime | None,
    to_time: datetime | None,
    sample: float | None,
    limit: int | None,
) -> dict[str, Any]:
    """How the traces were chosen, as recorded with the run: the criteria given, under the names runs
    have always had (since/until)."""
    given = {
        "trace_ids": list(trace_ids) or None,
        "name": name,
        "since": from_time.isoformat() if from_time else None,
        "until": to_time.isoformat() if to_time else None,
        "sample": sample,
        "limit": limit,
    }
    return {k: v for k, v in given.items() if v is not None}


def _write_backs(
    store: Store, run: RunRecord, items: Sequence[ItemResult], targets: Sequence[str], options: ScoreOptions
) -> tuple[tuple[WriteReport, ...], int | None]:
    """Write-back's reports, and for a shared run what of the whole run is left to write after it."""
    if options.run_name is None:
        # A local run's items kept as not final are written back once scored (by its resume), not now.
        # One its budget stopped is not resumed (nothing more is scored): its items are final as they are.
        resumable = run.status != "stopped_budget"
        final = [i for i in items if not (resumable and is_still_arriving(i))]
        reports = tuple(write_back(t, run, final) for t in targets)
        if resumable:
            _keep_waiting(store, run, items, written=bool(targets) and all(r.ok for r in reports))
        return reports, None
    # Whatever a stopped or dead worker of the run left unwritten too, each item by one worker.
    reports = write_back_shared_run(
        store, run, targets, lease_s=options.lease_s, reconnect_s=options.reconnect_s
    )
    return reports, (store.run_unwritten(run.run_id) if targets else None)


def _keep_waiting(store: Store, run: RunRecord, items: Sequence[ItemResult], *, written: bool) -> None:
    """A local run that left items unscored, their trace still arriving: kept as not final, each until its
    trace's last span is STILL_ARRIVING old, so that ``score --run RUN_ID`` (the run's id) resumes it as a
    later worker of a shared run does — it scores them once their trace has arrived, and nothing final."""
    kept = [i.trace_id for i in items if is_still_arriving(i)]
    if not kept:
        return
    load = store_loader(store)
    waits = {}
    for trace_id in kept:
        task = load(trace_id)
        # One that no longer loads waits no more: a resume stores why, as its final result.
        waits[trace_id] = still_arriving_for(task) if isinstance(task, TaskRecord) else 0.0
    store.keep_run_items(
        run.run_id,
        done=[i for i in items if not is_still_arriving(i)],
        waiting=waits,
        written=written,
    )


def _in_trace_order(items: Sequence[ItemResult]) -> tuple[ItemResult, ...]:
    """A local run's items as the store keeps them: one per trace (the one scored last, as its write
    replaced the earlier), in trace id order."""
    last = {item.trace_id: item for item in items}
    return tuple(last[t] for t in sorted(last))


async def _beside(later: QuietQueue[ItemResult] | None, run: Awaitable[RunRecord]) -> RunRecord:
    """``run``, with ``later``'s work done in its quiet moments (and what is left when it ends)."""
    if later is None:
        return await run
    quietly = asyncio.create_task(later.run())
    try:
        record = await run
    finally:
        quietly.cancel()
    later.finish()
    return record


def score_traces(
    store: Store,
    rubric: Rubric,
    *,
    rubric_path: str = "RUBRIC.yaml",
    trace_ids: Sequence[str] = (),
    name: str | None = None,
    from_time: datetime | None = None,
    to_time: datetime | None = None,
    sample: float | None = None,
    limit: int | None = None,
    rerun_of: str | None = None,
    manifest_path: Path | None = None,
    options: ScoreOptions | None = None,
    gate: float | None = None,
    targets: Sequence[str] = (),
    on_item: Callable[[ItemResult], None] | None = None,
    in_quiet: Callable[[ItemResult], None] | None = None,
) -> ScoreOutcome:
    """Score the stored traces chosen by ids (or ``rerun_of``'s), name glob, start time window,
    deterministic sample and limit with ``rubric`` (read from ``rubric_path``, named in hints),
    recorded as a run.

    ``options`` sets concurrency, repeats, budgets and the cache (its selection, manifest and
    rerun_of are filled in here). With ``gate``, a held-out calibration must allow this rubric and
    judge for these traces before any judge call (else :class:`~tracejudge.audit.GateRefused`);
    the outcome then says whether the pass rate clears it. ``targets`` write the scores back.
    ``on_item`` sees each item as it is scored (progress); ``in_quiet`` sees each item too, but while
    the run's judge calls are out (the moments no reply is being handled; the rest at the end), for
    work on it that no call should wait for — rendering its output.
    """
    if rerun_of is not None:
        trace_ids = _rerun_trace_ids(store, rerun_of)
    selection = _selection(trace_ids, name, from_time, to_time, sample, limit)

    def select() -> Iterator[str]:
        return select_trace_ids(
            store, trace_ids=trace_ids, name=name, since=from_time, until=to_time, sample=sample, limit=limit
        )

    ids = select()
    for target in targets:
        check_target(target)
    if gate is not None:
        # Refused before any judge call: a gate needs a held-out calibration (DESIGN 2).
        from tracejudge.audit import require_gate_for_traces

        require_gate_for_traces(store, rubric, select(), rubric_path=rubric_path)
    options = dataclasses.replace(
        options or ScoreOptions(),
        manifest=read_manifest(manifest_path) if manifest_path else None,
        selection=selection,
        rerun_of=rerun_of,
    )
    mine: list[ItemResult] = []
    later = QuietQueue(in_quiet) if in_quiet is not None else None

    def seen(item: ItemResult) -> None:
        mine.append(item)
        if later is not None:
            later.add(item)
        if on_item is not None:
            on_item(item)

    run = run_to_a_safe_stop(
        _beside(later, score_run_async(rubric, store, ids, options=options, on_item=seen))
    )
    # A shared run's summary is the whole run's; its items (and write-back) are this worker's. A local
    # run's items are the ones just scored, in trace id order as the store lists them (not read back:
    # 2,000 items took 0.2 s to read and validate again after the last reply).
    items = tuple(mine) if options.run_name is not None else _in_trace_order(mine)
    reports, pending = _write_backs(store, run, items, targets, options)
    verdict = None
    if gate is not None:
        from tracejudge.audit import gate_run

        verdict = gate_run(run, gate)
    # A local run that left items waiting is resumed as a shared run is (score --run RUN_ID).
    waiting = store.run_progress(run.run_id)
    return ScoreOutcome(
        run=run,
        items=items,
        write_back=reports,
        gate=verdict,
        write_back_pending=pending,
        waiting=waiting.waiting,
        waiting_s=waiting.waiting_s,
    )
