"""What ``score --json`` prints (DESIGN 5.6, with more beside the required fields)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tracejudge.schema import GroupSummary, ItemResult, RunRecord


def _group(g: GroupSummary) -> dict[str, Any]:
    return g.model_dump(mode="json", by_alias=True)


def item_json(item: ItemResult) -> dict[str, Any]:
    """One item: verdict, reason, every criterion and check, and the judge replies whole."""
    return {
        "trace_id": item.trace_id,
        "span_id": item.span_id,
        "category": item.category,
        "verdict": item.verdict,
        "reason": item.reason,
        "mean_score": item.mean_score,
        "criteria": {
            name: {
                "score": c.score,
                "reasoning": c.reasoning,
                "verdict": c.verdict,
                "reason": c.reason,
                "decided_by": c.decided_by,
                "scores": list(c.scores),
                "score_range": c.score_range,
                "flipped": c.flipped,
            }
            for name, c in item.criteria.items()
        },
        "checks": {
            name: {"verdict": r.verdict, "type": r.type, "detail": r.detail}
            for name, r in item.checks.items()
        },
        "tokens": {"input": item.input_tokens, "output": item.output_tokens},
        "cost_usd": item.cost_usd,
        "latency_ms": round(item.latency_ms, 3),
        "replies": [r.model_dump(mode="json") for r in item.replies],
    }


def run_json(run: RunRecord, items: Iterable[ItemResult]) -> dict[str, Any]:
    """The whole run as printed by ``score --json``."""
    s = run.summary
    overall = _group(s.overall)
    return {
        "run_id": run.run_id,
        "status": run.status,
        "series": run.series,
        "previous_run_id": run.previous_run_id,
        "rerun_of": run.rerun_of,
        "rubric": {"name": run.provenance.rubric_name, "version": run.provenance.rubric_version},
        "provenance": run.provenance.model_dump(mode="json"),
        "selection": run.selection,
        "items": [item_json(i) for i in items],
        "summary": {
            **{k: overall[k] for k in ("n", "pass", "fail", "indeterminate", "pass_rate")},
            "mean": overall["mean"],
            "p95_latency_ms": overall["p95_latency_ms"],
            "tokens": {"input": overall["input_tokens"], "output": overall["output_tokens"]},
            "cost_usd": s.cost_usd,
            "judge_calls": s.judge_calls,
            "cache_hits": s.cache_hits,
            "not_scored": s.not_scored,
            "reasons": s.reasons,
            "criteria": {k: _group(v) for k, v in s.criteria.items()},
            "checks": {k: _group(v) for k, v in s.checks.items()},
            "categories": {k: _group(v) for k, v in s.categories.items()},
        },
    }
