"""``calibrate sample``: traces for people to label, stratified across the judge's score bands and
heavy near the pass threshold, where a judge's mistakes matter most."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import quote

from tracejudge._errors import InputError
from tracejudge.runs import Loader, is_still_arriving, sample_bucket, still_arriving_reason, store_loader
from tracejudge.schema import ItemResult, Rubric, StoredReport, TaskRecord
from tracejudge.store import Store

BANDS = ("near_fail", "near_pass", "far_fail", "far_pass", "indeterminate")
"""Bands in the order unfilled quota moves to."""
SHARES = {"near_fail": 0.3, "near_pass": 0.3, "far_fail": 0.15, "far_pass": 0.15, "indeterminate": 0.1}
NEAR = 2.0


class QueueApi(Protocol):
    """What queueing needs of the Langfuse API client."""

    def get(self, path: str, params: Mapping[str, Any] | None = None, *, allow_404: bool = False) -> Any: ...

    def post(self, path: str, body: Any) -> Any: ...


@dataclass(frozen=True)
class Queued:
    """What ``calibrate sample --queue`` did to a Langfuse annotation queue."""

    queue_id: str
    """The queue."""
    queued: int
    """Traces added now."""
    already: int
    """Traces that were in the queue already and were left alone."""


@dataclass(frozen=True)
class LabellingSample:
    """The picked traces, ready to label, and how they were picked."""

    rows: tuple[dict[str, Any], ...]
    """One JSON object per trace, ``label`` empty."""
    bands: dict[str, int]
    """Picked per band."""
    available: dict[str, int]
    """Available per band."""
    run_id: str | None
    """The scoring run the bands come from."""
    report_id: str
    """Id of the stored record of the sample."""
    still_arriving: tuple[str, ...] = ()
    """Traces left out: they may still be arriving, their answer maybe a draft the user never got (left
    unscored by the run, or still arriving as the sample is drawn). Sample again once they have arrived."""


def band(item: ItemResult, thresholds: Mapping[str, float], default: float = 7.0) -> str:
    """Where an item's judge scores sit against the threshold: the smallest margin decides."""
    margins = [
        c.score - thresholds.get(name, default)
        for name, c in item.criteria.items()
        if c.decided_by == "judge" and c.score is not None
    ]
    if not margins:
        return "indeterminate"
    m = min(margins)
    if m < 0:
        return "near_fail" if m >= -NEAR else "far_fail"
    return "near_pass" if m < NEAR else "far_pass"


def allocate(n: int, available: Mapping[str, int]) -> dict[str, int]:
    """Quota per band: the shares, then what a band cannot fill moves to the next band in order."""
    quota = {b: min(available.get(b, 0), int(n * SHARES[b])) for b in BANDS}
    left = n - sum(quota.values())
    while left > 0:
        room = [b for b in BANDS if quota[b] < available.get(b, 0)]
        if not room:
            break
        for b in room:
            if left == 0:
                break
            quota[b] += 1
            left -= 1
    return quota


def labelling_sample(
    store: Store,
    n: int,
    *,
    run_id: str | None = None,
    rubric: Rubric | None = None,
) -> LabellingSample:
    """Pick ``n`` traces of a scoring run (default: the newest, of ``rubric`` when given)."""
    run_id = _sampled_run(store, run_id, rubric)
    late: list[str] = []
    by_band = _traces_by_band(store, run_id, rubric, late)
    available = {b: len(v) for b, v in by_band.items()}
    quota = allocate(n, available)
    load = store_loader(store)
    rows = []
    # Hash order: reproducible, and unrelated to when or how the traces arrived.
    for b in BANDS:
        for trace_id in sorted(by_band[b], key=sample_bucket)[: quota[b]]:
            row = _sample_row(load, trace_id)
            if row is None:
                late.append(trace_id)
            else:
                rows.append(row)
    report_id = f"sample-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    picked = {b: quota[b] for b in BANDS}
    store.put_report(
        StoredReport(
            report_id=report_id,
            kind="sample",
            created_at=datetime.now(UTC),
            run_id=run_id,
            rubric_name=rubric.name if rubric else None,
            rubric_version=str(rubric.version) if rubric else None,
            payload={
                "bands": picked,
                "available": available,
                "trace_ids": [r["trace_id"] for r in rows],
            },
        )
    )
    return LabellingSample(
        rows=tuple(rows),
        bands=picked,
        available=available,
        run_id=run_id,
        report_id=report_id,
        still_arriving=tuple(late),
    )


def _traces_by_band(
    store: Store, run_id: str, rubric: Rubric | None, late: list[str]
) -> dict[str, list[str]]:
    """The run's trace ids in each score band (against the rubric's thresholds when given); those the run
    left unscored as still arriving go to ``late`` instead (an answer to label may be a draft)."""
    thresholds = {c.name: c.threshold for c in rubric.criteria} if rubric else {}
    by_band: dict[str, list[str]] = {b: [] for b in BANDS}
    for item in store.iter_score_items(run_id):
        if is_still_arriving(item):
            late.append(item.trace_id)
        else:
            by_band[band(item, thresholds)].append(item.trace_id)
    return by_band


def _sample_row(load: Loader, trace_id: str) -> dict[str, Any] | None:
    """A labels line to fill in: the trace as a labeller sees it (ids only when it no longer loads); None
    when it may still be arriving, its answer maybe a draft (:func:`~tracejudge.runs.still_arriving_reason`):
    no one should label that."""
    row: dict[str, Any] = {"id": trace_id, "trace_id": trace_id, "label": None, "rater": None}
    task = load(trace_id)
    if not isinstance(task, str):
        if still_arriving_reason(task) is not None:
            return None
        row.update(_row_fields(task))
    return row


def _sampled_run(store: Store, run_id: str | None, rubric: Rubric | None) -> str:
    """The run asked for, which must exist, else the newest scoring run (of ``rubric`` when given)."""
    if run_id is not None:
        if store.get_run(run_id) is None:
            raise InputError(
                f"no run {run_id} in the store", hint="see the run ids printed by `tracejudge score`"
            )
        return run_id
    runs = [r for r in store.list_runs() if rubric is None or r.provenance.rubric_name == rubric.name]
    if not runs:
        raise InputError(
            "no scoring run to sample from",
            hint="run `tracejudge score --rubric R` first; the sample is stratified by its scores",
        )
    return runs[0].run_id


def _row_fields(task: TaskRecord) -> dict[str, Any]:
    """What a labeller sees of a loaded trace: input, answer, retrieved context, tool calls, prompt."""
    prompts = sorted({m.prompt for m in task.model_calls if m.prompt})
    context = [
        {"doc_id": d.doc_id, "version": d.version, "content": d.content}
        for r in task.retrievals
        for d in r.documents
    ]
    return {
        "input": task.input,
        "output": task.final_answer,
        "context": context or None,
        "tool_calls": [
            {"name": t.name, "arguments": t.arguments, "result": t.result} for t in task.tool_calls
        ],
        "prompt": prompts[-1] if prompts else None,
    }


def _queue_hint(api: QueueApi) -> str:
    listed = api.get("/annotation-queues", {"page": 1, "limit": 20}, allow_404=True)
    rows = listed.get("data", []) if isinstance(listed, dict) else []
    known = ", ".join(f"{q.get('name')} ({q.get('id')})" for q in rows if isinstance(q, dict))
    where = f"queues in this project: {known}" if known else "this project has no annotation queues"
    return f"create the queue in Langfuse (Annotation Queues) and pass its id; {where}"


def queued_trace_ids(api: QueueApi, queue_id: str) -> set[str]:
    """Trace ids already in a Langfuse annotation queue (every page, any status)."""
    path = f"/annotation-queues/{quote(queue_id, safe='')}/items"
    found: set[str] = set()
    page = 1
    while True:
        body = api.get(path, {"page": page, "limit": 100})
        found |= {i["objectId"] for i in body.get("data", []) if i.get("objectType") == "TRACE"}
        if page >= int(body.get("meta", {}).get("totalPages", 1)):
            return found
        page += 1


def queue_for_annotation(api: QueueApi, queue_id: str, trace_ids: Sequence[str]) -> Queued:
    """Put traces in a Langfuse annotation queue. Traces already queued are skipped, so picking the
    same sample twice does not queue a trace twice. An unknown queue is an :class:`InputError`."""
    if api.get(f"/annotation-queues/{quote(queue_id, safe='')}", allow_404=True) is None:
        raise InputError(f"Langfuse has no annotation queue {queue_id!r}", hint=_queue_hint(api))
    present = queued_trace_ids(api, queue_id)
    added = 0
    for trace_id in dict.fromkeys(trace_ids):
        if trace_id in present:
            continue
        api.post(
            f"/annotation-queues/{quote(queue_id, safe='')}/items",
            {"objectId": trace_id, "objectType": "TRACE"},
        )
        added += 1
    return Queued(queue_id=queue_id, queued=added, already=len(set(trace_ids)) - added)
