"""``calibrate``: the judge on labelled items, measured against people (DESIGN 2, 5.6)."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from tracejudge.audit._labels import LabelSet, group_by_id, in_holdout, item_key, to_task
from tracejudge.audit._stats import BOOTSTRAP_RESAMPLES, agreement, cohen_kappa
from tracejudge.judge import Judge, JudgeClient, OpenAIJudgeClient, prompt_template_hash, rubric_hash
from tracejudge.runs import Loader, is_still_arriving, score_source, store_loader
from tracejudge.schema import (
    Agreement,
    CalibrationItem,
    CalibrationReport,
    CriterionCoverage,
    ItemResult,
    JudgeConfig,
    LabelItem,
    ManifestEntry,
    ModelComparison,
    RaterAgreement,
    Rubric,
    StoredReport,
    SweepPoint,
    TaskRecord,
    ThresholdSweep,
    TuningMark,
)
from tracejudge.store import Store

Verdict = Literal["pass", "fail", "indeterminate"]
ClientFactory = Callable[[JudgeConfig], JudgeClient]

SWEEP = tuple(i / 2 for i in range(21))
_STOP = frozenset(
    {
        "the",
        "and",
        "that",
        "this",
        "with",
        "what",
        "when",
        "which",
        "does",
        "from",
        "have",
        "been",
        "into",
        "must",
        "should",
        "would",
        "could",
        "item",
        "items",
        "user",
        "users",
        "agent",
        "answer",
        "answers",
        "answered",
        "question",
        "questions",
        "response",
        "responses",
        "reply",
        "replies",
        "about",
        "given",
        "their",
        "they",
        "them",
        "there",
        "these",
        "those",
        "only",
        "also",
        "more",
        "than",
        "then",
        "each",
        "every",
        "pass",
        "passes",
        "passed",
        "fail",
        "fails",
        "failed",
        "score",
        "scores",
        "good",
        "whether",
        "other",
        "some",
        "such",
        "will",
        "your",
        "judge",
        "judged",
        "label",
        "labels",
        "labelled",
        "true",
        "false",
    }
)


@dataclass(frozen=True)
class CalibrateOptions:
    """How a calibration goes; resolved at the edge."""

    holdout: float | None = None
    """Fraction of items kept aside (by id hash) and reported as never used for tuning."""
    compare_model: str | None = None
    """A second judge model run on the same items."""
    rater: str | None = None
    """The rater the judge is measured against (default: the first in the file)."""
    band: float = 2.0
    """Scores within this distance below the threshold are ``borderline`` for the weighted kappa."""
    concurrency: int = 8
    """Judge calls in flight."""
    use_cache: bool = True
    """Reuse cached judge replies."""
    agent_prompts: tuple[str, ...] = ()
    """Agent prompt versions the labels cover (default: the items' ``prompt`` fields)."""
    resamples: int = BOOTSTRAP_RESAMPLES
    """Bootstrap resamples for kappa's interval."""
    manifest: Sequence[ManifestEntry] | None = None
    """The index manifest, for the permission check (as ``score --manifest``)."""


@dataclass(frozen=True)
class _Judged:
    verdict: Verdict
    reason: str
    hard_fail: bool
    undecided: bool
    scores: dict[str, float | None]
    thresholds: dict[str, float]
    reasoning: dict[str, str]
    arriving: bool = False
    """Not judged: the stored trace may still have been arriving, its answer maybe a draft."""

    def at(self, threshold: float) -> Verdict:
        """The verdict had every judged criterion's threshold been ``threshold``."""
        if self.hard_fail or any(s is not None and s < threshold for s in self.scores.values()):
            return "fail"
        if self.undecided or any(s is None for s in self.scores.values()):
            return "indeterminate"
        return "pass"

    def bucket(self, band: float) -> str:
        if self.verdict != "fail":
            return self.verdict
        if self.hard_fail:
            return "fail"
        margins = [s - self.thresholds[k] for k, s in self.scores.items() if s is not None]
        return "borderline" if margins and min(margins) >= -band else "fail"


def _check_outcome(item: ItemResult) -> tuple[bool, bool]:
    """(hard fail, undecided) from the checks: the criteria checks decided and the checks that decide
    no criterion."""
    by_check = [c for c in item.criteria.values() if c.decided_by != "judge"]
    deciding = {c.decided_by.removeprefix("check:") for c in by_check}
    verdicts = [c.verdict for c in by_check] + [
        r.verdict for name, r in item.checks.items() if name not in deciding
    ]
    return "fail" in verdicts, "indeterminate" in verdicts


def _read(item: ItemResult, rubric: Rubric) -> _Judged:
    judged = {
        c.name: c.threshold
        for c in rubric.criteria
        if (result := item.criteria.get(c.name)) is not None and result.decided_by == "judge"
    }
    hard_fail, undecided = _check_outcome(item)
    return _Judged(
        verdict=item.verdict,
        reason=item.reason,
        hard_fail=hard_fail,
        undecided=undecided,
        scores={k: item.criteria[k].score for k in judged},
        thresholds=judged,
        reasoning={k: c.reasoning for k, c in item.criteria.items() if c.reasoning},
        arriving=is_still_arriving(item),
    )


def _task(item: LabelItem, load: Loader | None) -> TaskRecord:
    # A labelled item picked from a stored trace (``calibrate sample``, Langfuse annotations) is judged
    # on that trace, as ``score`` judged it: its principal, retrievals and tool calls included. Only
    # when the stored answer is the one labelled; an edited item is judged as written.
    if load is not None and item.trace_id:
        stored = load(item.trace_id)
        if isinstance(stored, TaskRecord) and item.output in (None, stored.final_answer):
            return stored
    return to_task(item)


async def judge_labelled(
    rubric: Rubric,
    items: Sequence[LabelItem],
    client: JudgeClient | None,
    *,
    store: Store | None = None,
    concurrency: int = 8,
    manifest: Sequence[ManifestEntry] | None = None,
    load: Loader | None = None,
) -> list[ItemResult]:
    """Score labelled items with a rubric (checks, then the judge), in the given order. ``load`` finds
    the stored trace of an item that names one; one that may still be arriving, its answer maybe a draft,
    is not judged (indeterminate, as ``score`` leaves it: :func:`~tracejudge.runs.still_arriving_reason`)."""
    judge = Judge(rubric, client, cache=store, concurrency=concurrency) if client and rubric.judge else None
    return list(
        await asyncio.gather(
            *(
                score_source(
                    _task(it, load), rubric, run_id="calibration", judge=judge, repeat=1, manifest=manifest
                )
                for it in items
            )
        )
    )


def _words(text: str) -> dict[str, str]:
    # A 5-letter stem joins correct / correctly / correctness; the original word is what is shown.
    out: dict[str, str] = {}
    for w in re.findall(r"[a-z][a-z-]{3,}", text.lower()):
        if w not in _STOP:
            out.setdefault(w[:5], w)
    return out


def _coverage_rows(rubric: Rubric) -> list[tuple[str, str, float | None]]:
    """(name, description, threshold) of each criterion, and of each check that decides no criterion
    of its own (a check deciding a criterion is that criterion's row)."""
    rows: list[tuple[str, str, float | None]] = [
        (c.name, c.description, c.threshold) for c in rubric.criteria
    ]
    rows.extend(
        (f"check:{chk.name}", f"{chk.type} {chk.target} {chk.subject}".strip(), None)
        for chk in rubric.checks
        if not chk.criterion
    )
    return rows


def criteria_beside_definition(rubric: Rubric, definition: str) -> tuple[CriterionCoverage, ...]:
    """Each criterion and check with the content words it shares with the labels' definition."""
    defined = _words(definition)
    out = []
    for name, desc, threshold in _coverage_rows(rubric):
        mine = _words(f"{name.replace('_', ' ')} {desc}")
        shared = tuple(sorted({mine[k] for k in mine if k in defined}))
        out.append(
            CriterionCoverage(
                name=name,
                description=desc,
                threshold=threshold,
                shared_words=shared,
                covered=bool(shared) if definition.strip() else None,
            )
        )
    return tuple(out)


def _sweep_point(
    threshold: float, judged: Sequence[_Judged], labels: Sequence[str], idx: Sequence[int]
) -> SweepPoint:
    """Agreement on the items ``idx`` had every judged criterion's threshold been ``threshold``."""
    a = agreement([judged[i].at(threshold) for i in idx], [labels[i] for i in idx], resamples=0)
    return SweepPoint(
        threshold=threshold, n=a.n, accuracy=a.accuracy, kappa=a.kappa, judge_pass_rate=a.judge_pass_rate
    )


def _best_point(points: Sequence[SweepPoint], rubric: Rubric) -> SweepPoint | None:
    """The point of highest kappa; ties go to the threshold nearest the rubric's mean (7 without one)."""
    current = [c.threshold for c in rubric.criteria]
    ref = sum(current) / len(current) if current else 7.0
    scored = [p for p in points if p.kappa is not None]
    return max(scored, key=lambda p: (round(p.kappa or 0.0, 9), -abs(p.threshold - ref)), default=None)


def _sweep(
    rubric: Rubric,
    judged: Sequence[_Judged],
    labels: Sequence[str],
    holdout: Sequence[int],
    tuning: Sequence[int],
) -> ThresholdSweep | None:
    if not any(j.scores for j in judged):
        return None
    points = [_sweep_point(t, judged, labels, tuning) for t in SWEEP]
    best = _best_point(points, rubric)
    hk = _sweep_point(best.threshold, judged, labels, holdout).kappa if best is not None and holdout else None
    return ThresholdSweep(
        points=tuple(points),
        best_threshold=best.threshold if best else None,
        best_kappa=best.kappa if best else None,
        rubric_thresholds={c.name: c.threshold for c in rubric.criteria},
        holdout_kappa_at_best=hk,
    )


def _subset(
    judged: Sequence[_Judged], labels: Sequence[str], idx: Sequence[int], band: float, resamples: int
) -> Agreement:
    return agreement(
        [judged[i].verdict for i in idx],
        [labels[i] for i in idx],
        judge_buckets=[judged[i].bucket(band) for i in idx],
        resamples=resamples,
    )


def _binary_kappa(x: Sequence[str], y: Sequence[str]) -> tuple[float | None, float | None, int]:
    pairs = [(a, b) for a, b in zip(x, y, strict=True) if a in ("pass", "fail") and b in ("pass", "fail")]
    if not pairs:
        return None, None, 0
    k = cohen_kappa([p[0] for p in pairs], [p[1] for p in pairs], labels=["fail", "pass"])
    return k, sum(a == b for a, b in pairs) / len(pairs), len(pairs)


def _wrong(verdict: str, label: str) -> bool:
    """A decided verdict that is not the label."""
    return verdict in ("pass", "fail") and verdict != label


@dataclass(frozen=True)
class _Errors:
    """Items two judges got wrong (against pass/fail labels): by both, by one only."""

    shared: list[str]
    only_main: list[str]
    only_other: list[str]

    @classmethod
    def of(
        cls,
        main: Sequence[_Judged],
        other: Sequence[_Judged],
        labels: Sequence[str],
        ids: Sequence[str],
        idx: Sequence[int],
    ) -> _Errors:
        # (main wrong, other wrong) -> the ids of that kind
        by_kind: dict[tuple[bool, bool], list[str]] = {
            (m, o): [] for m in (True, False) for o in (True, False)
        }
        for i in idx:
            if labels[i] in ("pass", "fail"):
                by_kind[_wrong(main[i].verdict, labels[i]), _wrong(other[i].verdict, labels[i])].append(
                    ids[i]
                )
        return cls(
            shared=by_kind[True, True], only_main=by_kind[True, False], only_other=by_kind[False, True]
        )

    def reading(self, model: str) -> str:
        """Whether the errors point at the rubric and labels (shared) or at the model (apart)."""
        errors = len(self.shared) + len(self.only_main) + len(self.only_other)
        if errors == 0:
            return "neither model errs on these items"
        if len(self.shared) * 2 >= errors:
            return (
                f"{len(self.shared)} of {errors} errors are shared by both models: look at the rubric and the"
                " labels' definition before blaming the model"
            )
        return (
            f"the models err on different items ({len(self.only_main)} only the primary,"
            f" {len(self.only_other)} only {model}): the model's own limits weigh more than the prompt's"
        )


def _compare(
    opts: CalibrateOptions,
    main: Sequence[_Judged],
    other: Sequence[_Judged] | None,
    chosen: _Chosen,
    idx: Sequence[int],
) -> ModelComparison | None:
    """The ``--compare-model`` judge beside the primary one on the evaluated items (None without it)."""
    if other is None:
        return None
    model = opts.compare_model or ""
    labels = chosen.labels
    errors = _Errors.of(main, other, labels, chosen.ids, idx)
    between, _, _ = _binary_kappa([main[i].verdict for i in idx], [other[i].verdict for i in idx])
    return ModelComparison(
        model=model,
        agreement=_subset(other, labels, idx, opts.band, opts.resamples),
        between_models_kappa=between,
        shared_errors=tuple(errors.shared),
        only_primary_errors=tuple(errors.only_main),
        only_other_errors=tuple(errors.only_other),
        reading=errors.reading(model),
    )


def new_calibration_id() -> str:
    """Sortable and unique."""
    return f"cal-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class _Chosen:
    """The labelled items, one per id: the label of the rater the judge is measured against."""

    ids: list[str]
    """Item ids in file order."""
    groups: dict[str, list[LabelItem]]
    """Every rater's label item per id."""
    raters: list[str]
    """Raters in file order."""
    primary: str
    """The rater measured against (``--rater``, else the first)."""
    items: list[LabelItem]
    """Per id, the primary rater's item (or the id's first one)."""

    @property
    def labels(self) -> list[str]:
        """The primary labels, by item."""
        return [it.label for it in self.items]


def _choose(labels: LabelSet, rater: str | None) -> _Chosen:
    ids, groups, raters = group_by_id(labels.items)
    primary = rater or raters[0]
    items = [next((it for it in groups[i] if (it.rater or "rater") == primary), groups[i][0]) for i in ids]
    return _Chosen(ids=ids, groups=groups, raters=raters, primary=primary, items=items)


@dataclass(frozen=True)
class _Split:
    """Which items are held out and which were (or may have been) used for tuning."""

    keys: list[str]
    """Each item's key (id, input and output hashed) for the tuning marks."""
    holdout: list[int]
    """Items in the holdout bucket never used for tuning."""
    tuning: list[int]
    """Every other item, the contaminated ones included."""
    contaminated: list[str]
    """Ids in the holdout bucket already used for tuning (so counted as tuning)."""
    seen_by: list[str]
    """Other rubric versions this holdout was already evaluated against."""


def _seen_by(rubric: Rubric, marks: Sequence[TuningMark], held_keys: set[str]) -> list[str]:
    """Other rubric versions that already evaluated any of these held-out items."""
    seen = {m.rubric_version for m in marks if m.kind == "holdout_seen" and m.item_key in held_keys}
    return sorted(seen - {str(rubric.version)})


def _tuned_keys(marks: Sequence[TuningMark]) -> set[str]:
    """Keys of the items some calibration already used for tuning."""
    return {m.item_key for m in marks if m.kind == "tuning"}


def _holdout_bucket(items: Sequence[LabelItem], holdout: float | None) -> list[int]:
    """Items whose id hashes into the holdout fraction (none without one)."""
    return [i for i, it in enumerate(items) if holdout and in_holdout(it.id, holdout)]


def _split(
    rubric: Rubric, items: Sequence[LabelItem], marks: Sequence[TuningMark], holdout: float | None
) -> _Split:
    used = _tuned_keys(marks)
    keys = [item_key(it) for it in items]
    # An item in the holdout bucket that was already used for tuning is contaminated: counted as tuning.
    bucket = _holdout_bucket(items, holdout)
    held = [i for i in bucket if keys[i] not in used]
    return _Split(
        keys=keys,
        holdout=held,
        tuning=sorted(set(range(len(items))) - set(held)),
        contaminated=[items[i].id for i in bucket if keys[i] in used],
        seen_by=_seen_by(rubric, marks, {keys[i] for i in held}),
    )


async def _judge_all(
    rubric: Rubric, items: Sequence[LabelItem], store: Store, opts: CalibrateOptions, make: ClientFactory
) -> tuple[list[_Judged], list[_Judged] | None]:
    """The rubric's judge on every item, and the ``--compare-model`` judge when asked for."""
    load = store_loader(store)

    async def run(r: Rubric) -> list[_Judged]:
        client = make(r.judge) if r.judge is not None else None
        try:
            results = await judge_labelled(
                r,
                items,
                client,
                store=store if opts.use_cache else None,
                concurrency=opts.concurrency,
                manifest=opts.manifest,
                load=load,
            )
        finally:
            if client is not None:
                await client.aclose()
        return [_read(x, r) for x in results]

    judged = await run(rubric)
    if not (opts.compare_model and rubric.judge is not None):
        return judged, None
    alt = rubric.model_copy(update={"judge": rubric.judge.model_copy(update={"model": opts.compare_model})})
    return judged, await run(alt)


def _flags(
    headline: Agreement, opts: CalibrateOptions, split: _Split, judged: Sequence[_Judged]
) -> tuple[str, ...]:
    flags = list(headline.flags)
    arriving = sum(j.arriving for j in judged)
    if arriving:
        flags.append(
            f"still_arriving: {arriving} item(s) not judged (indeterminate): their stored trace may still be"
            " arriving and its answer may be a draft the user never got; they are not marked as seen."
            " Calibrate again once the rest of the trace has arrived"
        )
    if opts.holdout and not split.holdout:
        flags.append("no_holdout_items: every item in the holdout bucket was already used for tuning")
    if split.seen_by:
        flags.append(
            "holdout_seen: this holdout was already evaluated against rubric version(s) "
            + ", ".join(split.seen_by)
            + "; if the rubric was changed after reading those results, it is no longer held out"
        )
    return tuple(flags)


def _rater_agreement(
    chosen: _Chosen, judged: Sequence[_Judged], evaluated: Sequence[int]
) -> RaterAgreement | None:
    """How the first two raters agree (the ceiling a judge can reach) and the judge against each."""
    raters = chosen.raters
    if len(raters) < 2:
        return None
    by_rater = {
        r: [next((it.label for it in chosen.groups[i] if (it.rater or "rater") == r), "") for i in chosen.ids]
        for r in raters
    }
    k, acc, n = _binary_kappa(by_rater[raters[0]], by_rater[raters[1]])
    return RaterAgreement(
        raters=tuple(raters),
        primary=chosen.primary,
        ceiling_kappa=k,
        ceiling_accuracy=acc,
        ceiling_n=n,
        judge_kappa={
            r: _binary_kappa([judged[i].verdict for i in evaluated], [by_rater[r][i] for i in evaluated])[0]
            for r in raters
        },
    )


def _items(
    chosen: _Chosen, split: _Split, judged: Sequence[_Judged], other: Sequence[_Judged] | None
) -> tuple[CalibrationItem, ...]:
    held = set(split.holdout)
    return tuple(
        CalibrationItem(
            id=it.id,
            split="holdout" if i in held else "tuning",
            label=it.label,
            judge=judged[i].verdict,
            reason=judged[i].reason,
            scores=judged[i].scores,
            reasoning=judged[i].reasoning,
            labels={(g.rater or "rater"): g.label for g in chosen.groups[it.id]},
            other_judge=other[i].verdict if other is not None else None,
        )
        for i, it in enumerate(chosen.items)
    )


def _keep(
    store: Store, rubric: Rubric, report: CalibrationReport, split: _Split, unjudged: Sequence[bool]
) -> None:
    """Store the report, and mark each item judged as used for tuning or as a holdout seen by this
    version (one left unjudged, its trace still arriving, was neither: a later calibration judges it)."""
    store.put_report(
        StoredReport(
            report_id=report.calibration_id,
            kind="calibration",
            created_at=report.created_at,
            rubric_name=rubric.name,
            rubric_version=str(rubric.version),
            judge_model=report.judge_model,
            payload=report.model_dump(mode="json"),
        )
    )
    now = datetime.now(UTC)
    held = set(split.holdout)
    store.put_tuning_marks(
        [
            TuningMark(
                rubric_name=rubric.name,
                item_key=key,
                kind="holdout_seen" if i in held else "tuning",
                rubric_version=str(rubric.version),
                calibration_id=report.calibration_id,
                marked_at=now,
            )
            for i, key in enumerate(split.keys)
            if not unjudged[i]
        ]
    )


def _agent_prompts(labels: LabelSet, opts: CalibrateOptions) -> tuple[str, ...]:
    """The agent prompt versions the labels cover: as given, else the items' ``prompt`` fields."""
    return opts.agent_prompts or tuple(sorted({it.prompt for it in labels.items if it.prompt}))


async def calibrate_async(
    rubric: Rubric,
    labels: LabelSet,
    store: Store,
    *,
    options: CalibrateOptions | None = None,
    client_for: ClientFactory | None = None,
) -> CalibrationReport:
    """Run the judge on labelled items and measure it against the labels; store the report and
    mark which items were used for tuning."""
    opts = options or CalibrateOptions()
    make: ClientFactory = client_for or (lambda cfg: OpenAIJudgeClient(cfg, concurrency=opts.concurrency))
    chosen = _choose(labels, opts.rater)
    split = _split(rubric, chosen.items, store.tuning_marks(rubric.name), opts.holdout)
    judged, other = await _judge_all(rubric, chosen.items, store, opts, make)
    label_of = chosen.labels
    held = bool(split.holdout)
    evaluated = split.holdout if held else list(range(len(chosen.items)))
    headline = _subset(judged, label_of, evaluated, opts.band, opts.resamples)
    report = CalibrationReport(
        **{**headline.model_dump(), "flags": _flags(headline, opts, split, judged)},
        calibration_id=new_calibration_id(),
        created_at=datetime.now(UTC),
        rubric_name=rubric.name,
        rubric_version=str(rubric.version),
        rubric_hash=rubric_hash(rubric),
        prompt_hash=prompt_template_hash(rubric),
        judge_model=rubric.judge.model if rubric.judge else None,
        agent_prompts=_agent_prompts(labels, opts),
        labels_source=labels.source,
        labels_sha256=labels.sha256,
        labels_skipped=labels.warnings,
        definition=labels.definition,
        evaluated_on="holdout" if held else "all",
        holdout_fraction=opts.holdout,
        tuning=_subset(judged, label_of, split.tuning, opts.band, opts.resamples) if held else None,
        holdout=headline if held else None,
        contaminated=tuple(split.contaminated),
        holdout_seen_by=tuple(split.seen_by),
        raters=_rater_agreement(chosen, judged, evaluated),
        criteria=criteria_beside_definition(rubric, labels.definition),
        sweep=_sweep(rubric, judged, label_of, split.holdout, split.tuning),
        comparison=_compare(opts, judged, other, chosen, evaluated),
        items=_items(chosen, split, judged, other),
    )
    _keep(store, rubric, report, split, [j.arriving for j in judged])
    return report


def calibrate(
    rubric: Rubric,
    labels: LabelSet,
    store: Store,
    *,
    options: CalibrateOptions | None = None,
    client_for: ClientFactory | None = None,
) -> CalibrationReport:
    """Synchronous :func:`calibrate_async`."""
    return asyncio.run(calibrate_async(rubric, labels, store, options=options, client_for=client_for))
