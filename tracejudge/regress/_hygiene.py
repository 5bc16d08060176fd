"""Suite hygiene (``regress check``): pure rules over samples and past runs."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from tracejudge.checks import find_numbers
from tracejudge.regress._build import fingerprint
from tracejudge.regress._suite import LoadedSample
from tracejudge.schema import HygieneReport, Sample, SuiteRun, Violation

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


def _groups(active: Sequence[LoadedSample], opts: HygieneOptions) -> list[Violation]:
    out: list[Violation] = []
    by_group: dict[str, list[LoadedSample]] = defaultdict(list)
    for s in active:
        by_group[s.sample.group].append(s)
    for group, items in sorted(by_group.items()):
        splits = {i.sample.split for i in items}
        if len(splits) > 1:
            out.append(
                _violation(
                    "split_straddle",
                    f"group {group!r} has samples in both debug and acceptance: move them to one split",
                    items,
                )
            )
    seen_pairs: set[tuple[str, str]] = set()
    for i, a in enumerate(active):
        for b in active[i + 1 :]:
            if a.sample.group == b.sample.group or _basis_key(a.sample) != _basis_key(b.sample):
                continue
            wa, wb = _words(_text(a.sample)), _words(_text(b.sample))
            sim = len(wa & wb) / len(wa | wb) if wa | wb else 1.0
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


def _leaks(sample: Sample) -> list[str]:
    text = _text(sample)
    flat = _flat(text)
    found: list[str] = []
    numbers = {n.value for n in find_numbers(text)}
    for m in sample.basis.required:
        if m.clause and _flat(m.clause) in flat:
            found.append(f"the clause of {m.doc_id} ({m.clause!r})")
        for key, value in m.facts.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and float(value) in numbers:
                found.append(f"the expected value {key}={value}")
            elif isinstance(value, str) and value.strip() and _flat(value) in flat:
                found.append(f"the expected value {key}={value!r}")
    for check in sample.expected.checks:
        if check.type == "contains" and check.value is not None:
            values = [check.value] if isinstance(check.value, str) else check.value
            found += [f"the text {v!r} check {check.name!r} expects" for v in values if _flat(v) in flat]
        if check.type == "number" and check.expected is not None and check.expected in numbers:
            found.append(f"the number {check.expected:g} check {check.name!r} expects")
    if sample.expected.behavior and _flat(sample.expected.behavior) in flat:
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


def _debug_used(samples: Sequence[LoadedSample], runs: Sequence[SuiteRun]) -> list[Violation]:
    out: list[Violation] = []
    used: dict[str, list[str]] = defaultdict(list)
    for run in runs:
        if run.purpose != "debug":
            continue
        for r in run.samples:
            used[r.sample_id].append(run.run_id)
    replaced = {s.sample.replaces for s in samples if s.sample.status == "active" and s.sample.replaces}
    for s in samples:
        if s.sample.split != "acceptance":
            continue
        if s.sample.status == "active" and s.sample.id in used:
            out.append(
                _violation(
                    "debug_used",
                    f"acceptance sample {s.sample.id} was used while debugging (runs "
                    f"{', '.join(used[s.sample.id])}): set its status to retired and add a fresh sample "
                    f"with `replaces: {s.sample.id}`",
                    [s],
                )
            )
        elif s.sample.status == "retired" and s.sample.id not in replaced:
            out.append(
                _violation(
                    "debug_used",
                    f"acceptance sample {s.sample.id} is retired but nothing replaces it: add a fresh sample "
                    f"with `replaces: {s.sample.id}`",
                    [s],
                )
            )
    return out


def _missing(active: Sequence[LoadedSample]) -> list[Violation]:
    out = []
    for s in active:
        have = {(m.doc_id, m.version) for m in s.sample.environment.materials if m.content.strip()}
        ids = {doc for doc, _ in have}
        missing = [
            f"{m.doc_id}@{m.version}" if m.version else m.doc_id
            for m in s.sample.basis.required
            if ((m.doc_id, m.version) not in have if m.version is not None else m.doc_id not in ids)
        ]
        retrieval = s.sample.environment.retrieval
        if retrieval is not None:
            missing += [
                f"{d.doc_id}@{d.version} (fixed retrieval)"
                for d in retrieval.documents
                if (d.doc_id, d.version) not in have
            ]
        if missing:
            out.append(
                _violation(
                    "missing_material",
                    f"{s.sample.id}: the environment lacks {', '.join(missing)}: rebuild it with --manifest "
                    "(the index manifest with document content) or add the material",
                    [s],
                )
            )
    return out


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
        *_groups(active, opts),
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
