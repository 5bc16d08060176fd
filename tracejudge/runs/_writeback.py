"""Scores onto the traces: Langfuse scores per criterion plus the overall verdict, or OTel
``gen_ai.evaluation.result`` events parented to the evaluated span (DESIGN 5.7)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tracejudge.schema import CheckResult, CriterionResult, ItemResult, RunRecord
from tracejudge.write import (
    EvaluationEvent,
    EvaluationWriter,
    ScoreRecord,
    ScoreWriter,
    WriteReport,
    find_target,
    open_event_writer,
    open_score_writer,
    stable_id,
)


def _provenance_metadata(run: RunRecord) -> dict[str, Any]:
    p = run.provenance
    return {
        "run_id": run.run_id,
        "series": run.series,
        "rubric_hash": p.rubric_hash,
        "judge_base_url": p.judge_base_url,
        "repeat": p.repeat,
        "tracejudge_version": p.tracejudge_version,
        "source": "tracejudge",
    }


def _comment(reasoning: str, reason: str) -> str | None:
    text = "\n".join(t for t in (reasoning, reason) if t)
    return text or None


@dataclass(frozen=True)
class _Scores:
    """Builds a run's score records: every one carries the run's provenance, and its item's
    ``task_time`` as its timestamp (so the writer need not look up a stored score's; an item stored
    without one leaves it None, and the writer looks it up as before)."""

    rubric_name: str
    common: dict[str, Any]
    """Fields of every record (rubric name and version, judge model, temperature)."""
    base_meta: dict[str, Any]
    """Metadata of every record (:func:`_provenance_metadata`)."""

    @classmethod
    def of(cls, run: RunRecord) -> _Scores:
        p = run.provenance
        common = {
            "rubric_name": p.rubric_name,
            "rubric_version": p.rubric_version,
            "judge_model": p.judge_model,
            "temperature": p.temperature,
        }
        return cls(p.rubric_name, common, _provenance_metadata(run))

    def item(self, item: ItemResult) -> Iterator[ScoreRecord]:
        """An item's criteria, its plain checks, then its verdict."""
        prompt_hash = item.replies[0].prompt_hash if item.replies else None
        for name, c in item.criteria.items():
            yield self.criterion(item, name, c, prompt_hash)
        for name, check in item.checks.items():
            # BOOLEAN can only say pass or fail: an indeterminate check stays out (it is named in the
            # verdict's comment) rather than becoming a false; a name a criterion already uses is skipped
            # so the two never share one deterministic score id.
            if check.verdict != "indeterminate" and name not in item.criteria:
                yield self.check(item, name, check)
        yield self.verdict(item, prompt_hash)

    def criterion(
        self, item: ItemResult, name: str, c: CriterionResult, prompt_hash: str | None
    ) -> ScoreRecord:
        meta = {**self.base_meta, "verdict": c.verdict, "decided_by": c.decided_by, "category": item.category}
        if c.reason:
            meta["reason"] = c.reason
        numeric = c.score is not None
        return ScoreRecord(
            trace_id=item.trace_id,
            observation_id=item.span_id,
            name=f"{self.rubric_name}.{name}",
            value=c.score if c.score is not None else c.verdict,
            data_type="NUMERIC" if numeric else "CATEGORICAL",
            comment=_comment(c.reasoning, c.reason),
            prompt_hash=prompt_hash if numeric or c.decided_by == "judge" else None,
            metadata=meta,
            timestamp=item.task_time,
            **self.common,
        )

    def check(self, item: ItemResult, name: str, check: CheckResult) -> ScoreRecord:
        return ScoreRecord(
            trace_id=item.trace_id,
            observation_id=item.span_id,
            name=f"{self.rubric_name}.{name}",
            value=check.verdict == "pass",
            data_type="BOOLEAN",
            comment=check.detail or None,
            metadata={
                **self.base_meta,
                "verdict": check.verdict,
                "decided_by": "check",
                "type": check.type,
            },
            timestamp=item.task_time,
            **self.common,
        )

    def verdict(self, item: ItemResult, prompt_hash: str | None) -> ScoreRecord:
        checks = "; ".join(f"{k}={v.verdict}" for k, v in item.checks.items())
        return ScoreRecord(
            trace_id=item.trace_id,
            observation_id=item.span_id,
            name=f"{self.rubric_name}.verdict",
            value=item.verdict,
            data_type="CATEGORICAL",
            comment=_comment(item.reason, f"checks: {checks}" if checks else ""),
            prompt_hash=prompt_hash,
            metadata={**self.base_meta, "category": item.category, "mean_score": item.mean_score},
            timestamp=item.task_time,
            **self.common,
        )


def score_records(run: RunRecord, items: Iterable[ItemResult]) -> list[ScoreRecord]:
    """Per item: one NUMERIC score per judged criterion, one CATEGORICAL verdict per criterion decided
    by a check, one BOOLEAN per hard check that passed or failed, and the overall CATEGORICAL verdict;
    an indeterminate criterion is a CATEGORICAL ``indeterminate``, never a number."""
    scores = _Scores.of(run)
    return [record for item in items for record in scores.item(item)]


def evaluation_events(run: RunRecord, items: Iterable[ItemResult]) -> list[EvaluationEvent]:
    """Per item with a known evaluated span: an event per criterion and one for the overall verdict."""
    p = run.provenance
    extra: dict[str, str | int | float | bool] = {
        "tracejudge.run_id": run.run_id,
        "tracejudge.rubric.name": p.rubric_name,
        "tracejudge.rubric.version": p.rubric_version,
        "tracejudge.prompt_hash": p.prompt_hash,
        "tracejudge.version": p.tracejudge_version,
    }
    if p.judge_model:
        extra["tracejudge.judge.model"] = p.judge_model
    if p.temperature is not None:
        extra["tracejudge.judge.temperature"] = p.temperature
    out: list[EvaluationEvent] = []
    for item in items:
        if not item.span_id:
            continue
        for name, c in item.criteria.items():
            out.append(
                EvaluationEvent(
                    trace_id=item.trace_id,
                    span_id=item.span_id,
                    name=name,
                    score_value=c.score,
                    score_label=c.verdict,
                    explanation=_comment(c.reasoning, c.reason),
                    attributes={
                        **extra,
                        "tracejudge.decided_by": c.decided_by,
                        "tracejudge.identifier": stable_id(
                            "eval", item.trace_id, item.span_id, name, p.rubric_name, p.rubric_version
                        ),
                    },
                )
            )
        out.append(
            EvaluationEvent(
                trace_id=item.trace_id,
                span_id=item.span_id,
                name=f"{p.rubric_name}.verdict",
                score_value=item.mean_score,
                score_label=item.verdict,
                explanation=item.reason or None,
                attributes={
                    **extra,
                    "tracejudge.identifier": stable_id(
                        "eval", item.trace_id, item.span_id, "verdict", p.rubric_name, p.rubric_version
                    ),
                },
            )
        )
    return out


def write_back(
    target: str,
    run: RunRecord,
    items: Sequence[ItemResult],
    *,
    writer: ScoreWriter | None = None,
    event_writer: EvaluationWriter | None = None,
) -> WriteReport:
    """Write a run's results to a target of ``write.TARGETS``: one that takes scores (Langfuse scores;
    Phoenix span annotations, or trace annotations when no span is known) gets :func:`score_records`,
    one that takes events (OTel) gets :func:`evaluation_events`.

    ``writer`` / ``event_writer`` override the target's own (tests pass recording fakes); they are
    not closed here."""
    if find_target(target, "scores", "events").writes("scores"):
        if writer is not None:
            return writer.write_scores(score_records(run, items))
        with open_score_writer(target) as own:
            return own.write_scores(score_records(run, items))
    if event_writer is not None:
        return event_writer.write_events(evaluation_events(run, items))
    with open_event_writer(target) as ew:
        return ew.write_events(evaluation_events(run, items))


def check_target(target: str) -> None:
    """Open and close ``target``'s writer: a target that is not configured is refused (the writer's
    error says what to set) before a run spends anything on the judge, not after it."""
    if find_target(target, "scores", "events").writes("scores"):
        open_score_writer(target).close()
    else:
        open_event_writer(target).close()
