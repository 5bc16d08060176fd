"""The four checks (DESIGN 5.5): was the applicable material indexed, retrieved, in the model input, used?

Pure: a task record, a ticket and an optional index manifest in, a :class:`Localization` out.
Every status rests on evidence from the trace or the manifest; when the records cannot settle a
stage it is ``unconfirmed`` and ``missing`` names the records that would. Nothing is guessed.

Overall verdict with several required materials: each material gets its own verdict (first
failing stage in pipeline order; a stage after a failed or unconfirmed one is skipped). The
overall verdict is the fault whose deciding stage comes earliest in the pipeline (indexed,
retrieved, in_context, used_by_model), ties going to the material listed first in the ticket.
A fault on one material is established even when another is unconfirmed. With no fault,
``basis_not_in_effect`` (the ticket names material that did not apply) comes before
``unconfirmed``, which comes before ``no_fault``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from tracejudge.localize import _in_context, _indexed, _retrieved, _used_by_model
from tracejudge.localize._context import CheckContext, material_label, stage_result, task_time, utc
from tracejudge.localize._identify import identify
from tracejudge.localize._judge import UsageJudge
from tracejudge.normalize import DECORATOR_RUNS, OWN_TRACE_ID, incompleteness
from tracejudge.schema import (
    Localization,
    ManifestEntry,
    Material,
    MaterialResult,
    StageName,
    StageResult,
    TaskRecord,
    Ticket,
    Verdict,
)

__all__ = [
    "PIPELINE",
    "STAGES",
    "STILL_ARRIVING",
    "Stage",
    "answer_still_arriving",
    "localize",
    "still_arriving",
    "task_time",
    "trace_not_stored",
]


class Stage(NamedTuple):
    """One of the four checks, in the order the pipeline runs them."""

    name: StageName
    """The stage's name in reports."""
    check: Callable[[CheckContext, Material], StageResult]
    """``check(ctx, material)``: the stage's status for one required material, with its evidence."""
    fault: Callable[[CheckContext, Material, StageResult], Verdict]
    """The material's verdict when ``check`` failed."""


PIPELINE: tuple[Stage, ...] = (
    Stage("indexed", _indexed.check, _indexed.fault),
    Stage("retrieved", _retrieved.check, _retrieved.fault),
    Stage("in_context", _in_context.check, _in_context.fault),
    Stage("used_by_model", _used_by_model.check, _used_by_model.fault),
)
"""The checks in pipeline order: a material's first failed or unconfirmed stage decides its verdict
and the stages after it are skipped."""
STAGES: tuple[StageName, ...] = tuple(s.name for s in PIPELINE)
_FAULTS: frozenset[Verdict] = frozenset(
    {"not_indexed", "filtered", "not_retrieved", "dropped_in_context", "ignored_by_model"}
)


def _material(ctx: CheckContext, m: Material) -> MaterialResult:
    stages: list[StageResult] = []
    verdict: Verdict | None = None
    stop: StageResult | None = None
    for stage in PIPELINE:
        if stop is not None:
            why = "failed" if stop.status == "fail" else "is unconfirmed"
            stages.append(stage_result(stage.name, "skipped", f"not checked: {stop.name} {why}"))
            continue
        result = _check(ctx, stage, m)
        stages.append(result)
        if result.status == "fail":
            verdict = stage.fault(ctx, m, result)
            stop = result
        elif result.status == "unconfirmed":
            verdict, stop = "unconfirmed", result
    cause = next((s.cause for s in stages if s.cause is not None), None)
    return MaterialResult(
        doc_id=m.doc_id, version=m.version, verdict=verdict or "no_fault", cause=cause, stages=tuple(stages)
    )


STILL_ARRIVING = timedelta(minutes=10)
"""How long after its last span ended a trace that lacks spans (a parent, its root) is read as still
arriving. Exporters send a span when it ends, batched (the SDKs' BatchSpanProcessor: 5 s; a collector's
batch and tail-sampling processors: up to ~30 s), and retry a failed export for about a minute; past this a
missing span is not on its way — lost, or never exported (a span filter, a service exporting elsewhere) —
and the trace reads as it is, its notes saying what it lacks."""


def still_arriving(task: TaskRecord, now: datetime | None) -> str | None:
    """What says ``task``'s trace may still be arriving (:func:`~tracejudge.normalize.incompleteness`),
    when its last span ended less than :data:`STILL_ARRIVING` before ``now``, or ``now`` is not known; else
    None."""
    notes = incompleteness(task)
    if not notes:
        return None
    end, at = utc(task.end_time), utc(now)
    if end is not None and at is not None and at - end >= STILL_ARRIVING:
        return None
    return "; ".join(notes)


def answer_still_arriving(task: TaskRecord, now: datetime | None) -> str | None:
    """What says the answer read from ``task`` may be a draft the user never got: the trace may still be
    arriving (:func:`still_arriving`) and the answer was read from a model call, not recorded by the root
    (a later record not yet received may hold the answer given); else None. Triage does not judge such an
    answer (:func:`_check`), nor do ``triage --sweep`` and ``score``: they say so; a later run reads it."""
    late = still_arriving(task, now)
    return None if late is None or not _answer_may_be_draft(task) else late


def _answer_may_be_draft(task: TaskRecord) -> bool:
    return task.final_answer is not None and not _from_root(task, task.final_answer_span_id)


_NOT_YET: dict[StageName, str] = {
    "indexed": "a retrieval not yet received may show it returned, and so indexed",
    "retrieved": "a retrieval not yet received may have returned it",
    "in_context": "a model call not yet received may have been given it",
}


def _check(ctx: CheckContext, stage: Stage, m: Material) -> StageResult:
    """``stage.check``, where a trace that may still be arriving settles nothing by what it does not hold.

    Exporters send spans as they end, a batch at a time and each service on its own, so the first spans
    of a trace are stored (and may be triaged) before the rest: its root ends last. While a span's parent
    is still to come (:func:`still_arriving`), a retrieval or a model call not yet received may have
    returned the material or been given it, and a later call may have given the answer the user got — so
    "not returned", "not in the model input", "not indexed" (a manifest the trace contradicts once a
    retrieval shows the material returned is not read) and what an answer read from a model call states
    are unconfirmed. What the received records show (returned, in the input) stands."""
    late = ctx.incomplete
    if late is None:
        return stage.check(ctx, m)
    missing = f"the rest of the trace ({late}): triage again once it has arrived"
    if stage.name == "used_by_model":
        answer = ctx.task.final_answer_span_id
        if not _answer_may_be_draft(ctx.task):
            return stage.check(ctx, m)
        # Not asked of a judge either: the reply read may be a draft the user never got.
        detail = (
            f"the answer was read from span {answer}, but {late}: a later record not yet received may"
            " hold the answer the user got"
        )
        return stage_result("used_by_model", "unconfirmed", detail, missing=[missing])
    result = stage.check(ctx, m)
    if result.status != "fail" or stage.fault(ctx, m, result) == "basis_not_in_effect":
        # Material not in effect at task time is the ticket's and the manifest's word, not the trace's.
        return result
    detail = f"{result.detail}; but {late}: {_NOT_YET[stage.name]}"
    return stage_result(
        stage.name, "unconfirmed", detail, evidence=list(result.evidence), missing=[missing, *result.missing]
    )


def _from_root(task: TaskRecord, span_id: str | None) -> bool:
    """Whether ``span_id`` is the trace's root as recorded (a span that names no parent): what it says the
    task answered is its own, whatever spans under it are still to come."""
    node = next((n for n in task.spans if n.span_id == span_id), None)
    if node is None or node.parent_span_id is not None:
        return False
    # A span whose parent was not received is read as a root (SpanNode.parent_span_id None) with a gap.
    return not any(g.kind == "missing_parent" and g.span_id in (None, span_id) for g in task.gaps)


def _deciding_stage(r: MaterialResult) -> int:
    return next((i for i, s in enumerate(r.stages) if s.status in ("fail", "unconfirmed")), len(STAGES))


def _overall(results: Sequence[MaterialResult]) -> MaterialResult:
    faults = [(_deciding_stage(r), i) for i, r in enumerate(results) if r.verdict in _FAULTS]
    if faults:
        return results[min(faults)[1]]
    for wanted in ("basis_not_in_effect", "unconfirmed"):
        for r in results:
            if r.verdict == wanted:
                return r
    return results[0]


def _summary(decider: MaterialResult, results: Sequence[MaterialResult]) -> str:
    label = material_label(decider.doc_id, decider.version)
    if decider.verdict == "no_fault":
        what = "every required material" if len(results) > 1 else label
        text = f"no_fault: {what} was indexed, retrieved, in the model input and used"
    else:
        stage = next(s for s in decider.stages if s.status in ("fail", "unconfirmed"))
        text = f"{decider.verdict}: {stage.detail}"
    if len(results) > 1:
        others = ", ".join(
            f"{material_label(r.doc_id, r.version)}: {r.verdict}" for r in results if r is not decider
        )
        text += f" (decided by {label}; also {others})"
    return text


def localize(
    task: TaskRecord,
    ticket: Ticket,
    manifest: Sequence[ManifestEntry] | None = None,
    *,
    judge: UsageJudge | None = None,
    session_missing: str | None = None,
    now: datetime | None = None,
) -> Localization:
    """Localize why the answer of ``task`` was wrong, for the material ``ticket`` says applied.

    ``session_missing`` (set by :func:`~tracejudge.localize.localize_session`) names earlier turns of
    the conversation that are not stored: "not returned" is then not concluded. ``now``: when the triage
    runs; a trace that lacks spans (a parent, its root) and whose last span ended less than
    :data:`STILL_ARRIVING` before it (or at any time, when None) may still be arriving, and what it does
    not hold is then not concluded absent (:func:`_check`)."""
    if ticket.status == "draft":
        verified = ticket.model_copy(update={"status": "verified"})
        again = localize(task, verified, manifest, judge=judge, session_missing=session_missing, now=now)
        return _unverified(again)
    incomplete = still_arriving(task, now)
    if task.runs and ticket.required:
        runs = [_localized(run, ticket, manifest, judge, session_missing, incomplete) for run in task.runs]
        named = [run.run_label() for run in task.runs]
        missing = [OWN_TRACE_ID]
        if any(g.kind == "missing_parent" for g in task.gaps):
            # Spans whose parent was not received are a run of their own (the last run) and this run's: the
            # trace read whole is the reading where they are this run's.
            runs.append(_localized(task, ticket, manifest, judge, session_missing, incomplete))
            named.append("the trace read whole (the spans whose parent was not received as this run's)")
            missing.append(LOST_PARENT)
        elif any(g.kind == "several_runs" and DECORATOR_RUNS in g.detail for g in task.gaps):
            # A v2 @observe trace cut where its model calls' question changes: which step is whose is a
            # guess, and the trace read whole (one run) is a reading too.
            runs.append(_localized(task, ticket, manifest, judge, session_missing, incomplete))
            named.append("the trace read whole (its steps as one run's)")
        return _several_runs(task, ticket, runs, named, missing)
    return _localized(task, ticket, manifest, judge, session_missing, incomplete)


def _localized(
    task: TaskRecord,
    ticket: Ticket,
    manifest: Sequence[ManifestEntry] | None,
    judge: UsageJudge | None,
    session_missing: str | None,
    incomplete: str | None,
) -> Localization:
    """The checks over one run's record (the trace's, when it holds one); ``incomplete``: what says the trace
    may still be arriving (:func:`still_arriving`, of the whole trace)."""
    task = identify(task, manifest or ())
    ctx = CheckContext(
        task=task,
        ticket=ticket,
        manifest=manifest or (),
        task_time=task_time(task, ticket),
        judge=judge,
        session_missing=session_missing,
        incomplete=incomplete,
    )
    if not ticket.required:
        stages = [
            stage_result(
                "indexed",
                "unconfirmed",
                "the ticket names no required material",
                missing=["required material"],
            )
        ]
        stages += [stage_result(n, "skipped", "not checked: indexed is unconfirmed") for n in STAGES[1:]]
        return Localization(
            ticket=ticket.ticket,
            trace_id=task.trace_id,
            task_time=ctx.task_time,
            verdict="unconfirmed",
            summary="unconfirmed: the ticket names no required material",
            stages=tuple(stages),
        )
    results = [_material(ctx, m) for m in ticket.required]
    decider = _overall(results)
    return Localization(
        ticket=ticket.ticket,
        trace_id=task.trace_id,
        task_time=ctx.task_time,
        verdict=decider.verdict,
        cause=decider.cause,
        summary=_summary(decider, results),
        stages=decider.stages,
        materials=tuple(results),
    )


# What would tell whether spans whose parent was not received are this run's: the parent span itself.
LOST_PARENT = (
    "the span the spans name as their parent (not received: a lost span of this run, or another run's root);"
    " see why the trace's spans were lost (exporter queue, batch size, a process ended before flushing)"
)


def _several_runs(
    task: TaskRecord,
    ticket: Ticket,
    runs: Sequence[Localization],
    named: Sequence[str],
    missing: Sequence[str],
) -> Localization:
    """The result for a trace that holds several runs (``TaskRecord.runs``: several spans name no parent,
    several top-level observations of a Langfuse trace each hold a whole run, or spans name a parent not
    received beside a root: its trace id reused), ``runs`` each reading's result and ``named`` what it read:
    what every reading concludes alike stands — whichever run the ticket is about, it holds — and the first
    stage where they differ is unconfirmed, naming each reading's result there."""
    results = [
        _agreed([run.materials[i] for run in runs], named, missing) for i in range(len(ticket.required))
    ]
    decider = _overall(results)
    # Each run as run_label names it: its root span, or the parent its spans name when that was lost.
    roots = "; ".join(named[: len(task.runs)])
    whole = " and read whole" if len(runs) > len(task.runs) else ""
    summary = _summary(decider, results) + (
        f" — the trace holds {len(task.runs)} runs ({roots}: a trace id given to more than"
        f" one run), each checked on its own{whole}; "
        + ("each gives this verdict" if decider.verdict != "unconfirmed" or _alike(runs) else "they differ")
    )
    return Localization(
        ticket=ticket.ticket,
        trace_id=task.trace_id,
        task_time=task_time(task, ticket),
        verdict=decider.verdict,
        cause=decider.cause,
        summary=summary,
        stages=decider.stages,
        materials=tuple(results),
    )


def _alike(runs: Sequence[Localization]) -> bool:
    return len({(run.verdict, run.cause) for run in runs}) == 1


def _agreed(results: Sequence[MaterialResult], runs: Sequence[str], missing: Sequence[str]) -> MaterialResult:
    """One material's result over every run: the first run's while every run's stages read alike (status,
    cause, and the fault a failed stage gives); else, at the first stage they differ, ``unconfirmed`` saying
    what each run gives, the stages after it skipped."""
    first = results[0]
    for k, stage in enumerate(first.stages):
        said = [
            (r.stages[k].status, r.stages[k].cause, r.verdict if r.stages[k].status == "fail" else None)
            for r in results
        ]
        if len(set(said)) == 1:
            continue
        each = "; ".join(
            f"{run}: {status}" + (f" ({verdict})" if verdict else "")
            for run, (status, _, verdict) in zip(runs, said, strict=True)
        )
        detail = (
            f"the trace holds several runs (a trace id given to more than one run) and they differ here —"
            f" {each}: which run the ticket is about is not recorded"
        )
        stages = [*first.stages[:k], stage_result(stage.name, "unconfirmed", detail, missing=missing)]
        stages += [
            stage_result(s.name, "skipped", f"not checked: {stage.name} is unconfirmed")
            for s in first.stages[k + 1 :]
        ]
        return MaterialResult(
            doc_id=first.doc_id,
            version=first.version,
            verdict="unconfirmed",
            cause=None,
            stages=tuple(stages),
        )
    if first.verdict != "unconfirmed":
        return first
    # Every run unconfirmed at one stage: what would settle it is what each run misses.
    k = next(k for k, stage in enumerate(first.stages) if stage.status == "unconfirmed")
    missing = [m for r in results for m in r.stages[k].missing]
    stage = first.stages[k].model_copy(update={"missing": tuple(dict.fromkeys(missing))})
    return first.model_copy(update={"stages": (*first.stages[:k], stage, *first.stages[k + 1 :])})


def _unverified(loc: Localization) -> Localization:
    """A draft ticket's result: the same checks, marked as resting on a basis no person has verified."""
    note = "unverified basis (draft ticket, not yet confirmed by a person): "
    return loc.model_copy(update={"basis": "draft", "summary": note + loc.summary})


def trace_not_stored(ticket: Ticket, trace_id: str) -> Localization:
    """The result for a ticket whose trace has no stored spans: unconfirmed, asking for the trace.

    Used when many tickets are triaged at once, so one trace not yet collected does not stop the rest.
    """
    missing = f"the spans of trace {trace_id} in the store (collect the trace first)"
    return _unread(
        ticket, trace_id, f"no spans stored for trace {trace_id}", missing, "the trace is not stored"
    )


def trace_unreadable(ticket: Ticket, trace_id: str, reason: str) -> Localization:
    """The result for a ticket whose trace (or an earlier turn of its session) the store holds damaged
    (``reason``, a :attr:`~tracejudge.StoreDamageError.reason`): unconfirmed, as when it is not stored.

    Used when many tickets are triaged at once, so one damaged trace does not stop the rest."""
    missing = (
        f"the spans of trace {trace_id} as they were stored: restore the store from a backup"
        " (`tracejudge doctor --deep` lists the traces that no longer read back)"
    )
    return _unread(ticket, trace_id, reason, missing, "the stored trace does not read back")


def _unread(ticket: Ticket, trace_id: str, detail: str, missing: str, why: str) -> Localization:
    """Unconfirmed at the first stage (``detail``, ``missing``); the others not checked (``why``)."""
    stages = [stage_result("indexed", "unconfirmed", detail, missing=[missing])]
    stages += [stage_result(n, "skipped", f"not checked: {why}") for n in STAGES[1:]]
    return Localization(
        ticket=ticket.ticket,
        trace_id=trace_id,
        task_time=utc(ticket.task_time),
        verdict="unconfirmed",
        summary=f"unconfirmed: {detail}",
        stages=tuple(stages),
    )
