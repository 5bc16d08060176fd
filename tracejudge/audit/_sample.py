"""``calibrate sample``: traces for people to label, stratified across the judge's score bands and
heavy near the pass threshold, where a judge's mistakes matter most."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from tracejudge._errors import InputError
from tracejudge.runs import sample_bucket, store_loader
from tracejudge.schema import ItemResult, Rubric, StoredReport
from tracejudge.store import Store

BANDS = ("near_fail", "near_pass", "far_fail", "far_pass", "indeterminate")
"""Bands in the order unfilled quota moves to."""
SHARES = {"near_fail": 0.3, "near_pass": 0.3, "far_fail": 0.15, "far_pass": 0.15, "indeterminate": 0.1}
NEAR = 2.0


class QueueApi(Protocol):
    """What queueing needs of the Langfuse API client."""

    def post(self, path: str, body: Any) -> Any: ...


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
    if run_id is None:
        runs = [r for r in store.list_runs() if rubric is None or r.provenance.rubric_name == rubric.name]
        if not runs:
            raise InputError(
                "no scoring run to sample from",
                hint="run `tracejudge score --rubric R` first; the sample is stratified by its scores",
            )
        run_id = runs[0].run_id
    elif store.get_run(run_id) is None:
        raise InputError(
            f"no run {run_id} in the store", hint="see the run ids printed by `tracejudge score`"
        )
    thresholds = {c.name: c.threshold for c in rubric.criteria} if rubric else {}
    by_band: dict[str, list[str]] = {b: [] for b in BANDS}
    for item in store.iter_score_items(run_id):
        by_band[band(item, thresholds)].append(item.trace_id)
    available = {b: len(v) for b, v in by_band.items()}
    quota = allocate(n, available)
    load = store_loader(store)
    rows: list[dict[str, Any]] = []
    for b in BANDS:
        # Hash order: reproducible, and unrelated to when or how the traces arrived.
        for trace_id in sorted(by_band[b], key=sample_bucket)[: quota[b]]:
            task = load(trace_id)
            row: dict[str, Any] = {"id": trace_id, "trace_id": trace_id, "label": None, "rater": None}
            if not isinstance(task, str):
                prompts = sorted({m.prompt for m in task.model_calls if m.prompt})
                row.update(
                    input=task.input,
                    output=task.final_answer,
                    context=[
                        {"doc_id": d.doc_id, "version": d.version, "content": d.content}
                        for r in task.retrievals
                        for d in r.documents
                    ]
                    or None,
                    tool_calls=[
                        {"name": t.name, "arguments": t.arguments, "result": t.result}
                        for t in task.tool_calls
                    ],
                    prompt=prompts[-1] if prompts else None,
                )
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
        rows=tuple(rows), bands=picked, available=available, run_id=run_id, report_id=report_id
    )


def queue_for_annotation(api: QueueApi, queue_id: str, trace_ids: Sequence[str]) -> int:
    """Put traces in a Langfuse annotation queue; returns how many were queued."""
    for trace_id in trace_ids:
        api.post(f"/annotation-queues/{queue_id}/items", {"objectId": trace_id, "objectType": "TRACE"})
    return len(trace_ids)
