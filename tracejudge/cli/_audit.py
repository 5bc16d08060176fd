"""``tracejudge audit``: what to distrust in a scoring run."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import click
from rich.table import Table

from tracejudge._errors import InputError
from tracejudge.audit import audit_run, load_pairs, pair_tasks
from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.cli._safe import escape
from tracejudge.judge import load_rubric
from tracejudge.runs import ScoreOptions, score_run_async
from tracejudge.schema import AuditReport, Drift, Mismatch, Stability


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def render_audit(app: App, r: AuditReport) -> None:
    """The audit for a person: one part per measurement, each saying what to do when it is missing."""
    c = app.console
    c.print(
        f"[bold]audit of run {r.run_id}[/bold]  rubric {escape(r.rubric_name)} v{escape(r.rubric_version)}"
        f"  judge {escape(r.judge_model or '-')}  items {r.items}  report {r.report_id}"
    )
    c.print(
        f"reasoning vs score: {len(r.mismatches)} contradictions in {r.replies_read} reasonings"
        " (cue words against the score's direction; read them)"
    )
    if r.mismatches:
        c.print(_mismatch_table(r.mismatches[:20]))
    c.print(_stability_line(r.stability))
    if r.position is not None:
        p = r.position
        c.print(
            f"position: {p.consistent}/{p.pairs} pairs consistent ({_num(p.consistency_rate, '.0%')}),"
            f" first-shown answer picked {_num(p.first_position_rate, '.0%')} of the time"
        )
    c.print(_drift_line(r.drift))
    if r.still_arriving:
        c.print(
            f"not scored: {len(r.still_arriving)} item(s) whose trace may still have been arriving (their"
            " answer maybe a draft): "
            + escape(", ".join(x[:24] for x in r.still_arriving[:10]))
            + "; score them again once they have arrived (a shared run: the same"
            " `tracejudge score --run NAME` again; else `tracejudge score --trace ID` for each),"
            " then audit again"
        )


def _mismatch_table(mismatches: Sequence[Mismatch]) -> Table:
    t = Table("trace", "criterion", "score", "tone", "disagree", "cues", "reasoning")
    for m in mismatches:
        cues = ", ".join([*m.negative_cues, *(f"+{p}" for p in m.positive_cues)])
        t.add_row(
            escape(m.trace_id[:24]),
            escape(m.criterion),
            f"{m.score:g}",
            f"{m.sentiment:+.2f}",
            f"{m.disagreement:.2f}",
            escape(cues[:40]),
            escape(m.reasoning[:160]),
        )
    return t


def _stability_line(s: Stability | None) -> str:
    if s is None:
        return "stability: the run has no repeats (score with --repeat 3 to measure it)"
    return (
        f"stability over {s.repeats} repeats: mean spread {_num(s.mean_spread)},"
        f" max {_num(s.max_spread)},"
        f" flip rate {_num(s.flip_rate, '.0%')}; straddling the threshold: "
        + (escape(", ".join(x[:24] for x in s.straddling[:10])) or "none")
    )


def _drift_line(d: Drift | None) -> str:
    if d is None:
        return "drift: no earlier run of this rubric"
    ci = f" [{d.change_ci[0]:+.2f}, {d.change_ci[1]:+.2f}]" if d.change_ci else ""
    return (
        f"drift vs {d.previous_run_id}: pass rate {_num(d.previous_pass_rate, '.0%')} ->"
        f" {_num(d.pass_rate, '.0%')} ({_num(d.change, '+.2f')}{ci}); {escape(d.reading)}"
    )


@click.command("audit")
@click.argument("run_id", required=False)
@click.option(
    "--pairs", type=click.Path(path_type=Path), default=None, help="Pairs JSONL: judge each both ways."
)
@click.option(
    "--rubric", "rubric_path", type=click.Path(path_type=Path), default=None, help="Pairwise rubric."
)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Mismatches kept.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def audit(
    app: App,
    run_id: str | None,
    pairs: Path | None,
    rubric_path: Path | None,
    limit: int,
    as_json: bool,
) -> None:
    """Audit a scoring run (default: the newest): reasoning vs score, stability, position, drift."""
    if pairs is not None:
        if rubric_path is None or run_id is not None:
            raise InputError(
                "--pairs needs --rubric and no RUN_ID", hint="tracejudge audit --pairs P --rubric R"
            )
        rubric = load_rubric(rubric_path)
        tasks = pair_tasks(load_pairs(pairs))
        run = asyncio.run(
            score_run_async(rubric, app.store, tasks, options=ScoreOptions(selection={"pairs": str(pairs)}))
        )
        run_id = run.run_id
    report = audit_run(app.store, run_id, mismatch_limit=limit)
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        render_audit(app, report)
