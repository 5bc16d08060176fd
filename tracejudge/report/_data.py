"""What the report and ``/metrics`` show, read from the store into plain records.

``build_report`` is the only function here that reads the store; the views are computed from
records by pure functions (``triage_view``, ``rubric_view``, ``suite_view``)."""

from __future__ import annotations

import os
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tracejudge import __version__
from tracejudge._errors import StoreDamageError
from tracejudge.schema import (
    AuditReport,
    CalibrationReport,
    ItemResult,
    Localization,
    MaterialResult,
    Mismatch,
    RawSpan,
    RunRecord,
    StageResult,
    SuiteRun,
    SweepSummary,
)
from tracejudge.store import Store, TriageEntry

VERDICTS = (
    "not_indexed",
    "filtered",
    "not_retrieved",
    "dropped_in_context",
    "ignored_by_model",
    "unconfirmed",
    "basis_not_in_effect",
    "no_fault",
)
"""Triage verdicts in pipeline order (faults first, then unconfirmed, wrong basis and healthy)."""

_MAX_RUNS_PER_RUBRIC = 60
_PROMPT_TRACES_PER_RUN = 50

_R = TypeVar("_R", bound=BaseModel)


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class TicketView(_View):
    """One triaged ticket: the latest triage of its trace."""

    ticket: str | None
    """Ticket id."""
    trace_id: str
    """The trace."""
    triaged_at: datetime
    """When it was triaged."""
    verdict: str
    """Overall verdict."""
    cause: str | None
    """Cause of a filtered / not_retrieved verdict."""
    deciding_stage: str
    """First stage that failed or could not be confirmed (``none`` when all passed)."""
    summary: str
    """One-line explanation."""
    task_time: datetime | None
    """The time the checks were judged at."""
    stages: tuple[StageResult, ...]
    """Stages of the deciding material."""
    materials: tuple[MaterialResult, ...]
    """Per-material results when the ticket names several."""
    source: str | None = None
    """Where the trace came from (otlp, file, langfuse, phoenix)."""
    langfuse_url: str | None = None
    """Link to the trace in Langfuse, when it came from there and Langfuse's address is known."""
    earlier: int = 0
    """Earlier triages of the same ticket and trace kept in the store."""


class TriageView(_View):
    """Triage across tickets."""

    tickets: tuple[TicketView, ...] = ()
    """Latest triage per ticket and trace, worst verdict first."""
    verdict_counts: dict[str, int] = Field(default_factory=dict)
    """Tickets per verdict (every verdict listed, zero included)."""
    by_stage_cause: tuple[tuple[str, str, str, int], ...] = ()
    """(verdict, deciding stage, cause, tickets)."""
    entries: int = 0
    """Triage entries in the store, reruns included."""
    entry_counts: dict[str, int] = Field(default_factory=dict)
    """Entries per verdict, reruns included."""


class RunPoint(_View):
    """One scoring run as a point on the rubric's timeline."""

    run_id: str
    """Run id."""
    created_at: datetime
    """When it started."""
    status: str
    """Where it stands."""
    rubric_version: str
    """Rubric version."""
    rubric_hash: str
    """Rubric hash."""
    prompt_hash: str
    """Judge prompt template hash."""
    judge_model: str | None
    """Judge model."""
    temperature: float | None
    """Judge temperature."""
    repeat: int = 1
    """Judge calls per item."""
    agent_prompts: tuple[str, ...] = ()
    """Managed agent prompts (``name@version``) seen in the run's traces."""
    n: int
    """Items."""
    passed: int
    """Items passed."""
    failed: int
    """Items failed."""
    indeterminate: int
    """Items that could not be decided."""
    pass_rate: float | None
    """pass / n."""
    indeterminate_share: float | None
    """indeterminate / n."""
    criteria: dict[str, float | None] = Field(default_factory=dict)
    """Pass rate per criterion."""
    checks: dict[str, float | None] = Field(default_factory=dict)
    """Pass rate per hard check."""
    categories: dict[str, float | None] = Field(default_factory=dict)
    """Pass rate per category."""
    p95_latency_ms: float | None = None
    """95th percentile of per-item scoring latency."""
    input_tokens: int = 0
    """Judge prompt tokens."""
    output_tokens: int = 0
    """Judge completion tokens."""
    cost_usd: float = 0.0
    """Judge cost."""
    judge_calls: int = 0
    """Judge calls made (cache hits excluded)."""
    reasons: dict[str, int] = Field(default_factory=dict)
    """Indeterminate reasons."""
    changes: tuple[str, ...] = ()
    """What changed since the previous run of the rubric (judge, rubric, judge prompt, agent prompt)."""


class CategoryRow(_View):
    """A category (or criterion, or check) of the latest run."""

    name: str
    """Name."""
    n: int
    """Items."""
    passed: int
    """Passed."""
    failed: int
    """Failed."""
    indeterminate: int
    """Undecided."""
    pass_rate: float | None
    """pass / n."""
    mean: float | None = None
    """Mean score (criteria)."""


class RubricView(_View):
    """A rubric's runs, oldest first, and its latest run in detail."""

    name: str
    """Rubric name."""
    runs: tuple[RunPoint, ...]
    """Runs, oldest first (the newest ``_MAX_RUNS_PER_RUBRIC``)."""
    distributions: dict[str, list[int]] = Field(default_factory=dict)
    """Latest run: items per integer score 0..10, per criterion."""
    criteria: tuple[CategoryRow, ...] = ()
    """Latest run, per criterion."""
    checks: tuple[CategoryRow, ...] = ()
    """Latest run, per hard check."""
    categories: tuple[CategoryRow, ...] = ()
    """Latest run, per category."""

    @property
    def latest(self) -> RunPoint:
        return self.runs[-1]


class SuiteView(_View):
    """A regression suite: its composition and its latest runs."""

    name: str
    """Suite folder name."""
    path: str
    """Suite folder."""
    samples: int
    """Active samples."""
    composition: dict[str, dict[str, int]] = Field(default_factory=dict)
    """kind -> split -> samples."""
    runs: tuple[SuiteRun, ...] = ()
    """Latest runs, newest first."""
    notable: tuple[tuple[str, str, str, str], ...] = ()
    """Latest run: (sample id, kind, change, outcome) of fixed, regressed and flaky samples."""
    error: str | None = None
    """Why the suite could not be read."""


class ReportData(_View):
    """Everything the HTML report and ``/metrics`` show."""

    generated_at: datetime
    """When the report was built."""
    version: str = __version__
    """tracejudge's version."""
    triage: TriageView = Field(default_factory=TriageView)
    """Triage across tickets."""
    rubrics: tuple[RubricView, ...] = ()
    """Scoring runs per rubric."""
    calibrations: tuple[CalibrationReport, ...] = ()
    """Latest calibration per rubric and judge model."""
    calibration_available: bool = True
    """False when the store keeps no calibration records."""
    audits: tuple[AuditReport, ...] = ()
    """Latest audit per rubric."""
    unread_reports: tuple[str, ...] = ()
    """Stored calibration and audit reports this version could not read (a later layout): each what it is,
    why, and what to do; the latest shown of their rubric may be older than they are."""
    unreadable_traces: tuple[str, ...] = ()
    """Traces the report reads (a triaged trace's origin, a scored trace's agent prompt) that the store
    holds damaged: shown without their Langfuse link and prompt version (``doctor --deep`` lists all)."""
    suites: tuple[SuiteView, ...] = ()
    """Regression suites asked for."""
    regression_available: bool = True
    """False when tracejudge's regression module is not installed."""
    sweep: SweepSummary | None = None
    """The latest ``triage --sweep``, if one was recorded."""


# --- triage -------------------------------------------------------------------------------------


def deciding_stage(loc: Localization) -> str:
    """The first stage that failed or could not be confirmed (``none`` when every stage passed)."""
    return next((s.name for s in loc.stages if s.status in ("fail", "unconfirmed")), "none")


def langfuse_trace_url(base_url: str | None, trace_id: str) -> str | None:
    """``{base}/trace/{id}`` (Langfuse redirects it to the trace's project); None unless ``base_url`` is
    an http(s) URL, so nothing from a trace can make the link run script."""
    if not base_url or not base_url.lower().startswith(("http://", "https://")):
        return None
    return f"{base_url.rstrip('/')}/trace/{quote(trace_id, safe='')}"


def langfuse_base_url(env: Mapping[str, str] | None = None) -> str | None:
    """``LANGFUSE_BASE_URL`` or ``LANGFUSE_HOST``, when set."""
    env = os.environ if env is None else env
    return env.get("LANGFUSE_BASE_URL") or env.get("LANGFUSE_HOST") or None


def trace_origin(spans: Sequence[RawSpan]) -> tuple[str | None, str | None]:
    """(source, Langfuse trace id) of a stored trace.

    The collector puts ``langfuse.trace.id`` on the root span only and lowercases the store's trace id;
    Langfuse's own id may differ in case, so it is looked for on every span before falling back."""
    if not spans:
        return None, None
    from_langfuse = [s for s in spans if s.source == "langfuse"]
    if not from_langfuse:
        return spans[0].source, None
    for s in from_langfuse:
        lf = s.attributes.get("langfuse.trace.id")
        if isinstance(lf, str | int) and str(lf):
            return "langfuse", str(lf)
    return "langfuse", from_langfuse[0].trace_id


def triage_view(
    entries: Sequence[TriageEntry],
    origins: Mapping[str, tuple[str | None, str | None]] | None = None,
    *,
    langfuse_url: str | None = None,
) -> TriageView:
    """Latest triage per (ticket, trace) with verdict counts; ``entries`` newest first."""
    origins = origins or {}
    latest, earlier = _latest_per_ticket(entries)
    order = {v: i for i, v in enumerate(VERDICTS)}
    tickets = sorted(
        (_ticket_view(e, origins, langfuse_url, earlier[key]) for key, e in latest.items()),
        key=lambda t: (order.get(t.verdict, 99), t.ticket or "", t.trace_id),
    )
    counts = dict.fromkeys(VERDICTS, 0) | Counter(t.verdict for t in tickets)
    combos = Counter((t.verdict, t.deciding_stage, t.cause or "none") for t in tickets)
    entry_counts = Counter(e.result.verdict for e in entries)
    return TriageView(
        tickets=tuple(tickets),
        verdict_counts=counts,
        by_stage_cause=tuple(
            (v, s, c, n)
            for (v, s, c), n in sorted(combos.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0]))
        ),
        entries=len(entries),
        entry_counts=dict(sorted(entry_counts.items())),
    )


def _latest_per_ticket(
    entries: Sequence[TriageEntry],
) -> tuple[dict[tuple[str | None, str], TriageEntry], Counter[tuple[str | None, str]]]:
    """The newest entry per (ticket, trace), and how many earlier ones each has (``entries`` newest first)."""
    latest: dict[tuple[str | None, str], TriageEntry] = {}
    earlier: Counter[tuple[str | None, str]] = Counter()
    for e in entries:
        key = (e.ticket, e.trace_id)
        if key in latest:
            earlier[key] += 1
        else:
            latest[key] = e
    return latest, earlier


def _ticket_view(
    e: TriageEntry,
    origins: Mapping[str, tuple[str | None, str | None]],
    langfuse_url: str | None,
    earlier: int,
) -> TicketView:
    loc = e.result
    source, lf_id = origins.get(e.trace_id, (None, None))
    return TicketView(
        ticket=e.ticket,
        trace_id=e.trace_id,
        triaged_at=e.triaged_at,
        verdict=loc.verdict,
        cause=loc.cause,
        deciding_stage=deciding_stage(loc),
        summary=loc.summary,
        task_time=loc.task_time,
        stages=loc.stages,
        materials=loc.materials if len(loc.materials) > 1 else (),
        source=source,
        langfuse_url=langfuse_trace_url(langfuse_url, lf_id) if lf_id else None,
        earlier=earlier,
    )


# --- the judge's audit ---------------------------------------------------------------------------


class MismatchRow(_View):
    """Reasoning that contradicts its score, with identical replies of repeated judge calls merged."""

    trace_id: str
    """The item."""
    criterion: str
    """Criterion (``overall`` for the reply's overall reasoning)."""
    score: float
    """The score given."""
    sentiment: float
    """Tone of the reasoning on -1..1."""
    cues: tuple[str, ...] = ()
    """The cue words that set the tone (critical ones first)."""
    repeats: tuple[int, ...] = ()
    """Which judge calls gave this reply."""
    reasoning: str = ""
    """The reasoning, whole."""


def gate_reading(c: CalibrationReport) -> str | None:
    """Why this calibration could not let its judge gate a build (``score --gate``), or None when its
    held-out figures clear the bar (the rubric and prompt checks of the gate itself still apply)."""
    from tracejudge.audit import GATE_KAPPA, GATE_MIN_HOLDOUT

    if c.holdout is None:
        return "no items held out: cannot gate a build (calibrate with --holdout 0.3)"
    if c.holdout.n < GATE_MIN_HOLDOUT:
        return f"only {c.holdout.n} held-out items: at least {GATE_MIN_HOLDOUT} are needed to gate a build"
    if c.holdout.kappa is None or c.holdout.kappa < GATE_KAPPA:
        return f"held-out kappa under {GATE_KAPPA}: too weak to gate a build"
    return None


def mismatch_rows(mismatches: Iterable[Mismatch]) -> tuple[MismatchRow, ...]:
    """Mismatches with the same item, criterion, score and reasoning merged (a repeated judge call that
    said the same thing is one finding, not three), in the audit's order (most contradictory first)."""
    rows: dict[tuple[str, str, float, str], MismatchRow] = {}
    for m in mismatches:
        key = (m.trace_id, m.criterion, m.score, m.reasoning)
        row = rows.get(key)
        if row is None:
            rows[key] = MismatchRow(
                trace_id=m.trace_id,
                criterion=m.criterion,
                score=m.score,
                sentiment=m.sentiment,
                cues=tuple(dict.fromkeys((*m.negative_cues, *m.positive_cues))),
                repeats=(m.repeat,),
                reasoning=m.reasoning,
            )
        elif m.repeat not in row.repeats:
            rows[key] = row.model_copy(update={"repeats": tuple(sorted((*row.repeats, m.repeat)))})
    return tuple(rows.values())


# --- scoring ------------------------------------------------------------------------------------


def _rate(summary_rate: float | None) -> float | None:
    return None if summary_rate is None else float(summary_rate)


def run_point(run: RunRecord, agent_prompts: Iterable[str] = ()) -> RunPoint:
    """A run's headline figures from its record."""
    s = run.summary
    o = s.overall
    p = run.provenance
    return RunPoint(
        run_id=run.run_id,
        created_at=run.created_at,
        status=run.status,
        rubric_version=p.rubric_version,
        rubric_hash=p.rubric_hash,
        prompt_hash=p.prompt_hash,
        judge_model=p.judge_model,
        temperature=p.temperature,
        repeat=p.repeat,
        agent_prompts=tuple(sorted(set(agent_prompts))),
        n=o.n,
        passed=o.pass_,
        failed=o.fail,
        indeterminate=o.indeterminate,
        pass_rate=_rate(o.pass_rate),
        indeterminate_share=(o.indeterminate / o.n) if o.n else None,
        criteria={k: _rate(v.pass_rate) for k, v in s.criteria.items()},
        checks={k: _rate(v.pass_rate) for k, v in s.checks.items()},
        categories={k: _rate(v.pass_rate) for k, v in s.categories.items()},
        p95_latency_ms=o.p95_latency_ms,
        input_tokens=o.input_tokens,
        output_tokens=o.output_tokens,
        cost_usd=s.cost_usd,
        judge_calls=s.judge_calls,
        reasons=dict(s.reasons),
    )


def _judge_model_change(before: RunPoint, now: RunPoint) -> str | None:
    if before.judge_model == now.judge_model:
        return None
    return f"judge {before.judge_model or 'none'} \u2192 {now.judge_model or 'none'}"


def _temperature_change(before: RunPoint, now: RunPoint) -> str | None:
    if before.temperature == now.temperature:
        return None
    return f"judge temperature {before.temperature} \u2192 {now.temperature}"


def _repeat_change(before: RunPoint, now: RunPoint) -> str | None:
    # Scores of repeated calls are aggregated, so the same judge can read differently.
    if before.repeat == now.repeat:
        return None
    return f"judge calls per item {before.repeat} \u2192 {now.repeat}"


def _rubric_change(before: RunPoint, now: RunPoint) -> str | None:
    if before.rubric_version != now.rubric_version:
        return f"rubric v{before.rubric_version} \u2192 v{now.rubric_version}"
    judge_changed = before.judge_model != now.judge_model or before.temperature != now.temperature
    # The rubric's hash covers its judge section: a judge change alone is reported as that.
    if before.rubric_hash != now.rubric_hash and not judge_changed:
        return "rubric edited (same version)"
    return None


def _judge_prompt_change(before: RunPoint, now: RunPoint) -> str | None:
    if before.prompt_hash != now.prompt_hash and before.rubric_hash == now.rubric_hash:
        return "judge prompt changed"
    return None


def _agent_prompt_change(before: RunPoint, now: RunPoint) -> str | None:
    if not (before.agent_prompts and now.agent_prompts) or before.agent_prompts == now.agent_prompts:
        return None
    gone = sorted(set(before.agent_prompts) - set(now.agent_prompts))
    new = sorted(set(now.agent_prompts) - set(before.agent_prompts))
    return f"agent prompt {', '.join(gone) or '-'} \u2192 {', '.join(new) or '-'}"


# What may change between two runs of a rubric, in the order the timeline names the changes.
_CHANGES: tuple[Callable[[RunPoint, RunPoint], str | None], ...] = (
    _judge_model_change,
    _temperature_change,
    _repeat_change,
    _rubric_change,
    _judge_prompt_change,
    _agent_prompt_change,
)


def _changes(before: RunPoint, now: RunPoint) -> tuple[str, ...]:
    return tuple(text for change in _CHANGES if (text := change(before, now)) is not None)


def _rows(groups: Mapping[str, Any]) -> tuple[CategoryRow, ...]:
    return tuple(
        CategoryRow(
            name=name,
            n=g.n,
            passed=g.pass_,
            failed=g.fail,
            indeterminate=g.indeterminate,
            pass_rate=g.pass_rate,
            mean=g.mean,
        )
        for name, g in sorted(groups.items())
    )


def score_bins(items: Iterable[ItemResult]) -> dict[str, list[int]]:
    """Items per integer score 0..10, per judged criterion (scores round half up)."""
    out: dict[str, list[int]] = {}
    for item in items:
        for name, c in item.criteria.items():
            if c.score is None or c.decided_by != "judge":
                continue
            bins = out.setdefault(name, [0] * 11)
            bins[max(0, min(10, int(c.score + 0.5)))] += 1
    return dict(sorted(out.items()))


def rubric_view(
    name: str,
    runs: Sequence[RunRecord],
    *,
    prompts: Mapping[str, Iterable[str]] | None = None,
    latest_items: Iterable[ItemResult] = (),
) -> RubricView:
    """One rubric's runs (any order) as a timeline with change markers; ``latest_items`` are the newest
    run's items (for the score distributions)."""
    prompts = prompts or {}
    ordered = sorted(runs, key=lambda r: (r.created_at, r.run_id))[-_MAX_RUNS_PER_RUBRIC:]
    points: list[RunPoint] = []
    for run in ordered:
        point = run_point(run, prompts.get(run.run_id, ()))
        if points:
            point = point.model_copy(update={"changes": _changes(points[-1], point)})
        points.append(point)
    last = ordered[-1]
    return RubricView(
        name=name,
        runs=tuple(points),
        distributions=score_bins(latest_items),
        criteria=_rows(last.summary.criteria),
        checks=_rows(last.summary.checks),
        categories=_rows(last.summary.categories),
    )


def _spans(store: Store, trace_id: str, lost: list[str]) -> list[RawSpan]:
    """The trace's stored spans; none, and its id in ``lost``, when they do not read back (the report
    shows the rest of what it holds)."""
    try:
        return store.get_spans(trace_id)
    except StoreDamageError:
        lost.append(trace_id)
        return []


def _agent_prompts(store: Store, items: Iterable[ItemResult], limit: int, lost: list[str]) -> set[str]:
    from tracejudge.normalize import normalize

    found: set[str] = set()
    for i, item in enumerate(items):
        if i >= limit:
            break
        spans = _spans(store, item.trace_id, lost)
        if not spans:
            continue
        try:
            task = normalize(spans)
        except Exception:  # noqa: S112 (a trace that does not normalize shows no prompt; the report goes on)
            continue
        found.update(m.prompt for m in task.model_calls if m.prompt)
    return found


# --- regression suites --------------------------------------------------------------------------


def suite_view(name: str, path: str, samples: Iterable[Any], runs: Sequence[SuiteRun]) -> SuiteView:
    """Composition by kind and split of the active samples, and the latest runs (newest first)."""
    comp: dict[str, dict[str, int]] = {}
    n = 0
    for s in samples:
        if getattr(s, "status", "active") != "active":
            continue
        n += 1
        row = comp.setdefault(s.kind, {})
        row[s.split] = row.get(s.split, 0) + 1
    newest = sorted(runs, key=lambda r: (r.created_at, r.run_id), reverse=True)[:10]
    notable: tuple[tuple[str, str, str, str], ...] = ()
    if newest:
        notable = tuple(
            (r.sample_id, r.kind, r.change, r.outcome)
            for r in newest[0].samples
            if r.change in ("fixed", "regressed", "flaky") or r.outcome == "flaky"
        )
    return SuiteView(name=name, path=path, samples=n, composition=comp, runs=tuple(newest), notable=notable)


def _load_suite(path: Path) -> SuiteView:
    from tracejudge._errors import TracejudgeError
    from tracejudge.regress import load_suite

    try:
        suite = load_suite(path)
        return suite_view(suite.name, str(path), [s.sample for s in suite.samples], suite.runs())
    except (TracejudgeError, OSError, ValidationError) as exc:
        return SuiteView(name=path.name, path=str(path), samples=0, error=str(exc))


# --- the whole report ---------------------------------------------------------------------------


def _latest_by(reports: Iterable[Any], key: Callable[[Any], Any]) -> list[Any]:
    seen: dict[Any, Any] = {}
    for r in reports:
        k = key(r)
        if k not in seen or r.created_at > seen[k].created_at:
            seen[k] = r
    return sorted(seen.values(), key=lambda r: (r.rubric_name, str(getattr(r, "judge_model", ""))))


def build_report(
    store: Store,
    *,
    suites: Sequence[str | Path] = (),
    langfuse_url: str | None = None,
    now: datetime | None = None,
    agent_prompt_traces: int = _PROMPT_TRACES_PER_RUN,
) -> ReportData:
    """Read triage results, scoring runs, calibrations, audits (and the given regression suites) from the
    store into a :class:`ReportData`. ``langfuse_url`` (default ``LANGFUSE_BASE_URL``/``LANGFUSE_HOST``)
    links Langfuse-sourced traces."""
    base = langfuse_url if langfuse_url is not None else langfuse_base_url()
    entries = store.list_triage_results()
    lost: list[str] = []
    origins = {tid: trace_origin(_spans(store, tid, lost)) for tid in {e.trace_id for e in entries}}
    calibration_available = hasattr(store, "list_reports")
    calibrations: list[CalibrationReport] = []
    audits: list[AuditReport] = []
    unread: list[str] = []
    if calibration_available:
        calibrations = _latest_by(
            _stored_reports(store, "calibration", CalibrationReport, unread),
            lambda c: (c.rubric_name, c.judge_model),
        )
        audits = _latest_by(_stored_reports(store, "audit", AuditReport, unread), lambda a: a.rubric_name)
    suite_views = _suite_views(suites)
    from tracejudge.sweep import latest_sweep

    return ReportData(
        sweep=latest_sweep(store) if calibration_available else None,
        generated_at=now or datetime.now(UTC),
        triage=triage_view(entries, origins, langfuse_url=base),
        rubrics=_rubric_views(store, agent_prompt_traces, lost),
        calibrations=tuple(calibrations),
        calibration_available=calibration_available,
        audits=tuple(audits),
        unread_reports=tuple(unread),
        unreadable_traces=tuple(dict.fromkeys(lost)),
        suites=tuple(suite_views or ()),
        regression_available=suite_views is not None,
    )


def _rubric_views(store: Store, agent_prompt_traces: int, lost: list[str]) -> tuple[RubricView, ...]:
    by_rubric: dict[str, list[RunRecord]] = {}
    for run in store.list_runs():
        by_rubric.setdefault(run.provenance.rubric_name, []).append(run)
    rubrics = []
    for name in sorted(by_rubric):
        runs = sorted(by_rubric[name], key=lambda r: (r.created_at, r.run_id))[-_MAX_RUNS_PER_RUBRIC:]
        prompts = {
            r.run_id: _agent_prompts(store, store.iter_score_items(r.run_id), agent_prompt_traces, lost)
            for r in runs
        }
        rubrics.append(
            rubric_view(name, runs, prompts=prompts, latest_items=store.iter_score_items(runs[-1].run_id))
        )
    return tuple(rubrics)


def _stored_reports(store: Store, kind: str, model: type[_R], unread: list[str]) -> list[_R]:
    """The stored reports of ``kind`` this version can read — one a later version stored with fields this
    one does not know is read without them (:func:`~tracejudge.store.read_record`); one it cannot read is
    left out and named in ``unread`` (with what to do), not skipped unsaid: the latest shown would be an
    older one."""
    from tracejudge.store import UnreadableRecordError, read_record

    found: list[_R] = []
    for r in store.list_reports(kind):
        try:
            found.append(read_record(model, r.payload, what=f"{kind} report {r.report_id}"))
        except UnreadableRecordError as exc:
            unread.append(str(exc))
    return found


def _suite_views(suites: Sequence[str | Path]) -> list[SuiteView] | None:
    """The given regression suites, or None when the regress package is not installed."""
    if not suites:
        return []
    try:
        import tracejudge.regress  # noqa: F401
    except ImportError:
        return None
    return [_load_suite(Path(p)) for p in suites]


def p95(values: Sequence[float]) -> float | None:
    """95th percentile (inclusive method), None for no values."""
    if not values:
        return None
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=20, method="inclusive")[-1])
