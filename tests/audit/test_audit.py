"""Run audit (mismatches, stability, position, drift), the gate, probes and the labelling sample."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tracejudge.audit import (
    GateRefused,
    ProbeCase,
    allocate,
    audit_run,
    cues,
    find_mismatches,
    gate_decision,
    gate_run,
    pair_tasks,
    position_consistency,
    probe_case_async,
    require_gate,
)
from tracejudge.judge import FakeJudgeClient, parse_rubric, prompt_template_hash, rubric_hash
from tracejudge.runs import provenance, score_run
from tracejudge.schema import (
    Agreement,
    CalibrationReport,
    CriterionResult,
    GroupSummary,
    ItemResult,
    JudgeReply,
    ModelCall,
    Rubric,
    RunRecord,
    RunSummary,
    StoredReport,
    TaskRecord,
)
from tracejudge.store import SqliteStore

RUBRIC = parse_rubric(
    """
name: qa
version: 2
judge: {model: judge-a}
criteria:
  - {name: correctness, description: "The answer is right.", threshold: 7}
checks:
  - {name: no_submit, type: tool_not_called, tool: submit_payment}
"""
)


def reply(score: float, reasoning: str, repeat: int = 0) -> JudgeReply:
    return JudgeReply(
        repeat=repeat,
        prompt_hash="h",
        scores={"correctness": score},
        criterion_reasoning={"correctness": reasoning},
    )


def test_cues_handle_negation() -> None:
    neg, pos = cues("The answer is not correct and has no errors; it is wrong.")
    assert neg == ["not correct", "wrong"]
    assert pos == ["no errors"]


def test_names_of_traces_and_items_are_not_cues() -> None:
    neg, pos = cues("Trace handoff-missing (case wrong_change_2) is answered correctly and completely.")
    assert neg == []
    assert pos == ["correctly"]
    neg, pos = cues("The handoff is missing; the change is wrong.")
    assert neg == ["missing", "wrong"]


def test_mismatches_worst_first() -> None:
    items = [
        ItemResult(
            run_id="r",
            trace_id="t1",
            verdict="pass",
            replies=(reply(9, "Incorrect and misleading; wrong total."),),
        ),
        ItemResult(
            run_id="r", trace_id="t2", verdict="fail", replies=(reply(1, "Correct, accurate and complete."),)
        ),
        ItemResult(run_id="r", trace_id="t3", verdict="pass", replies=(reply(6, "It is wrong."),)),
        ItemResult(run_id="r", trace_id="t4", verdict="pass", replies=(reply(9, "Correct and clear."),)),
    ]
    found, read = find_mismatches(items)
    assert read == 4
    assert [m.trace_id for m in found] == ["t1", "t2", "t3"]
    assert found[0].negative_cues == ("incorrect", "misleading", "wrong")
    assert found[0].disagreement == pytest.approx(1.8)
    assert found[0].reasoning.startswith("Incorrect")


def test_position_consistency() -> None:
    decisions = [
        ("p1", "ab", "pass"),
        ("p1", "ba", "fail"),  # A wins both ways
        ("p2", "ab", "pass"),
        ("p2", "ba", "pass"),  # first shown always wins: inconsistent
        ("p3", "ab", "fail"),
        ("p3", "ba", "indeterminate"),
    ]
    pc = position_consistency(decisions)
    assert pc is not None
    assert (pc.pairs, pc.consistent, pc.inconsistent) == (2, 1, ("p2",))
    assert pc.first_position_rate == pytest.approx(3 / 5)
    tasks = pair_tasks([{"id": "p1", "input": "q", "a": "alpha", "b": "beta"}])
    assert [t.trace_id for t in tasks] == ["p1::ab", "p1::ba"]
    assert tasks[1].final_answer is not None
    assert tasks[1].final_answer.startswith("Answer 1:\nbeta")


def _store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "t.db")


def test_audit_run_stability_and_drift(tmp_path: Path) -> None:
    store = _store(tmp_path)
    tasks = [TaskRecord(trace_id=f"{i:032x}", input=f"q{i}", final_answer=f"a{i}") for i in range(4)]
    scores = {"q0": [9, 9, 9], "q1": [6, 8, 7], "q2": [2, 3, 2], "q3": [9, 9, 9]}
    calls: dict[str, int] = {}

    def answer(messages: Any) -> str:
        q = re.search(r'"input": "(q\d)"', messages[1]["content"])
        assert q is not None
        n = calls.get(q[1], 0)
        calls[q[1]] = n + 1
        s = scores[q[1]][n % 3]
        why = "The answer is wrong." if q[1] == "q3" else "Looks right."
        return f'{{"criteria": {{"correctness": {{"score": {s}, "reasoning": "{why}"}}}}, "reasoning": "x"}}'

    first = score_run(RUBRIC, store, tasks, client=FakeJudgeClient(answer), options=None)
    from tracejudge.runs import ScoreOptions

    second = score_run(
        RUBRIC, store, tasks, client=FakeJudgeClient(answer), options=ScoreOptions(repeat=3, use_cache=False)
    )
    report = audit_run(store, second.run_id)
    assert report.stability is not None
    assert report.stability.repeats == 3
    assert report.stability.straddling == (f"{1:032x}",)
    assert report.stability.flip_rate == pytest.approx(0.25)
    assert report.mismatches[0].trace_id == f"{3:032x}"
    assert report.drift is not None
    assert report.drift.previous_run_id == first.run_id
    assert report.drift.provenance_changes == {"repeat": (1, 3)}
    assert "cannot be read as an agent change" in report.drift.reading
    stored = store.list_reports("audit", run_id=second.run_id)
    assert stored[0].payload["report_id"] == report.report_id
    # Newest run by default.
    assert audit_run(store).run_id == second.run_id


def _verdict_judge(score: float) -> FakeJudgeClient:
    def answer(messages: Any) -> str:
        return f'{{"criteria": {{"correctness": {{"score": {score}, "reasoning": "r"}}}}, "reasoning": "r"}}'

    return FakeJudgeClient(answer)


def _tasks(start: int, n: int = 30) -> list[TaskRecord]:
    return [
        TaskRecord(trace_id=f"{i:032x}", input=f"q{i}", final_answer=f"a{i}") for i in range(start, start + n)
    ]


def test_drift_readings_separate_agent_judge_and_noise(tmp_path: Path) -> None:
    from tracejudge.runs import ScoreOptions

    store = _store(tmp_path)
    fresh = ScoreOptions(use_cache=False)
    base = score_run(RUBRIC, store, _tasks(0), client=_verdict_judge(9), options=fresh)
    assert audit_run(store, base.run_id).drift is None
    # Same judge, rubric and traces, the same verdicts (from the cache): no change, and it says so.
    same = score_run(RUBRIC, store, _tasks(0), client=_verdict_judge(9))
    d = audit_run(store, same.run_id).drift
    assert d is not None
    assert (d.previous_run_id, d.change, d.provenance_changes) == (base.run_id, 0.0, {})
    assert d.shared_traces == 30
    assert d.reading == "same judge and rubric; the change is within sampling noise"
    # Same judge, rubric and traces but every verdict flipped: the judge is unstable, not the agent.
    flipped = score_run(RUBRIC, store, _tasks(0), client=_verdict_judge(2), options=fresh)
    d = audit_run(store, flipped.run_id).drift
    assert d is not None
    assert (d.pass_rate, d.previous_pass_rate, d.change) == (0.0, 1.0, -1.0)
    assert d.change_ci is not None
    assert d.change_ci[1] < 0
    assert d.reading == "same judge, rubric and traces: the change is the judge's own instability"
    # Same judge and rubric on new traffic: the change is the agent's (or its traffic's).
    traffic = score_run(RUBRIC, store, _tasks(100), client=_verdict_judge(9), options=fresh)
    d = audit_run(store, traffic.run_id).drift
    assert d is not None
    assert (d.shared_traces, d.change, d.provenance_changes) == (0, 1.0, {})
    assert d.reading == "same judge and rubric: the change is in the agent or its traffic"
    # A new judge model on the same traffic: the drift is not read as the agent's.
    assert RUBRIC.judge is not None
    judge_b = RUBRIC.model_copy(update={"judge": RUBRIC.judge.model_copy(update={"model": "judge-b"})})
    other = score_run(judge_b, store, _tasks(100), client=_verdict_judge(2), options=fresh)
    d = audit_run(store, other.run_id).drift
    assert d is not None
    assert d.provenance_changes["judge_model"] == ("judge-a", "judge-b")
    assert "rubric_version" not in d.provenance_changes
    assert d.change == -1.0
    assert "cannot be read as an agent change" in d.reading
    # A new rubric version: version and hash both named.
    v3 = parse_rubric(
        "name: qa\nversion: 3\njudge: {model: judge-b}\n"
        "criteria:\n  - {name: correctness, description: 'The answer is right.', threshold: 8}\n"
    )
    bumped = score_run(v3, store, _tasks(100), client=_verdict_judge(2), options=fresh)
    d = audit_run(store, bumped.run_id).drift
    assert d is not None
    assert d.previous_run_id == other.run_id
    assert d.provenance_changes["rubric_version"] == ("2", "3")
    assert "rubric_hash" in d.provenance_changes
    assert "judge_model" not in d.provenance_changes


def test_drift_passes_over_a_run_that_never_finished(tmp_path: Path) -> None:
    store = _store(tmp_path)
    done = score_run(RUBRIC, store, _tasks(0, 10), client=_verdict_judge(9))
    # A run killed mid-way stays "running" with no summary; comparing with it would say nothing.
    killed = RunRecord(
        run_id="run-killed",
        series=done.series,
        created_at=datetime.now(UTC),
        provenance=done.provenance,
    )
    store.put_run(killed)
    again = score_run(RUBRIC, store, _tasks(0, 10), client=_verdict_judge(9))
    d = audit_run(store, again.run_id).drift
    assert d is not None
    assert d.previous_run_id == done.run_id
    assert d.previous_pass_rate == 1.0


def test_drift_passes_over_a_running_run_whose_summary_is_recorded_but_nothing_waits(tmp_path: Path) -> None:
    # A run recorded "running" with a summary is not thereby at rest with items waiting (a record of a run in
    # flight may hold one): only RunRecord.left_waiting says so. It was read from the summary alone.
    from tracejudge.runs import left_waiting

    store = _store(tmp_path)
    done = score_run(RUBRIC, store, _tasks(0, 10), client=_verdict_judge(9))
    summary = RunSummary(overall=GroupSummary(n=3, **{"pass": 0}, fail=3, pass_rate=0.0))
    flight = RunRecord(
        run_id="run-in-flight",
        series=done.series,
        created_at=datetime.now(UTC),
        provenance=done.provenance,
        summary=summary,
    )
    resting = flight.model_copy(update={"run_id": "run-at-rest", "left_waiting": 1})
    assert (left_waiting(flight), left_waiting(resting)) == (False, True)
    store.put_run(flight)
    again = score_run(RUBRIC, store, _tasks(0, 10), client=_verdict_judge(9))
    d = audit_run(store, again.run_id).drift
    assert d is not None
    assert (d.previous_run_id, d.previous_pass_rate) == (done.run_id, 1.0)


def _seed(
    store: SqliteStore,
    rubric: Rubric,
    *,
    kappa: float,
    n: int,
    prompts: tuple[str, ...] = (),
    holdout: bool = True,
    version: str | None = None,
) -> None:
    held = Agreement(n=n, kappa=kappa)
    assert rubric.judge is not None
    rep = CalibrationReport(
        **held.model_dump(),
        calibration_id=f"cal-{kappa}-{n}-{version}",
        created_at=datetime.now(UTC),
        rubric_name=rubric.name,
        rubric_version=version or str(rubric.version),
        rubric_hash=rubric_hash(rubric),
        prompt_hash=prompt_template_hash(rubric),
        judge_model=rubric.judge.model,
        agent_prompts=prompts,
        holdout=held if holdout else None,
    )
    store.put_report(
        StoredReport(
            report_id=rep.calibration_id,
            kind="calibration",
            created_at=rep.created_at,
            rubric_name=rubric.name,
            payload=rep.model_dump(mode="json"),
        )
    )


def test_gate_decisions(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert "never been calibrated" in gate_decision(store, RUBRIC).reason
    _seed(store, RUBRIC, kappa=0.9, n=30, version="1")
    assert "new rubric version" in gate_decision(store, RUBRIC).reason
    _seed(store, RUBRIC, kappa=0.9, n=30, holdout=False)
    assert "none held out" in gate_decision(store, RUBRIC).reason
    _seed(store, RUBRIC, kappa=0.5, n=30, prompts=("agent@3",))
    low = gate_decision(store, RUBRIC, prompts=["agent@3"])
    assert not low.allowed
    assert "kappa 0.50" in low.reason
    _seed(store, RUBRIC, kappa=0.8, n=30, prompts=("agent@3",))
    assert gate_decision(store, RUBRIC, prompts=["agent@3"]).allowed
    changed = gate_decision(store, RUBRIC, prompts=["agent@4"])
    assert not changed.allowed
    assert "agent@4" in changed.reason
    task = TaskRecord(trace_id="x", model_calls=(ModelCall(span_id="m", prompt="agent@4"),))
    with pytest.raises(GateRefused) as exc:
        require_gate(store, RUBRIC, [task])
    assert exc.value.exit_code == 2
    other_model = RUBRIC.model_copy(update={"judge": RUBRIC.judge.model_copy(update={"model": "judge-b"})})  # type: ignore[union-attr]
    assert not gate_decision(store, other_model).allowed


def test_a_run_with_traces_still_arriving_does_not_clear_the_gate() -> None:
    # Every item scored passed, but one trace is kept as not final (still arriving): it might fail.
    summary = RunSummary(overall=GroupSummary(n=3, pass_=2, indeterminate=1, pass_rate=2 / 3))
    run = RunRecord(
        run_id="run-w",
        series="s",
        created_at=datetime.now(UTC),
        provenance=provenance(RUBRIC, repeat=1),
        status="running",
        summary=summary,
    )
    gate = gate_run(run, 0.5, waiting=1)
    assert not gate.passed
    assert gate.reason.startswith("1 selected trace(s) still arriving, not scored yet; rerun `tracejudge")
    assert gate_run(run.model_copy(update={"status": "complete"}), 0.5).passed


CASE = ProbeCase(
    id="prepay",
    input="Can we prepay 5,000 RMB on contract C-17?",
    output="Yes. Attachment C-17/attachment@v2 caps prepayment at 30,000 RMB,"
    " so 5,000 RMB is within the limit.",
    context=[
        {"doc_id": "C-17/attachment", "version": "v2", "content": "Prepayment shall not exceed 30,000 RMB"},
        {"doc_id": "C-18/attachment", "version": "v1", "content": "Prepayment shall not exceed 80,000 RMB"},
    ],
)


def test_probes_flag_a_judge_that_misses_changes(tmp_path: Path) -> None:
    # A careful judge: fails amounts above the cap, foreign citations and "paused" with a submission
    # (the check catches that one); a careless judge passes everything.
    def careful(messages: Any) -> str:
        answer = messages[1]["content"].split('"output"')[1]
        bad = "50,000" in answer or "C-18" in answer
        s = 2 if bad else 9
        return f'{{"criteria": {{"correctness": {{"score": {s}, "reasoning": "r"}}}}, "reasoning": "r"}}'

    store = _store(tmp_path)
    rep = asyncio.run(probe_case_async(RUBRIC, CASE, store, client=FakeJudgeClient(careful)))
    by = {p.name: p for p in rep.probes}
    assert rep.base_verdict == "pass"
    assert by["amount_change"].change == "5,000 -> 50,000"
    assert {p.name: p.status for p in rep.probes} == {
        "amount_change": "expected",
        "citation_swap": "expected",
        "paused_vs_submitted": "expected",
        "reword": "skipped",
    }
    assert by["citation_swap"].change == "C-17/attachment@v2 -> C-18/attachment@v1"

    def careless(messages: Any) -> str:
        return '{"criteria": {"correctness": {"score": 9, "reasoning": "fine"}}, "reasoning": "fine"}'

    case = ProbeCase(
        **{
            **CASE.__dict__,
            "probes": {"reword": "Yes: the cap in C-17/attachment@v2 is 30,000 RMB; 5,000 RMB fits."},
        }
    )
    rep2 = asyncio.run(probe_case_async(RUBRIC, case, store, client=FakeJudgeClient(careless)))
    status = {p.name: p.status for p in rep2.probes}
    assert status == {
        "amount_change": "unexpected",
        "citation_swap": "unexpected",
        "paused_vs_submitted": "expected",  # the hard check, not the judge
        "reword": "expected",
    }
    assert rep2.unexpected == 2
    assert len(store.list_reports("probe")) == 2


def test_allocation_is_heavy_near_the_threshold() -> None:
    quota = allocate(
        40, {"near_fail": 100, "near_pass": 100, "far_fail": 100, "far_pass": 100, "indeterminate": 100}
    )
    assert quota == {"near_fail": 12, "near_pass": 12, "far_fail": 6, "far_pass": 6, "indeterminate": 4}
    short = allocate(40, {"near_fail": 3, "near_pass": 50, "far_fail": 0, "far_pass": 50, "indeterminate": 0})
    assert sum(short.values()) == 40
    assert short["near_fail"] == 3
    assert short["near_pass"] > short["far_pass"]


def test_calibrate_sample_cli(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from tracejudge.cli import cli

    store = _store(tmp_path)
    tasks = [TaskRecord(trace_id=f"{i:032x}", input=f"q{i}", final_answer=f"a{i}") for i in range(30)]
    run = RunRecord(
        run_id="run-x",
        series="s",
        created_at=datetime.now(UTC) - timedelta(minutes=1),
        provenance=provenance(RUBRIC, repeat=1),
    )
    store.put_run(run)
    for i, t in enumerate(tasks):
        s = float(i % 11)
        store.put_score_item(
            ItemResult(
                run_id="run-x",
                trace_id=t.trace_id,
                verdict="pass" if s >= 7 else "fail",
                criteria={"correctness": CriterionResult(score=s, verdict="pass" if s >= 7 else "fail")},
            )
        )
    store.close()
    out = tmp_path / "to-label.jsonl"
    result = CliRunner().invoke(
        cli,
        [
            "--store",
            f"sqlite:///{tmp_path / 't.db'}",
            "calibrate",
            "sample",
            "--n",
            "10",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 10 == summary["n"]
    assert all(r["label"] is None for r in rows)
    assert summary["bands"]["near_fail"] + summary["bands"]["near_pass"] >= 6
