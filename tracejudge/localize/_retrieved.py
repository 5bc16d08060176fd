"""The ``retrieved`` stage: did a retrieval call return the required material, and if not, why?"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tracejudge.localize._context import (
    CheckContext,
    candidate,
    doc_note,
    material_label,
    other_version_notes,
    rank,
    recording_switch,
    stage_result,
)
from tracejudge.localize._filter import evaluate_filter, filter_keys
from tracejudge.localize._identify import unidentified
from tracejudge.localize._text import one_line
from tracejudge.schema import (
    Cause,
    Document,
    Evidence,
    ManifestEntry,
    Material,
    RetrievalCall,
    StageResult,
    Verdict,
)

_EXCERPT = 160


def _short(text: str, n: int = _EXCERPT) -> str:
    return one_line(text, n)


def _json_excerpt(value: Any, n: int = _EXCERPT) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return _short(text, n)


def _entry_for_replay(ctx: CheckContext, m: Material) -> ManifestEntry | None:
    entries = ctx.entries(m)
    if not entries:
        return None
    first = entries[0]
    # Several entries that disagree on metadata or ACL cannot be replayed without choosing one.
    if any(e.metadata != first.metadata or e.acl != first.acl for e in entries[1:]):
        return None
    return first


@dataclass
class _Outcome:
    cause: Cause | None
    evidence: list[Evidence]
    missing: list[str]


def _replay_metadata(entry: ManifestEntry | None) -> dict[str, Any]:
    """What a filter is replayed against: the manifest metadata, plus the entry's own doc_id and
    version, which stores keep in the metadata too (a filter pinning ``{"version": "v1"}``)."""
    if entry is None:
        return {}
    own: dict[str, Any] = {"doc_id": entry.doc_id}
    if entry.version is not None:
        own["version"] = entry.version
    return {**own, **entry.metadata}


def _call_outcome(
    call: RetrievalCall, m: Material, entry: ManifestEntry | None, switch: str, unread: str | None = None
) -> _Outcome:
    """Why ``call`` did not return ``m``: its recorded candidates say, else the filter and the ACL
    replayed against the manifest entry, else what would settle it (``switch``: how to record the
    call's documents, ``"; to record it: …"`` or ""; ``unread``: why candidates it recorded could not
    be read)."""
    label = material_label(m.doc_id, m.version)
    span = call.span_id
    ev: list[Evidence] = []
    missing: list[str] = []
    c = candidate(call, m)
    if c is not None and c.excluded_by is not None:
        score = f", score {c.score:g}" if c.score is not None else ""
        note = f"recorded candidates: {label} excluded_by={c.excluded_by}{score}"
        return _Outcome(c.excluded_by, [Evidence(span_id=span, note=note)], [])
    if call.candidates is not None and c is None:
        note = f"{label} is not among the {len(call.candidates)} recorded candidates"
        ev.append(Evidence(span_id=span, note=note))
    passes_filter = _replay_filter(call, label, entry, ev, missing)
    allowed = _replay_acl(call, label, entry, ev, missing)
    in_namespace = _replay_namespace(call, label, entry, ev, missing)
    if passes_filter is False or in_namespace is False:
        return _Outcome("filter", ev, [])
    if allowed is False:
        return _Outcome("permission", ev, [])
    if unread is not None:
        # Candidates it could not read may say a filter or an ACL excluded the material: not rank.
        return _Outcome(None, ev, [f"the candidates of retrieval span {span}, readable ({unread})"])
    admitted = bool(passes_filter and allowed and in_namespace)
    return _not_excluded(call, label, ev, missing, switch, admitted=admitted)


def _not_excluded(
    call: RetrievalCall, label: str, ev: list[Evidence], missing: list[str], switch: str, *, admitted: bool
) -> _Outcome:
    """Neither the filter nor the ACL excluded the material from ``call``. When both are known to
    admit it, recorded documents without it say ranking cut it; otherwise the documents (``switch``:
    how to record them) and what the replays lacked (``missing``) would settle it."""
    documents = f"the documents returned by retrieval span {call.span_id}{switch}"
    if not admitted:
        # The documents, once recorded, would settle whether it was returned: ask for them first.
        return _Outcome(None, ev, missing if call.documents_recorded else [documents, *missing])
    if not call.documents_recorded:
        return _Outcome(None, ev, [documents])
    if not call.documents and call.namespace is not None:
        # A Pinecone query (a namespace is read for it, "" the default) returns its top_k nearest matches
        # among what its filter admits, with no score threshold: no match at all says the namespace held
        # nothing the filter admits, so ranking did not cut the material — what it searched did not hold
        # it, whatever the manifest says. (A retriever with a score threshold may return nothing by rank.)
        note = f"returned no match, though its filter admits {label}"
        wanted = (
            f"why retrieval span {call.span_id} returned no match: whether the index and namespace it"
            f" searched held {label} then"
        )
        return _Outcome(None, [*ev, Evidence(span_id=call.span_id, note=note)], [wanted])
    note = f"returned {len(call.documents)} documents, {label} not among them"
    return _Outcome("rank", [*ev, Evidence(span_id=call.span_id, note=note)], [])


def _replay_filter(
    call: RetrievalCall, label: str, entry: ManifestEntry | None, ev: list[Evidence], missing: list[str]
) -> bool | None:
    """Whether the call's metadata filter admits the material's manifest metadata (None: cannot
    tell); notes what it compared in ``ev``, or what would settle it in ``missing``."""
    span = call.span_id
    if call.filter is None:
        missing.append(
            f"the metadata filter of retrieval span {span} (tracejudge.retrieval.filter)"
            " or its candidates (tracejudge.retrieval.candidates)"
        )
        return None
    metadata = _replay_metadata(entry)
    passes = evaluate_filter(call.filter, metadata)
    shown = call.filter_raw or _json_excerpt(call.filter)
    if passes is not None:
        got = {k: metadata.get(k) for k in filter_keys(call.filter)}
        verb = "excludes" if passes is False else "admits"
        note = f"filter {_short(shown, 100)} {verb} {label} (manifest metadata {_json_excerpt(got, 80)})"
        ev.append(Evidence(span_id=span, note=note))
    else:
        missing.append(_replay_wanted(call, label, entry, metadata, shown))
    return passes


def _replay_wanted(
    call: RetrievalCall, label: str, entry: ManifestEntry | None, metadata: dict[str, Any], shown: str
) -> str:
    """What would let the call's filter (``shown`` as recorded) be replayed against the material."""
    span = call.span_id
    if not isinstance(call.filter, dict):
        return f"a filter tracejudge can replay on span {span} (recorded: {_short(shown, 80)})"
    if entry is None:
        return f"index manifest entry for {label} (its metadata, to replay the filter of span {span})"
    keys = [k for k in filter_keys(call.filter) if k not in metadata]
    what = ", ".join(keys) if keys else "metadata the filter compares"
    return f"manifest metadata {what} of {label} (to replay the filter of span {span})"


def _replay_acl(
    call: RetrievalCall, label: str, entry: ManifestEntry | None, ev: list[Evidence], missing: list[str]
) -> bool | None:
    """Whether the call's principal may read the material by its manifest ACL (None: cannot tell)."""
    if entry is None:
        missing.append(f"index manifest entry for {label} (its acl)")
        return None
    if entry.acl is None:
        return True
    if call.principal is None:
        missing.append(f"the principal of retrieval span {call.span_id} (tracejudge.retrieval.principal)")
        return None
    allowed = call.principal in entry.acl
    verb = "is" if allowed else "is not"
    note = f"principal {call.principal!r} {verb} in the manifest acl {list(entry.acl)} of {label}"
    ev.append(Evidence(span_id=call.span_id, note=note))
    return allowed


def _replay_namespace(
    call: RetrievalCall, label: str, entry: ManifestEntry | None, ev: list[Evidence], missing: list[str]
) -> bool | None:
    """Whether the namespace the call searched holds the material, by the manifest metadata's
    ``namespace`` (None: cannot tell). A store without namespaces, or a manifest that names none for the
    material, leaves it to the filter (the manifest describes what the query searched). A Pinecone query
    that records no namespace searched the default one or lost the attribute: not replayed."""
    if call.namespace is None or entry is None or "namespace" not in entry.metadata:
        return True
    held = entry.metadata["namespace"]
    span = call.span_id
    if call.namespace == "":
        missing.append(
            f"the namespace retrieval span {span} searched (pinecone.query.namespace: none recorded, which is"
            f" the default namespace or a lost attribute; the manifest puts {label} in {held!r})"
        )
        return None
    inside = bool(call.namespace == held)
    verb = "holds" if inside else "does not hold"
    ev.append(
        Evidence(
            span_id=span, note=f"namespace {call.namespace!r} {verb} {label} (manifest namespace {held!r})"
        )
    )
    return inside


def _identity_wanted(call: RetrievalCall, doc: Document) -> str:
    """What would identify a returned document: its ids in metadata, or the manifest's ids/content."""
    what = f"the identity of the document at rank {rank(doc)} returned by retrieval span {call.span_id}"
    if doc.content:
        what += f" ({_short(doc.content, 60)!r})"
    ways = ["its doc_id and version in the document's metadata"]
    if doc.raw_id is not None:
        ways.append(f"the manifest entry's ids listing the retriever's id {doc.raw_id!r}")
    if doc.content:
        ways.append("the manifest entry's content (the version's text, which identifies returned text)")
    else:
        ways.append("its text (content capture), to compare with the manifest entry's content")
    return f"{what}: {'; or '.join(ways)}"


def check(ctx: CheckContext, m: Material) -> StageResult:
    """Did a retrieval return ``m``? (:func:`_check`) In a conversation whose earlier turns are not
    all stored, "not returned" is never concluded: a turn not stored may have returned it."""
    result = _check(ctx, m)
    if ctx.session_missing is None or result.status == "pass":
        return result
    if result.status == "unconfirmed":
        return result.model_copy(update={"missing": (ctx.session_missing, *result.missing)})
    detail = (
        f"{result.detail}; but an earlier turn of the conversation is not stored and may have retrieved it"
    )
    return stage_result(
        "retrieved",
        "unconfirmed",
        detail,
        evidence=list(result.evidence),
        missing=[ctx.session_missing, *result.missing],
    )


def _check(ctx: CheckContext, m: Material) -> StageResult:
    """Did a retrieval return ``m``? When none did, the recorded candidates, the replayed filter and
    ACL, and the returned documents say why (filter, permission or rank), or what would settle it."""
    hits = ctx.hits(m)
    label = material_label(m.doc_id, m.version)
    if hits.exact:
        ev = [doc_note(call, doc, "returned") for call, doc in hits.exact]
        calls = len({call.span_id for call, _ in hits.exact})
        detail = f"{label} was returned by {calls} of {len(ctx.task.retrievals)} retrieval calls"
        return stage_result("retrieved", "pass", detail, evidence=ev)
    if not ctx.task.retrievals:
        switch = recording_switch(ctx.task, "no_retrieval_span")
        missing = [f"a retrieval span (the trace records no retriever call{switch})"]
        return stage_result(
            "retrieved", "unconfirmed", "the trace records no retrieval call", missing=missing
        )
    other = other_version_notes(hits, m)
    if hits.unknown:
        ev = [doc_note(call, doc, "returned (version not recorded)") for call, doc in hits.unknown]
        missing = [
            f"the version of {m.doc_id} returned by retrieval span {call.span_id}" for call, _ in hits.unknown
        ]
        detail = f"{m.doc_id} was returned but its version was not recorded, so it may not be {m.version}"
        return stage_result("retrieved", "unconfirmed", detail, evidence=[*ev, *other], missing=missing)
    return _why_not_returned(ctx, m, label, other)


def _unread_candidates(ctx: CheckContext, call: RetrievalCall) -> str | None:
    """Why candidates the call recorded could not be read (cut short, not a list, an entry without an
    id); None when it recorded none, or all were read."""
    spans = {call.span_id, *call.span_ids}
    return next(
        (
            g.detail
            for g in ctx.task.gaps
            if g.kind == "attribute_unparseable"
            and g.span_id in spans
            and g.detail.startswith("tracejudge.retrieval.candidates")
        ),
        None,
    )


def _documents_switch(ctx: CheckContext, call: RetrievalCall) -> str:
    if call.documents_recorded:
        return ""
    return recording_switch(ctx.task, "retrieval_documents_not_recorded", call.span_id)


@dataclass(frozen=True)
class _Outcomes:
    """Why each retrieval call did not return the material."""

    calls: list[tuple[RetrievalCall, _Outcome]]

    @property
    def evidence(self) -> list[Evidence]:
        """Every call's evidence, call by call."""
        return [e for _, o in self.calls for e in o.evidence]

    @property
    def missing(self) -> list[str]:
        """What would settle each call, call by call."""
        return [s for _, o in self.calls for s in o.missing]

    def excluded(self) -> tuple[RetrievalCall, _Outcome] | None:
        """The first call whose filter or ACL excluded the material."""
        return next(((call, o) for call, o in self.calls if o.cause in ("filter", "permission")), None)

    def ranked_out(self) -> bool:
        """Whether ranking cut the material from every call."""
        return all(o.cause == "rank" for _, o in self.calls)


def _why_not_returned(ctx: CheckContext, m: Material, label: str, other: list[Evidence]) -> StageResult:
    """No retrieval returned ``m``: a filter or ACL that excluded it (fail), ranking that cut it
    from every call (fail), or what would settle it (unconfirmed)."""
    entry = _entry_for_replay(ctx, m)
    outcomes = _Outcomes(
        [
            (call, _call_outcome(call, m, entry, _documents_switch(ctx, call), _unread_candidates(ctx, call)))
            for call in ctx.task.retrievals
        ]
    )
    evidence = [*outcomes.evidence, *other]
    n = len(outcomes.calls)
    excluded = outcomes.excluded()
    unknown = unidentified(ctx.task, ctx.manifest)
    if excluded is not None:
        # The call whose filter or ACL excluded the material cannot have returned it, so its own
        # unidentified documents are not the material. Another call's may be, and another call whose
        # documents were not recorded may have returned it: "not returned" needs every call settled.
        open_calls = _may_have_returned(outcomes, unknown)
        if not open_calls:
            return _excluded(label, *excluded, n, evidence)
        return _excluded_elsewhere_unsettled(ctx, label, excluded, open_calls, unknown, evidence)
    if unknown:
        # An unidentified returned document may be the material: "not returned" (rank) is never
        # concluded while one exists.
        return _unidentified(label, unknown, outcomes.missing, evidence)
    if outcomes.ranked_out():
        detail = (
            f"{label} passed the filter and the ACL but was not among the documents returned"
            + (f" by any of the {n} retrieval calls" if n > 1 else "")
            + " (ranking cut it)"
        )
        return stage_result("retrieved", "fail", detail, cause="rank", evidence=evidence)
    detail = f"{label} was not returned by any of the {n} retrieval calls, and the records do not show why"
    return stage_result("retrieved", "unconfirmed", detail, evidence=evidence, missing=outcomes.missing)


def _may_have_returned(
    outcomes: _Outcomes, unknown: list[tuple[RetrievalCall, Document]]
) -> list[RetrievalCall]:
    """The calls that did not exclude the material and may still have returned it: their documents
    were not recorded, or one of them could not be identified."""
    with_unknown = {call.span_id for call, _ in unknown}
    return [
        call
        for call, o in outcomes.calls
        if o.cause not in ("filter", "permission")
        and (not call.documents_recorded or call.span_id in with_unknown)
    ]


def _excluded_elsewhere_unsettled(
    ctx: CheckContext,
    label: str,
    excluded: tuple[RetrievalCall, _Outcome],
    open_calls: list[RetrievalCall],
    unknown: list[tuple[RetrievalCall, Document]],
    evidence: list[Evidence],
) -> StageResult:
    """Unconfirmed: one call's filter or ACL excluded the material, but another call may have returned
    it; ``missing`` names what would settle each such call (its documents, or their identity)."""
    open_ids = {call.span_id for call in open_calls}
    notes = [
        doc_note(call, doc, "returned an unidentified document:")
        for call, doc in unknown
        if call.span_id in open_ids
    ]
    missing: list[str] = []
    for call in open_calls:
        if not call.documents_recorded:
            missing.append(
                f"the documents returned by retrieval span {call.span_id}{_documents_switch(ctx, call)}"
            )
        missing += [_identity_wanted(c, doc) for c, doc in unknown if c.span_id == call.span_id]
    others = ", ".join(call.span_id for call in open_calls)
    excluding, outcome = excluded
    by = "the query filter" if outcome.cause == "filter" else "a permission rule (ACL)"
    detail = (
        f"{by} excluded {label} from retrieval span {excluding.span_id}, but retrieval span"
        f"{'s' if len(open_calls) > 1 else ''} {others} may have returned it (documents not recorded"
        " or not identified)"
    )
    return stage_result("retrieved", "unconfirmed", detail, evidence=[*notes, *evidence], missing=missing)


def _excluded(
    label: str, call: RetrievalCall, outcome: _Outcome, n: int, evidence: list[Evidence]
) -> StageResult:
    """Fail: the query filter or an ACL excluded the material from ``call`` (one of ``n``)."""
    by = "the query filter" if outcome.cause == "filter" else "a permission rule (ACL)"
    detail = f"{label} was in the index but {by} excluded it from retrieval span {call.span_id}"
    if n > 1:
        detail += f" (one of {n} retrieval calls; none returned it)"
    return stage_result("retrieved", "fail", detail, cause=outcome.cause, evidence=evidence)


def _unidentified(
    label: str,
    unknown: list[tuple[RetrievalCall, Document]],
    outcomes_missing: list[str],
    evidence: list[Evidence],
) -> StageResult:
    notes = [doc_note(call, doc, "returned an unidentified document:") for call, doc in unknown]
    # What would identify them comes first: until then the filter and principal cannot settle it.
    missing = [_identity_wanted(call, doc) for call, doc in unknown]
    missing += outcomes_missing
    detail = (
        f"{label} was not among the identified documents, but {len(unknown)} returned document"
        f"{'s' if len(unknown) != 1 else ''} could not be identified and may be it"
    )
    return stage_result("retrieved", "unconfirmed", detail, evidence=[*notes, *evidence], missing=missing)


def fault(_ctx: CheckContext, _m: Material, result: StageResult) -> Verdict:
    """The verdict a failed ``retrieved`` stage gives: ranking cut it, or a filter/ACL excluded it."""
    return "not_retrieved" if result.cause == "rank" else "filtered"
