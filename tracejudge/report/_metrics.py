"""``/metrics``: the store's figures in the Prometheus text exposition format (version 0.0.4).

Counters (``*_total``) sum over every run kept in the store: runs are never rewritten, so they only
grow. Gauges describe the latest run of each rubric, the latest triage of each ticket and the latest
calibration of each rubric and judge."""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tracejudge import __version__
from tracejudge.schema import CalibrationReport, ItemResult, RunRecord, SweepSummary
from tracejudge.store import Store, UnreadableRecordError, read_record

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Judge call latency buckets, in seconds."""

Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    """One metric family: name, type, help, and its samples."""

    name: str
    kind: str
    help: str
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)

    def add(self, value: float, suffix: str = "", **labels: str | None) -> None:
        self.samples.append((suffix, tuple((k, v or "none") for k, v in labels.items()), float(value)))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


def exposition(families: Iterable[Family]) -> str:
    """Families as Prometheus text; label values are escaped, so trace text cannot forge a sample."""
    out: list[str] = []
    for f in families:
        out.append(f"# HELP {f.name} {f.help.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}")
        out.append(f"# TYPE {f.name} {f.kind}")
        for suffix, labels, v in f.samples:
            lab = ",".join(f'{k}="{_escape(val)}"' for k, val in labels)
            out.append(f"{f.name}{suffix}{{{lab}}} {_value(v)}" if lab else f"{f.name}{suffix} {_value(v)}")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class RunLatency:
    """Judge call latencies of one run, bucketed (cache hits left out)."""

    buckets: tuple[int, ...]
    count: int
    total_s: float


def run_latency(items: Iterable[ItemResult]) -> RunLatency:
    """Bucket every judge call of a run's items."""
    counts = [0] * len(LATENCY_BUCKETS)
    n = 0
    total = 0.0
    for item in items:
        for reply in item.replies:
            if reply.cached:
                continue
            s = reply.latency_ms / 1000
            n += 1
            total += s
            for i, le in enumerate(LATENCY_BUCKETS):
                if s <= le:
                    counts[i] += 1
    return RunLatency(tuple(counts), n, total)


class LatencyCache:
    """Finished runs never change: bucket their judge calls once per process, not on every scrape."""

    def __init__(self) -> None:
        self._done: dict[str, RunLatency] = {}
        self._lock = threading.Lock()

    def get(self, store: Store, run: RunRecord) -> RunLatency:
        with self._lock:
            hit = self._done.get(run.run_id)
        if hit is not None:
            return hit
        lat = run_latency(store.iter_score_items(run.run_id))
        if run.status != "running":
            with self._lock:
                self._done[run.run_id] = lat
        return lat


def _add_groups(
    rubric: str, key: str, groups: Mapping[str, object], totals: dict[tuple[str, ...], float]
) -> None:
    for name, g in groups.items():
        for verdict, n in (
            ("pass", getattr(g, "pass_", 0)),
            ("fail", getattr(g, "fail", 0)),
            ("indeterminate", getattr(g, "indeterminate", 0)),
        ):
            totals[(rubric, key, name, verdict)] += n


def scoring_families(runs: Sequence[RunRecord], latencies: Mapping[str, RunLatency]) -> list[Family]:
    """Scoring metrics from run records (any order) and their judge-call latencies."""
    return [
        *_verdict_families(runs),
        *_judge_families(runs),
        _latency_family(runs, latencies),
        *_latest_run_families(_latest_per_rubric(runs)),
    ]


def _verdict_families(runs: Sequence[RunRecord]) -> list[Family]:
    """Runs per rubric, and verdicts over all runs: per item, criterion, category and check."""
    runs_total = Family("tracejudge_score_runs_total", "counter", "Scoring runs kept in the store.")
    items_total = Family("tracejudge_score_items_total", "counter", "Scored items by overall verdict.")
    crit_total = Family("tracejudge_criterion_verdicts_total", "counter", "Criterion verdicts over all runs.")
    cat_total = Family(
        "tracejudge_category_verdicts_total", "counter", "Item verdicts per category, all runs."
    )
    check_total = Family("tracejudge_check_verdicts_total", "counter", "Hard-check verdicts over all runs.")
    counts: dict[str, int] = defaultdict(int)
    verdicts: dict[tuple[str, ...], float] = defaultdict(float)
    for run in runs:
        rubric = run.provenance.rubric_name
        counts[rubric] += 1
        s = run.summary
        _add_groups(rubric, "overall", {"": s.overall}, verdicts)
        _add_groups(rubric, "criterion", s.criteria, verdicts)
        _add_groups(rubric, "category", s.categories, verdicts)
        _add_groups(rubric, "check", s.checks, verdicts)
    for rubric, runs_n in sorted(counts.items()):
        runs_total.add(runs_n, rubric=rubric)
    # The group kind -> its family and the label naming the group (the overall group has none).
    by_kind = {
        "overall": (items_total, None),
        "criterion": (crit_total, "criterion"),
        "category": (cat_total, "category"),
        "check": (check_total, "check"),
    }
    for (rubric, key, name, verdict), count in sorted(verdicts.items()):
        family, label = by_kind[key]
        family.add(count, rubric=rubric, **({label: name} if label else {}), verdict=verdict)
    return [runs_total, items_total, crit_total, cat_total, check_total]


def _judge_families(runs: Sequence[RunRecord]) -> list[Family]:
    """Judge calls, tokens and cost per rubric and judge model."""
    calls = Family("tracejudge_judge_calls_total", "counter", "Judge calls made (cache hits excluded).")
    tokens = Family("tracejudge_judge_tokens_total", "counter", "Judge tokens billed, by type.")
    cost = Family("tracejudge_judge_cost_usd_total", "counter", "Judge cost in USD.")
    per_judge: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for run in runs:
        s = run.summary
        j = per_judge[(run.provenance.rubric_name, run.provenance.judge_model or "none")]
        j[0] += s.judge_calls
        j[1] += s.overall.input_tokens
        j[2] += s.overall.output_tokens
        j[3] += s.cost_usd
    for (rubric, judge), (ncalls, tin, tout, usd) in sorted(per_judge.items()):
        calls.add(ncalls, rubric=rubric, judge_model=judge)
        tokens.add(tin, rubric=rubric, judge_model=judge, type="input")
        tokens.add(tout, rubric=rubric, judge_model=judge, type="output")
        cost.add(usd, rubric=rubric, judge_model=judge)
    return [calls, tokens, cost]


def _latency_family(runs: Sequence[RunRecord], latencies: Mapping[str, RunLatency]) -> Family:
    """The judge-call latency histogram per rubric and judge model (buckets, then count and sum)."""
    latency = Family(
        "tracejudge_judge_latency_seconds", "histogram", "Judge call latency (retries included)."
    )
    hist: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0] * (len(LATENCY_BUCKETS) + 2))
    for run in runs:
        lat = latencies.get(run.run_id)
        if lat is None:
            continue
        h = hist[(run.provenance.rubric_name, run.provenance.judge_model or "none")]
        for i, c in enumerate(lat.buckets):
            h[i] += c
        h[-2] += lat.count
        h[-1] += lat.total_s
    for (rubric, judge), h in sorted(hist.items()):
        for i, le in enumerate(LATENCY_BUCKETS):
            latency.add(h[i], "_bucket", rubric=rubric, judge_model=judge, le=_value(le))
        latency.add(h[-2], "_bucket", rubric=rubric, judge_model=judge, le="+Inf")
        latency.add(h[-1], "_sum", rubric=rubric, judge_model=judge)
        latency.add(h[-2], "_count", rubric=rubric, judge_model=judge)
    return latency


def _latest_per_rubric(runs: Sequence[RunRecord]) -> dict[str, RunRecord]:
    latest: dict[str, RunRecord] = {}
    for run in runs:
        rubric = run.provenance.rubric_name
        if rubric not in latest or (run.created_at, run.run_id) > (
            latest[rubric].created_at,
            latest[rubric].run_id,
        ):
            latest[rubric] = run
    return latest


def _latest_run_families(latest: Mapping[str, RunRecord]) -> list[Family]:
    """The gauges of each rubric's latest run: pass rates overall, per criterion and category, size,
    undecided items, p95 item time."""
    pass_rate = Family("tracejudge_pass_rate", "gauge", "Pass rate of the latest run of each rubric.")
    crit_rate = Family("tracejudge_criterion_pass_rate", "gauge", "Latest run: pass rate per criterion.")
    cat_rate = Family("tracejudge_category_pass_rate", "gauge", "Latest run: pass rate per category.")
    items = Family("tracejudge_items", "gauge", "Latest run: items scored.")
    indet = Family("tracejudge_indeterminate", "gauge", "Latest run: items that could not be decided.")
    p95 = Family("tracejudge_item_latency_p95_seconds", "gauge", "Latest run: p95 of per-item scoring time.")
    for rubric, run in sorted(latest.items()):
        s = run.summary
        judge = run.provenance.judge_model or "none"
        if s.overall.pass_rate is not None:
            pass_rate.add(s.overall.pass_rate, rubric=rubric, judge_model=judge)
        items.add(s.overall.n, rubric=rubric)
        indet.add(s.overall.indeterminate, rubric=rubric)
        if s.overall.p95_latency_ms is not None:
            p95.add(s.overall.p95_latency_ms / 1000, rubric=rubric)
        for name, g in sorted(s.criteria.items()):
            if g.pass_rate is not None:
                crit_rate.add(g.pass_rate, rubric=rubric, criterion=name)
        for name, g in sorted(s.categories.items()):
            if g.pass_rate is not None:
                cat_rate.add(g.pass_rate, rubric=rubric, category=name)
    return [pass_rate, crit_rate, cat_rate, items, indet, p95]


def triage_families(
    by_stage_cause: Iterable[tuple[str, str, str, int]], entry_counts: Mapping[str, int]
) -> list[Family]:
    """Triage verdicts of the latest triage per ticket (by deciding stage and cause), and all entries."""
    current = Family(
        "tracejudge_triage_verdicts", "gauge", "Tickets by latest triage verdict, deciding stage and cause."
    )
    for verdict, stage, cause, n in by_stage_cause:
        current.add(n, verdict=verdict, stage=stage, cause=cause)
    total = Family("tracejudge_triage_results_total", "counter", "Triage runs kept in the store, by verdict.")
    for verdict, n in sorted(entry_counts.items()):
        total.add(n, verdict=verdict)
    return [current, total]


def calibration_families(reports: Iterable[CalibrationReport]) -> list[Family]:
    """The latest calibration per rubric and judge model."""
    kappa = Family("tracejudge_calibration_kappa", "gauge", "Cohen's kappa of the judge against labels.")
    low = Family("tracejudge_calibration_kappa_ci_low", "gauge", "Lower end of kappa's 95% interval.")
    high = Family("tracejudge_calibration_kappa_ci_high", "gauge", "Upper end of kappa's 95% interval.")
    acc = Family("tracejudge_calibration_accuracy", "gauge", "Share of items where judge and label agree.")
    jpr = Family(
        "tracejudge_calibration_judge_pass_rate", "gauge", "Share of labelled items the judge passed."
    )
    lpr = Family("tracejudge_calibration_label_pass_rate", "gauge", "Share of labelled items people passed.")
    n = Family("tracejudge_calibration_items", "gauge", "Items the headline figures rest on.")
    for c in reports:
        labels = {"rubric": c.rubric_name, "judge_model": c.judge_model or "none"}
        if c.kappa is not None:
            kappa.add(c.kappa, **labels)
        if c.kappa_ci is not None:
            low.add(c.kappa_ci[0], **labels)
            high.add(c.kappa_ci[1], **labels)
        if c.accuracy is not None:
            acc.add(c.accuracy, **labels)
        if c.judge_pass_rate is not None:
            jpr.add(c.judge_pass_rate, **labels)
        if c.label_pass_rate is not None:
            lpr.add(c.label_pass_rate, **labels)
        n.add(c.n, **labels)
    return [kappa, low, high, acc, jpr, lpr, n]


def sweep_families(summary: SweepSummary | None) -> list[Family]:
    """The latest sweep: flagged traces per document version used and version in effect."""
    flagged = Family(
        "tracejudge_sweep_flagged_traces",
        "gauge",
        "Traces of the latest sweep whose answer rests on a document version not in effect at the task time.",
    )
    arriving = Family(
        "tracejudge_sweep_still_arriving_traces",
        "gauge",
        "Traces of the latest sweep not judged: they may still have been arriving (their answer a draft).",
    )
    if summary is not None:
        for c in summary.by_version:
            flagged.add(c.flagged, doc_id=c.doc_id, version_used=c.used, in_effect=c.in_effect or "several")
        # Not counted by the tracejudge that recorded it: no sample rather than a 0 that was never counted.
        if summary.still_arriving is not None:
            arriving.add(summary.still_arriving)
    return [flagged, arriving]


def store_metrics(store: Store, *, cache: LatencyCache | None = None) -> str:
    """Every metric, read from the store now."""
    from tracejudge.report._data import _latest_by, triage_view
    from tracejudge.sweep import latest_sweep

    cache = cache or LatencyCache()
    runs = store.list_runs()
    latencies = {r.run_id: cache.get(store, r) for r in runs}
    tv = triage_view(store.list_triage_results())
    cals: list[CalibrationReport] = []
    if hasattr(store, "list_reports"):
        for r in store.list_reports("calibration"):
            try:
                cals.append(read_record(CalibrationReport, r.payload))
            except UnreadableRecordError:
                continue
    info = Family("tracejudge_info", "gauge", "tracejudge's version.")
    info.add(1, version=__version__)
    families = [
        info,
        *scoring_families(runs, latencies),
        *triage_families(tv.by_stage_cause, tv.entry_counts),
        *calibration_families(_latest_by(cals, lambda c: (c.rubric_name, c.judge_model))),
        *sweep_families(latest_sweep(store) if hasattr(store, "list_reports") else None),
    ]
    return exposition(families)
