"""From verified feedback and its trace to regression samples (DESIGN 5.8). Pure: records in, samples out."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from tracejudge.schema import (
    CheckSpec,
    CitesCheck,
    ContainsCheck,
    Criterion,
    FixedDocument,
    FixedRetrieval,
    Localization,
    ManifestEntry,
    Material,
    NumberCheck,
    RegressionRecord,
    Sample,
    SampleBasis,
    SampleEnvironment,
    SampleExpected,
    SampleInput,
    SampleKind,
    SampleMaterial,
    SampleMessage,
    SampleObserved,
    SampleSource,
    SampleSplit,
    SampleTool,
    TaskRecord,
    Ticket,
    ToolCheck,
)

ESCALATE_TOOL = "escalate"
"""The mocked tool an agent calls to hand a question to a person; expected when materials are incomplete."""

_KIND_ORDER: dict[SampleKind, int] = {"failure": 0, "boundary": 1, "reasonable_rejection": 2, "success": 3}
_POSITIVE_LABELS = frozenset(
    ["correct", "good", "positive", "pass", "passed", "up", "thumbs_up", "yes", "helpful", "right"]
)


@dataclass(frozen=True)
class TicketExtras:
    """Optional keys of a ticket file that only ``regress build`` reads (the triage ticket ignores them)."""

    kind: SampleKind | None = None
    """Overrides the kind the triage verdict implies."""
    forbidden_tools: tuple[str, ...] = ()
    """Tools the agent must not call for this request: mocked in ``block`` mode and checked."""
    verified_at: date | datetime | None = None
    """When the feedback was verified."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Extra tags."""


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _digest(*parts: Any) -> str:
    canon = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def sample_id(trace_id: str, basis: SampleBasis) -> str:
    """Stable id: derived from the source trace and the basis."""
    return "rs-" + _digest(trace_id.lower(), basis.model_dump(mode="json"))[:8]


def group_of(basis: SampleBasis, fallback: str) -> str:
    """Near-duplicate group: the object the basis is about (``C-17/attachment`` -> ``basis-C-17``)."""
    docs = [m.doc_id for m in basis.required] or [m.doc_id for m in basis.superseded]
    root = docs[0].split("/")[0] if docs else fallback
    return "basis-" + re.sub(r"[^0-9A-Za-z._-]+", "-", root).strip("-")


def split_of(group: str, acceptance_share: float = 0.5) -> SampleSplit:
    """Deterministic split by group, so a group never straddles splits."""
    bucket = int(_digest("split", group)[:8], 16) / 0xFFFFFFFF
    return "acceptance" if bucket < acceptance_share else "debug"


def _label(doc_id: str, version: str | None) -> str:
    return f"{doc_id}@{version}" if version else doc_id


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_") or "x"


def _in_effect(e: ManifestEntry, t: datetime | None) -> bool:
    if t is None:
        return True
    start, end = _utc(e.effective_from), _utc(e.effective_to)
    return (start is None or start <= t) and (end is None or end > t)


def _indexed(e: ManifestEntry, t: datetime | None) -> bool:
    indexed, removed = _utc(e.indexed_at), _utc(e.removed_at)
    if indexed is None:
        return False
    if t is None:
        return removed is None
    return indexed <= t and (removed is None or removed > t)


def _matches(m: Material, doc_id: str, version: str | None) -> bool:
    return m.doc_id == doc_id and (m.version is None or m.version == version)


def _user_messages(task: TaskRecord) -> tuple[SampleMessage, ...]:
    if task.input:
        return (SampleMessage(role="user", content=task.input),)
    for call in task.model_calls:
        users = [m.content for m in call.input_messages if m.role == "user" and m.content]
        if users:
            return (SampleMessage(role="user", content=users[-1]),)
    return (SampleMessage(role="user", content=""),)


def _recorded(task: TaskRecord) -> dict[tuple[str, str | None], str]:
    """(doc_id, version) of each retrieved document with text -> its text as first retrieved."""
    recorded: dict[tuple[str, str | None], str] = {}
    for d in (d for r in task.retrievals for d in r.documents):
        if d.doc_id and d.content:
            recorded.setdefault((d.doc_id, d.version), d.content)
    return recorded


def _materials(
    task: TaskRecord, basis: SampleBasis, manifest: Sequence[ManifestEntry], t: datetime | None
) -> list[SampleMaterial]:
    """Every material the environment holds: the manifest's entries in effect at the task time or named
    by the basis, with their text (the manifest's, else as retrieved); without a manifest, what was
    retrieved. A basis material with no text anywhere is left out (``regress check`` reports it)."""
    recorded = _recorded(task)
    named = [*basis.required, *basis.superseded]
    out: dict[tuple[str, str | None], SampleMaterial] = {}
    for e in manifest:
        key = (e.doc_id, e.version)
        text = e.content or recorded.get(key)
        if text is not None and key not in out and _wanted(e, t, named, recorded):
            out[key] = _manifest_material(e, text, t)
    for (doc_id, version), text in recorded.items():
        if (doc_id, version) not in out:
            out[(doc_id, version)] = SampleMaterial(
                doc_id=doc_id, version=version, content=text, searchable=True
            )
    return list(out.values())


def _wanted(
    e: ManifestEntry,
    t: datetime | None,
    named: Sequence[Material],
    recorded: Mapping[tuple[str, str | None], str],
) -> bool:
    """Does the environment hold this manifest entry: in effect at ``t``, named by the basis, or retrieved?"""
    return (
        _in_effect(e, t)
        or any(_matches(m, e.doc_id, e.version) for m in named)
        or (e.doc_id, e.version) in recorded
    )


def _manifest_material(e: ManifestEntry, text: str, t: datetime | None) -> SampleMaterial:
    return SampleMaterial(
        doc_id=e.doc_id,
        version=e.version,
        content=text,
        effective_from=e.effective_from,
        effective_to=e.effective_to,
        metadata=dict(e.metadata),
        acl=e.acl,
        searchable=_indexed(e, t),
    )


def available(material: SampleMaterial, principal: str | None, t: datetime | None) -> bool:
    """Whether the agent could have found this material: searchable, readable by the principal, in effect."""
    if not material.searchable:
        return False
    if material.acl is not None and (principal is None or principal not in material.acl):
        return False
    start, end = _utc(material.effective_from), _utc(material.effective_to)
    return t is None or ((start is None or start <= t) and (end is None or end > t))


def _find(materials: Sequence[SampleMaterial], m: Material) -> SampleMaterial | None:
    hits = [x for x in materials if _matches(m, x.doc_id, x.version)]
    return hits[-1] if hits else None


def basis_complete(sample_basis: SampleBasis, env: SampleEnvironment, principal: str | None) -> bool:
    """Every required material is in the environment and available to the principal at the task time."""
    t = _utc(env.task_time)
    for m in sample_basis.required:
        found = _find(env.materials, m)
        if found is None or not available(found, principal, t):
            return False
    return bool(sample_basis.required)


def _fixed_retrieval(
    task: TaskRecord,
    basis: SampleBasis,
    materials: Sequence[SampleMaterial],
    principal: str | None,
    t: datetime | None,
) -> FixedRetrieval | None:
    """The recorded results, plus any required material the agent could have found but did not get:
    fixed retrieval tests the model on the right material with the distractors it really saw."""
    docs: dict[tuple[str, str | None], FixedDocument] = {}
    for d in (d for r in task.retrievals for d in r.documents):
        if d.doc_id and (d.doc_id, d.version) not in docs:
            docs[(d.doc_id, d.version)] = FixedDocument(doc_id=d.doc_id, version=d.version, score=d.score)
    for m in _reachable(basis, materials, principal, t):
        docs.setdefault((m.doc_id, m.version), FixedDocument(doc_id=m.doc_id, version=m.version))
    if not docs:
        return None
    query = next((r.query for r in task.retrievals if r.query), None)
    return FixedRetrieval(query=query, documents=tuple(docs.values()))


def _reachable(
    basis: SampleBasis, materials: Sequence[SampleMaterial], principal: str | None, t: datetime | None
) -> Iterator[SampleMaterial]:
    """The environment's material for each required one, where the principal could have found it at ``t``."""
    for m in basis.required:
        found = _find(materials, m)
        if found is not None and available(found, principal, t):
            yield found


def _number_spellings(value: float) -> list[str]:
    if value != int(value):
        return [f"{value:g}"]
    n = int(value)
    out = [f"{n:,}", str(n), f"{n:,}".replace(",", " ")]
    if n % 1000 == 0 and n >= 1000:
        out.append(f"{n // 1000}k")
    return list(dict.fromkeys(out))


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


def _numbers(facts: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """The numeric facts of a material: (key, value)."""
    for key, value in facts.items():
        num = _numeric(value)
        if num is not None:
            yield key, num


def _basis_checks(basis: SampleBasis) -> list[CheckSpec]:
    """With the basis available: state each required material's numeric facts, and cite its version."""
    checks: list[CheckSpec] = []
    for m in basis.required:
        checks += [
            NumberCheck(name=f"states_{_slug(key)}", type="number", expected=num)
            for key, num in _numbers(m.facts)
        ]
        checks.append(
            CitesCheck(
                name=f"cites_{_slug(_label(m.doc_id, m.version))}",
                type="cites",
                doc_id=m.doc_id,
                version=m.version,
            )
        )
    return checks


def _superseded_checks(basis: SampleBasis) -> list[CheckSpec]:
    """Never state a superseded material's number that no required material states too."""
    required = {num for m in basis.required for _, num in _numbers(m.facts)}
    return [
        ContainsCheck(
            name=f"not_superseded_{_slug(key)}_{_slug(f'{num:g}')}",
            type="not_contains",
            value=_number_spellings(num),
        )
        for m in basis.superseded
        for key, num in _numbers(m.facts)
        if num not in required
    ]


def _basis_text(basis: SampleBasis) -> str:
    """The required materials as the expected behaviour names them, each with its clause."""
    return "; ".join(
        _label(m.doc_id, m.version) + (f' ("{m.clause}")' if m.clause else "") for m in basis.required
    )


def _rests_on(basis_text: str, stale: str) -> tuple[str, Criterion]:
    """Behaviour and criterion when the basis is available: answer from it."""
    behavior = f"answer from {basis_text}" + (f", not from the superseded {stale}" if stale else "")
    return behavior, Criterion(
        name="rests_on_basis",
        description=(
            f"The answer rests on {basis_text} and states what follows from it for the request, "
            "in any wording; it does not rely on superseded material."
        ),
    )


def _handles_missing(basis_text: str, stale: str) -> tuple[str, Criterion]:
    """Behaviour and criterion when the basis is missing: say so, give no value, re-query or escalate."""
    behavior = (
        f"the applicable material ({basis_text}) is not available: say so, do not give a value from "
        f"other material{f' (such as {stale})' if stale else ''}, and re-query or escalate to a person"
    )
    return behavior, Criterion(
        name="handles_missing_material",
        description=(
            "The answer does not present a value the available material cannot support, and it "
            "re-queries or hands the question to a person. Saying only that the answer is pending "
            "verification does not pass."
        ),
    )


def expected_for(
    basis: SampleBasis, *, complete: bool, forbidden_tools: Sequence[str] = ()
) -> SampleExpected:
    """Hard checks and criteria: any phrasing resting on the right basis with the right actions passes.

    With the basis available: cite each required material's version and state its numeric facts, and
    never a superseded value. With it missing: escalate (or re-query) and do not present a superseded
    value; saying only "pending verification" does not pass.
    """
    checks = _basis_checks(basis) if complete else []
    checks += _superseded_checks(basis)
    checks += [
        ToolCheck(name=f"no_{_slug(tool)}", type="tool_not_called", tool=tool) for tool in forbidden_tools
    ]
    stale = ", ".join(_label(m.doc_id, m.version) for m in basis.superseded)
    if complete:
        behavior, criterion = _rests_on(_basis_text(basis), stale)
    else:
        checks.append(ToolCheck(name="escalates", type="tool_called", tool=ESCALATE_TOOL))
        behavior, criterion = _handles_missing(_basis_text(basis), stale)
    if forbidden_tools:
        behavior += f"; do not call {', '.join(forbidden_tools)}"
    return SampleExpected(behavior=behavior, checks=tuple(checks), criteria=(criterion,))


def _record(task: TaskRecord, basis: SampleBasis, rubric: str | None) -> RegressionRecord:
    model = next((c.model for c in task.model_calls if c.model), None)
    prompt = next((c.prompt for c in task.model_calls if c.prompt), None)
    retrieval = None
    if task.retrievals:
        r = task.retrievals[0]
        parts = []
        if r.top_k is not None:
            parts.append(f"top_k={r.top_k}")
        if r.filter is not None:
            parts.append("filter=" + json.dumps(r.filter, sort_keys=True))
        if r.principal:
            parts.append(f"principal={r.principal}")
        parts.append(f"returned={len(r.documents)}")
        retrieval = ",".join(parts)
    return RegressionRecord(
        materials={m.doc_id: m.version for m in basis.required},
        model=model,
        prompt=prompt,
        retrieval=retrieval,
        rubric=rubric,
    )


def _kind_for(loc: Localization, extras: TicketExtras) -> SampleKind:
    if extras.kind is not None:
        return extras.kind
    if loc.verdict == "no_fault":
        return "success"
    if loc.verdict == "basis_not_in_effect":
        return "boundary"
    return "failure"


def _basis_for(ticket: Ticket, loc: Localization, manifest: Sequence[ManifestEntry]) -> SampleBasis:
    if loc.verdict != "basis_not_in_effect":
        return SampleBasis(required=ticket.required, superseded=ticket.superseded)
    # The ticket named material not yet in effect: what applied then was the "superseded" material in
    # effect at the task time, and the ticket's material is the one the answer must not rest on.
    t = _utc(loc.task_time)
    in_force = tuple(
        m
        for m in ticket.superseded
        if any(_matches(m, e.doc_id, e.version) and _in_effect(e, t) for e in manifest) or not manifest
    )
    return SampleBasis(required=in_force or ticket.superseded, superseded=ticket.required)


def _principal(task: TaskRecord) -> str | None:
    """Who the retrieval ran as: the first retrieval that records one."""
    return next((r.principal for r in task.retrievals if r.principal), None)


def _tool_names(task: TaskRecord) -> list[str]:
    """The tools the trace called, once each in call order, and the escalation tool."""
    return list(dict.fromkeys([*(c.name for c in task.tool_calls), ESCALATE_TOOL]))


def _environment(
    task: TaskRecord,
    basis: SampleBasis,
    manifest: Sequence[ManifestEntry],
    t: datetime | None,
    tools: Sequence[SampleTool],
) -> SampleEnvironment:
    """The environment a sample replays in: the materials at ``t``, the fixed retrieval, the tools."""
    materials = _materials(task, basis, manifest, t)
    return SampleEnvironment(
        task_time=t,
        materials=tuple(materials),
        retrieval=_fixed_retrieval(task, basis, materials, _principal(task), t),
        tools=tuple(tools),
    )


# A verified ticket's sample's risk tag, by (kind is failure, the basis supersedes something).
_RISK: dict[tuple[bool, bool], str] = {
    (True, True): "high",
    (True, False): "medium",
    (False, True): "low",
    (False, False): "low",
}


def _ticket_tags(
    kind: SampleKind, basis: SampleBasis, complete: bool, verdict: str, extras: TicketExtras
) -> dict[str, str]:
    return {
        "risk": _RISK[(kind == "failure", bool(basis.superseded))],
        "complexity": "multi-document" if len(basis.required) > 1 else "single-document",
        "anomaly": verdict,
        "materials": "complete" if complete else "incomplete",
        **{str(k): str(v) for k, v in extras.tags.items()},
    }


def build_sample(
    task: TaskRecord,
    ticket: Ticket,
    localization: Localization,
    manifest: Sequence[ManifestEntry] = (),
    *,
    extras: TicketExtras | None = None,
    rubric: str | None = None,
    acceptance_share: float = 0.5,
) -> Sample:
    """One sample from a verified ticket, its trace and the triage verdict."""
    ex = extras or TicketExtras()
    t = _utc(localization.task_time) or _utc(task.start_time)
    principal = _principal(task)
    basis = _basis_for(ticket, localization, manifest)
    tools = [SampleTool(name=n, mode="block") for n in ex.forbidden_tools]
    tools += [SampleTool(name=n, mode="record") for n in _tool_names(task) if n not in ex.forbidden_tools]
    env = _environment(task, basis, manifest, t, tools)
    complete = basis_complete(basis, env, principal)
    kind = _kind_for(localization, ex)
    group = group_of(basis, fallback=task.trace_id[:8])
    return Sample(
        id=sample_id(task.trace_id, basis),
        kind=kind,
        group=group,
        split=split_of(group, acceptance_share),
        tags=_ticket_tags(kind, basis, complete, localization.verdict, ex),
        source=SampleSource(
            trace_id=task.trace_id,
            observation_id=task.final_answer_span_id,
            ticket=ticket.ticket,
            feedback=ticket.feedback,
            verified_by=ticket.verified_by,
            verified_at=ex.verified_at,
        ),
        input=SampleInput(messages=_user_messages(task), principal=principal),
        basis=basis,
        environment=env,
        observed=SampleObserved(
            verdict=localization.verdict, answer=task.final_answer, deviation=localization.summary
        ),
        expected=expected_for(basis, complete=complete, forbidden_tools=ex.forbidden_tools),
        record=_record(task, basis, rubric),
    )


# --- feedback scores --------------------------------------------------------------------------


def is_positive(score: Mapping[str, Any], *, threshold: float = 1.0) -> bool:
    """Positive feedback: BOOLEAN true, NUMERIC at or above ``threshold``, or a positive label."""
    value = score.get("value")
    kind = str(score.get("data_type") or score.get("dataType") or "NUMERIC").upper()
    if kind == "BOOLEAN" or isinstance(value, bool):
        return value is True or (isinstance(value, int | float) and value == 1)
    if isinstance(value, int | float):
        return float(value) >= threshold
    return isinstance(value, str) and value.strip().lower() in _POSITIVE_LABELS


def build_from_feedback(
    task: TaskRecord,
    score: Mapping[str, Any],
    manifest: Sequence[ManifestEntry] = (),
    *,
    threshold: float = 1.0,
    acceptance_share: float = 0.5,
) -> Sample:
    """One sample from a feedback score on a trace (as the Langfuse collector stores it).

    Positive feedback makes a success sample whose basis is the retrieved material the answer cites.
    Negative feedback without a ticket names no basis: the sample carries the comment as its expected
    behaviour and a judge criterion, and no fact checks (write a ticket to add them).
    """
    if is_positive(score, threshold=threshold):
        return _feedback_sample(
            task, score, manifest, SampleBasis(required=tuple(_cited_materials(task))), acceptance_share
        )
    return _feedback_sample(task, score, manifest, None, acceptance_share)


def _feedback_sample(
    task: TaskRecord,
    score: Mapping[str, Any],
    manifest: Sequence[ManifestEntry],
    cited: SampleBasis | None,
    acceptance_share: float,
) -> Sample:
    """The sample of positive feedback (``cited`` is the basis the answer cites) or negative (None)."""
    positive = cited is not None
    basis = cited if cited is not None else SampleBasis()
    comment = _feedback_comment(score)
    env = _environment(
        task, basis, manifest, _utc(task.start_time), [SampleTool(name=n) for n in _tool_names(task)]
    )
    group = group_of(basis, fallback=task.trace_id[:8])
    score_name = str(score.get("name") or "feedback")
    return Sample(
        id=sample_id(
            task.trace_id, basis if positive else SampleBasis(required=(Material(doc_id=score_name),))
        ),
        kind="success" if positive else "failure",
        group=group,
        split=split_of(group, acceptance_share),
        tags=_feedback_tags(score, score_name, positive),
        source=_feedback_source(task.trace_id, score, comment),
        input=SampleInput(messages=_user_messages(task), principal=_principal(task)),
        basis=basis,
        environment=env,
        observed=SampleObserved(answer=task.final_answer, deviation="" if positive else comment),
        expected=_feedback_expected(basis) if positive else _complaint_expected(comment),
        record=_record(task, basis, None),
    )


def _feedback_tags(score: Mapping[str, Any], score_name: str, positive: bool) -> dict[str, str]:
    queue = {"annotation_queue": str(score["queue_id"])} if score.get("queue_id") else {}
    return {"risk": "low" if positive else "medium", "anomaly": "feedback", "feedback": score_name, **queue}


def _cited_materials(task: TaskRecord) -> list[Material]:
    """The retrieved documents the final answer names, once each, in retrieval order."""
    answer = (task.final_answer or "").casefold()
    named = [d for r in task.retrievals for d in r.documents if d.doc_id and d.doc_id.casefold() in answer]
    cited: list[Material] = []
    for m in (Material(doc_id=d.doc_id, version=d.version) for d in named):
        if m not in cited:  # a list, not a set: a Material holds a dict and does not hash
            cited.append(m)
    return cited


def _feedback_comment(score: Mapping[str, Any]) -> str:
    """The score's comment, else its value when it is a TEXT score."""
    text = score.get("value") if str(score.get("data_type") or "").upper() == "TEXT" else None
    return str(score.get("comment") or text or "")


def _feedback_source(trace_id: str, score: Mapping[str, Any], comment: str) -> SampleSource:
    """Where a feedback sample came from, read from the score (snake_case or Langfuse's camelCase)."""
    return SampleSource(
        trace_id=trace_id,
        observation_id=score.get("observation_id") or score.get("observationId"),
        ticket=str(score.get("id")) if score.get("id") else None,
        feedback=comment,
        verified_by=score.get("author_user_id") or score.get("source"),
        verified_at=_date(score.get("timestamp")),
    )


def _feedback_expected(basis: SampleBasis) -> SampleExpected:
    """Positive feedback: the cited basis's facts, or when nothing is cited, answer as it did."""
    if basis.required:
        return expected_for(basis, complete=True)
    return SampleExpected(
        behavior="answer as the verified answer did",
        criteria=(Criterion(name="rests_on_basis", description="The answer is right given the material."),),
    )


def _complaint_expected(comment: str) -> SampleExpected:
    """Negative feedback: avoid what people reported, as the comment says it."""
    return SampleExpected(
        behavior=comment or "address the verified complaint",
        criteria=(
            Criterion(
                name="addresses_feedback",
                description=f"The answer avoids the fault people reported: {comment or '(none)'}",
            ),
        ),
    )


def _date(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


# --- whole suites -----------------------------------------------------------------------------


def fingerprint(sample: Sample) -> str:
    """What makes two samples the same test: input, basis, environment and expected behaviour."""
    return _digest(
        sample.input.model_dump(mode="json"),
        sample.basis.model_dump(mode="json"),
        sample.environment.model_dump(mode="json"),
        sample.expected.model_dump(mode="json"),
    )


def merge_duplicates(samples: Iterable[Sample]) -> list[Sample]:
    """One sample per fingerprint. The kept one is the most telling (failure before success); the
    others are listed in ``source.also``."""
    by_fp: dict[str, list[Sample]] = {}
    for s in samples:
        by_fp.setdefault(fingerprint(s), []).append(s)
    out: list[Sample] = []
    for group in by_fp.values():
        ranked = sorted(group, key=lambda s: (_KIND_ORDER[s.kind], s.source.ticket or "", s.id))
        keep = ranked[0]
        also = [f"{s.source.ticket or s.id} ({s.source.trace_id})" for s in ranked[1:]]
        if also:
            keep = keep.model_copy(
                update={"source": keep.source.model_copy(update={"also": (*keep.source.also, *also)})}
            )
        out.append(keep)
    return sorted(out, key=lambda s: s.id)
