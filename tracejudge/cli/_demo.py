"""``tracejudge demo``: the triage job end to end on the bundled examples, offline."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from tracejudge._demo import DemoReport, find_examples, run_demo
from tracejudge.cli._app import App, handle_errors, pass_app, print_json


def _verdict(verdict: str | None, cause: str | None) -> str:
    if verdict is None:
        return "-"
    return f"{verdict} ({cause})" if cause else verdict


def render(app: App, report: DemoReport) -> None:
    table = Table("scenario", "ticket", "expected", "actual", "", "why", title="tracejudge demo: triage")
    for r in report.rows:
        mark = "[green]ok[/green]" if r.ok else "[red]MISMATCH[/red]"
        table.add_row(
            escape(r.scenario),
            escape(r.ticket or "-"),
            escape(_verdict(r.expected_verdict, r.expected_cause)),
            escape(_verdict(r.verdict, r.cause)),
            mark,
            escape(r.summary),
        )
    app.console.print(table)
    s = report.summary
    colour = "green" if report.ok else "red"
    app.console.print(
        f"[{colour}]{s.get('ok', 0)} of {s.get('n', 0)} scenarios got their expected verdict[/{colour}]"
        f"  (store: {escape(report.store)})"
    )
    if report.rows:
        first = report.rows[0]
        app.console.print(
            "explore: "
            f"tracejudge --store {escape(report.store)} traces show {first.trace_id}\n"
            f"         tracejudge --store {escape(report.store)} triage --ticket {escape(first.ticket_path)} "
            f"--manifest {escape(str(Path(report.examples) / 'manifest.jsonl'))}"
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
