"""``tracejudge report``: the self-contained HTML report from the store; ``report langfuse-configs``."""

from __future__ import annotations

from pathlib import Path

import click

from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.cli._safe import escape


@click.group("report", invoke_without_command=True)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("report.html"),
    show_default=True,
    help="Where to write the HTML file.",
)
@click.option(
    "--suite",
    "suites",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A regression suite folder to include (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print what the report holds as JSON.")
@click.pass_context
@handle_errors
def report(ctx: click.Context, out: Path, suites: tuple[Path, ...], as_json: bool) -> None:
    """Write one self-contained HTML report (no network, no script; charts as inline SVG): triage
    verdicts and stage evidence, scoring pass rates over runs with judge/rubric/prompt change markers,
    judge calibration and audit, regression suites. Langfuse traces link to Langfuse when
    LANGFUSE_BASE_URL (or LANGFUSE_HOST) is set."""
    if ctx.invoked_subcommand is not None:
        return
    from tracejudge.report import write_report

    app = ctx.find_object(App)
    assert app is not None
    data = write_report(app.reader, out, suites=suites)
    for unread in data.unread_reports:
        # A report a later tracejudge stored in a layout this one cannot read: the one shown is older.
        click.echo(f"warning: {unread}", err=True)
    if data.unreadable_traces:
        click.echo(
            f"warning: {len(data.unreadable_traces)} stored trace(s) the report reads do not read back (a"
            f" damaged store), shown without their Langfuse link or prompt version:"
            f" {', '.join(data.unreadable_traces[:5])}{' …' if len(data.unreadable_traces) > 5 else ''};"
            " run `tracejudge doctor --deep` to list every one",
            err=True,
        )
    if as_json:
        print_json(
            {
                "out": str(out),
                "tickets": len(data.triage.tickets),
                "verdicts": data.triage.verdict_counts,
                "rubrics": {r.name: len(r.runs) for r in data.rubrics},
                "calibrations": len(data.calibrations),
                "audits": len(data.audits),
                "unread_reports": list(data.unread_reports),
                "unreadable_traces": list(data.unreadable_traces),
                "suites": [s.name for s in data.suites],
            }
        )
        return
    app.console.print(
        f"wrote {escape(str(out))}: {len(data.triage.tickets)} triaged ticket(s), "
        f"{sum(len(r.runs) for r in data.rubrics)} scoring run(s) over {len(data.rubrics)} rubric(s), "
        f"{len(data.calibrations)} calibration(s), {len(data.suites)} suite(s)"
    )


@report.command("langfuse-configs")
@click.option(
    "--rubric",
    "rubrics",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Rubric YAML to create configs for (repeatable); default: every rubric scored in the store.",
)
@click.option("--dry-run", is_flag=True, help="Show the configs without calling Langfuse.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def langfuse_configs(app: App, rubrics: tuple[Path, ...], dry_run: bool, as_json: bool) -> None:
    """Create Langfuse score configs for tracejudge's scores (LANGFUSE_BASE_URL, LANGFUSE_PUBLIC_KEY,
    LANGFUSE_SECRET_KEY): tracejudge.triage categorical, RUBRIC.CRITERION numeric 0-10, RUBRIC.verdict
    categorical, RUBRIC.CHECK boolean. Configs that exist are left as they are."""
    from tracejudge.report import (
        ConfigsReport,
        configs_from_rubrics,
        configs_from_store,
        create_score_configs,
    )

    if rubrics:
        from tracejudge.judge import load_rubric

        specs = configs_from_rubrics([load_rubric(p) for p in rubrics])
    else:
        specs = configs_from_store(app.reader)
    if dry_run:
        result = ConfigsReport(planned=tuple(specs))
    else:
        from tracejudge.write import LangfuseApi, LangfuseCredentials

        with LangfuseApi(LangfuseCredentials.from_env()) as api:
            result = create_score_configs(api, specs)
    if as_json:
        print_json(result)
        return
    for s in result.planned:
        state = "created" if s.name in result.created else "exists" if s.name in result.existing else ""
        if s.name in result.skipped:
            state = "skipped: " + result.skipped[s.name]
        app.console.print(f"{escape(s.name)}  {s.data_type}  {escape(state or 'planned')}")
