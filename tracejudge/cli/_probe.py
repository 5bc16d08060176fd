"""``tracejudge probe``: counterfactual sanity checks of checks and judge on one case."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from tracejudge.audit import load_case, probe_case
from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.cli._safe import escape
from tracejudge.judge import load_rubric


@click.command("probe")
@click.option("--rubric", "rubric_path", required=True, type=click.Path(path_type=Path), help="Rubric YAML.")
@click.option("--case", "case_path", required=True, type=click.Path(path_type=Path), help="Case YAML.")
@click.option("--strict", is_flag=True, help="Exit 1 when any probe does not behave as it must.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def probe(app: App, rubric_path: Path, case_path: Path, strict: bool, as_json: bool) -> None:
    """Change an amount, swap a citation, claim "paused" over a submission, reword: does the verdict
    move as it must?"""
    report = probe_case(load_rubric(rubric_path), load_case(case_path), app.store)
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        app.console.print(
            f"[bold]probes of {escape(report.case_id)}[/bold]  rubric {escape(report.rubric_name)}"
            f" v{escape(report.rubric_version)}  as written: {report.base_verdict}"
        )
        t = Table("probe", "must", "change", "verdict", "result", "detail")
        colour = {"expected": "green", "unexpected": "red", "skipped": "yellow"}
        for p in report.probes:
            t.add_row(
                p.name,
                p.expectation,
                escape(p.change[:60]),
                p.verdict or "-",
                f"[{colour[p.status]}]{p.status}[/]",
                escape((p.detail or p.reason)[:100]),
            )
        app.console.print(t)
        app.console.print(
            f"{report.expected} as expected, {report.unexpected} not; report {report.report_id}"
        )
    if strict and report.unexpected:
        raise SystemExit(1)
