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

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tracejudge._errors import TracejudgeError
from tracejudge.localize._facts import FactValue, cites_version, extract_values, fact_value, mentions
from tracejudge.localize._filter import evaluate_filter, filter_keys
from tracejudge.localize._judge import UsageJudge
from tracejudge.localize._text import (
    AmbiguousDate,
    ClauseMatch,
    _Haystack,
    find_clause,
    prepare,
    split_clause,
)
from tracejudge.schema import (
    Cause,
    Document,
    Evidence,
    Localization,
    ManifestEntry,
    Material,
    MaterialResult,
    ModelCall,
    RetrievalCall,
    StageName,
    StageResult,
    TaskRecord,
    Ticket,
    UsageQuestion,
    Verdict,
)

__all__ = ["localize", "task_time", "trace_not_stored"]

STAGES: tuple[StageName, ...] = ("indexed", "retrieved", "in_context", "used_by_model")
_FAULTS: frozenset[Verdict] = frozenset(
    {"not_indexed", "filtered", "not_retrieved", "dropped_in_context", "ignored_by_model"}
)
_EXCERPT = 160


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _iso(value: datetime | None) -> str:
    return value.isoformat().replace("+00:00", "Z") if value is not None else "-"


def _short(text: str, n: int = _EXCERPT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def _json_excerpt(value: Any, n: int = _EXCERPT) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return _short(text, n)


def _norm_version(version: str | None) -> str | None:
    if version is None:
        return None
    return re.sub(r"^(?:v|ver|version)\.?\s*(?=\d)", "", version.strip().casefold())


def _label(doc_id: str, version: str | None) -> str:
    return f"{doc_id}@{version}" if version else doc_id


def task_time(task: TaskRecord, ticket: Ticket) -> datetime | None:
    """The time the checks are judged at: the ticket's ``task_time``, else the trace's start (UTC)."""
    return _utc(ticket.task_time) or _utc(task.start_time)


# --------------------------------------------------------------------------- context


@dataclass
class _Hits:
    """Where the material shows up among returned documents."""

    exact: list[tuple[RetrievalCall, Document]] = field(default_factory=list)
    other: list[tuple[RetrievalCall, Document]] = field(default_factory=list)
    unknown: list[tuple[RetrievalCall, Document]] = field(default_factory=list)


@dataclass
class _Ctx:
    task: TaskRecord
    ticket: Ticket
    manifest: Sequence[ManifestEntry]
    t: datetime | None
    judge: UsageJudge | None
    _hay: dict[int, _Haystack] = field(default_factory=dict)
    _answer_values: list[FactValue] | None = None
    _question_values: list[FactValue] | None = None

    def hay(self, index: int, call: ModelCall) -> _Haystack:
        if index not in self._hay:
            self._hay[index] = prepare(call.input_text)
        return self._hay[index]

    def answer_values(self) -> list[FactValue]:
        if self._answer_values is None:
            self._answer_values = extract_values(self.task.final_answer or "")
        return self._answer_values

    def question_values(self) -> list[FactValue]:
        if self._question_values is None:
            self._question_values = extract_values(self.task.input or "")
        return self._question_values

    def entries(self, m: Material) -> list[ManifestEntry]:
        want = _norm_version(m.version)
        found = [
            e
            for e in self.manifest
            if e.doc_id == m.doc_id and (want is None or _norm_version(e.version) == want)
        ]
        if m.version is None and self.t is not None:
            # "Any version" means the one in effect at task time, when the manifest says which.
            in_effect = [e for e in found if _effective(e, self.t)]
            if in_effect:
                return in_effect
        return found


def _effective(e: ManifestEntry, t: datetime) -> bool:
    start, end = _utc(e.effective_from), _utc(e.effective_to)
    return (start is None or start <= t) and (end is None or end > t)


def _indexed_at(e: ManifestEntry, t: datetime) -> bool:
    at, removed = _utc(e.indexed_at), _utc(e.removed_at)
    return at is not None and at <= t and (removed is None or removed > t)


def _doc_match(doc: Document, m: Material) -> str | None:
    """exact, other (another version), unknown (version not recorded), or None (another document)."""
    version = doc.version
    hit = False
    for ident in (doc.doc_id, doc.raw_id):
        if ident is None:
            continue
        if ident == m.doc_id:
            hit = True
        elif "@" in ident and ident.rsplit("@", 1)[0] == m.doc_id:
            hit = True
            version = version or ident.rsplit("@", 1)[1]
    if not hit:
        return None
    if m.version is None:
        return "exact"
    if version is None:
        return "unknown"
    return "exact" if _norm_version(version) == _norm_version(m.version) else "other"


def _hits(ctx: _Ctx, m: Material) -> _Hits:
    hits = _Hits()
    for call in ctx.task.retrievals:
        for doc in call.documents:
            kind = _doc_match(doc, m)
            if kind == "unknown" and m.clause and doc.content and find_clause(doc.content, m.clause).found:
                kind = "exact"  # version not recorded, but it carries the required clause
            if kind is not None:
                getattr(hits, kind).append((call, doc))
    return hits


def _doc_note(call: RetrievalCall, doc: Document, what: str) -> Evidence:
    score = f", score {doc.score:g}" if doc.score is not None else ""
    ver = f"@{doc.version}" if doc.version else ""
    return Evidence(span_id=call.span_id, note=f"{what} {doc.doc_id}{ver} at rank {doc.position}{score}")


def _other_version_notes(hits: _Hits, m: Material) -> list[Evidence]:
    return [
        _doc_note(call, doc, f"returned a different version instead of {_label(m.doc_id, m.version)}:")
        for call, doc in hits.other
    ]


def _candidate(call: RetrievalCall, m: Material) -> Any:
    for c in call.candidates or ():
        if c.doc_id == m.doc_id and (
            m.version is None or c.version is None or _norm_version(c.version) == _norm_version(m.version)
        ):
            return c
    return None


def _stage(name: StageName, status: Any, detail: str, **kw: Any) -> StageResult:
    for key in ("evidence", "missing"):
        if key in kw:
            kw[key] = tuple(dict.fromkeys(kw[key]))  # order kept, duplicates dropped
    return StageResult(name=name, status=status, detail=detail, **kw)


# --------------------------------------------------------------------------- indexed


def _check_indexed(ctx: _Ctx, m: Material, hits: _Hits) -> tuple[StageResult, Verdict | None]:
    label = _label(m.doc_id, m.version)
    entries = ctx.entries(m)
    t = ctx.t
    if entries and t is not None and not any(_effective(e, t) for e in entries):
        e = entries[0]
        start, end = _utc(e.effective_from), _utc(e.effective_to)
        if start is not None and start > t:
            why = f"was not yet in effect at task time {_iso(t)}: effective from {_iso(start)}"
        else:
            why = f"was no longer in effect at task time {_iso(t)}: effective until {_iso(end)}"
        note = f"manifest: {_label(e.doc_id, e.version)} effective {_iso(start)} .. {_iso(end)}"
        detail = f"{label} {why}; the ticket names material that did not apply then"
        return _stage("indexed", "fail", detail, evidence=[Evidence(note=note)]), "basis_not_in_effect"
    if hits.exact:
        ev = [_doc_note(call, doc, "returned") for call, doc in hits.exact]
        return _stage("indexed", "pass", f"{label} was retrieved, so it was in the index", evidence=ev), None
    for call in ctx.task.retrievals:
        c = _candidate(call, m)
        if c is not None and (m.version is None or c.version is not None):
            note = f"listed among the retriever's candidates (excluded_by={c.excluded_by})"
            detail = f"{label} was a retrieval candidate, so it was in the index"
            return _stage(
                "indexed", "pass", detail, evidence=[Evidence(span_id=call.span_id, note=note)]
            ), None
    other = _other_version_notes(hits, m)
    if not entries:
        detail = f"no record shows whether {label} was in the index at task time"
        missing = [f"index manifest entry for {label}"]
        versions = [e.version or "(no version)" for e in ctx.manifest if e.doc_id == m.doc_id]
        if versions:
            # A version the manifest does not list is not proof it was never indexed: the
            # manifest may be partial, or the ticket may spell the version differently.
            note = f"manifest lists {m.doc_id} only as {', '.join(dict.fromkeys(versions))}"
            other = [Evidence(note=note), *other]
        return _stage("indexed", "unconfirmed", detail, evidence=other, missing=missing), None
    if t is None:
        missing = ["task time (task_time in the ticket, or a trace start time)"]
        return _stage(
            "indexed", "unconfirmed", "the task time is unknown", evidence=other, missing=missing
        ), None
    ok = [e for e in entries if _indexed_at(e, t)]
    if ok:
        e = ok[0]
        note = f"manifest: {_label(e.doc_id, e.version)} indexed_at {_iso(_utc(e.indexed_at))}"
        if e.removed_at is not None:
            note += f", removed_at {_iso(_utc(e.removed_at))}"
        detail = f"the manifest shows {label} in the index at task time {_iso(t)}"
        return _stage("indexed", "pass", detail, evidence=[Evidence(note=note), *other]), None
    notes = []
    for e in entries:
        at, removed = _utc(e.indexed_at), _utc(e.removed_at)
        if at is None:
            notes.append(f"manifest: {_label(e.doc_id, e.version)} never indexed (indexed_at null)")
        elif at > t:
            notes.append(
                f"manifest: {_label(e.doc_id, e.version)} indexed only at {_iso(at)}, after the task"
            )
        else:
            notes.append(f"manifest: {_label(e.doc_id, e.version)} removed from the index at {_iso(removed)}")
    detail = f"{label} was in effect at task time {_iso(t)} but not in the index then (ingestion fault)"
    return _stage("indexed", "fail", detail, evidence=[*(Evidence(note=n) for n in notes), *other]), None


# --------------------------------------------------------------------------- retrieved


def _entry_for_replay(ctx: _Ctx, m: Material) -> ManifestEntry | None:
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


def _call_outcome(call: RetrievalCall, m: Material, entry: ManifestEntry | None) -> _Outcome:
    label = _label(m.doc_id, m.version)
    span = call.span_id
    ev: list[Evidence] = []
    missing: list[str] = []
    c = _candidate(call, m)
    if c is not None and c.excluded_by is not None:
        score = f", score {c.score:g}" if c.score is not None else ""
        note = f"recorded candidates: {label} excluded_by={c.excluded_by}{score}"
        return _Outcome(c.excluded_by, [Evidence(span_id=span, note=note)], [])
    if call.candidates is not None and c is None:
        ev.append(
            Evidence(
                span_id=span, note=f"{label} is not among the {len(call.candidates)} recorded candidates"
            )
        )

    passes_filter: bool | None
    if call.filter is None:
        passes_filter = None
        missing.append(
            f"the metadata filter of retrieval span {span} (tracejudge.retrieval.filter)"
            " or its candidates (tracejudge.retrieval.candidates)"
        )
    else:
        metadata = _replay_metadata(entry)
        passes_filter = evaluate_filter(call.filter, metadata)
        shown = call.filter_raw or _json_excerpt(call.filter)
        if passes_filter is None:
            if not isinstance(call.filter, dict):
                missing.append(
                    f"a filter tracejudge can replay on span {span} (recorded: {_short(shown, 80)})"
                )
            elif entry is None:
                missing.append(
                    f"index manifest entry for {label} (its metadata, to replay the filter of span {span})"
                )
            else:
                keys = [k for k in filter_keys(call.filter) if k not in metadata]
                what = ", ".join(keys) if keys else "metadata the filter compares"
                missing.append(f"manifest metadata {what} of {label} (to replay the filter of span {span})")
        else:
            got = {k: metadata.get(k) for k in filter_keys(call.filter)}
            verb = "excludes" if passes_filter is False else "admits"
            note = f"filter {_short(shown, 100)} {verb} {label} (manifest metadata {_json_excerpt(got, 80)})"
            ev.append(Evidence(span_id=span, note=note))

    allowed: bool | None
    if entry is None:
        allowed = None
        missing.append(f"index manifest entry for {label} (its acl)")
    elif entry.acl is None:
        allowed = True
    elif call.principal is None:
        allowed = None
        missing.append(f"the principal of retrieval span {span} (tracejudge.retrieval.principal)")
    else:
        allowed = call.principal in entry.acl
        verb = "is" if allowed else "is not"
        note = f"principal {call.principal!r} {verb} in the manifest acl {list(entry.acl)} of {label}"
        ev.append(Evidence(span_id=span, note=note))

    if passes_filter is False:
        return _Outcome("filter", ev, [])
    if allowed is False:
        return _Outcome("permission", ev, [])
    if passes_filter and allowed:
        if not call.documents_recorded:
            return _Outcome(None, ev, [f"the documents returned by retrieval span {span}"])
        ev.append(
            Evidence(span_id=span, note=f"returned {len(call.documents)} documents, {label} not among them")
        )
        return _Outcome("rank", ev, [])
    return _Outcome(None, ev, missing)


def _check_retrieved(ctx: _Ctx, m: Material, hits: _Hits) -> StageResult:
    label = _label(m.doc_id, m.version)
    if hits.exact:
        ev = [_doc_note(call, doc, "returned") for call, doc in hits.exact]
        calls = len({call.span_id for call, _ in hits.exact})
        detail = f"{label} was returned by {calls} of {len(ctx.task.retrievals)} retrieval calls"
        return _stage("retrieved", "pass", detail, evidence=ev)
    if not ctx.task.retrievals:
        missing = ["a retrieval span (the trace records no retriever call)"]
        return _stage("retrieved", "unconfirmed", "the trace records no retrieval call", missing=missing)
    other = _other_version_notes(hits, m)
    if hits.unknown:
        ev = [_doc_note(call, doc, "returned (version not recorded)") for call, doc in hits.unknown]
        missing = [
            f"the version of {m.doc_id} returned by retrieval span {call.span_id}" for call, _ in hits.unknown
        ]
        detail = f"{m.doc_id} was returned but its version was not recorded, so it may not be {m.version}"
        return _stage("retrieved", "unconfirmed", detail, evidence=[*ev, *other], missing=missing)
    entry = _entry_for_replay(ctx, m)
    outcomes = [(call, _call_outcome(call, m, entry)) for call in ctx.task.retrievals]
    ev = [e for _, o in outcomes for e in o.evidence]
    n = len(outcomes)
    excluded = next(((call, o) for call, o in outcomes if o.cause in ("filter", "permission")), None)
    if excluded is not None:
        call, o = excluded
        by = "the query filter" if o.cause == "filter" else "a permission rule (ACL)"
        detail = f"{label} was in the index but {by} excluded it from retrieval span {call.span_id}"
        if n > 1:
            detail += f" (one of {n} retrieval calls; none returned it)"
        return _stage("retrieved", "fail", detail, cause=o.cause, evidence=[*ev, *other])
    if all(o.cause == "rank" for _, o in outcomes):
        detail = (
            f"{label} passed the filter and the ACL but was not among the documents returned"
            + (f" by any of the {n} retrieval calls" if n > 1 else "")
            + " (ranking cut it)"
        )
        return _stage("retrieved", "fail", detail, cause="rank", evidence=[*ev, *other])
    missing = [s for _, o in outcomes for s in o.missing]
    detail = f"{label} was not returned by any of the {n} retrieval calls, and the records do not show why"
    return _stage("retrieved", "unconfirmed", detail, evidence=[*ev, *other], missing=missing)


# --------------------------------------------------------------------------- in_context


def _partial_note(match: ClauseMatch, size: int) -> str:
    if not match.matched:
        return "no part of the clause is in the input"
    where = ""
    if match.start is not None and size:
        where = f" at {100 * match.start // size}% of the input"
        if match.end is not None and size - match.end <= 2:
            where += " (its very end)"
    if match.differs is not None:
        text, wanted = match.differs
        run = (
            f"the clause's first {match.matched} tokens are there"
            if match.first == 0
            else f"clause tokens {match.first + 1}-{match.first + match.matched} are there"
        )
        head = f"{run}, then the input has {text!r} where the clause has {wanted!r}"
    elif match.first == 0:
        head = "the start of the clause is there and the rest is missing (cut off?)"
    else:
        head = f"clause tokens {match.first + 1}-{match.first + match.matched}"
    return f"best partial match {match.matched}/{match.total} tokens, {head}{where}: {match.excerpt!r}"


def _order(a: AmbiguousDate) -> str:
    return "day first (DD/MM/YYYY)" if a.day_first else "month first (MM/DD/YYYY)"


def _ambiguous_note(match: ClauseMatch, source: str) -> str:
    dates = "; ".join(
        f"{a.text!r} is {a.clause_text!r} ({a.date.isoformat()}) only if read {_order(a)}"
        for a in match.ambiguous
    )
    head = f"{source} is in this model input only under one reading of an ambiguous date"
    return f"{head}: {dates}: {match.excerpt!r}"


def _ambiguous_missing(call: ModelCall, match: ClauseMatch) -> str:
    shown = ", ".join(repr(a.text) for a in match.ambiguous)
    return (
        f"the date format (locale) of the model input of span {call.span_id}:"
        f" whether {shown} is written day first or month first"
    )


def _check_in_context(ctx: _Ctx, m: Material, hits: _Hits) -> StageResult:
    label = _label(m.doc_id, m.version)
    clause, source = m.clause, "the clause"
    if not clause:
        doc = next((d for _, d in hits.exact if d.content), None)
        if doc is not None and doc.content is not None:
            clause, source = doc.content, "the retrieved content"
    if not clause:
        wanted = f"a clause for {label} in the ticket (or the retrieved document's content in the trace)"
        return _stage("in_context", "unconfirmed", "nothing to look for in the model input", missing=[wanted])
    calls = ctx.task.model_calls
    if not calls:
        wanted = "a model (LLM) span in the trace"
        return _stage("in_context", "unconfirmed", "the trace records no model call", missing=[wanted])
    seen: list[Evidence] = []
    absent: list[Evidence] = []
    missing: list[str] = []
    # Inputs holding the clause only if an ambiguous date ("01/03/2026") is read one way.
    unsure: list[tuple[ClauseMatch, ModelCall]] = []
    best: tuple[ClauseMatch, ModelCall] | None = None
    exact = [
        find_clause(ctx.hay(i, call), clause, partial=False) if call.input_recorded else None
        for i, call in enumerate(calls)
    ]
    # Best partial matches only matter when no input holds the clause: skip that search otherwise.
    settled = any(m is not None and m.found for m in exact)
    for i, (call, match) in enumerate(zip(calls, exact, strict=True)):
        if match is None:
            why = "redacted" if call.input_redacted else "content capture was off"
            missing.append(f"model input of span {call.span_id} ({why})")
            continue
        if match.found:
            seen.append(
                Evidence(span_id=call.span_id, note=f"{source} is in the model input: {match.excerpt!r}")
            )
            continue
        if settled:
            absent.append(Evidence(span_id=call.span_id, note="not in this model input"))
            continue
        if match.ambiguous:
            unsure.append((match, call))
            continue
        match = find_clause(ctx.hay(i, call), clause)
        if best is None or match.matched > best[0].matched:
            best = (match, call)
        note = _partial_note(match, len(call.input_text))
        if call.input_redacted:
            missing.append(f"model input of span {call.span_id} (redacted)")
            absent.append(Evidence(span_id=call.span_id, note=f"input partly redacted; {note}"))
        else:
            absent.append(Evidence(span_id=call.span_id, note=f"not in this model input; {note}"))
    split = None if seen or m.clause is None else _split_in_input(ctx, m.clause, hits)
    if split is not None:
        detail = (
            f"{source} of {label}, split across two retrieved chunks, reached the model input"
            f" of {len(split)} of {len(calls)} model calls"
        )
        return _stage("in_context", "pass", detail, evidence=split)
    if seen:
        detail = f"{source} of {label} reached the model input of {len(seen)} of {len(calls)} model calls"
        return _stage("in_context", "pass", detail, evidence=[*seen, *absent])
    if unsure:
        ev = [Evidence(span_id=call.span_id, note=_ambiguous_note(mt, source)) for mt, call in unsure]
        first = unsure[0][0].ambiguous[0]
        detail = (
            f"{source} of {label} is in the model input only if {first.text!r} is read {_order(first)};"
            " the trace does not say which date format the input used"
        )
        settle = [_ambiguous_missing(call, mt) for mt, call in unsure]
        return _stage(
            "in_context", "unconfirmed", detail, evidence=[*ev, *absent], missing=[*settle, *missing]
        )
    if missing:
        if all(x is None for x in exact):
            n = len(calls)
            detail = f"the model input was not recorded ({n} model call{'s' if n > 1 else ''})"
        else:
            detail = (
                f"{source} of {label} is not in any recorded model input, and not every input was recorded"
            )
        return _stage("in_context", "unconfirmed", detail, evidence=absent, missing=missing)
    drops = _drop_notes(ctx, m)
    detail = f"{source} of {label} is in none of the {len(calls)} recorded model inputs"
    if hits.exact:
        detail += " although the retriever returned it"
    if best is not None and best[0].matched:
        detail += f"; best partial match {best[0].matched}/{best[0].total} tokens in span {best[1].span_id}"
        if best[0].differs is not None:
            text, wanted = best[0].differs
            detail += f", where the input has {text!r} for the clause's {wanted!r}"
    return _stage("in_context", "fail", detail, evidence=[*drops, *absent])


_SPLIT_CHUNKS = 16


def _split_in_input(ctx: _Ctx, clause: str, hits: _Hits) -> list[Evidence] | None:
    """Evidence that the clause reached a model input in two parts: the end of one retrieved chunk
    of the material and the start of another (a splitter cut the clause), both in one input."""
    chunks: list[tuple[RetrievalCall, Document, str]] = []
    for rc, doc in (*hits.exact, *hits.unknown):
        if doc.content and all(doc.content != text for _, _, text in chunks):
            chunks.append((rc, doc, doc.content))
    chunks = chunks[:_SPLIT_CHUNKS]
    found: list[Evidence] = []
    for (ca, a, a_text), (cb, b, b_text) in ((x, y) for x in chunks for y in chunks if x is not y):
        parts = split_clause(a_text, b_text, clause)
        if parts is None:
            continue
        where = f"chunks at rank {a.position} and {b.position}"
        if ca.span_id != cb.span_id:
            where += f" (spans {ca.span_id} and {cb.span_id})"
        for i, call in enumerate(ctx.task.model_calls):
            if not call.input_recorded:
                continue
            hay = ctx.hay(i, call)
            first, second = (find_clause(hay, part, partial=False) for part in parts)
            if first.found and second.found:
                note = (
                    f"the clause is split between retrieved {where}; both parts are in the model input:"
                    f" {first.excerpt!r} … {second.excerpt!r}"
                )
                found.append(Evidence(span_id=call.span_id, note=note))
        if found:
            return found
    return None


def _ident_matches(ident: str, m: Material) -> bool:
    doc, _, version = ident.partition("@")
    if doc != m.doc_id:
        return False
    return not (m.version and version) or _norm_version(version) == _norm_version(m.version)


def _drop_notes(ctx: _Ctx, m: Material) -> list[Evidence]:
    notes: list[Evidence] = []
    for ca in ctx.task.context_assemblies:
        for ident in ca.dropped:
            if _ident_matches(ident, m):
                reason = ca.dropped_reasons.get(ident)
                why = f" ({reason})" if reason else ""
                notes.append(Evidence(span_id=ca.span_id, note=f"context assembly dropped {ident}{why}"))
    for rr in ctx.task.rerankings:
        given = any(_doc_match(d, m) == "exact" for d in rr.input_documents)
        kept = any(_doc_match(d, m) == "exact" for d in rr.output_documents)
        if given and not kept and rr.output_documents:
            notes.append(
                Evidence(span_id=rr.span_id, note=f"the reranker received {m.doc_id} and did not keep it")
            )
    return notes


# --------------------------------------------------------------------------- used_by_model


def _facts(items: dict[str, Any]) -> list[tuple[str, FactValue]]:
    out = []
    for key, value in items.items():
        fv = fact_value(key, value)
        if fv is not None:
            out.append((key, fv))
    return out


def _answer_missing(ctx: _Ctx) -> list[str]:
    task = ctx.task
    if not task.model_calls and task.final_answer_span_id is None:
        return ["the final answer (no model span and no root span output recorded)"]
    last = task.model_calls[-1] if task.model_calls else None
    for gap in task.gaps:
        if gap.kind == "model_output_redacted":
            return [f"output of span {gap.span_id} (redacted)"]
    if last is not None and not last.output_recorded:
        return [f"output of model span {last.span_id} (content capture was off)"]
    return ["the final answer (root span output or the last model call's output)"]


def _relevant_superseded(ctx: _Ctx, m: Material) -> list[Material]:
    required_ids = {r.doc_id for r in ctx.ticket.required}
    return [s for s in ctx.ticket.superseded if s.doc_id == m.doc_id or s.doc_id not in required_ids]


def _check_used(ctx: _Ctx, m: Material) -> StageResult:
    label = _label(m.doc_id, m.version)
    answer = ctx.task.final_answer
    span = ctx.task.final_answer_span_id
    if answer is None:
        return _stage(
            "used_by_model", "unconfirmed", "no final answer recorded", missing=_answer_missing(ctx)
        )
    values = ctx.answer_values()
    question = ctx.task.input or ""
    qvalues = ctx.question_values()
    required = _facts(m.facts)
    agree: list[Evidence] = []
    agreed: list[str] = []
    echoed: list[Evidence] = []

    def stated(fv: FactValue, echo: str) -> str | None:
        """The answer's words stating ``fv``; None when it does not, or only echoes the request
        (then noted in ``echoed`` as ``echo``)."""
        spans = mentions(answer, values, fv)
        if not spans:
            return None
        if question and mentions(question, qvalues, fv):
            echoed.append(Evidence(span_id=span, note=echo))
            return None
        a, b = spans[0]
        return answer[a:b]

    for key, fv in required:
        what = f"{key} = {fv.show()}"
        quote = stated(fv, f"states {what}, but the request states it too (an echo)")
        if quote is not None:
            agreed.append(key)
            agree.append(Evidence(span_id=span, note=f"states {what} as {label} says: {quote!r}"))
    stale: list[Evidence] = []
    for s in _relevant_superseded(ctx, m):
        slabel = _label(s.doc_id, s.version)
        for key, fv in _facts(s.facts):
            if any(_same_value(fv, r) for _, r in required):
                continue  # the superseded value equals a required one: stating it shows nothing
            what = f"{key} = {fv.show()}"
            quote = stated(fv, f"states {slabel}'s {what}, but the request states it too")
            if quote is not None:
                stale.append(Evidence(span_id=span, note=f"states {slabel}'s superseded {what}: {quote!r}"))
        same = s.doc_id == m.doc_id and _norm_version(s.version) == _norm_version(m.version)
        if not same and cites_version(answer, s.doc_id, s.version):
            stale.append(Evidence(span_id=span, note=f"cites the superseded {slabel}"))
    if m.version and cites_version(answer, m.doc_id, m.version):
        agree_note = Evidence(span_id=span, note=f"cites {label}")
    else:
        agree_note = None
    if stale and not agree:
        detail = f"the answer rests on superseded material instead of {label}"
        return _stage("used_by_model", "fail", detail, evidence=[*stale, *echoed])
    if agree and not stale:
        detail = f"the answer agrees with {label} ({', '.join(agreed)})"
        extra = [agree_note] if agree_note else []
        return _stage("used_by_model", "pass", detail, evidence=[*agree, *extra, *echoed])
    evidence = [*agree, *stale, *echoed, *([agree_note] if agree_note else [])]
    if stale and agree:
        detail = f"the answer states values of both {label} and superseded material"
    elif not required and not any(_facts(s.facts) for s in _relevant_superseded(ctx, m)):
        detail = f"the ticket gives no facts for {label} to compare the answer with"
    else:
        detail = f"the answer states neither {label}'s facts nor superseded ones"
    if ctx.judge is not None:
        return _ask_judge(ctx, m, answer, detail, evidence)
    wanted = (
        f"facts for {label} in the ticket that the answer states, or a usage judge to read the answer"
        if not required
        else "a usage judge to read the answer (its facts do not settle it)"
    )
    return _stage("used_by_model", "unconfirmed", detail, evidence=evidence, missing=[wanted])


def _same_value(a: FactValue, b: FactValue) -> bool:
    if a.kind != b.kind:
        return False
    if a.kind == "date":
        return bool(a.readings() & b.readings())
    if a.kind == "number":
        return bool(a.numbers & b.numbers)
    return " ".join(a.text.split()).casefold() == " ".join(b.text.split()).casefold()


def _ask_judge(ctx: _Ctx, m: Material, answer: str, why: str, evidence: list[Evidence]) -> StageResult:
    assert ctx.judge is not None
    excerpt = None
    if m.clause:
        for i, call in enumerate(ctx.task.model_calls):
            if call.input_recorded:
                found = find_clause(ctx.hay(i, call), m.clause)
                if found.found:
                    excerpt = found.excerpt
                    break
    question = UsageQuestion(
        answer=answer,
        answer_span_id=ctx.task.final_answer_span_id,
        question=ctx.task.input,
        material=m,
        superseded=tuple(_relevant_superseded(ctx, m)),
        context_excerpt=excerpt,
    )
    try:
        got = ctx.judge.judge_usage(question)
    except TracejudgeError as exc:
        detail = f"{why}; the usage judge failed: {exc.message}"
        return _stage(
            "used_by_model", "unconfirmed", detail, evidence=evidence, missing=["a usable judge reply"]
        )
    if got.status in ("pass", "fail") and got.evidence:
        return _stage(
            "used_by_model",
            got.status,
            f"judge: {got.detail}" if got.detail else "judge",
            evidence=[*got.evidence, *evidence],
        )
    if got.status in ("pass", "fail"):
        detail = f"{why}; the judge said {got.status} without citing evidence, which is not accepted"
        return _stage("used_by_model", "unconfirmed", detail, evidence=evidence, missing=["judge evidence"])
    detail = f"{why}; judge: {got.detail or 'undecided'}"
    return _stage(
        "used_by_model",
        "unconfirmed",
        detail,
        evidence=[*got.evidence, *evidence],
        missing=got.missing or ("a decisive judge reply",),
    )


# --------------------------------------------------------------------------- verdicts


def _material(ctx: _Ctx, m: Material) -> MaterialResult:
    hits = _hits(ctx, m)
    stages: list[StageResult] = []
    verdict: Verdict | None = None
    stop: StageResult | None = None
    for name in STAGES:
        if stop is not None:
            why = "failed" if stop.status == "fail" else "is unconfirmed"
            stages.append(_stage(name, "skipped", f"not checked: {stop.name} {why}"))
            continue
        special: Verdict | None = None
        if name == "indexed":
            result, special = _check_indexed(ctx, m, hits)
        elif name == "retrieved":
            result = _check_retrieved(ctx, m, hits)
        elif name == "in_context":
            result = _check_in_context(ctx, m, hits)
        else:
            result = _check_used(ctx, m)
        stages.append(result)
        if result.status == "fail":
            verdict = special or _fault(result)
            stop = result
        elif result.status == "unconfirmed":
            verdict, stop = "unconfirmed", result
    cause = next((s.cause for s in stages if s.cause is not None), None)
    return MaterialResult(
        doc_id=m.doc_id, version=m.version, verdict=verdict or "no_fault", cause=cause, stages=tuple(stages)
    )


def _fault(result: StageResult) -> Verdict:
    if result.name == "indexed":
        return "not_indexed"
    if result.name == "retrieved":
        return "not_retrieved" if result.cause == "rank" else "filtered"
    if result.name == "in_context":
        return "dropped_in_context"
    return "ignored_by_model"


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
    label = _label(decider.doc_id, decider.version)
    if decider.verdict == "no_fault":
        what = "every required material" if len(results) > 1 else label
        text = f"no_fault: {what} was indexed, retrieved, in the model input and used"
    else:
        stage = next(s for s in decider.stages if s.status in ("fail", "unconfirmed"))
        text = f"{decider.verdict}: {stage.detail}"
    if len(results) > 1:
        others = ", ".join(f"{_label(r.doc_id, r.version)}: {r.verdict}" for r in results if r is not decider)
        text += f" (decided by {label}; also {others})"
    return text


def localize(
    task: TaskRecord,
    ticket: Ticket,
    manifest: Sequence[ManifestEntry] | None = None,
    *,
    judge: UsageJudge | None = None,
) -> Localization:
    """Localize why the answer of ``task`` was wrong, for the material ``ticket`` says applied."""
    ctx = _Ctx(task=task, ticket=ticket, manifest=manifest or (), t=task_time(task, ticket), judge=judge)
    if not ticket.required:
        stages = [
            _stage(
                "indexed",
                "unconfirmed",
                "the ticket names no required material",
                missing=["required material"],
            )
        ]
        stages += [_stage(n, "skipped", "not checked: indexed is unconfirmed") for n in STAGES[1:]]
        return Localization(
            ticket=ticket.ticket,
            trace_id=task.trace_id,
            task_time=ctx.t,
            verdict="unconfirmed",
            summary="unconfirmed: the ticket names no required material",
            stages=tuple(stages),
        )
    results = [_material(ctx, m) for m in ticket.required]
    decider = _overall(results)
    return Localization(
        ticket=ticket.ticket,
        trace_id=task.trace_id,
        task_time=ctx.t,
        verdict=decider.verdict,
        cause=decider.cause,
        summary=_summary(decider, results),
        stages=decider.stages,
        materials=tuple(results),
    )


def trace_not_stored(ticket: Ticket, trace_id: str) -> Localization:
    """The result for a ticket whose trace has no stored spans: unconfirmed, asking for the trace.

    Used when many tickets are triaged at once, so one trace not yet collected does not stop the rest.
    """
    missing = f"the spans of trace {trace_id} in the store (collect the trace first)"
    stages = [_stage("indexed", "unconfirmed", f"no spans stored for trace {trace_id}", missing=[missing])]
    stages += [_stage(n, "skipped", "not checked: the trace is not stored") for n in STAGES[1:]]
    return Localization(
        ticket=ticket.ticket,
        trace_id=trace_id,
        task_time=_utc(ticket.task_time),
        verdict="unconfirmed",
        summary=f"unconfirmed: no spans stored for trace {trace_id}",
        stages=tuple(stages),
    )
