"""Which document version a trace's answer rests on, judged against the versions in effect at its task
time (DESIGN 5.5, **Sweep**). Pure: a task record and a :class:`VersionIndex` in, findings out.

A trace is flagged for a document when its answer states a value that only a version not in effect
then holds — no document in effect at that time states it, and the user's question did not bring it —
or cites such a version, and the answer states nothing that only the version in effect holds (an
answer contrasting the old cap with the new one is right, not stale).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tracejudge.localize import cites_version, find_clause
from tracejudge.schema import Evidence, TaskRecord
from tracejudge.sweep._index import DocVersion, VersionIndex, utc
from tracejudge.sweep._values import Value, agrees, significant_values

__all__ = ["Finding", "analyse", "task_time_of"]


@dataclass
class Finding:
    """What one trace's answer shows about one document."""

    doc_id: str
    in_effect: tuple[DocVersion, ...]
    """Versions in effect at the task time."""
    stale: dict[str, list[tuple[Value, Value]]] = field(default_factory=dict)
    """Per version not in effect: (answer value, that version's value) pairs only it holds."""
    cited_stale: list[str] = field(default_factory=list)
    """Versions not in effect the answer names."""
    current: list[tuple[Value, Value]] = field(default_factory=list)
    """(answer value, in-effect version's value) pairs only the version in effect holds."""
    cited_current: list[str] = field(default_factory=list)
    """Versions in effect the answer names."""

    @property
    def states_stale(self) -> bool:
        """Does the answer state a value only a version not in effect holds?"""
        return any(self.stale.values())

    @property
    def shows_anything(self) -> bool:
        """Does the answer state or cite anything of this document's versions?"""
        return self.states_stale or bool(self.cited_stale or self.current or self.cited_current)

    @property
    def flagged(self) -> bool:
        stale = self.states_stale or bool(self.cited_stale)
        return stale and not self.current and not self.cited_current

    def used(self, retrieved: set[tuple[str, str | None]]) -> str:
        """The version the answer rests on: most values, then cited, then retrieved, then the latest."""

        def rank(version: str) -> tuple[int, int, int]:
            return (
                len(self.stale.get(version, [])),
                version in self.cited_stale,
                (self.doc_id, version) in retrieved,
            )

        names = [v for v in self.stale if self.stale[v]] + [
            v for v in self.cited_stale if v not in self.stale
        ]
        return max(reversed(names), key=rank)


def task_time_of(task: TaskRecord) -> datetime | None:
    """The task time of a trace with no ticket: its start (UTC)."""
    return utc(task.start_time)


def _holds(value: Value, values: Sequence[Value]) -> Value | None:
    return next((v for v in values if agrees(value, v)), None)


def analyse(task: TaskRecord, index: VersionIndex, t: datetime | None = None) -> list[Finding]:
    """One finding per document the answer states versioned values of, or cites a version of."""
    t = t or task_time_of(task)
    answer = task.final_answer
    if t is None or not answer or not index.docs:
        return []
    said = significant_values(answer)
    found = _findings(index, t, answer, said)
    # A value the user's question brought is no evidence of the document the answer rests on. Only an
    # answer holding stale values can be flagged, so only then is the question read.
    if task.input and any(f.states_stale for f in found):
        kept = _not_asked(index, said, task.input)
        if len(kept) < len(said):
            found = _findings(index, t, answer, kept)
    return found


def _not_asked(index: VersionIndex, said: Sequence[Value], question: str) -> list[Value]:
    """The answer's values the question did not bring: it does not state them, or states them by
    quoting a document."""
    asked = significant_values(question)
    return [v for v in said if _holds(v, asked) is None or _quoted(index, v, question)]


def _quoted(index: VersionIndex, value: Value, text: str) -> bool:
    """Does ``text`` state ``value`` by quoting a document sentence that holds it? Then the value came
    with retrieved context (a framework records the whole prompt as the task's input), not from the
    user's question."""
    for dv, hit in index.holders(value):
        for sentence in dv.sentences:
            if (
                any(v is hit for v in sentence.values)
                and find_clause(text, sentence.text, partial=False).found
            ):
                return True
    return False


def _documents_holding(
    index: VersionIndex, holders: Sequence[tuple[Value, Sequence[tuple[DocVersion, Value]]]]
) -> set[str]:
    """The versioned documents a version of which holds one of the answer's values."""
    return {dv.entry.doc_id for _, hs in holders for dv, _ in hs if dv.entry.doc_id in index.docs}


def _findings(index: VersionIndex, t: datetime, answer: str, said: Sequence[Value]) -> list[Finding]:
    holders = [(a, index.holders(a)) for a in said]
    docs = _documents_holding(index, holders)
    cited = set(index.named_in(answer.lower()))
    found = (
        _finding(doc_id, index.docs[doc_id], t, holders, answer if doc_id in cited else None)
        for doc_id in index.docs
        if doc_id in docs or doc_id in cited
    )
    return [f for f in found if f is not None]


@dataclass(frozen=True)
class _Split:
    """One document's versions at the task time: those in effect and the others (by identity)."""

    effect: frozenset[int]
    others: frozenset[int]

    def stale(self, hs: Sequence[tuple[DocVersion, Value]]) -> list[tuple[DocVersion, Value]]:
        return [(dv, hit) for dv, hit in hs if id(dv) in self.others]

    def only_current(self, hs: Sequence[tuple[DocVersion, Value]]) -> Value | None:
        """The value of the first of this document's versions holding it, if all of them are in effect."""
        mine = [(dv, hit) for dv, hit in hs if id(dv) in self.others or id(dv) in self.effect]
        return mine[0][1] if mine and all(id(dv) in self.effect for dv, _ in mine) else None


def _finding(
    doc_id: str,
    versions: Sequence[DocVersion],
    t: datetime,
    holders: Sequence[tuple[Value, Sequence[tuple[DocVersion, Value]]]],
    citing: str | None,
) -> Finding | None:
    """What the answer shows about one document, or None when it shows nothing. ``citing`` is the
    answer when it names the document (then the versions it cites are read), else None."""
    effect = tuple(v for v in versions if v.in_effect(t))
    if not effect:
        return None  # the document did not apply then: nothing is right or stale about it
    others = [v for v in versions if not v.in_effect(t)]
    f = Finding(doc_id, effect)
    _note_values(f, _Split(frozenset(map(id, effect)), frozenset(map(id, others))), t, holders)
    if citing is not None:
        f.cited_stale = _cited(citing, doc_id, others)
        f.cited_current = _cited(citing, doc_id, effect)
    return f if f.shows_anything else None


def _cited(answer: str, doc_id: str, versions: Sequence[DocVersion]) -> list[str]:
    """The versions of the document the answer cites."""
    return [v.version for v in versions if cites_version(answer, doc_id, v.version)]


def _note_values(
    f: Finding,
    split: _Split,
    t: datetime,
    holders: Sequence[tuple[Value, Sequence[tuple[DocVersion, Value]]]],
) -> None:
    """Record each answer value against ``f``'s document: stale when only versions not in effect state
    it (no document in effect then does), current when only the versions in effect do."""
    for a, hs in holders:
        if not any(dv.in_effect(t) for dv, _ in hs):
            _note_stale(f, a, split.stale(hs))
        current = split.only_current(hs)
        if current is not None:
            f.current.append((a, current))


def _note_stale(f: Finding, a: Value, hs: Sequence[tuple[DocVersion, Value]]) -> None:
    """Record answer value ``a`` against each stale version of ``f``'s document holding it, once."""
    for dv, hit in hs:
        pairs = f.stale.setdefault(dv.version, [])
        if all(x is not a for x, _ in pairs):
            pairs.append((a, hit))


def retrieved_versions(task: TaskRecord, index: VersionIndex) -> dict[tuple[str, str | None], str]:
    """(doc_id, version) of every returned document the index knows -> the retrieval span."""
    out: dict[tuple[str, str | None], str] = {}
    for call in task.retrievals:
        for doc in call.documents:
            key = index.identify(doc)
            if key is not None:
                out.setdefault(key, call.span_id)
    return out


def evidence(task: TaskRecord, index: VersionIndex, f: Finding, used: str, t: datetime) -> list[Evidence]:
    """What the flag rests on: the answer's values and citations, the retrieval, the model input."""
    stale = index.version(f.doc_id, used)
    assert stale is not None
    ev = _answer_evidence(task, f, stale, t)
    texts = {h.text for _, h in f.stale.get(used, [])}
    # A trace holding several runs (a trace id given to more than one, their answers alike): what each run
    # retrieved and was given, named by its run.
    for label, run in task.each_run():
        found = _retrieval_evidence(run, index, f) + _in_input(run, stale, texts)
        ev += [e.model_copy(update={"note": f"{label}: {e.note}"}) for e in found] if label else found
    return ev


def _answer_evidence(task: TaskRecord, f: Finding, stale: DocVersion, t: datetime) -> list[Evidence]:
    """The stale values the answer states (what only ``stale`` says, and what was in effect), and its
    citation of ``stale``."""
    when = t.isoformat().replace("+00:00", "Z")
    now = ", ".join(f"{e.label} ({e.window()})" for e in f.in_effect)
    ev = [
        Evidence(
            span_id=task.final_answer_span_id,
            note=f'the answer states "{a.text}" ({a.canonical()}): only {stale.label} ({stale.window()})'
            f' says "{hit.text}", and no document in effect at {when} does; in effect then: {now}',
        )
        for a, hit in f.stale.get(stale.version, [])
    ]
    if stale.version in f.cited_stale:
        ev.append(
            Evidence(
                span_id=task.final_answer_span_id,
                note=f"the answer cites {stale.label}, not in effect at {when} ({stale.window()})",
            )
        )
    return ev


def _retrieval_evidence(task: TaskRecord, index: VersionIndex, f: Finding) -> list[Evidence]:
    """Which versions of the document the trace retrieved, and which in effect it did not."""
    got = retrieved_versions(task, index)
    in_effect = {e.version for e in f.in_effect}
    ev = [
        Evidence(span_id=span, note=f"retrieved {f.doc_id}@{version} ({_state(version in in_effect)} then)")
        for (doc_id, version), span in got.items()
        if doc_id == f.doc_id
    ]
    if task.retrievals:
        ev += [
            Evidence(note=f"{e.label}, in effect then, is not among the retrieved documents")
            for e in f.in_effect
            if (f.doc_id, e.version) not in got
        ]
    return ev


def _state(in_effect: bool) -> str:
    return "in effect" if in_effect else "not in effect"


def _in_input(task: TaskRecord, stale: DocVersion, texts: set[str]) -> list[Evidence]:
    """The stale version's sentences stating the answer's values, where the model input holds them."""
    wanted = [s.text for s in stale.sentences if any(v.text in texts for v in s.values)]
    out = []
    for call in task.model_calls:
        if not call.input_text:
            continue
        for sentence in wanted:
            m = find_clause(call.input_text, sentence, partial=False)
            if m.found:
                out.append(
                    Evidence(span_id=call.span_id, note=f'the model input holds {stale.label}: "{sentence}"')
                )
    return out
