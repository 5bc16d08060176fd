"""Anonymizing a suite: consistent pseudonyms for identifiers across every sample, keeping amounts,
dates, versions and the relations between objects; verified by replaying triage and the hard checks
on each sample before and after. Pure: samples in, samples and the mapping out."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import dropwhile
from typing import Any

from tracejudge.checks import run_checks
from tracejudge.schema import (
    AnonymizedCheck,
    CitesCheck,
    Document,
    ManifestEntry,
    ModelCall,
    RetrievalCall,
    Sample,
    SampleMaterial,
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
# Contract-like ids: letters, a hyphen, digits (C-17, PO-2231, EXP-311, INV-2026-0042).
_ID = re.compile(r"(?<![A-Za-z0-9_])[A-Z]{1,6}-\d{1,10}(?:-\d+)*(?![A-Za-z0-9_])")
# Standards, hashes, models and currencies look like ids but identify nobody.
_NOT_IDS = frozenset(
    [
        "UTF",
        "ISO",
        "SHA",
        "MD",
        "GPT",
        "HTTP",
        "TLS",
        "SSL",
        "IPV",
        "RFC",
        "COVID",
        "USD",
        "EUR",
        "RMB",
        "CNY",
    ]
)
# International phone numbers, or any number written after a phone keyword.
_PHONE_INTL = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){2,6}(?![\w])")
_PHONE_KEYWORD = re.compile(
    r"(?i)\b(?:tel|phone|mobile|cell|fax)\b\.?(?:\s*(?:no\.?|number))?[\s:#]*(?P<num>\(?\d[\d ().-]{5,}\d)"
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# Legal forms end a company name and are kept (they identify nobody); trade words are part of the name.
_LEGAL = frozenset(
    """Ltd Ltd. Limited GmbH AG Inc Inc. LLC L.L.C. SA S.A. BV B.V. NV N.V. PLC plc Co Co. Corp Corp.
    KG SARL SAS Pte Pty Oy AB SpA S.p.A. Srl""".split()  # noqa: SIM905
)
_TRADE = frozenset(
    """Trading Logistics Supplies Supply Industries Industrial Manufacturing Holdings Group Partners
    Services Systems Technologies Solutions Components Steel Metals Freight Shipping Enterprises
    Corporation Company International Imports Exports Textiles Chemicals Electronics Foods""".split()  # noqa: SIM905
)
# Capitalized words that start sentences or name documents, never the start of a company name.
_STOP = frozenset(
    """The A An This That These Those Our Your Their His Her Its Please Dear Ask Contact Pay Paid From To
    For With By Per Under Between And Or Of In On At Re Attn Supply Attachment Agreement Contract
    Invoice Invoices Order Policy Revised Correct Procurement Payment Prepayment If When Then No""".split()  # noqa: SIM905
)
_CAP_RUN = re.compile(r"[A-Z][A-Za-z0-9&'.-]*(?:[ \t]+(?:[A-Z][A-Za-z0-9&'.-]*|&))*")
_TITLED = re.compile(r"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?\s+(?P<name>[A-Z][a-z'-]+(?:\s+[A-Z][a-z'-]+){0,2})")
_NAMED_EMAIL = re.compile(
    r"(?P<q>\"?)(?P<name>[A-Z][a-z'-]+(?:\s+[A-Z][a-z'-]+){1,2})(?P=q)\s*<\s*[\w.+-]+@[\w-]+(?:\.[\w-]+)+\s*>"
)
# Fields that are structure, not content: never rewritten.
_KEEP = frozenset(
    ["schema_version", "id", "kind", "split", "status", "replaces", "trace_id", "observation_id", "version"]
)

_PREFIX = {"contract": "ID", "name": "Party", "person": "Person", "email": "", "account": "ACCT", "phone": ""}


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
        elif kind == "phone":
            fake = f"+00 000 {n:07d}"
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


def contract_ids(text: str) -> list[str]:
    """Contract-like ids in free text (``C-17``, ``PO-2231``, ``EXP-311``); versions (``v2``), dates,
    amounts, currency codes and standards (``UTF-8``, ``ISO-8601``) are not ids."""
    return [m.group(0) for m in _ID.finditer(text) if m.group(0).split("-", 1)[0] not in _NOT_IDS]


def phone_numbers(text: str) -> list[str]:
    """Phone numbers in free text: international (``+49 30 1234567``) or after tel/phone/mobile/fax."""
    found: list[str] = []
    for m in _PHONE_INTL.finditer(text):
        if sum(c.isdigit() for c in m.group(0)) >= 8:
            found.append(m.group(0))
    for m in _PHONE_KEYWORD.finditer(text):
        num = m.group("num").strip(" .-")
        if sum(c.isdigit() for c in num) >= 7 and not _DATE.search(num):
            found.append(num)
    return found


def company_names(text: str) -> list[str]:
    """Company names in free text, without their legal form: a run of capitalized words ending in a
    trade word or legal form (``Eastwind Trading``, ``Nordlicht Components GmbH`` -> ``Nordlicht
    Components``), with leading sentence words (``The``, ``Please``) left out."""
    found: list[str] = []
    for run in _CAP_RUN.finditer(text):
        for part in _split_on_ids(run.group(0).split()):
            name = _company_in(part)
            if name:
                found.append(name)
    return found


def _split_on_ids(words: list[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for w in words:
        if _ID.fullmatch(w.rstrip(".,;:")) or any(c.isdigit() for c in w):
            parts.append([])
        else:
            parts[-1].append(w)
    return [p for p in parts if p]


def _company_in(words: list[str]) -> str | None:
    words = list(dropwhile(_is_stop, words))
    end = _name_end(words)
    if end is None:
        return None
    name = _without_legal_form([w.rstrip(",;:") for w in words[: end + 1]])
    if not any(w not in _TRADE and w not in _STOP for w in name):
        return None
    return " ".join(name) if len(name) >= 2 or name[0] not in _TRADE else None


def _is_stop(word: str) -> bool:
    return word.rstrip(".,") in _STOP


def _is_legal(word: str) -> bool:
    return word in _LEGAL or word.rstrip(".") in _LEGAL


def _is_suffix(word: str) -> bool:
    bare = word.rstrip(",;:")
    return _is_legal(bare) or bare.rstrip(".") in _TRADE


def _name_end(words: list[str]) -> int | None:
    """Index of the last word of the name: the first legal form or trade word after the first word,
    with the legal forms and trade words that follow it."""
    end = next((i for i, w in enumerate(words) if i > 0 and _is_suffix(w)), None)
    if end is None:
        return None
    while end + 1 < len(words) and _is_suffix(words[end + 1]):
        end += 1
    return end


def _without_legal_form(name: list[str]) -> list[str]:
    """The name without its trailing legal forms, and without the full stop ending its last word."""
    while name and _is_legal(name[-1]):
        name.pop()
    name[-1:] = [name[-1].rstrip(".")] if name else []
    return name


def person_names(text: str) -> list[str]:
    """Person names in free text: after a title (``Mr``, ``Ms``, ``Dr``) or before an address
    (``Li Wei <li.wei@example.com>``)."""
    found = [m.group("name") for m in _TITLED.finditer(text)]
    for m in _NAMED_EMAIL.finditer(text):
        words = m.group("name").split()
        while words and words[0] in _STOP:
            words.pop(0)
        if words:
            found.append(" ".join(words))
    return found


def _collect(samples: Sequence[Sample], extra: Iterable[str], names: Pseudonyms) -> None:
    for s in samples:
        _collect_structured(s, names)
    for term in extra:
        if term.strip():
            names.add("name", term.strip())

    def scan(text: str) -> None:
        for kind, find in _SCANNERS:
            for found in find(text):
                names.add(kind, found)

    for s in samples:
        _walk_strings(s.model_dump(mode="json"), scan)


def _collect_structured(s: Sample, names: Pseudonyms) -> None:
    """What a sample's fields name outright: document roots, material owners, the verifier."""
    for root in (doc_id.split("/")[0] for doc_id in _doc_ids(s)):
        if root:
            names.add("contract", root)
    for value in _named_in_metadata(s):
        names.add("name", value)
    if s.source.verified_by:
        names.add("person", s.source.verified_by)


def _doc_ids(s: Sample) -> list[str]:
    """The document ids a sample's basis, materials and citation checks name, in that order."""
    doc_ids = [m.doc_id for m in (*s.basis.required, *s.basis.superseded)]
    doc_ids += [m.doc_id for m in s.environment.materials]
    return doc_ids + [c.doc_id for c in s.expected.checks if isinstance(c, CitesCheck) and c.doc_id]


def _named_in_metadata(s: Sample) -> Iterator[str]:
    """The materials' metadata values under a key that names an organisation or a person, stripped."""
    for m in s.environment.materials:
        for key, value in m.metadata.items():
            if key.lower() in _NAME_KEYS and isinstance(value, str) and value.strip():
                yield value.strip()


# What the text scan looks for, in this order: a kind of identifying value and how to find it.
_SCANNERS: tuple[tuple[str, Callable[[str], Iterable[str]]], ...] = (
    ("email", lambda text: (m.group(0) for m in _EMAIL.finditer(text))),
    ("account", lambda text: (m.group(0) for m in _IBAN.finditer(text))),
    ("account", lambda text: (m.group("num") for m in _ACCOUNT.finditer(text))),
    ("phone", phone_numbers),
    ("contract", contract_ids),
    ("person", person_names),
    ("name", company_names),
)


def _pattern(mapping: Mapping[str, str]) -> re.Pattern[str] | None:
    if not mapping:
        return None
    originals = sorted(mapping, key=len, reverse=True)
    return re.compile(
        r"(?<![0-9A-Za-z])(?:" + "|".join(re.escape(o) for o in originals) + r")(?![0-9A-Za-z])"
    )


def _replacer(mapping: Mapping[str, str]) -> Callable[[str], str]:
    pattern = _pattern(mapping)
    if pattern is None:
        return lambda text: text
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


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _with_slugs(names: Pseudonyms) -> dict[str, str]:
    """The flat mapping, plus the slug of each id (``c_17`` in a check name like
    ``cites_c_17_attachment_v1``) so derived names do not keep the original either."""
    mapping = names.flat()
    for original, fake in names.by_kind.get("contract", {}).items():
        slug = _slug(original)
        if slug and slug != original and slug not in mapping:
            mapping[slug] = _slug(fake)
    return mapping


@dataclass(frozen=True)
class PlannedReplacement:
    """One identifier ``regress anonymize`` replaces, and where."""

    kind: str
    """contract, name, person, email, account or phone."""
    original: str
    """As found in the suite."""
    pseudonym: str
    """What it becomes, the same in every sample."""
    occurrences: int
    """How many times it occurs across the suite."""
    samples: tuple[str, ...]
    """Ids of the samples it occurs in."""


def plan_anonymization(
    samples: Sequence[Sample], *, identifiers: Iterable[str] = ()
) -> list[PlannedReplacement]:
    """What :func:`anonymize_samples` would replace (a dry run): every identifier found, with its
    pseudonym and where it occurs, in order of first appearance. Nothing is rewritten."""
    names = Pseudonyms()
    _collect(samples, identifiers, names)
    mapping = _with_slugs(names)
    kinds = {orig: kind for kind, table in names.by_kind.items() for orig in table}
    pattern = _pattern(mapping)
    counts: dict[str, int] = dict.fromkeys(mapping, 0)
    where: dict[str, list[str]] = {o: [] for o in mapping}
    if pattern is not None:
        for s in samples:

            def count(text: str, sid: str = s.id) -> None:
                for m in pattern.finditer(text):
                    counts[m.group(0)] += 1
                    if sid not in where[m.group(0)]:
                        where[m.group(0)].append(sid)

            _walk_all(s.model_dump(mode="json"), count)
    return [
        PlannedReplacement(
            kind=kinds.get(o, "contract"),
            original=o,
            pseudonym=fake,
            occurrences=counts[o],
            samples=tuple(where[o]),
        )
        for o, fake in mapping.items()
    ]


def _walk_all(value: Any, fn: Callable[[str], None], key: str | None = None) -> None:
    # The strings _rewrite rewrites: values outside _KEEP and every mapping key.
    if key in _KEEP:
        return
    if isinstance(value, str):
        fn(value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                fn(k)
            _walk_all(v, fn, k)
    elif isinstance(value, list | tuple):
        for v in value:
            _walk_all(v, fn)


def anonymize_samples(
    samples: Sequence[Sample], *, identifiers: Iterable[str] = ()
) -> tuple[list[Sample], dict[str, dict[str, str]]]:
    """Pseudonymize every sample with one mapping; returns the samples and the mapping (kind ->
    original -> pseudonym), which must be kept out of the suite."""
    names = Pseudonyms()
    _collect(samples, identifiers, names)
    sub = _replacer(_with_slugs(names))
    out = [Sample.model_validate(_rewrite(s.model_dump(mode="json"), sub)) for s in samples]
    return out, names.by_kind


# --- verification -----------------------------------------------------------------------------


def _observed_documents(sample: Sample) -> list[Document]:
    """The fixed retrieval's documents, in order, with the text of the materials they are."""
    retrieval = sample.environment.retrieval
    if retrieval is None:
        return []
    by_key = {(m.doc_id, m.version): m for m in sample.environment.materials}
    return [
        Document(
            doc_id=d.doc_id,
            version=d.version,
            content=_content(by_key.get((d.doc_id, d.version))),
            score=d.score,
            position=i,
        )
        for i, d in enumerate(retrieval.documents)
    ]


def _content(material: SampleMaterial | None) -> str | None:
    return material.content if material else None


def observed_task(sample: Sample) -> TaskRecord:
    """The observed situation as a task record: the input, the fixed retrieval with the materials'
    text as the model input, and the observed answer."""
    docs = _observed_documents(sample)
    question = "\n".join(m.content for m in sample.input.messages if m.role == "user")
    context = "\n\n".join(f"[{d.doc_id}@{d.version}]\n{d.content or ''}" for d in docs)
    answer = sample.observed.answer
    retrieval = RetrievalCall(
        span_id="observed-retrieval", documents=tuple(docs), principal=sample.input.principal
    )
    return TaskRecord(
        trace_id=sample.source.trace_id,
        start_time=sample.environment.task_time,
        input=question,
        final_answer=answer,
        final_answer_span_id="observed-answer" if answer is not None else None,
        retrievals=(retrieval,) if docs else (),
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
