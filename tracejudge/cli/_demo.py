"""``tracejudge demo``: the triage job end to end on the bundled examples, offline."""

from __future__ import annotations

from pathlib import Path

import click
from rich import box
from rich.markup import escape
from rich.table import Table

from tracejudge._demo import DemoReport, find_examples, run_demo
from tracejudge.cli._app import App, handle_errors, pass_app, print_json


def _verdict(verdict: str | None, cause: str | None) -> str:
    if verdict is None:
        return "-"
    return f"{verdict} ({cause})" if cause else verdict


def _rel(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def render(app: App, report: DemoReport) -> None:
    # Compact enough for an 80-column terminal without cutting a scenario name or verdict.
    table = Table(title="tracejudge demo: triage", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    for name in ("scenario", "ticket", "expected", "actual", "result"):
        table.add_column(name, overflow="fold")
    for r in report.rows:
        table.add_row(
            escape(r.scenario),
            escape(r.ticket or "-"),
            escape(_verdict(r.expected_verdict, r.expected_cause)),
            escape(_verdict(r.verdict, r.cause)),
            "[green]ok[/green]" if r.ok else "[red]WRONG[/red]",
        )
    app.console.print(table)
    for r in report.rows:
        app.console.print(f"[bold]{escape(r.ticket or r.scenario)}[/bold] {escape(r.summary)}")
    s = report.summary
    colour = "green" if report.ok else "red"
    app.console.print(
        f"\n[{colour}]{s.get('ok', 0)} of {s.get('n', 0)} scenarios got their expected verdict[/{colour}]"
    )
    if report.rows:
        # Point at a fault rather than the healthy run: that is the trace worth opening.
        first = next((r for r in report.rows if r.verdict not in (None, "no_fault")), report.rows[0])
        ticket = escape(_rel(first.ticket_path))
        store = escape(report.store)
        manifest = escape(_rel(str(Path(report.examples) / "manifest.jsonl")))
        app.console.print(
            "explore:\n"
            f"  tracejudge --store {store} traces show {first.trace_id}\n"
            f"  tracejudge --store {store} triage --ticket {ticket} --manifest {manifest}",
            soft_wrap=True,
        )


@click.command("demo")
@click.option(
    "--examples",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The example folder (default: examples/procurement of the source checkout).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def demo(app: App, examples: Path | None, as_json: bool) -> None:
    """Run the bundled procurement agent through every fault scenario and triage each ticket.

    Offline: starts the OTLP receiver and a scripted OpenAI-compatible model on loopback, traces
    the agent into the store, then localizes every ticket. Exit 0 when every scenario gets its
    expected verdict, 1 otherwise.
    """
    folder = find_examples(examples)
    report = run_demo(app.store_url, app.store, folder, progress=lambda m: app.err.print(escape(m)))
    if as_json:
        print_json(report.model_dump(mode="json") | {"ok": report.ok})
    else:
        render(app, report)
    raise SystemExit(0 if report.ok else 1)
