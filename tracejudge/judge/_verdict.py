"""From scores, thresholds and checks to verdicts. Pure: the model's own verdict is never read."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from tracejudge.schema import CheckResult, Criterion, CriterionResult, JudgeReply, ScoreVerdict


def _threshold_verdict(score: float, threshold: float) -> ScoreVerdict:
    return "pass" if score >= threshold else "fail"


def _reply_problem(reply: JudgeReply, name: str) -> str | None:
    if reply.error is not None:
        return reply.error
    if name in reply.problems:
        return reply.problems[name]
    if name not in reply.scores:
        return "missing_criterion"
    return None


def aggregate_criterion(criterion: Criterion, replies: Sequence[JudgeReply]) -> CriterionResult:
    """One criterion over every repeat: the median of usable scores when most repeats are usable,
    else indeterminate with the commonest reason."""
    scores: list[float] = []
    verdicts: list[ScoreVerdict] = []
    reasons: list[str] = []
    reasonings: list[tuple[float, str]] = []
    for reply in replies:
        problem = _reply_problem(reply, criterion.name)
        if problem is not None:
            verdicts.append("indeterminate")
            reasons.append(problem)
            continue
        score = reply.scores[criterion.name]
        scores.append(score)
        verdicts.append(_threshold_verdict(score, criterion.threshold))
        reasonings.append((score, reply.criterion_reasoning.get(criterion.name, "")))
    if not replies or len(scores) * 2 <= len(replies):
        reason = Counter(reasons).most_common(1)[0][0] if reasons else "not_judged"
        if len(replies) > 1:
            reason = f"{reason} ({len(replies) - len(scores)} of {len(replies)} replies unusable)"
        return CriterionResult(
            score=None,
            verdict="indeterminate",
            reason=reason,
            scores=tuple(scores),
            verdicts=tuple(verdicts),
        )
    median = float(statistics.median(scores))
    # The reasoning shown is the one whose score is nearest the aggregate.
    reasoning = min(reasonings, key=lambda sr: abs(sr[0] - median))[1]
    decided = {v for v in verdicts if v != "indeterminate"}
    return CriterionResult(
        score=median,
        reasoning=reasoning,
        verdict=_threshold_verdict(median, criterion.threshold),
        scores=tuple(scores),
        verdicts=tuple(verdicts),
        score_range=max(scores) - min(scores),
        flipped=len(decided) > 1,
    )


def criterion_from_check(check_name: str, result: CheckResult) -> CriterionResult:
    """A criterion decided by a hard check: the check's verdict, no judge score."""
    return CriterionResult(
        score=None,
        reasoning=result.detail,
        verdict=result.verdict,
        reason=result.detail if result.verdict == "indeterminate" else "",
        decided_by=f"check:{check_name}",
    )


def _failures(
    criteria: Mapping[str, CriterionResult],
    checks: Mapping[str, CheckResult],
    thresholds: Mapping[str, float],
    mean_score: float | None,
    overall_threshold: float | None,
) -> Iterator[tuple[ScoreVerdict, str]]:
    """Each part that did not pass, as its verdict and how the reason names it: the criteria, the
    checks, then a mean score below the overall threshold."""
    for name, c in criteria.items():
        if c.verdict == "indeterminate":
            yield c.verdict, f"{name}: {c.reason}"
        elif c.verdict == "fail":
            why = f"{c.score:g} < {thresholds.get(name, 0):g}" if c.score is not None else f"({c.decided_by})"
            yield c.verdict, f"{name} {why}"
    yield from ((r.verdict, f"check {name}: {r.detail}") for name, r in checks.items() if r.verdict != "pass")
    if overall_threshold is not None and mean_score is not None and mean_score < overall_threshold:
        yield "fail", f"mean score {mean_score:.2f} < {overall_threshold:g}"


def item_verdict(
    criteria: Mapping[str, CriterionResult],
    checks: Mapping[str, CheckResult],
    *,
    thresholds: Mapping[str, float],
    mean_score: float | None = None,
    overall_threshold: float | None = None,
) -> tuple[ScoreVerdict, str]:
    """pass only when every criterion and check passes. A definite failure is reported as fail (with
    any undecided parts named in the reason); otherwise anything undecided makes it indeterminate."""
    parts: dict[ScoreVerdict, list[str]] = {"fail": [], "indeterminate": []}
    for verdict, text in _failures(criteria, checks, thresholds, mean_score, overall_threshold):
        parts[verdict].append(text)
    failed, undecided = parts["fail"], parts["indeterminate"]
    if failed:
        reason = "failed: " + "; ".join(failed)
        if undecided:
            reason += " | undecided: " + "; ".join(undecided)
        return "fail", reason
    if undecided:
        return "indeterminate", "; ".join(undecided)
    if (
        overall_threshold is not None
        and mean_score is None
        and any(c.decided_by == "judge" for c in criteria.values())
    ):
        return "indeterminate", "mean score unavailable for the overall threshold"
    return "pass", ""
