"""Run statistics per criterion, per check and per category, never only a mean."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from tracejudge.schema import GroupSummary, ItemResult, RunSummary, ScoreVerdict


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    # Nearest-rank percentile: an observed latency, not an interpolation.
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


@dataclass
class _Group:
    counts: Counter[str] = field(default_factory=Counter)
    scores: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    flips: int = 0
    repeated: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(
        self,
        verdict: ScoreVerdict,
        *,
        score: float | None = None,
        latency: float | None = None,
        flipped: bool | None = None,
        tokens: tuple[int, int] = (0, 0),
    ) -> None:
        self.counts[verdict] += 1
        if score is not None:
            self.scores.append(score)
        if latency is not None:
            self.latencies.append(latency)
        if flipped is not None:
            self.repeated += 1
            self.flips += int(flipped)
        self.input_tokens += tokens[0]
        self.output_tokens += tokens[1]

    def summary(self) -> GroupSummary:
        n = sum(self.counts.values())
        return GroupSummary.model_validate(
            {
                "n": n,
                "pass": self.counts["pass"],
                "fail": self.counts["fail"],
                "indeterminate": self.counts["indeterminate"],
                "pass_rate": self.counts["pass"] / n if n else None,
                "mean": sum(self.scores) / len(self.scores) if self.scores else None,
                "min": min(self.scores) if self.scores else None,
                "max": max(self.scores) if self.scores else None,
                "flip_rate": self.flips / self.repeated if self.repeated else None,
                "p95_latency_ms": _p95(self.latencies),
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
            }
        )


class SummaryBuilder:
    """Accumulates item results one at a time (a run never holds all items to summarize them)."""

    def __init__(self) -> None:
        self.overall = _Group()
        self.criteria: dict[str, _Group] = {}
        self.checks: dict[str, _Group] = {}
        self.categories: dict[str, _Group] = {}
        self.reasons: Counter[str] = Counter()
        self.cost_usd = 0.0
        self.judge_calls = 0
        self.cache_hits = 0

    def add(self, item: ItemResult) -> None:
        tokens = (item.input_tokens, item.output_tokens)
        self.overall.add(item.verdict, score=item.mean_score, latency=item.latency_ms, tokens=tokens)
        self.categories.setdefault(item.category, _Group()).add(
            item.verdict, score=item.mean_score, latency=item.latency_ms, tokens=tokens
        )
        self._add_criteria(item)
        for name, r in item.checks.items():
            self.checks.setdefault(name, _Group()).add(r.verdict)
        self.cost_usd += item.cost_usd
        self._add_replies(item)

    def _add_criteria(self, item: ItemResult) -> None:
        """Each criterion's verdict and score (flips only when the judge decided it over repeats), and
        why it was indeterminate."""
        repeated = len(item.replies) > 0 and max(r.repeat for r in item.replies) > 0
        for name, c in item.criteria.items():
            self.criteria.setdefault(name, _Group()).add(
                c.verdict,
                score=c.score,
                flipped=c.flipped if repeated and c.decided_by == "judge" else None,
            )
            if c.verdict == "indeterminate":
                self.reasons[c.reason.split(" (")[0] or "unknown"] += 1

    def _add_replies(self, item: ItemResult) -> None:
        """Judge calls made and answered from the cache (a reply the budget refused is neither)."""
        for reply in item.replies:
            if reply.cached:
                self.cache_hits += 1
            elif reply.error != "budget_exhausted":
                self.judge_calls += 1

    def build(self, *, not_scored: int = 0) -> RunSummary:
        return RunSummary(
            overall=self.overall.summary(),
            criteria={k: g.summary() for k, g in self.criteria.items()},
            checks={k: g.summary() for k, g in self.checks.items()},
            categories={k: g.summary() for k, g in sorted(self.categories.items())},
            reasons=dict(self.reasons.most_common()),
            judge_calls=self.judge_calls,
            cache_hits=self.cache_hits,
            cost_usd=round(self.cost_usd, 6),
            not_scored=not_scored,
        )
