"""Suite hygiene (``regress check``): pure rules over samples and past runs."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tracejudge.checks import find_numbers
from tracejudge.regress._build import fingerprint
from tracejudge.regress._suite import LoadedSample
from tracejudge.schema import CheckSpec, HygieneReport, Material, Sample, SuiteRun, Violation

_WORD = re.compile(r"[0-9a-z]+")


@dataclass(frozen=True)
class HygieneOptions:
    """Thresholds of the rules."""

    max_failure_share: float = 0.75
    """Above this share of failures a suite teaches the agent to refuse."""
    near_duplicate_similarity: float = 0.8
    """Input word overlap (Jaccard) from which two samples with the same basis are variants of one object."""


def _text(sample: Sample) -> str:
    return "\n".join(m.content for m in sample.input.messages)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def _flat(text: str) -> str:
    return " ".join(text.casefold().replace(",", "").split())


def _basis_key(sample: Sample) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted((m.doc_id, m.version) for m in sample.basis.required))


def _violation(rule: str, message: str, items: Sequence[LoadedSample]) -> Violation:
    return Violation.model_validate(
        {
            "rule": rule,
            "message": message,
            "samples": tuple(i.sample.id for i in items),
            "files": tuple(str(i.path) for i in items),
        }
    )


def _balance(active: Sequence[LoadedSample], opts: HygieneOptions) -> list[Violation]:
    kinds = Counter(s.sample.kind for s in active)
    out: list[Violation] = []
    if not active:
        return out
    if kinds["failure"] and not kinds["success"]:
        out.append(
            _violation(
                "balance",
                "the suite has failures but no success samples: it would teach the agent to refuse; add "
                "normal successes from traces with positive feedback or passing scores",
                [],
            )
        )
    share = kinds["failure"] / len(active)
    if share > opts.max_failure_share:
        out.append(
            _violation(
                "balance",
                f"{kinds['failure']} of {len(active)} samples are failures ({share:.0%} > "
                f"{opts.max_failure_share:.0%}): add successes, reasonable rejections and boundary cases",
                [],
            )
        )
    return out


def _straddles(active: Sequence[LoadedSample]) -> list[Violation]:
    """A group's samples sit in both splits."""
    by_group: dict[str, list[LoadedSample]] = defaultdict(list)
    for s in active:
        by_group[s.sample.group].append(s)
    return [
        _violation(
            "split_straddle",
            f"group {group!r} has samples in both debug and acceptance: move them to one split",
            items,
        )
        for group, items in sorted(by_group.items())
        if len({i.sample.split for i in items}) > 1
    ]


def _same_basis_apart(active: Sequence[LoadedSample]) -> Iterator[tuple[LoadedSample, LoadedSample]]:
    """Each pair of samples (in suite order) with the same basis in different groups."""
    for i, a in enumerate(active):
        for b in active[i + 1 :]:
            if a.sample.group != b.sample.group and _basis_key(a.sample) == _basis_key(b.sample):
                yield a, b


def _similarity(a: Sample, b: Sample) -> float:
    """Jaccard overlap of two samples' input words (1.0 when neither has any)."""
    wa, wb = _words(_text(a)), _words(_text(b))
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def _near_duplicates(active: Sequence[LoadedSample], opts: HygieneOptions) -> list[Violation]:
    """Variants of one problem (same basis, most input words shared) in different groups."""
    out: list[Violation] = []
    seen_pairs: set[tuple[str, str]] = set()
    for a, b in _same_basis_apart(active):
        sim = _similarity(a.sample, b.sample)
        pair = (a.sample.id, b.sample.id)
        if sim >= opts.near_duplicate_similarity and pair not in seen_pairs:
            seen_pairs.add(pair)
            out.append(
                _violation(
                    "near_duplicate",
                    f"{a.sample.id} and {b.sample.id} pose variants of the same problem (same basis, "
                    f"{sim:.0%} of input words shared) but sit in groups {a.sample.group!r} and "
                    f"{b.sample.group!r}: put them in one group",
                    [a, b],
                )
            )
    return out


@dataclass(frozen=True)
class _Input:
    """A sample's input as the leakage rule reads it."""

    flat: str
    """The input text, case-folded, without thousands separators, single-spaced."""
    numbers: frozenset[float]
    """The numbers the input states."""

    @classmethod
    def of(cls, sample: Sample) -> _Input:
        text = _text(sample)
        return cls(_flat(text), frozenset(n.value for n in find_numbers(text)))

    def holds(self, text: str) -> bool:
        return _flat(text) in self.flat


def _material_leaks(m: Material, given: _Input) -> Iterator[str]:
    """What of a required material (its clause, its facts) the input gives away."""
    if m.clause and given.holds(m.clause):
        yield f"the clause of {m.doc_id} ({m.clause!r})"
    for key, value in m.facts.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and float(value) in given.numbers:
            yield f"the expected value {key}={value}"
        elif isinstance(value, str) and value.strip() and given.holds(value):
            yield f"the expected value {key}={value!r}"


def _check_leaks(check: CheckSpec, given: _Input) -> Iterator[str]:
    """What a hard check expects that the input gives away."""
    if check.type == "contains" and check.value is not None:
        values = [check.value] if isinstance(check.value, str) else check.value
        yield from (f"the text {v!r} check {check.name!r} expects" for v in values if given.holds(v))
    if check.type == "number" and check.expected is not None and check.expected in given.numbers:
        yield f"the number {check.expected:g} check {check.name!r} expects"


def _leaks(sample: Sample) -> list[str]:
    given = _Input.of(sample)
    found = [leak for m in sample.basis.required for leak in _material_leaks(m, given)]
    found += [leak for check in sample.expected.checks for leak in _check_leaks(check, given)]
    if sample.expected.behavior and given.holds(sample.expected.behavior):
        found.append("the expected behaviour")
    return list(dict.fromkeys(found))


def _leakage(active: Sequence[LoadedSample]) -> list[Violation]:
    out = []
    for s in active:
        leaks = _leaks(s.sample)
        if leaks:
            out.append(
                _violation(
                    "leakage",
                    f"{s.sample.id}: the input gives away {', '.join(leaks)}: remove it from the input",
                    [s],
                )
            )
    return out


def _debug_runs(runs: Sequence[SuiteRun]) -> dict[str, list[str]]:
    """Sample id -> the debug runs that used it."""
    used: dict[str, list[str]] = defaultdict(list)
    for run in (r for r in runs if r.purpose == "debug"):
        for r in run.samples:
            used[r.sample_id].append(run.run_id)
    return used


def _reuse_problem(sample: Sample, used: dict[str, list[str]], replaced: set[str]) -> str | None:
    """What is wrong with an acceptance sample: used while debugging, or retired with no replacement."""
    if sample.status == "active" and sample.id in used:
        return (
            f"acceptance sample {sample.id} was used while debugging (runs "
            f"{', '.join(used[sample.id])}): set its status to retired and add a fresh sample "
            f"with `replaces: {sample.id}`"
        )
    if sample.status == "retired" and sample.id not in replaced:
        return (
            f"acceptance sample {sample.id} is retired but nothing replaces it: add a fresh sample "
            f"with `replaces: {sample.id}`"
        )
    return None


def _debug_used(samples: Sequence[LoadedSample], runs: Sequence[SuiteRun]) -> list[Violation]:
    used = _debug_runs(runs)
    replaced = {s.sample.replaces for s in samples if s.sample.status == "active" and s.sample.replaces}
    problems = (
        (s, _reuse_problem(s.sample, used, replaced)) for s in samples if s.sample.split == "acceptance"
    )
    return [_violation("debug_used", problem, [s]) for s, problem in problems if problem]


def _lacking(sample: Sample) -> list[str]:
    """The basis's and the fixed retrieval's materials the environment holds no text of."""
    have = {(m.doc_id, m.version) for m in sample.environment.materials if m.content.strip()}
    ids = {doc for doc, _ in have}
    missing = [
        f"{m.doc_id}@{m.version}" if m.version else m.doc_id
        for m in sample.basis.required
        if not _held(m, have, ids)
    ]
    retrieval = sample.environment.retrieval
    if retrieval is not None:
        missing += [
            f"{d.doc_id}@{d.version} (fixed retrieval)"
            for d in retrieval.documents
            if (d.doc_id, d.version) not in have
        ]
    return missing


def _held(m: Material, have: set[tuple[str, str | None]], ids: set[str]) -> bool:
    """Is a basis material among those held: that version, or with no version named, any of the document?"""
    return (m.doc_id, m.version) in have if m.version is not None else m.doc_id in ids


def _missing(active: Sequence[LoadedSample]) -> list[Violation]:
    lacking = ((s, _lacking(s.sample)) for s in active)
    return [
        _violation(
            "missing_material",
            f"{s.sample.id}: the environment lacks {', '.join(missing)}: rebuild it with --manifest "
            "(the index manifest with document content) or add the material",
            [s],
        )
        for s, missing in lacking
        if missing
    ]


def _duplicates(active: Sequence[LoadedSample]) -> list[Violation]:
    by_fp: dict[str, list[LoadedSample]] = defaultdict(list)
    for s in active:
        by_fp[fingerprint(s.sample)].append(s)
    return [
        _violation(
            "duplicate",
            f"{', '.join(i.sample.id for i in items)} are the same test (input, basis, environment and "
            "expected behaviour): keep one",
            items,
        )
        for items in by_fp.values()
        if len(items) > 1
    ]


def check_suite(
    name: str,
    samples: Sequence[LoadedSample],
    runs: Sequence[SuiteRun] = (),
    options: HygieneOptions | None = None,
) -> HygieneReport:
    """Every hygiene rule over a suite's samples (and its runs, for samples seen while debugging)."""
    opts = options or HygieneOptions()
    active = [s for s in samples if s.sample.status == "active"]
    violations = [
        *_balance(active, opts),
        *_straddles(active),
        *_near_duplicates(active, opts),
        *_leakage(active),
        *_debug_used(samples, runs),
        *_missing(active),
        *_duplicates(active),
    ]
    groups: dict[str, list[str]] = defaultdict(list)
    for s in active:
        groups[s.sample.group].append(s.sample.id)
    return HygieneReport(
        suite=name,
        samples=len(active),
        kinds=dict(Counter(s.sample.kind for s in active)),
        splits=dict(Counter(s.sample.split for s in active)),
        groups=dict(groups),
        violations=tuple(violations),
    )
