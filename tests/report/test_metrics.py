"""The exposition format and the views behind it, from records."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tracejudge.report import Family, exposition, langfuse_trace_url, rubric_view, triage_view
from tracejudge.report._metrics import store_metrics
from tracejudge.report._svg import Bar, bar_chart, line_chart
from tracejudge.schema import GroupSummary, Localization, Provenance, RunRecord, RunSummary, StageResult
from tracejudge.store import SqliteStore, TriageEntry

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_label_values_are_escaped() -> None:
    f = Family("tracejudge_x", "gauge", "help")
    f.add(1, rubric='a"b\\c\nd')
    text = exposition([f])
    assert 'tracejudge_x{rubric="a\\"b\\\\c\\nd"} 1' in text
    assert text.count("\n") == 3


def _run(run_id: str, at: datetime, model: str, version: str, prate: float) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        series="s",
        created_at=at,
        provenance=Provenance(
            rubric_name="r",
            rubric_version=version,
            rubric_hash="h" + version + model,
            prompt_hash="p",
            judge_model=model,
            temperature=0.0,
            tracejudge_version="0",
        ),
        summary=RunSummary(
            overall=GroupSummary(n=10, pass_=int(prate * 10), fail=10 - int(prate * 10), pass_rate=prate)
        ),
    )


def test_markers_say_what_changed_between_runs() -> None:
    runs = [
        _run("c", T0 + timedelta(2), "m2", "2", 0.5),
        _run("a", T0, "m1", "1", 0.9),
        _run("b", T0 + timedelta(1), "m2", "1", 0.7),
    ]
    view = rubric_view("r", runs)
    assert [p.run_id for p in view.runs] == ["a", "b", "c"]
    assert view.runs[0].changes == ()
    assert view.runs[1].changes == ("judge m1 \u2192 m2",)
    assert view.runs[2].changes == ("rubric v1 \u2192 v2",)


def _entry(ticket: str, verdict: str, at: datetime, stage_status: str = "fail") -> TriageEntry:
    loc = Localization(
        ticket=ticket,
        trace_id="t-" + ticket,
        task_time=T0,
        verdict=verdict,  # type: ignore[arg-type]
        cause="filter" if verdict == "filtered" else None,
        stages=(
            StageResult(name="indexed", status="pass"),
            StageResult(name="retrieved", status=stage_status),
        ),  # type: ignore[arg-type]
    )
    return TriageEntry(
        triage_id=ticket + at.isoformat(), triaged_at=at, ticket=ticket, trace_id=loc.trace_id, result=loc
    )


def test_triage_view_counts_the_latest_per_ticket() -> None:
    entries = [
        _entry("A", "filtered", T0 + timedelta(1)),
        _entry("A", "unconfirmed", T0, "unconfirmed"),
        _entry("B", "no_fault", T0, "pass"),
    ]
    view = triage_view(entries)
    assert view.verdict_counts["filtered"] == 1
    assert view.verdict_counts["unconfirmed"] == 0
    assert view.entry_counts == {"filtered": 1, "no_fault": 1, "unconfirmed": 1}
    assert ("filtered", "retrieved", "filter", 1) in view.by_stage_cause
    assert ("no_fault", "none", "none", 1) in view.by_stage_cause
    assert view.tickets[0].earlier == 1


def test_langfuse_links_only_to_http() -> None:
    assert langfuse_trace_url("javascript:alert(1)//", "x") is None
    assert langfuse_trace_url("https://lf.example/", "a/b c") == "https://lf.example/trace/a%2Fb%20c"


def test_charts_escape_labels() -> None:
    svg = str(bar_chart([Bar("<script>x</script>", 2)], title='"><img>'))
    assert "<script>" not in svg
    assert "&lt;script&gt;" in svg
    assert "<img>" not in svg
    svg = str(line_chart({"<b>": [0.5, None, 1.0]}, ["1", "2", "3"], title="t"))
    assert "<b>" not in svg
    assert svg.count("<circle") == 2


_SAMPLE = re.compile(r"^([a-z0-9_]+)(?:\{([^}]*)\})? (\S+)$")


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample: {line!r}"
        labels = dict(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


# What issue 8 asks /metrics to carry, with the labels the dashboards group by.
REQUIRED = {
    "tracejudge_score_items_total": {"rubric", "verdict"},
    "tracejudge_criterion_verdicts_total": {"rubric", "criterion", "verdict"},
    "tracejudge_category_verdicts_total": {"rubric", "category", "verdict"},
    "tracejudge_pass_rate": {"rubric", "judge_model"},
    "tracejudge_criterion_pass_rate": {"rubric", "criterion"},
    "tracejudge_category_pass_rate": {"rubric", "category"},
    "tracejudge_indeterminate": {"rubric"},
    "tracejudge_triage_verdicts": {"verdict", "stage", "cause"},
    "tracejudge_judge_latency_seconds_bucket": {"rubric", "judge_model", "le"},
    "tracejudge_judge_tokens_total": {"rubric", "judge_model", "type"},
    "tracejudge_calibration_kappa": {"rubric", "judge_model"},
    "tracejudge_sweep_flagged_traces": {"doc_id", "version_used", "in_effect"},
}


def test_metrics_carry_what_the_issue_lists(populated: tuple[Path, dict[str, Any]]) -> None:
    db, filled = populated
    store = SqliteStore(db)
    samples = _samples(store_metrics(store))
    store.close()
    for name, labels in REQUIRED.items():
        found = [lab for n, lab, _ in samples if n == name]
        assert found, f"{name} missing"
        assert all(set(lab) == labels for lab in found), (name, found[0])
    runs = filled["runs"]
    last = runs[-1].summary

    def value(name: str, **labels: str) -> float:
        (v,) = [v for n, lab, v in samples if n == name and labels.items() <= lab.items()]
        return v

    assert value("tracejudge_indeterminate", rubric="restaurant-assistant") == last.overall.indeterminate
    (row,) = filled["sweep"].by_version
    flagged = value("tracejudge_sweep_flagged_traces", doc_id=row.doc_id, version_used=row.used)
    assert flagged == row.flagged == filled["sweep"].flagged_total
    for verdict in ("pass", "fail", "indeterminate"):
        total = sum(getattr(r.summary.overall, "pass_" if verdict == "pass" else verdict) for r in runs)
        assert value("tracejudge_score_items_total", rubric="restaurant-assistant", verdict=verdict) == total
    for criterion, group in last.criteria.items():
        assert value("tracejudge_criterion_pass_rate", criterion=criterion) == pytest.approx(group.pass_rate)
    tokens = sum(r.summary.overall.input_tokens for r in runs)
    assert (
        sum(v for n, lab, v in samples if n == "tracejudge_judge_tokens_total" and lab["type"] == "input")
        == tokens
    )
