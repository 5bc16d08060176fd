"""Calibration, audit and probe records: how far a judge can be trusted (DESIGN 2, 5.6)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from tracejudge.schema._spans import SCHEMA_VERSION, _Frozen

LabelValue = Literal["pass", "fail", "borderline"]
Split = Literal["tuning", "holdout"]
ReportKind = Literal["calibration", "audit", "probe", "sample", "sweep", "sweep_arriving"]


class LabelItem(_Frozen):
    """One labelled item (a line of the labels JSONL, DESIGN 5.6)."""

    id: str
    """Item id; the same id from two raters is one item labelled twice."""
    input: str | None = None
    """What was asked."""
    output: str | None = None
    """What the agent answered."""
    label: LabelValue
    """The person's verdict; ``borderline`` only enters the weighted kappa."""
    context: Any = None
    """Material the agent had: a string, or a list of strings or ``{doc_id, version, content}`` objects."""
    tool_calls: tuple[dict[str, Any], ...] = ()
    """Tool calls the agent made: ``{name, arguments, result}`` each."""
    rater: str | None = None
    """Who labelled it."""
    prompt: str | None = None
    """The agent's own prompt version (``name@version``) the item was produced with."""
    trace_id: str | None = None
    """The trace the item came from, when it came from one."""


class Confusion(_Frozen):
    """Judge verdicts against labels, indeterminate items left out."""

    true_pass: int = 0
    """Judge pass, label pass."""
    true_fail: int = 0
    """Judge fail, label fail."""
    false_pass: int = 0
    """Judge pass, label fail: the judge let a bad item through."""
    false_fail: int = 0
    """Judge fail, label pass: the judge rejected a good item."""


class Agreement(_Frozen):
    """Agreement of a judge with labels over one set of items."""

    n: int = 0
    """Items with both a pass/fail label and a pass/fail judge verdict."""
    accuracy: float | None = None
    """Share of those where the judge agrees with the label."""
    kappa: float | None = None
    """Cohen's kappa (None when undefined: both sides constant)."""
    kappa_ci: tuple[float, float] | None = None
    """95% percentile bootstrap interval of kappa."""
    weighted_kappa: float | None = None
    """Linear-weighted kappa over fail < borderline < pass buckets (judge score bucketed)."""
    judge_pass_rate: float | None = None
    """Share the judge passed."""
    label_pass_rate: float | None = None
    """Share the labels passed."""
    bias: Literal["lenient", "strict", "even"] | None = None
    """lenient: the judge passes more than people do; strict: fewer."""
    bias_difference: float | None = None
    """judge_pass_rate - label_pass_rate."""
    confusion: Confusion = Field(default_factory=Confusion)
    """The confusion matrix."""
    indeterminate: int = 0
    """Items the judge could not decide (never counted as a pass)."""
    borderline_labels: int = 0
    """Items labelled borderline (only in the weighted kappa)."""
    interpretation: str = "n/a"
    """Landis-Koch reading of kappa."""
    flags: tuple[str, ...] = ()
    """Why a number may mislead (balanced labels, skewed labels, constant judge, few items)."""


class SweepPoint(_Frozen):
    """Agreement at one pass threshold."""

    threshold: float
    """The threshold applied to every judged criterion."""
    n: int
    """Items decided at that threshold."""
    accuracy: float | None
    """Agreement share."""
    kappa: float | None
    """Cohen's kappa."""
    judge_pass_rate: float | None
    """Share the judge would pass."""


class ThresholdSweep(_Frozen):
    """The pass threshold chosen from data, not by convention."""

    points: tuple[SweepPoint, ...] = ()
    """Agreement at each threshold, on the tuning items."""
    best_threshold: float | None = None
    """Threshold with the highest kappa (ties: nearest the rubric's)."""
    best_kappa: float | None = None
    """Kappa at the best threshold, on the tuning items."""
    rubric_thresholds: dict[str, float] = Field(default_factory=dict)
    """The thresholds the rubric sets now."""
    holdout_kappa_at_best: float | None = None
    """Kappa on the held-out items at the best threshold (the honest figure)."""


class RaterAgreement(_Frozen):
    """Two or more people labelled the same items: their agreement is the ceiling."""

    raters: tuple[str, ...]
    """Raters in order of first appearance."""
    primary: str
    """The rater whose labels the judge is measured against."""
    ceiling_kappa: float | None = None
    """Kappa between the first two raters."""
    ceiling_accuracy: float | None = None
    """Raw agreement between the first two raters."""
    ceiling_n: int = 0
    """Items both labelled pass/fail."""
    judge_kappa: dict[str, float | None] = Field(default_factory=dict)
    """Judge's kappa against each rater."""


class CriterionCoverage(_Frozen):
    """A rubric criterion beside the labels' definition."""

    name: str
    """Criterion (or check) name."""
    description: str
    """What it grades."""
    threshold: float | None = None
    """Its pass threshold."""
    shared_words: tuple[str, ...] = ()
    """Content words it shares with the labels' definition."""
    covered: bool | None = None
    """False when it shares no content word: it may grade what the labels never asked about."""


class CalibrationItem(_Frozen):
    """One labelled item and what the judge said."""

    id: str
    """Item id."""
    split: Split
    """tuning (seen while the rubric was tuned) or holdout."""
    label: LabelValue
    """The primary rater's label."""
    judge: Literal["pass", "fail", "indeterminate"]
    """The judge's verdict."""
    reason: str = ""
    """Why the judge failed or could not decide."""
    scores: dict[str, float | None] = Field(default_factory=dict)
    """Judge score per criterion."""
    reasoning: dict[str, str] = Field(default_factory=dict)
    """Judge reasoning per criterion."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Every rater's label."""
    other_judge: Literal["pass", "fail", "indeterminate"] | None = None
    """The comparison model's verdict, when one was run."""


class ModelComparison(_Frozen):
    """The same labelled set through a second judge model."""

    model: str
    """The second model."""
    agreement: Agreement
    """Its agreement with the labels (same split as the main figures)."""
    between_models_kappa: float | None = None
    """Kappa between the two judges."""
    shared_errors: tuple[str, ...] = ()
    """Items both models got wrong: the rubric or labels, not the model."""
    only_primary_errors: tuple[str, ...] = ()
    """Items only the primary model got wrong."""
    only_other_errors: tuple[str, ...] = ()
    """Items only the second model got wrong."""
    reading: str = ""
    """What the comparison suggests."""


class CalibrationReport(Agreement):
    """``calibrate --json``: the headline figures (held-out items when there are any) and the rest."""

    schema_version: int = SCHEMA_VERSION
    """Version of this record's layout."""
    calibration_id: str
    """Id of the stored calibration."""
    created_at: datetime
    """When it ran."""
    rubric_name: str
    """Rubric name."""
    rubric_version: str
    """Rubric version."""
    rubric_hash: str
    """sha256 of the rubric: an edit without a version bump still asks for recalibration."""
    prompt_hash: str
    """sha256 of the judge prompt template."""
    judge_model: str | None
    """Judge model."""
    agent_prompts: tuple[str, ...] = ()
    """Agent prompt versions the labelled items came from."""
    labels_source: str = ""
    """Where the labels came from (path or ``langfuse:SCORE``)."""
    labels_sha256: str = ""
    """sha256 of the labels as read."""
    labels_skipped: tuple[str, ...] = ()
    """Labels not read, and why: for ``langfuse:SCORE``, stored traces that no longer read back (a damaged
    store); the figures rest on the labels that were read."""
    definition: str = ""
    """What the labels' pass means, as written by the people who labelled."""
    evaluated_on: Literal["holdout", "all"] = "all"
    """Which items the headline figures cover."""
    holdout_fraction: float | None = None
    """Fraction asked to be held out."""
    tuning: Agreement | None = None
    """Figures on the tuning items."""
    holdout: Agreement | None = None
    """Figures on the held-out items."""
    contaminated: tuple[str, ...] = ()
    """Items in the holdout bucket already used for tuning: moved to tuning."""
    holdout_seen_by: tuple[str, ...] = ()
    """Earlier rubric versions already evaluated on this holdout."""
    raters: RaterAgreement | None = None
    """Agreement between people, when two raters labelled."""
    criteria: tuple[CriterionCoverage, ...] = ()
    """The rubric's criteria beside the labels' definition."""
    sweep: ThresholdSweep | None = None
    """The threshold sweep."""
    comparison: ModelComparison | None = None
    """A second judge model side by side."""
    items: tuple[CalibrationItem, ...] = ()
    """Every item."""


class GateDecision(_Frozen):
    """Whether a rubric and judge may gate a build."""

    allowed: bool
    """True when a held-out calibration at kappa >= the bar matches rubric, judge and agent prompt."""
    reason: str
    """Why (or why not)."""
    hint: str = ""
    """What to run to be allowed."""
    calibration_id: str | None = None
    """The calibration relied on, or the newest one found."""
    kappa: float | None = None
    """Its held-out kappa."""
    n_holdout: int = 0
    """Its held-out items."""


class Mismatch(_Frozen):
    """Reasoning whose tone contradicts its score."""

    trace_id: str
    """The item."""
    criterion: str
    """Criterion (``overall`` for the reply's overall reasoning against the mean)."""
    repeat: int = 0
    """Which judge call."""
    score: float
    """The score given."""
    score_direction: float
    """Score on -1..1 ((score - 5) / 5)."""
    sentiment: float
    """Tone of the reasoning on -1..1 from cue words."""
    disagreement: float
    """How far tone and score point apart (0..2); the list is ordered by it."""
    negative_cues: tuple[str, ...] = ()
    """Critical cue words found."""
    positive_cues: tuple[str, ...] = ()
    """Approving cue words found."""
    reasoning: str = ""
    """The reasoning, whole, for a person to read."""


class StabilityItem(_Frozen):
    """One item's criterion across repeats."""

    trace_id: str
    """The item."""
    criterion: str
    """Criterion."""
    scores: tuple[float, ...]
    """Score of each repeat."""
    spread: float
    """max - min."""
    stdev: float
    """Population standard deviation."""
    flipped: bool
    """Repeats disagree on pass/fail: the item straddles the threshold."""


class Stability(_Frozen):
    """Test-retest stability of a run with repeats."""

    repeats: int
    """Judge calls per item."""
    measured: int
    """Item-criterion pairs with more than one usable score."""
    mean_spread: float | None = None
    """Mean score spread."""
    max_spread: float | None = None
    """Largest spread."""
    flip_rate: float | None = None
    """Share of items with any criterion whose repeats disagree on pass/fail."""
    straddling: tuple[str, ...] = ()
    """Items whose repeats straddle the threshold."""
    items: tuple[StabilityItem, ...] = ()
    """Per item and criterion, largest spread first."""


class PositionConsistency(_Frozen):
    """Pairwise judging with both orders."""

    pairs: int
    """Pairs judged in both orders with a decision each time."""
    consistent: int
    """Pairs whose winner is the same in both orders."""
    consistency_rate: float | None = None
    """consistent / pairs."""
    first_position_rate: float | None = None
    """Share of decisions that picked the answer shown first (0.5 is unbiased)."""
    inconsistent: tuple[str, ...] = ()
    """Pairs whose winner changed with the order."""


class Drift(_Frozen):
    """Pass rate against the previous run of the same rubric."""

    previous_run_id: str
    """The run compared with."""
    pass_rate: float | None
    """This run's pass rate."""
    previous_pass_rate: float | None
    """The previous run's pass rate."""
    change: float | None = None
    """Difference in pass rate."""
    change_ci: tuple[float, float] | None = None
    """95% interval of the difference (normal approximation)."""
    provenance_changes: dict[str, tuple[Any, Any]] = Field(default_factory=dict)
    """Provenance fields that differ: (previous, now)."""
    shared_traces: int = 0
    """Traces scored in both runs."""
    still_arriving: tuple[int, int] = (0, 0)
    """Items of (this run, the previous run) left indeterminate because their trace may still have been
    arriving (their answer maybe a draft): each pass rate counts them as not passing."""
    reading: str = ""
    """Whether the change can be read as the agent's."""


class AuditReport(_Frozen):
    """``audit --json``: what to distrust in a scoring run."""

    schema_version: int = SCHEMA_VERSION
    """Version of this record's layout."""
    report_id: str
    """Id of the stored report."""
    run_id: str
    """The audited run."""
    created_at: datetime
    """When the audit ran."""
    rubric_name: str
    """Rubric name."""
    rubric_version: str
    """Rubric version."""
    judge_model: str | None
    """Judge model."""
    items: int
    """Items in the run."""
    replies_read: int = 0
    """Judge reasonings read for mismatches."""
    mismatches: tuple[Mismatch, ...] = ()
    """Reasoning contradicting the score, worst first."""
    stability: Stability | None = None
    """Test-retest stability (runs with repeats)."""
    position: PositionConsistency | None = None
    """Position consistency (pairwise runs)."""
    drift: Drift | None = None
    """Drift against the previous run of the same rubric."""
    still_arriving: tuple[str, ...] = ()
    """Traces of the run not scored (indeterminate) because they may still have been arriving, their
    answer maybe a draft the user never got (DESIGN 5.5): score them again once they have arrived."""


class ProbeResult(_Frozen):
    """One counterfactual probe."""

    name: str
    """amount_change, citation_swap, paused_vs_submitted, reword."""
    expectation: Literal["flip", "fail", "unchanged"]
    """What a sound checker must do."""
    status: Literal["expected", "unexpected", "skipped"]
    """Whether it did."""
    change: str = ""
    """What was changed in the case."""
    verdict: Literal["pass", "fail", "indeterminate"] | None = None
    """Verdict on the changed case."""
    reason: str = ""
    """The verdict's reason."""
    detail: str = ""
    """Why skipped, or what went wrong."""


class ProbeReport(_Frozen):
    """``probe --json``: counterfactual sanity checks of checks and judge on one case."""

    schema_version: int = SCHEMA_VERSION
    """Version of this record's layout."""
    report_id: str
    """Id of the stored report."""
    created_at: datetime
    """When the probes ran."""
    case_id: str
    """The case."""
    rubric_name: str
    """Rubric name."""
    rubric_version: str
    """Rubric version."""
    judge_model: str | None
    """Judge model."""
    base_verdict: Literal["pass", "fail", "indeterminate"]
    """Verdict on the case as written."""
    base_reason: str = ""
    """Its reason."""
    probes: tuple[ProbeResult, ...] = ()
    """Each probe."""
    expected: int = 0
    """Probes that behaved as they must."""
    unexpected: int = 0
    """Probes that did not."""


class StoredReport(_Frozen):
    """A calibration, audit, probe, sample or sweep report kept in the store."""

    report_id: str
    """Id."""
    kind: ReportKind
    """What it is."""
    created_at: datetime
    """When it was made."""
    run_id: str | None = None
    """The scoring run it belongs to, if any."""
    rubric_name: str | None = None
    """Rubric name."""
    rubric_version: str | None = None
    """Rubric version."""
    judge_model: str | None = None
    """Judge model."""
    payload: dict[str, Any]
    """The report as JSON data."""


class TuningMark(_Frozen):
    """A labelled item was used while a rubric was tuned (or its holdout figures were seen)."""

    rubric_name: str
    """Rubric name (marks span versions: tuning v2 on an item spoils it for v3)."""
    item_key: str
    """sha256 of the item's id, input and output."""
    kind: Literal["tuning", "holdout_seen"]
    """Used for tuning, or evaluated as held out."""
    rubric_version: str
    """The version it was used with."""
    calibration_id: str
    """The calibration that used it."""
    marked_at: datetime
    """When."""
