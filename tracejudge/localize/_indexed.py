"""The ``indexed`` stage: was the required material in the index at task time?"""

from __future__ import annotations

from datetime import datetime

from tracejudge.localize._context import (
    CheckContext,
    candidate,
    doc_note,
    is_effective,
    iso,
    material_label,
    other_version_notes,
    stage_result,
    utc,
)
from tracejudge.schema import Evidence, ManifestEntry, Material, StageResult, Verdict


def _indexed_at(e: ManifestEntry, t: datetime) -> bool:
    at, removed = utc(e.indexed_at), utc(e.removed_at)
    return at is not None and at <= t and (removed is None or removed > t)


def not_in_effect(ctx: CheckContext, m: Material) -> ManifestEntry | None:
    """The manifest entry showing ``m`` was not in effect at task time, or None when it was (or
    nothing says): then the ticket names material that did not apply (``basis_not_in_effect``)."""
    entries = ctx.entries(m)
    t = ctx.task_time
    if entries and t is not None and not any(is_effective(e, t) for e in entries):
        return entries[0]
    return None


def check(ctx: CheckContext, m: Material) -> StageResult:
    """Was ``m`` in the index at task time? Returned or a retrieval candidate shows it was; else the
    manifest's indexed_at/removed_at decide; without a manifest entry it is unconfirmed."""
    label = material_label(m.doc_id, m.version)
    e, t = not_in_effect(ctx, m), ctx.task_time
    if e is not None and t is not None:
        return _did_not_apply(label, e, t)
    return _seen_in_trace(ctx, m, label) or _by_manifest(ctx, m, label)


def _did_not_apply(label: str, e: ManifestEntry, t: datetime) -> StageResult:
    start, end = utc(e.effective_from), utc(e.effective_to)
    if start is not None and start > t:
        why = f"was not yet in effect at task time {iso(t)}: effective from {iso(start)}"
    else:
        why = f"was no longer in effect at task time {iso(t)}: effective until {iso(end)}"
    note = f"manifest: {material_label(e.doc_id, e.version)} effective {iso(start)} .. {iso(end)}"
    detail = f"{label} {why}; the ticket names material that did not apply then"
    return stage_result("indexed", "fail", detail, evidence=[Evidence(note=note)])


def _seen_in_trace(ctx: CheckContext, m: Material, label: str) -> StageResult | None:
    """Pass when the trace itself shows ``m`` in the index: returned, or among the candidates."""
    hits = ctx.hits(m)
    if hits.exact:
        ev = [doc_note(call, doc, "returned") for call, doc in hits.exact]
        return stage_result("indexed", "pass", f"{label} was retrieved, so it was in the index", evidence=ev)
    for call in ctx.task.retrievals:
        c = candidate(call, m)
        if c is not None and (m.version is None or c.version is not None):
            note = f"listed among the retriever's candidates (excluded_by={c.excluded_by})"
            detail = f"{label} was a retrieval candidate, so it was in the index"
            return stage_result(
                "indexed", "pass", detail, evidence=[Evidence(span_id=call.span_id, note=note)]
            )
    return None


def _by_manifest(ctx: CheckContext, m: Material, label: str) -> StageResult:
    """What the manifest says of ``m`` at task time: indexed (pass), not (fail), or nothing."""
    entries = ctx.entries(m)
    t = ctx.task_time
    other = other_version_notes(ctx.hits(m), m)
    if not entries:
        return _no_entry(ctx, m, label, other)
    if t is None:
        missing = ["task time (task_time in the ticket, or a trace start time)"]
        return stage_result(
            "indexed", "unconfirmed", "the task time is unknown", evidence=other, missing=missing
        )
    ok = [e for e in entries if _indexed_at(e, t)]
    if ok:
        e = ok[0]
        note = f"manifest: {material_label(e.doc_id, e.version)} indexed_at {iso(utc(e.indexed_at))}"
        if e.removed_at is not None:
            note += f", removed_at {iso(utc(e.removed_at))}"
        detail = f"the manifest shows {label} in the index at task time {iso(t)}"
        return stage_result("indexed", "pass", detail, evidence=[Evidence(note=note), *other])
    notes = [Evidence(note=_not_indexed_note(e, t)) for e in entries]
    detail = f"{label} was in effect at task time {iso(t)} but not in the index then (ingestion fault)"
    return stage_result("indexed", "fail", detail, evidence=[*notes, *other])


def _no_entry(ctx: CheckContext, m: Material, label: str, other: list[Evidence]) -> StageResult:
    """Unconfirmed: the manifest has no entry for ``m`` (noting the versions it lists instead)."""
    detail = f"no record shows whether {label} was in the index at task time"
    missing = [f"index manifest entry for {label}"]
    versions = [e.version or "(no version)" for e in ctx.manifest if e.doc_id == m.doc_id]
    if versions:
        # A version the manifest does not list is not proof it was never indexed: the
        # manifest may be partial, or the ticket may spell the version differently.
        note = f"manifest lists {m.doc_id} only as {', '.join(dict.fromkeys(versions))}"
        other = [Evidence(note=note), *other]
    return stage_result("indexed", "unconfirmed", detail, evidence=other, missing=missing)


def _not_indexed_note(e: ManifestEntry, t: datetime) -> str:
    at, removed = utc(e.indexed_at), utc(e.removed_at)
    what = material_label(e.doc_id, e.version)
    if at is None:
        return f"manifest: {what} never indexed (indexed_at null)"
    if at > t:
        return f"manifest: {what} indexed only at {iso(at)}, after the task"
    return f"manifest: {what} removed from the index at {iso(removed)}"


def fault(ctx: CheckContext, m: Material, _result: StageResult) -> Verdict:
    """The verdict a failed ``indexed`` stage gives: material not in effect then is no index fault."""
    return "basis_not_in_effect" if not_in_effect(ctx, m) is not None else "not_indexed"
