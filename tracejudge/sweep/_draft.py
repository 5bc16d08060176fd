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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from tracejudge.localize import answer_still_arriving, cites_version, fact_value, tokenize
from tracejudge.schema import Ambiguity, ChangedValue, DraftTicket, Evidence, SentenceChange, TaskRecord
from tracejudge.sweep._index import DocVersion, VersionIndex
from tracejudge.sweep._sweep import Finding, analyse, evidence, retrieved_versions, task_time_of
from tracejudge.sweep._values import Value, agrees, sentence_values, significant_values

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

    def leave(self, path: str, reason: str, options: tuple[str, ...] = ()) -> None:
        """Leave the field at ``path`` to a person, saying why."""
        self.ambiguous.append(Ambiguity(field=path, reason=reason, options=options))

    def settle_version(self, doc_id: str, effect: Sequence[DocVersion]) -> DocVersion | None:
        """The one version in effect at the task time, now the required one; None when several were."""
        if len(effect) != 1:
            self.leave(
                "required[0].version",
                f"several versions of {doc_id} were in effect at the task time: keep the one that applied",
                tuple(e.version for e in effect),
            )
            return None
        self.required_version = effect[0].version
        return effect[0]


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


def _written_unit(v: ChangedValue) -> str | None:
    """The currency word of an amount as the document writes it ("30,000 RMB" -> "rmb"), when a fact
    key spelled with it reads as the same currency; None otherwise ("¥", "euros": the ISO code is
    the key's unit)."""
    if v.kind != "amount":
        return None
    units = fact_value("x_" + _suffix(v), 1)
    words: list[str] = re.findall(r"[a-z]+", v.text.lower())
    for word in words:
        read = fact_value("x_" + word, 1)
        if read is not None and units is not None and read.units and read.units == units.units:
            return word
    return None


def _key_base(sentence: str) -> str:
    words = [w for w in re.findall(r"[a-zA-Z]+", sentence.lower()) if w not in _STOP and len(w) > 2]
    return words[0] if words else "value"


def facts_of(change: SentenceChange) -> tuple[dict[str, Any], dict[str, Any]]:
    """(required facts, superseded facts) of a changed sentence, under shared keys: the n-th new value
    of a kind and the n-th old value of that kind are one fact that changed. A key is the sentence's
    first meaningful word and the value's unit, the currency as the document writes it when a key can
    carry it ("Prepayment shall not exceed 30,000 RMB" -> ``prepayment_rmb``; triage reads the currency
    back from the key), as hand-written tickets name facts (``prepayment_cap_rmb``)."""
    base = _key_base(change.new or change.old or "")
    # One spelling per unit for both sides, the new version's first: the keys must stay shared.
    spelled: dict[str, str] = {}
    for v in (*change.new_values, *change.old_values):
        word = _written_unit(v)
        if word is not None:
            spelled.setdefault(_suffix(v), word)
    required: dict[str, Any] = {}
    superseded: dict[str, Any] = {}
    for side, values in ((required, change.new_values), (superseded, change.old_values)):
        seen: dict[str, int] = {}
        for v in values:
            key = f"{base}_{spelled.get(_suffix(v), _suffix(v))}"
            n = seen[key] = seen.get(key, 0) + 1
            side[key if n == 1 else f"{key}_{n}"] = _fact_value(v)
    return required, superseded


def _content_words(text: str) -> set[str]:
    """The tokens of a text that carry meaning: no stop words, no numbers."""
    return {t for t in tokenize(text) if t not in _STOP and not t[:1].isdigit()}


def _score(change: SentenceChange, wanted: Sequence[Value], words: set[str]) -> tuple[int, float]:
    """How well a changed sentence matches the feedback: values the feedback states (on either side:
    "it said 45 days" names the old value), then shared words."""
    texts = [t for t in (change.new, change.old) if t]
    values = [v for t in texts for v in sentence_values(t)]
    hits = sum(1 for w in wanted if any(agrees(w, v) for v in values))
    toks = _content_words(" ".join(texts))
    overlap = len(words & toks) / len(toks) if toks else 0.0
    return hits, overlap


def _ascending(scored: tuple[tuple[int, float], int]) -> tuple[tuple[int, float], int]:
    """Sort key: by score, and among equal scores the earlier sentence last (the one picked)."""
    return scored[0], -scored[1]


def _undecided(
    candidates: Sequence[SentenceChange], scored: Sequence[tuple[tuple[int, float], int]]
) -> tuple[str, ...] | None:
    """The sentences a person must choose among when the feedback does not single one out (none
    matches, or several match best), else None."""
    best = scored[-1][0]
    tied = [candidates[j].new or "" for s, j in scored if s == best]
    if len(candidates) < 2 or (best != (0, 0.0) and len(tied) < 2):
        return None
    return tuple(tied if len(tied) > 1 else (c.new or "" for c in candidates))


def _pick_clause(
    d: _Draft, changes: Sequence[SentenceChange], wanted: Sequence[Value], feedback: str, where: str
) -> SentenceChange | None:
    candidates = [c for c in changes if c.new]
    if not candidates:
        d.leave(
            f"{where}.clause",
            "no sentence of the version in effect differs from the superseded one: write the clause that"
            " applies",
        )
        return None
    words = _content_words(feedback)
    scored = sorted(((_score(c, wanted, words), i) for i, c in enumerate(candidates)), key=_ascending)
    options = _undecided(candidates, scored)
    if options is not None:
        d.leave(
            f"{where}.clause",
            f"{len(options)} sentences of the version in effect differ from the superseded one and"
            " match the feedback equally: keep the one the feedback is about",
            options,
        )
        return None
    return candidates[scored[-1][1]]


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
    now = d.settle_version(f.doc_id, f.in_effect)
    if now is None:
        return d, []
    said = [a for a, _ in f.stale.get(used, [])]
    hits = _change_for(index, stale_v, now, [h for _, h in f.stale.get(used, [])])
    changes = [c for c in hits if c.kind == "changed"] or list(index.diff(stale_v, now).changes)
    _apply(d, _pick_clause(d, changes, said + significant_values(feedback), feedback, "required[0]"))
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


def _among(pool: Sequence[str], applicable: set[str]) -> list[str]:
    """The applicable documents of a pool, once each, in pool order."""
    return list(dict.fromkeys(x for x in pool if x in applicable))


def _applicable(index: VersionIndex, t: datetime) -> set[str]:
    """The documents with a version in effect at ``t``."""
    return {doc for doc, vs in index.docs.items() if any(v.in_effect(t) for v in vs)}


def _choose_doc(
    d: _Draft, task: TaskRecord, index: VersionIndex, feedback: str, t: datetime
) -> tuple[str, str | None] | None:
    """The document the draft is about, and the version the feedback names: the documents in effect
    at ``t`` the feedback names, else those the trace retrieved; None (left to a person) unless one."""
    named = _named(feedback, index)
    applicable = _applicable(index, t)
    pools = ([doc for doc, _ in named], [doc for doc, _ in retrieved_versions(task, index)])
    docs = next(filter(None, (_among(pool, applicable) for pool in pools)), [])
    if len(docs) == 1:
        return docs[0], next((v for doc, v in named if doc == docs[0] and v is not None), None)
    if docs:
        d.leave(
            "required[0].doc_id",
            "the feedback and the trace point at several documents: keep the one the feedback is about",
            tuple(docs),
        )
    else:
        d.leave(
            "required[0].doc_id",
            "neither the feedback nor the trace names a document of the manifest with versions that"
            " differ: name the document that should have been used",
        )
    return None


def _stale_used(
    doc_id: str,
    others: Sequence[DocVersion],
    got: Mapping[tuple[str, str | None], str],
    named_version: str | None,
    t: datetime,
) -> list[DocVersion]:
    """The versions other than the one in effect the trace used: the one the feedback names, else those
    it retrieved, else (nothing says which) the one the version in effect replaced."""
    named = [v for v in others if v.version == named_version]
    return named or [v for v in others if (doc_id, v.version) in got] or _replaced(others, t)


def _replaced(others: Sequence[DocVersion], t: datetime) -> list[DocVersion]:
    """The latest version that took effect before ``t`` and was no longer in effect at ``t``."""
    before = [v for v in others if not v.in_effect(t) and (v.entry.effective_from or t) <= t]
    return before[-1:]


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
    now = d.settle_version(doc_id, [v for v in versions if v.in_effect(t)])
    if now is None:
        return d, []
    got = retrieved_versions(task, index)
    used = _stale_used(doc_id, [v for v in versions if v.version != now.version], got, named_version, t)
    ev = [
        Evidence(span_id=got[(doc_id, v.version)], note=f"retrieved {v.label}")
        for v in used
        if (doc_id, v.version) in got
    ]
    if not used:
        d.leave(
            "superseded",
            f"no other version of {doc_id} was retrieved or named: name the stale material the agent used,"
            " if any",
        )
        return d, ev
    d.superseded_version = used[-1].version
    _apply(
        d,
        _pick_clause(
            d, index.diff(used[-1], now).changes, significant_values(feedback), feedback, "required[0]"
        ),
    )
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


@dataclass
class _Yaml:
    """A draft ticket's YAML, line by line: each field left for a person preceded by a comment saying why."""

    notes: dict[str, Ambiguity]
    """What is left to a person, by field path."""
    lines: list[str] = field(default_factory=list)

    def note(self, path: str, indent: str = "") -> None:
        a = self.notes.get(path)
        if a is not None:
            self.lines.append(f"{indent}# TO DECIDE: {a.reason}")
            self.lines += [f"{indent}#   - {_dump(o)}" for o in a.options]

    def item(self, m: dict[str, Any], keys: Sequence[str], path: str | None = None) -> None:
        """One list item: its keys in order (the first after the dash), each with its note under ``path``."""
        for j, key in enumerate(keys):
            if key not in m:
                continue
            if path is not None:
                self.note(f"{path}.{key}", "    ")
            self.lines.append(f"{'  - ' if j == 0 else '    '}{key}: {_dump(m[key])}")


def render_yaml(
    ticket: dict[str, Any], ambiguous: Sequence[Ambiguity], still_arriving: str | None = None
) -> str:
    """The ticket as YAML, each field left for a person preceded by a comment saying why (and, when the
    trace may still be arriving, why its answer was not read)."""
    y = _Yaml({a.field: a for a in ambiguous})
    y.lines.append("# Drafted by `tracejudge ticket draft`: check every field, then set status: verified.")
    if still_arriving is not None:
        y.lines.append(f"# STILL ARRIVING: {' '.join(still_arriving.splitlines())}")
    y.lines += [f"{key}: {_dump(ticket[key])}" for key in _SCALARS if key in ticket]
    y.note("required[0].doc_id")
    y.lines.append("required:" if ticket["required"] else "required: []")
    for i, m in enumerate(ticket["required"]):
        y.item(m, ("doc_id", "version", "clause", "facts"), f"required[{i}]")
    y.note("superseded")
    for m in ticket.get("superseded", []):
        y.lines.append("superseded:")
        y.item(m, ("doc_id", "version", "facts"))
    return "\n".join(y.lines) + "\n"


# The ticket's top-level scalar fields, in the order the YAML writes them.
_SCALARS = ("trace_id", "session_id", "task_time", "status", "feedback")


def _finding_for(task: TaskRecord, index: VersionIndex, feedback: str, t: datetime) -> Finding | None:
    """The sweep finding a draft rests on: the flagged one about a document the feedback names, or the
    only flagged one, or when the feedback names no document, the first; None leaves it to the
    document the feedback names or the trace retrieved."""
    named = {doc for doc, _ in _named(feedback, index)}
    flagged = [f for f in analyse(task, index, t) if f.flagged]
    found = [f for f in flagged if f.doc_id in named] or flagged
    if len(found) == 1 or (found and not named):
        return found[0]
    return None


def _basis(
    task: TaskRecord, index: VersionIndex, feedback: str, t: datetime, late: str | None
) -> tuple[_Draft, list[Evidence]]:
    # An answer that may be a draft of a trace still arriving is not read (as the sweep does not flag it).
    f = None if late is not None else _finding_for(task, index, feedback, t)
    if f is None:
        return _without_finding(task, index, feedback, t)
    return draft_from_finding(task, index, f, f.used(set(retrieved_versions(task, index))), feedback)


def draft_ticket(
    task: TaskRecord, index: VersionIndex, feedback: str = "", now: datetime | None = None
) -> DraftTicket:
    """A draft ticket for a trace (DESIGN 5.5): from a sweep finding when its answer rests on a version
    not in effect, else from the document the feedback names or the trace retrieved. An answer that may
    be a draft of a trace still arriving at ``now`` (at any time, when None:
    :func:`~tracejudge.localize.answer_still_arriving`) is not read; the record says why."""
    late = answer_still_arriving(task, now)
    t = task_time_of(task)
    if t is None:
        no_time = "the trace records no start time: write the task time, then the basis in effect then"
        d = _Draft(ambiguous=[Ambiguity(field="task_time", reason=no_time)])
        ev: list[Evidence] = []
    else:
        d, ev = _basis(task, index, feedback, t, late)
    ticket = _ticket(task, d, feedback, t)
    unread = None if late is None else _not_read(task, late)
    return DraftTicket(
        trace_id=task.trace_id,
        ticket=ticket,
        ambiguous=tuple(d.ambiguous),
        evidence=tuple(ev),
        yaml=render_yaml(ticket, d.ambiguous, unread),
        still_arriving=unread,
    )


def _not_read(task: TaskRecord, late: str) -> str:
    return (
        f"the answer was not read: it was read from span {task.final_answer_span_id}, not the root, and"
        f" {late}, so it may be a draft the user never got; draft again once the rest of the trace has"
        " arrived"
    )
