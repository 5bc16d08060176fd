"""The report's views from records: where a trace came from, merged mismatches, change markers, the
gate reading of a calibration, and the line chart's legend."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from tracejudge.report import rubric_view, triage_view
from tracejudge.report._data import gate_reading, mismatch_rows, trace_origin
from tracejudge.report._svg import line_chart
from tracejudge.schema import (
    Agreement,
    CalibrationReport,
    GroupSummary,
    Localization,
    Mismatch,
    Provenance,
    RawSpan,
    RunRecord,
    RunSummary,
    StageResult,
)
from tracejudge.store import TriageEntry

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _span(span_id: str, attrs: dict[str, object], *, parent: str | None = None) -> RawSpan:
    return RawSpan(
        trace_id="abcdef0123",
        span_id=span_id,
        parent_span_id=parent,
        name=span_id,
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        attributes=attrs,
        source="langfuse",
    )


def test_langfuse_trace_id_is_read_from_the_root_wherever_it_sits() -> None:
    # The store lowercases trace ids; Langfuse's own id (on the root span only) keeps its case.
    child = _span("c1", {"langfuse.observation.id": "c1"}, parent="r1")
    root = _span("r1", {"langfuse.trace.id": "AbCdEf0123"})
    assert trace_origin([child, root]) == ("langfuse", "AbCdEf0123")
    assert trace_origin([child]) == ("langfuse", "abcdef0123")
    assert trace_origin([root.model_copy(update={"source": "otlp", "attributes": {}})]) == ("otlp", None)
    assert trace_origin([]) == (None, None)


def _mismatch(trace: str, criterion: str, repeat: int, reasoning: str) -> Mismatch:
    return Mismatch(
        trace_id=trace,
        criterion=criterion,
        repeat=repeat,
        score=8.0,
        score_direction=0.6,
        sentiment=-1.0,
        disagreement=1.6,
        negative_cues=("wrong",),
        positive_cues=("correct",),
        reasoning=reasoning,
    )


def test_mismatches_of_repeated_calls_are_one_row() -> None:
    rows = mismatch_rows(
        [
            _mismatch("t1", "accuracy", 0, "wrong total"),
            _mismatch("t1", "accuracy", 2, "wrong total"),
            _mismatch("t1", "accuracy", 1, "wrong total"),
            _mismatch("t1", "accuracy", 1, "a different complaint: wrong"),
            _mismatch("t2", "accuracy", 0, "wrong total"),
        ]
    )
    assert [(r.trace_id, r.repeats, r.reasoning) for r in rows] == [
        ("t1", (0, 1, 2), "wrong total"),
        ("t1", (1,), "a different complaint: wrong"),
        ("t2", (0,), "wrong total"),
    ]
    assert rows[0].cues == ("wrong", "correct")


def _run(run_id: str, at: datetime, repeat: int) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        series="s",
        created_at=at,
        provenance=Provenance(
            rubric_name="r",
            rubric_version="1",
            rubric_hash="h",
            prompt_hash="p",
            judge_model="m",
            temperature=0.0,
            repeat=repeat,
            tracejudge_version="0",
        ),
        summary=RunSummary(overall=GroupSummary(n=4, pass_=2, fail=2, pass_rate=0.5)),
    )


def test_a_change_in_judge_calls_per_item_is_marked() -> None:
    view = rubric_view(
        "r", [_run("a", T0, 1), _run("b", T0 + timedelta(1), 3), _run("c", T0 + timedelta(2), 3)]
    )
    assert [p.changes for p in view.runs] == [(), ("judge calls per item 1 \u2192 3",), ()]


def _calibration(holdout: Agreement | None) -> CalibrationReport:
    return CalibrationReport(
        calibration_id="cal-1",
        created_at=T0,
        rubric_name="r",
        rubric_version="1",
        rubric_hash="h",
        prompt_hash="p",
        judge_model="m",
        n=holdout.n if holdout else 20,
        kappa=holdout.kappa if holdout else 0.9,
        evaluated_on="holdout" if holdout else "all",
        holdout=holdout,
    )


def test_gate_reading_says_why_a_judge_cannot_gate_yet() -> None:
    assert "no items held out" in (gate_reading(_calibration(None)) or "")
    assert "only 6 held-out items" in (gate_reading(_calibration(Agreement(n=6, kappa=0.9))) or "")
    assert "under 0.6" in (gate_reading(_calibration(Agreement(n=30, kappa=0.4))) or "")
    assert "under 0.6" in (gate_reading(_calibration(Agreement(n=30, kappa=None))) or "")
    assert gate_reading(_calibration(Agreement(n=30, kappa=0.75))) is None


def test_triage_table_follows_the_pipeline_order() -> None:
    def entry(ticket: str, verdict: str, stage: str) -> TriageEntry:
        status = "pass" if verdict == "no_fault" else "fail"
        loc = Localization(
            ticket=ticket,
            trace_id="t-" + ticket,
            task_time=T0,
            verdict=verdict,  # type: ignore[arg-type]
            stages=(StageResult(name=stage, status=status),),  # type: ignore[arg-type]
        )
        return TriageEntry(triage_id=ticket, triaged_at=T0, ticket=ticket, trace_id=loc.trace_id, result=loc)

    view = triage_view(
        [
            entry("A", "no_fault", "indexed"),
            entry("B", "ignored_by_model", "used_by_model"),
            entry("C", "not_indexed", "indexed"),
            entry("D", "basis_not_in_effect", "indexed"),
        ]
    )
    assert [v for v, *_ in view.by_stage_cause] == [
        "not_indexed",
        "ignored_by_model",
        "basis_not_in_effect",
        "no_fault",
    ]


def test_legend_gives_each_lines_latest_value_and_the_headline_is_drawn_on_top() -> None:
    svg = str(
        line_chart(
            {"overall": [0.5, 0.25], "accuracy": [0.75, None], "tone": [None, None]},
            ["1", "2"],
            title="t",
            strong="overall",
        )
    )
    texts = re.findall(r'class="lbl">([^<]*)<', svg)
    assert texts == ["accuracy 75%", "tone -", "overall 25%"]
    lines = re.findall(r'<polyline points="[^"]*" fill="none" stroke="([^"]*)" stroke-width="([^"]*)"', svg)
    # accuracy has one point (no line), tone none; overall is the last drawn, dark and thick.
    assert lines == [("#1d2530", "3.5")]
