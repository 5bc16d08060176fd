"""Verdicts from scores, thresholds and checks: a definite failure wins over what is undecided, and the
reason names both; nothing undecided is ever a pass."""

from __future__ import annotations

import asyncio

from tracejudge.judge import FakeJudgeClient, Judge, item_verdict, parse_rubric
from tracejudge.runs import score_task
from tracejudge.schema import CheckResult, CriterionResult, TaskRecord

RUBRIC = parse_rubric(
    """
name: support
version: 1
judge: {model: judge-a}
criteria:
  - {name: helpful, description: "Helps the customer.", threshold: 7}
checks:
  - {name: states_cap, type: contains, target: output, value: "350"}
"""
)


def _check(verdict: str, detail: str) -> CheckResult:
    return CheckResult.model_validate({"type": "contains", "verdict": verdict, "detail": detail})


def test_failed_check_and_unscored_criterion_is_fail_naming_both() -> None:
    verdict, reason = item_verdict(
        {"helpful": CriterionResult(score=None, verdict="indeterminate", reason="malformed_json")},
        {"states_cap": _check("fail", "'350' not in output")},
        thresholds={"helpful": 7},
    )
    assert verdict == "fail"
    assert reason == "failed: check states_cap: '350' not in output | undecided: helpful: malformed_json"


def test_only_undecided_is_indeterminate_and_all_passing_is_pass() -> None:
    undecided = {"helpful": CriterionResult(score=None, verdict="indeterminate", reason="timeout")}
    passing = {"states_cap": _check("pass", "found")}
    assert item_verdict(undecided, passing, thresholds={"helpful": 7}) == (
        "indeterminate",
        "helpful: timeout",
    )
    scored = {"helpful": CriterionResult(score=7.0, verdict="pass", decided_by="judge")}
    assert item_verdict(scored, passing, thresholds={"helpful": 7}) == ("pass", "")
    # An undecided check keeps an item with passing criteria from passing.
    open_check = {"states_cap": _check("indeterminate", "no output")}
    assert item_verdict(scored, open_check, thresholds={"helpful": 7}) == (
        "indeterminate",
        "check states_cap: no output",
    )


def test_scored_item_with_a_prose_reply_and_a_failed_check() -> None:
    judge = Judge(RUBRIC, FakeJudgeClient(lambda _m: "Looks great to me, 9/10."))
    task = TaskRecord(trace_id="t", input="What is the cap?", final_answer="The cap is 300.")
    item = asyncio.run(score_task(task, RUBRIC, run_id="r", judge=judge))
    assert item.verdict == "fail"
    assert item.criteria["helpful"].verdict == "indeterminate"
    assert item.criteria["helpful"].score is None
    assert "check states_cap" in item.reason
    assert "undecided: helpful: malformed_json" in item.reason
    assert item.replies[0].raw == "Looks great to me, 9/10."
