"""Draft tickets (DESIGN 5.5, **Draft tickets**): the basis a person would write, from the trace, the
manifest's ``content`` and the feedback — written with ``status: draft``, and every field it cannot
settle left empty with a note saying what is ambiguous. Pure.

required: the version in effect at the task time of the document the answer rests on (a sweep
finding), else the one the feedback names, else the one the trace retrieved. clause: that version's
sentence that differs from the superseded one and best matches the feedback (its values first, then
its words). facts: the values that changed in that sentence. superseded: the version the trace used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from tracejudge.localize import cites_version, tokenize
from tracejudge.schema import Ambiguity, ChangedValue, DraftTicket, Evidence, SentenceChange, TaskRecord
from tracejudge.sweep._index import DocVersion, VersionIndex
from tracejudge.sweep._sweep import Finding, analyse, evidence, retrieved_versions, task_time_of
from tracejudge.sweep._values import Value, agrees, find_values, sentence_values

__all__ = ["draft_from_finding", "draft_ticket", "render_yaml"]

_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "and",
        "or",
        "not",
        "no",
        "shall",
        "must",
        "may",
        "will",
        "be",
        "is",
        "are",
        "was",
        "any",
        "each",
        "every",
        "per",
        "than",
        "this",
        "that",
        "under",
        "within",
        "up",
        "der",
        "die",
        "das",
        "und",
        "oder",
        "nicht",
        "le",
        "la",
        "les",
        "de",
        "des",
        "du",
        "et",
        "ou",
    ]
)


@dataclass
class _Draft:
    doc_id: str | None = None
    required_version: str | None = None
    clause: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    superseded_version: str | None = None
    superseded_facts: dict[str, Any] = field(default_factory=dict)
    ambiguous: list[Ambiguity] = field(default_factory=list)


def _fact_value(v: ChangedValue) -> Any:
    """A fact as the ticket writes it: amounts as numbers (the key carries the currency), dates ISO,
    percents and durations as the document writes them."""
    if v.kind in ("amount", "number"):
        number = v.value.split(" ")[0].split("|")[0]
        d = Decimal(number)
        return int(d) if d == d.to_integral_value() else float(d)
    if v.kind == "date":
        return v.value.split("|")[0]
    return v.text


def _suffix(v: ChangedValue) -> str:
    if v.kind == "amount":
        unit = v.value.split(" ")[-1]
        return unit.lower() if "/" not in unit else "amount"
    if v.kind == "percent":
        return "pct"
    if v.kind == "duration":
        return v.value.split(" ")[-1] + "s"
    if v.kind == "count":
        return v.value.split(" ")[-1] + "s"
    return v.kind


def _key_base(sentence: str) -> str:
    words = [w for w in re.findall(r"[a-zA-Z]+", sentence.lower()) if w not in _STOP and len(w) > 2]
    return words[0] if words else "value"


def facts_of(change: SentenceChange) -> tuple[dict[str, Any], dict[str, Any]]:
    """(required facts, superseded facts) of a changed sentence, under shared keys: the n-th new value
    of a kind and the n-th old value of that kind are one fact that changed."""
    base = _key_base(change.new or change.old or "")
    required: dict[str, Any] = {}
    superseded: dict[str, Any] = {}
    for side, values in ((required, change.new_values), (superseded, change.old_values)):
        seen: dict[str, int] = {}
        for v in values:
            key = f"{base}_{_suffix(v)}"
            n = seen[key] = seen.get(key, 0) + 1
            side[key if n == 1 else f"{key}_{n}"] = _fact_value(v)
    return required, superseded


def _score(change: SentenceChange, wanted: Sequence[Value], words: set[str]) -> tuple[int, float]:
    """How well a changed sentence matches the feedback: values the feedback states (on either side:
    "it said 45 days" names the old value), then shared words."""
    texts = [t for t in (change.new, change.old) if t]
    values = [v for t in texts for v in sentence_values(t)]
    hits = sum(1 for w in wanted if any(agrees(w, v) for v in values))
    toks = {t for t in tokenize(" ".join(texts)) if t not in _STOP and not t[:1].isdigit()}
    overlap = len(words & toks) / len(toks) if toks else 0.0
    return hits, overlap


def _pick_clause(
    d: _Draft, changes: Sequence[SentenceChange], wanted: Sequence[Value], feedback: str, where: str
) -> SentenceChange | None:
    candidates = [c for c in changes if c.new]
    if not candidates:
        d.ambiguous.append(
            Ambiguity(
                field=f"{where}.clause",
                reason="no sentence of the version in effect differs from the"
                " superseded one: write the clause that applies",
            )
        )
        return None
    words = {t for t in tokenize(feedback) if t not in _STOP and not t[:1].isdigit()}
    scored = sorted(
        ((_score(c, wanted, words), i) for i, c in enumerate(candidates)), key=lambda s: (s[0], -s[1])
    )
    best, i = scored[-1]
    tied = [candidates[j].new or "" for s, j in scored if s == best]
    if len(candidates) > 1 and (best == (0, 0.0) or len(tied) > 1):
        options = tuple(tied if len(tied) > 1 else (c.new or "" for c in candidates))
        d.ambiguous.append(
            Ambiguity(
                field=f"{where}.clause",
                reason=f"{len(options)} sentences of the version in effect differ from the superseded one and"
                " match the feedback equally: keep the one the feedback is about",
                options=options,
            )
        )
        return None
    return candidates[i]


def _apply(d: _Draft, change: SentenceChange | None) -> None:
    if change is None:
        return
    d.clause = change.new
    d.facts, d.superseded_facts = facts_of(change)


def _change_for(
    index: VersionIndex, old: DocVersion, new: DocVersion, stale: Sequence[Value]
) -> list[SentenceChange]:
    """The changes from ``old`` to ``new`` whose old sentence states one of ``stale`` (the answer's)."""
    changes = index.diff(old, new).changes
    return [c for c in changes if c.old and any(agrees(v, x) for x in stale for v in sentence_values(c.old))]


def draft_from_finding(
    task: TaskRecord, index: VersionIndex, f: Finding, used: str, feedback: str = ""
) -> tuple[_Draft, list[Evidence]]:
    """The draft basis for a sweep finding: required = the version in effect, superseded = ``used``."""
    d = _Draft(doc_id=f.doc_id, superseded_version=used)
    stale_v = index.version(f.doc_id, used)
    assert stale_v is not None
    if len(f.in_effect) != 1:
        d.ambiguous.append(
            Ambiguity(
                field="required[0].version",
                reason=f"several versions of {f.doc_id} were in effect at the task time:"
                " keep the one that applied",
                options=tuple(e.version for e in f.in_effect),
            )
        )
        return d, []
    now = f.in_effect[0]
    d.required_version = now.version
    said = [a for a, _ in f.stale.get(used, [])]
    hits = _change_for(index, stale_v, now, [h for _, h in f.stale.get(used, [])])
    changes = [c for c in hits if c.kind == "changed"] or list(index.diff(stale_v, now).changes)
    wanted = said + [v for v in find_values(feedback) if v.significant]
    _apply(d, _pick_clause(d, changes, wanted, feedback, "required[0]"))
    t = task_time_of(task)
    return d, evidence(task, index, f, used, t) if t is not None else []


def _named(feedback: str, index: VersionIndex) -> list[tuple[str, str | None]]:
    """Documents (and versions) the feedback names."""
    out: list[tuple[str, str | None]] = []
    toks = set(tokenize(feedback))
    for doc_id, versions in index.docs.items():
        cited = [v.version for v in versions if cites_version(feedback, doc_id, v.version)]
        if cited:
            out += [(doc_id, v) for v in cited]
        elif set(tokenize(doc_id)) <= toks:
            out.append((doc_id, None))
    return out


def _choose_doc(
    d: _Draft, task: TaskRecord, index: VersionIndex, feedback: str, t: datetime
) -> tuple[str, str | None] | None:
    named = _named(feedback, index)
    got = retrieved_versions(task, index)
    applicable = {doc for doc, vs in index.docs.items() if any(v.in_effect(t) for v in vs)}
    for pool in ([n[0] for n in named], [k[0] for k in got]):
        docs = list(dict.fromkeys(x for x in pool if x in applicable))
        if len(docs) == 1:
            stale = [v for doc, v in named if doc == docs[0] and v is not None]
            return docs[0], stale[0] if stale else None
        if len(docs) > 1:
            d.ambiguous.append(
                Ambiguity(
                    field="required[0].doc_id",
                    reason="the feedback and the trace point at several documents: keep the one the feedback"
                    " is about",
                    options=tuple(docs),
                )
            )
            return None
    d.ambiguous.append(
        Ambiguity(
            field="required[0].doc_id",
            reason="neither the feedback nor the trace names a document of the manifest with versions that"
            " differ: name the document that should have been used",
        )
    )
    return None


def _without_finding(
    task: TaskRecord, index: VersionIndex, feedback: str, t: datetime
) -> tuple[_Draft, list[Evidence]]:
    d = _Draft()
    chosen = _choose_doc(d, task, index, feedback, t)
    if chosen is None:
        return d, []
    doc_id, named_version = chosen
    d.doc_id = doc_id
    versions = index.docs[doc_id]
    effect = [v for v in versions if v.in_effect(t)]
    if len(effect) != 1:
        d.ambiguous.append(
            Ambiguity(
                field="required[0].version",
                reason=f"several versions of {doc_id} were in effect at the task time:"
                " keep the one that applied",
                options=tuple(e.version for e in effect),
            )
        )
        return d, []
    now = effect[0]
    d.required_version = now.version
    got = retrieved_versions(task, index)
    others = [v for v in versions if v.version != now.version]
    used = [v for v in others if (doc_id, v.version) in got]
    if named_version and named_version != now.version:
        used = [v for v in others if v.version == named_version] or used
    if not used:
        # Nothing says which one the trace used: the one the version in effect replaced.
        before = [v for v in others if not v.in_effect(t) and (v.entry.effective_from or t) <= t]
        used = before[-1:]
    ev = [
        Evidence(span_id=got[(doc_id, v.version)], note=f"retrieved {v.label}")
        for v in used
        if (doc_id, v.version) in got
    ]
    if not used:
        d.ambiguous.append(
            Ambiguity(
                field="superseded",
                reason=f"no other version of {doc_id} was retrieved or named: name the"
                " stale material the agent used, if any",
            )
        )
        return d, ev
    old = used[-1]
    d.superseded_version = old.version
    wanted = [v for v in find_values(feedback) if v.significant]
    _apply(d, _pick_clause(d, index.diff(old, now).changes, wanted, feedback, "required[0]"))
    return d, ev


def _ticket(task: TaskRecord, d: _Draft, feedback: str, t: datetime | None) -> dict[str, Any]:
    ticket: dict[str, Any] = {"trace_id": task.trace_id}
    session = task.metadata.get("session_id")
    if isinstance(session, str) and session:
        ticket["session_id"] = session
    if t is not None:
        ticket["task_time"] = t.isoformat().replace("+00:00", "Z")
    ticket["status"] = "draft"
    ticket["feedback"] = feedback
    required: dict[str, Any] = {"doc_id": d.doc_id, "version": d.required_version, "clause": d.clause}
    if d.facts:
        required["facts"] = d.facts
    ticket["required"] = [required] if d.doc_id else []
    if d.doc_id and d.superseded_version:
        sup: dict[str, Any] = {"doc_id": d.doc_id, "version": d.superseded_version}
        if d.superseded_facts:
            sup["facts"] = d.superseded_facts
        ticket["superseded"] = [sup]
    return ticket


def _dump(value: Any) -> str:
    # JSON scalars and flow mappings are valid YAML and keep every character as written.
    return json.dumps(value, ensure_ascii=False)


def render_yaml(ticket: dict[str, Any], ambiguous: Sequence[Ambiguity]) -> str:
    """The ticket as YAML, each field left for a person preceded by a comment saying why."""
    notes = {a.field: a for a in ambiguous}

    def comment(path: str, indent: str) -> list[str]:
        a = notes.get(path)
        if a is None:
            return []
        lines = [f"{indent}# TO DECIDE: {a.reason}"]
        lines += [f"{indent}#   - {_dump(o)}" for o in a.options]
        return lines

    out = ["# Drafted by `tracejudge ticket draft`: check every field, then set status: verified."]
    for key in ("trace_id", "session_id", "task_time", "status", "feedback"):
        if key in ticket:
            out.append(f"{key}: {_dump(ticket[key])}")
    out += comment("required[0].doc_id", "")
    out.append("required:" if ticket["required"] else "required: []")
    for i, m in enumerate(ticket["required"]):
        for j, key in enumerate(("doc_id", "version", "clause", "facts")):
            if key in m:
                out += comment(f"required[{i}].{key}", "    ")
                out.append(f"{'  - ' if j == 0 else '    '}{key}: {_dump(m[key])}")
    out += comment("superseded", "")
    for m in ticket.get("superseded", []):
        out.append("superseded:")
        for j, key in enumerate(("doc_id", "version", "facts")):
            if key in m:
                out.append(f"{'  - ' if j == 0 else '    '}{key}: {_dump(m[key])}")
    return "\n".join(out) + "\n"


def draft_ticket(task: TaskRecord, index: VersionIndex, feedback: str = "") -> DraftTicket:
    """A draft ticket for a trace (DESIGN 5.5): from a sweep finding when its answer rests on a version
    not in effect, else from the document the feedback names or the trace retrieved."""
    t = task_time_of(task)
    if t is None:
        why = "the trace records no start time: write the task time, then the basis in effect then"
        d = _Draft(ambiguous=[Ambiguity(field="task_time", reason=why)])
        ev: list[Evidence] = []
    else:
        named = {doc for doc, _ in _named(feedback, index)}
        found = [f for f in analyse(task, index, t) if f.flagged]
        found = [f for f in found if f.doc_id in named] or found
        if len(found) == 1 or (found and not named):
            f = found[0]
            d, ev = draft_from_finding(task, index, f, f.used(set(retrieved_versions(task, index))), feedback)
        else:
            d, ev = _without_finding(task, index, feedback, t)
    ticket = _ticket(task, d, feedback, t)
    return DraftTicket(
        trace_id=task.trace_id,
        ticket=ticket,
        ambiguous=tuple(d.ambiguous),
        evidence=tuple(ev),
        yaml=render_yaml(ticket, d.ambiguous),
    )
