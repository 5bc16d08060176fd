"""``tracejudge doctor``: what this setup can reach, each with the exact fix."""

from __future__ import annotations

import click
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tracejudge._doctor import DoctorReport, DoctorSettings, run_doctor
from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.cli._safe import escape

_MARK = {
    "ok": "[green]ok[/green]",
    "fail": "[red]FAIL[/red]",
    "not_configured": "[dim]not configured[/dim]",
    "skipped": "[dim]skipped[/dim]",
}


def render(app: App, report: DoctorReport) -> None:
    table = Table(
        title=f"tracejudge {report.version} doctor",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
    )
    for name in ("check", "status", "target", "found"):
        table.add_column(name, overflow="fold")
    for c in report.checks:
        table.add_row(escape(c.name), _MARK[c.status], escape(c.target or "-"), escape(c.detail))
    app.console.print(table)
    for c in report.checks:
        if c.status == "fail":
            app.console.print(f"[red]{escape(c.name)}[/red]: {escape(c.fix)}", soft_wrap=True)
    app.console.print(
        "[green]everything configured works[/green]" if report.ok else "[red]fix the above[/red]"
    )


@click.command("doctor")
@click.option("--judge", "call_judge", is_flag=True, help="Also make a one-token call to the judge endpoint.")
@click.option(
    "--judge-model",
    envvar="TRACEJUDGE_JUDGE_MODEL",
    help="Model for the --judge call (env TRACEJUDGE_JUDGE_MODEL).",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0.1), default=5.0, show_default=True, help="Seconds per call."
)
@click.option(
    "--deep",
    is_flag=True,
    help="Also read every stored trace back (and check a SQLite file's pages): lists what a damaged "
    "store has lost. Reads the whole store.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def doctor(
    app: App, call_judge: bool, judge_model: str | None, timeout: float, deep: bool, as_json: bool
) -> None:
    """Check what this setup can reach: the store (and its schema), the receiver's address, Langfuse
    (keys, API generation, project), Phoenix, the judge (a one-token call with --judge) and the OTLP
    metrics endpoint. With --deep, every stored trace is read back too. Each problem comes with its fix;
    no secret is printed. Exit 1 when something configured does not work."""
    settings = DoctorSettings.from_env(app.store_url, judge_model=judge_model, timeout=timeout)
    with Progress(
        TextColumn("reading the store back"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=app.err,
        transient=True,
        disable=not (deep and app.err.is_terminal),  # only --deep reads the store through
    ) as progress:
        bar = progress.add_task("traces", total=None)
        report = run_doctor(
            settings,
            judge=call_judge,
            deep=deep,
            traces_read=lambda done, total: progress.update(bar, completed=done, total=total),
        )
    if as_json:
        print_json(report.model_dump(mode="json") | {"ok": report.ok})
    else:
        render(app, report)
    raise SystemExit(0 if report.ok else 1)
