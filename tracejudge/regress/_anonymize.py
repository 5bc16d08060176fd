"""Anonymizing a suite: consistent pseudonyms for identifiers across every sample, keeping amounts,
dates, versions and the relations between objects; verified by replaying triage and the hard checks
on each sample before and after. Pure: samples in, samples and the mapping out."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tracejudge.checks import run_checks
from tracejudge.schema import (
    AnonymizedCheck,
    Document,
    ManifestEntry,
    ModelCall,
    RetrievalCall,
    Sample,
    ScoreVerdict,
    TaskRecord,
    Ticket,
    Verdict,
)

# Keys whose values name an organisation or a person.
_NAME_KEYS = frozenset(
    [
        "supplier", "vendor", "customer", "client", "buyer", "seller", "company", "party", "counterparty",
        "person", "contact", "owner", "author", "approver", "requester", "employee", "name",
    ]
)  # fmt: skip
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_ACCOUNT = re.compile(
    r"(?i)\b(?:account|acct|a/c)(?:\s+(?:no\.?|number|#))?[\s:#]*(?P<num>[A-Z0-9][A-Z0-9-]{5,})"
)
# Fields that are structure, not content: never rewritten.
_KEEP = frozenset(
    ["schema_version", "id", "kind", "split", "status", "replaces", "trace_id", "observation_id", "version"]
)

_PREFIX = {"contract": "ID", "name": "Party", "person": "Person", "email": "", "account": "ACCT"}


@dataclass
class Pseudonyms:
    """The mapping, kind -> original -> pseudonym, grown in order of first appearance."""

    by_kind: dict[str, dict[str, str]] = field(default_factory=dict)

    def add(self, kind: str, original: str) -> str:
        table = self.by_kind.setdefault(kind, {})
        for k in self.by_kind.values():
            if original in k:
                return k[original]
        n = len(table) + 1
        if kind == "email":
            fake = f"user{n}@example.invalid"
        elif kind == "contract":
            fake = f"ID-{n:03d}"
        elif kind == "account":
            fake = f"ACCT-{n:06d}"
        else:
            fake = f"{_PREFIX[kind]} {_letters(n)}"
        table[original] = fake
        return fake

    def flat(self) -> dict[str, str]:
        return {orig: fake for table in self.by_kind.values() for orig, fake in table.items()}


def _letters(n: int) -> str:
    out = ""
    while n:
        n, r = divmod(n - 1, 26)
        out = chr(65 + r) + out
    return out


def _walk_strings(value: Any, fn: Callable[[str], None]) -> None:
    if isinstance(value, str):
        fn(value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if k not in _KEEP:
                _walk_strings(v, fn)
    elif isinstance(value, list | tuple):
        for v in value:
            _walk_strings(v, fn)


def _collect(samples: Sequence[Sample], extra: Iterable[str], names: Pseudonyms) -> None:
    for s in samples:
        doc_ids = [m.doc_id for m in (*s.basis.required, *s.basis.superseded)]
        doc_ids += [m.doc_id for m in s.environment.materials]
        doc_ids += [c.doc_id for c in s.expected.checks if c.doc_id]
        for doc_id in doc_ids:
            root = doc_id.split("/")[0]
            if root:
                names.add("contract", root)
        for m in s.environment.materials:
            for key, value in m.metadata.items():
                if key.lower() in _NAME_KEYS and isinstance(value, str) and value.strip():
                    names.add("name", value.strip())
        if s.source.verified_by:
            names.add("person", s.source.verified_by)
    for term in extra:
        if term.strip():
            names.add("name", term.strip())

    def scan(text: str) -> None:
        for m in _EMAIL.finditer(text):
            names.add("email", m.group(0))
        for m in _IBAN.finditer(text):
            names.add("account", m.group(0))
        for m in _ACCOUNT.finditer(text):
            names.add("account", m.group("num"))

    for s in samples:
        _walk_strings(s.model_dump(mode="json"), scan)


def _replacer(mapping: Mapping[str, str]) -> Callable[[str], str]:
    if not mapping:
        return lambda text: text
    originals = sorted(mapping, key=len, reverse=True)
    pattern = re.compile(
        r"(?<![0-9A-Za-z])(?:" + "|".join(re.escape(o) for o in originals) + r")(?![0-9A-Za-z])"
    )
    return lambda text: pattern.sub(lambda m: mapping[m.group(0)], text)


def _rewrite(value: Any, sub: Callable[[str], str], key: str | None = None) -> Any:
    if key in _KEEP:
        return value
    if isinstance(value, str):
        return sub(value)
    if isinstance(value, Mapping):
        # Keys are rewritten too: a ``materials`` record maps doc ids to versions.
        return {sub(k) if isinstance(k, str) else k: _rewrite(v, sub, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rewrite(v, sub) for v in value]
    return value


def anonymize_samples(
    samples: Sequence[Sample], *, identifiers: Iterable[str] = ()
) -> tuple[list[Sample], dict[str, dict[str, str]]]:
    """Pseudonymize every sample with one mapping; returns the samples and the mapping (kind ->
    original -> pseudonym), which must be kept out of the suite."""
    names = Pseudonyms()
    _collect(samples, identifiers, names)
    sub = _replacer(names.flat())
    out = [Sample.model_validate(_rewrite(s.model_dump(mode="json"), sub)) for s in samples]
    return out, names.by_kind


# --- verification -----------------------------------------------------------------------------


def observed_task(sample: Sample) -> TaskRecord:
    """The observed situation as a task record: the input, the fixed retrieval with the materials'
    text as the model input, and the observed answer."""
    by_key = {(m.doc_id, m.version): m for m in sample.environment.materials}
    docs = []
    if sample.environment.retrieval is not None:
        for i, d in enumerate(sample.environment.retrieval.documents):
            m = by_key.get((d.doc_id, d.version))
            docs.append(
                Document(
                    doc_id=d.doc_id,
                    version=d.version,
                    content=m.content if m else None,
                    score=d.score,
                    position=i,
                )
            )
    question = "\n".join(m.content for m in sample.input.messages if m.role == "user")
    context = "\n\n".join(f"[{d.doc_id}@{d.version}]\n{d.content or ''}" for d in docs)
    answer = sample.observed.answer
    return TaskRecord(
        trace_id=sample.source.trace_id,
        start_time=sample.environment.task_time,
        input=question,
        final_answer=answer,
        final_answer_span_id="observed-answer" if answer is not None else None,
        retrievals=(
            RetrievalCall(
                span_id="observed-retrieval", documents=tuple(docs), principal=sample.input.principal
            ),
        )
        if docs
        else (),
        model_calls=(
            ModelCall(
                span_id="observed-answer",
                input_text=f"{context}\n\n{question}",
                input_recorded=True,
                output_recorded=answer is not None,
                output_text=answer,
            ),
        ),
    )


def _manifest(sample: Sample) -> list[ManifestEntry]:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return [
        ManifestEntry(
            doc_id=m.doc_id,
            version=m.version,
            effective_from=m.effective_from,
            effective_to=m.effective_to,
            indexed_at=epoch if m.searchable else None,
            metadata=dict(m.metadata),
            acl=m.acl,
            content=m.content,
        )
        for m in sample.environment.materials
    ]


def sample_verdicts(sample: Sample) -> tuple[Verdict | None, list[ScoreVerdict]]:
    """Triage verdict and hard-check verdicts (in order) of the sample's observed situation."""
    from tracejudge.localize import localize

    task = observed_task(sample)
    verdict: Verdict | None = None
    if sample.basis.required:
        ticket = Ticket(
            ticket=sample.source.ticket,
            trace_id=sample.source.trace_id,
            task_time=sample.environment.task_time,
            required=sample.basis.required,
            superseded=sample.basis.superseded,
        )
        verdict = localize(task, ticket, _manifest(sample)).verdict
    checks = run_checks(sample.expected.checks, task, manifest=_manifest(sample))
    return verdict, [checks[c.name].verdict for c in sample.expected.checks if c.name in checks]


def verify_anonymized(before: Sample, after: Sample) -> AnonymizedCheck:
    """The triage verdict and hard checks of one sample, before and after anonymization."""
    vb, cb = sample_verdicts(before)
    va, ca = sample_verdicts(after)
    names = [c.name for c in before.expected.checks]
    return AnonymizedCheck(
        sample_id=after.id,
        original_id=before.id,
        verdict_before=vb,
        verdict_after=va,
        checks_before=dict(zip(names, cb, strict=False)),
        checks_after=dict(zip(names, ca, strict=False)),
        identical=vb == va and cb == ca,
    )
