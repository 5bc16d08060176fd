"""``score`` as a library call: select stored traces, score them with a rubric, write the scores
back, judge the gate. The CLI renders a :class:`ScoreOutcome`; :meth:`ScoreOutcome.json` is exactly
what ``tracejudge score --json`` prints, for any other caller (an MCP server) to return.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shlex
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from tracejudge._errors import InputError
from tracejudge._redact import redact
from tracejudge.checks import read_manifest
from tracejudge.runs._quiet import QuietQueue
from tracejudge.runs._report import run_json
from tracejudge.runs._run import ScoreOptions, score_run_async
from tracejudge.runs._select import select_trace_ids
from tracejudge.runs._shared import selection_options, write_back_shared_run
from tracejudge.runs._signals import run_to_a_safe_stop
from tracejudge.runs._writeback import check_target, write_back
from tracejudge.schema import ItemResult, Rubric, RunRecord
from tracejudge.store import Store
from tracejudge.write import WriteReport

if TYPE_CHECKING:
    from tracejudge.audit import RunGate

__all__ = ["ScoreOutcome", "resume_command", "resume_store_arg", "score_traces"]


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
    ``still_arriving: …``; the run stays ``running``) once this worker is done; a later worker of the run
    (``score --run NAME`` again; a local run: ``score --run RUN_ID``) scores them once their trace has
    arrived or their wait is over. None: not known (an outcome made elsewhere)."""
    waiting_s: float | None = None
    """Seconds until the first of them may be scored (None when none wait)."""
    resume: str | None = None
    """While items wait: the command that scores them (:func:`resume_command`), else None."""

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
            # Counted among the summary's indeterminate items: how many of them are not final.
            data["summary"]["waiting"] = self.waiting
            data["waiting"] = {"items": self.waiting, "after_s": self.waiting_s, "command": self.resume}
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
    """Write-back's reports, and for a shared or resumable run what of the whole run is left to write."""
    if options.run_name is None and run.status != "running":
        return tuple(write_back(t, run, items) for t in targets), None
    # A shared run: whatever a stopped or dead worker of the run left unwritten too, each item by one
    # worker. A local run left running kept items as not final (score_run_async): its final items are
    # written as a shared run's are, so that its resume writes the kept ones once scored, and only them.
    reports = write_back_shared_run(
        store, run, targets, lease_s=options.lease_s, reconnect_s=options.reconnect_s
    )
    return reports, (store.run_unwritten(run.run_id) if targets else None)


# Query parameters that may carry a secret (as the redactor reads them): left out of a printed store URL.
_SECRET_PARAM = re.compile(
    r"(?i)^(?:api[_-]?key|key|token|access_token|secret|password|sig|signature|auth|code)$"
)


def resume_store_arg(url: str, *, environment: str | None) -> str | None:
    """The ``--store`` a resume command names for a run on the store at ``url``: none when ``url`` is
    ``environment`` (the store the command's environment gives it: ``TRACEJUDGE_STORE`` or the default;
    None when the environment is not the caller's, as an MCP server's), else ``url`` without its secrets.

    A run on a store the command does not name goes on in another store — the default, empty — so the
    store is named even when its URL holds a secret: its password left out (the user stays, and
    PostgreSQL then reads the password from ``PGPASSWORD`` or ``~/.pgpass``), and query parameters that
    may hold one; where a secret would still show, the URL as :func:`~tracejudge._redact.redact` shows
    it (never the secret)."""
    if url == environment:
        return None
    # Edited in place, not rebuilt: urlunsplit drops an empty authority (sqlite:////abs.db).
    named, parts = url, urlsplit(url)
    if parts.password is not None:
        userinfo, _, host = parts.netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        named = named.replace(f"//{parts.netloc}", f"//{user}@{host}" if user else f"//{host}", 1)
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in query if not _SECRET_PARAM.match(k)]
    if len(kept) != len(query):
        named = named.replace(f"?{parts.query}", f"?{urlencode(kept)}" if kept else "", 1)
    return named if redact(named) == named else redact(named)


def resume_command(
    run: RunRecord,
    rubric: Rubric,
    *,
    rubric_path: str,
    manifest_path: Path | None = None,
    targets: Sequence[str] = (),
    store_arg: str | None = None,
) -> str:
    """The command that goes on with ``run`` (a later worker of a shared run, or a local run's resume):
    ``score --run`` with the run's id and every option a worker must share with it — its rubric, selection
    (an earlier run's ``--rerun``, else its trace ids; times as the run read them), repeat, manifest and
    budget — and ``targets``' write-back. ``store_arg``: the ``--store`` to name (None: the environment's)."""
    args = ["tracejudge", *(("--store", store_arg) if store_arg else ())]
    args += ["score", "--rubric", rubric_path, "--run", run.run_id]
    selection = run.selection
    if run.rerun_of is not None:
        args += ["--rerun", run.rerun_of]
    else:
        for trace_id in selection.get("trace_ids") or ():
            args += ["--trace", str(trace_id)]
    for flag, value in selection_options(selection):
        args += [flag, value]
    if run.provenance.repeat != rubric.repeat:
        args += ["--repeat", str(run.provenance.repeat)]
    if manifest_path is not None:
        args += ["--manifest", str(manifest_path)]
    # As stored, to the last digit: a worker's budget must equal the run's.
    if "usd" in run.budget:
        args += ["--budget-usd", repr(run.budget["usd"])]
    if "tokens" in run.budget:
        args += ["--budget-tokens", str(int(run.budget["tokens"]))]
    for target in targets:
        args += ["--write-back", target]
    return shlex.join(args)


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
    store_arg: str | None = None,
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
    work on it that no call should wait for — rendering its output. ``store_arg``: the ``--store`` the
    outcome's resume command names (None: none, the environment's store).
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
    # A local run that left items waiting is resumed as a shared run is (score --run RUN_ID). One the
    # budget stopped scores nothing more: what it kept is final as it is, and nothing waits.
    progress = store.run_progress(run.run_id)
    waiting = 0 if progress.stopped else progress.waiting
    verdict = None
    if gate is not None:
        from tracejudge.audit import gate_run

        verdict = gate_run(run, gate, waiting=waiting)
    resume = None
    if waiting:
        resume = resume_command(
            run,
            rubric,
            rubric_path=rubric_path,
            manifest_path=manifest_path,
            targets=targets,
            store_arg=store_arg,
        )
    return ScoreOutcome(
        run=run,
        items=items,
        write_back=reports,
        gate=verdict,
        write_back_pending=pending,
        waiting=waiting,
        waiting_s=progress.waiting_s if waiting else None,
        resume=resume,
    )
