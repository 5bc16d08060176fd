"""The gate: a judge may fail a build only at kappa >= 0.6 on held-out labelled items, for this rubric
version, this judge model and the agent prompt versions in the traces (DESIGN 2)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tracejudge._errors import TracejudgeError
from tracejudge.judge import prompt_template_hash, rubric_hash
from tracejudge.schema import CalibrationReport, GateDecision, Rubric, RunRecord, TaskRecord
from tracejudge.store import Store, UnreadableRecordError, read_record

GATE_KAPPA = 0.6
GATE_MIN_HOLDOUT = 10


class GateRefused(TracejudgeError):
    """``score --gate`` without a calibration that allows it (exit 2: a precondition, not a failure)."""

    exit_code = 2


def agent_prompts(tasks: Iterable[TaskRecord]) -> set[str]:
    """Agent prompt versions (``name@version``) recorded on the traces' model calls."""
    return {m.prompt for t in tasks for m in t.model_calls if m.prompt}


def _calibrations(store: Store, rubric_name: str) -> list[CalibrationReport]:
    out = []
    for r in store.list_reports("calibration", rubric_name=rubric_name):
        try:
            # One a later tracejudge stored is read without the fields this one does not know.
            out.append(read_record(CalibrationReport, r.payload))
        except UnreadableRecordError:
            continue
    return out


def gate_decision(
    store: Store,
    rubric: Rubric,
    *,
    prompts: Iterable[str] = (),
    min_kappa: float = GATE_KAPPA,
    min_holdout: int = GATE_MIN_HOLDOUT,
    rubric_path: str = "RUBRIC.yaml",
) -> GateDecision:
    """Whether ``rubric`` with its judge may gate traces made with agent prompt versions ``prompts``."""
    if rubric.judge is None:
        return GateDecision(allowed=True, reason="only deterministic checks decide this rubric")
    ask = _Ask(rubric, rubric.judge.model, set(prompts), min_kappa, min_holdout, rubric_path)
    cals = _calibrations(store, rubric.name)
    if not cals:
        return GateDecision(allowed=False, reason=f"{ask.who} has never been calibrated", hint=ask.hint)
    same = _of_this_rubric(ask, cals)
    if isinstance(same, GateDecision):
        return same
    covering = _covering(ask, same)
    if isinstance(covering, GateDecision):
        return covering
    return _holdout_decision(ask, covering[0])


@dataclass(frozen=True)
class _Ask:
    """What the gate is asked about: this rubric and judge model, for these agent prompts."""

    rubric: Rubric
    model: str
    wanted: set[str]
    min_kappa: float
    min_holdout: int
    rubric_path: str

    @property
    def run(self) -> str:
        run = f"tracejudge calibrate --rubric {self.rubric_path} --labels LABELS.jsonl --holdout 0.3"
        if self.wanted:
            run += " (labels from traces of " + ", ".join(sorted(self.wanted)) + ")"
        return run

    @property
    def hint(self) -> str:
        return f"run: {self.run}; scoring without --gate still works"

    @property
    def who(self) -> str:
        return f"rubric {self.rubric.name} v{self.rubric.version} with judge {self.model}"


def _of_this_rubric(ask: _Ask, cals: list[CalibrationReport]) -> list[CalibrationReport] | GateDecision:
    """The calibrations of this rubric version, judge model, rubric text and judge prompt, or why none."""
    same = [c for c in cals if c.rubric_version == str(ask.rubric.version) and c.judge_model == ask.model]
    if not same:
        seen = ", ".join(sorted({f"v{c.rubric_version}/{c.judge_model}" for c in cals}))
        return GateDecision(
            allowed=False,
            reason=f"{ask.who} is not calibrated (calibrations exist for {seen}): a new rubric version or"
            " judge model needs a new calibration",
            hint=ask.hint,
            calibration_id=cals[0].calibration_id,
        )
    newest = same[0]
    rh, ph = rubric_hash(ask.rubric), prompt_template_hash(ask.rubric)
    same = [c for c in same if c.rubric_hash == rh and c.prompt_hash == ph]
    if not same:
        return GateDecision(
            allowed=False,
            reason=f"{ask.who} changed since it was calibrated (rubric or judge prompt differs;"
            " bump the version)",
            hint=ask.hint,
            calibration_id=newest.calibration_id,
        )
    return same


def _covering(ask: _Ask, same: list[CalibrationReport]) -> list[CalibrationReport] | GateDecision:
    """Those with held-out items whose labels cover the agent prompts asked about, or why none."""
    held = [c for c in same if c.holdout is not None]
    if not held:
        return GateDecision(
            allowed=False,
            reason=f"{ask.who} was calibrated only on items used for tuning, none held out",
            hint=ask.hint,
            calibration_id=same[0].calibration_id,
            kappa=same[0].kappa,
        )
    covering = [c for c in held if ask.wanted <= set(c.agent_prompts)]
    if not covering:
        missing = sorted(ask.wanted - set(held[0].agent_prompts))
        return GateDecision(
            allowed=False,
            reason=f"the traces come from agent prompt {', '.join(missing)}, which the calibration of"
            f" {ask.who} does not cover ({', '.join(held[0].agent_prompts) or 'no prompt version recorded'}):"
            " a changed agent prompt needs recalibration",
            hint=ask.hint,
            calibration_id=held[0].calibration_id,
            kappa=held[0].holdout.kappa if held[0].holdout else None,
        )
    return covering


def _holdout_decision(ask: _Ask, c: CalibrationReport) -> GateDecision:
    """The newest covering calibration decides: enough held-out items at a high enough kappa."""
    assert c.holdout is not None
    k, n = c.holdout.kappa, c.holdout.n
    if n < ask.min_holdout:
        return GateDecision(
            allowed=False,
            reason=f"the newest calibration of {ask.who} held out only {n} items"
            f" (at least {ask.min_holdout} needed)",
            hint=ask.hint + "; label more items",
            calibration_id=c.calibration_id,
            kappa=k,
            n_holdout=n,
        )
    if k is None or k < ask.min_kappa:
        shown = "undefined" if k is None else f"{k:.2f}"
        return GateDecision(
            allowed=False,
            reason=f"{ask.who} agrees with people at kappa {shown} on held-out items;"
            f" gating needs {ask.min_kappa:g}",
            hint="improve the rubric on the tuning items (see calibrate's mismatches and sweep), then "
            + ask.run,
            calibration_id=c.calibration_id,
            kappa=k,
            n_holdout=n,
        )
    return GateDecision(
        allowed=True,
        reason=f"calibration {c.calibration_id}: kappa {k:.2f} on {n} held-out items",
        calibration_id=c.calibration_id,
        kappa=k,
        n_holdout=n,
    )


def require_gate(
    store: Store,
    rubric: Rubric,
    tasks: Iterable[TaskRecord] = (),
    *,
    rubric_path: str = "RUBRIC.yaml",
) -> GateDecision:
    """:func:`gate_decision` for the agent prompts of ``tasks``; raises :class:`GateRefused` if refused."""
    decision = gate_decision(store, rubric, prompts=agent_prompts(tasks), rubric_path=rubric_path)
    if not decision.allowed:
        raise GateRefused(f"refusing to gate: {decision.reason}", hint=decision.hint)
    return decision


def require_gate_for_traces(
    store: Store, rubric: Rubric, trace_ids: Iterable[str], *, rubric_path: str = "RUBRIC.yaml"
) -> GateDecision:
    """:func:`require_gate` for stored traces (their agent prompt versions read from the traces)."""
    from tracejudge.runs import store_loader

    load = store_loader(store)
    tasks = (t for t in map(load, trace_ids) if not isinstance(t, str))
    return require_gate(store, rubric, tasks, rubric_path=rubric_path)


@dataclass(frozen=True)
class RunGate:
    """Whether a scoring run clears ``score --gate`` (its JSON is ``score --json``'s ``gate``)."""

    threshold: float
    """The pass rate asked for (0-1)."""
    passed: bool
    """Whether the run clears it."""
    reason: str
    """Why, in words (shown after the run)."""

    def json(self) -> dict[str, object]:
        """As ``score --json`` prints it."""
        return {"threshold": self.threshold, "passed": self.passed, "reason": self.reason}


def gate_run(run: RunRecord, threshold: float, *, waiting: int = 0) -> RunGate:
    """Whether the run clears the gate, and why. Indeterminate items count against the pass rate, and a
    run that did not score every selected trace cannot pass: the unscored traces might have failed —
    those the budget left, and the ``waiting`` ones kept until their trace has arrived."""
    o = run.summary.overall
    if run.summary.not_scored:
        return RunGate(
            threshold,
            False,
            f"the budget stopped the run with {run.summary.not_scored} selected traces not scored;"
            " raise --budget-usd/--budget-tokens or select fewer traces",
        )
    if waiting:
        return RunGate(
            threshold,
            False,
            f"{waiting} selected trace(s) still arriving, not scored yet; rerun `tracejudge score --run"
            f" {run.run_id}` (with the same options) later and gate that",
        )
    if run.status != "complete":
        return RunGate(threshold, False, f"the run ended {run.status}, not complete")
    if o.pass_rate is None:
        return RunGate(threshold, False, "no items were scored")
    shown = f"pass rate {o.pass_rate:.1%} ({o.pass_} of {o.n}, {o.indeterminate} indeterminate)"
    if o.pass_rate >= threshold:
        return RunGate(threshold, True, f"{shown} is at or above {threshold:.1%}")
    return RunGate(threshold, False, f"{shown} is under {threshold:.1%}")
