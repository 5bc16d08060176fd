"""``tracejudge collect phoenix``: parse, pull, render."""

from __future__ import annotations

import os

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from tracejudge.cli import App, handle_errors, pass_app, print_json
from tracejudge.write import PhoenixApi, PhoenixCredentials
from tracejudge_collectors.langfuse import parse_when
from tracejudge_collectors.phoenix._pull import PullOptions, pull_phoenix, pull_summary


@click.command("phoenix")
@click.option(
    "--project",
    metavar="P",
    default=None,
    help="Phoenix project name or id [default: $PHOENIX_PROJECT_NAME, else 'default'].",
)
@click.option(
    "--from", "from_", metavar="T", help="Traces started at or after T (ISO 8601, or 24h / 7d back)."
)
@click.option("--to", "to", metavar="T", help="Traces started before T.")
@click.option("--limit", type=click.IntRange(min=1), help="Fetch at most N new traces this run.")
@click.option(
    "--retries",
    type=click.IntRange(0, 20),
    default=5,
    show_default=True,
    envvar="TRACEJUDGE_PHOENIX_RETRIES",
    help="Retries per request on rate limits, server errors and dropped connections.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the pull report as JSON.")
@pass_app
@handle_errors
def phoenix_command(
    app: App,
    project: str | None,
    from_: str | None,
    to: str | None,
    limit: int | None,
    retries: int,
    as_json: bool,
) -> None:
    """Pull traces from a Phoenix project into the store (incremental; resumes after a crash).

    Reads PHOENIX_COLLECTOR_ENDPOINT (the server's base URL, e.g. http://127.0.0.1:6006) and
    PHOENIX_API_KEY when the server has auth enabled.
    """
    options = PullOptions(
        project=project or os.environ.get("PHOENIX_PROJECT_NAME") or "default",
        from_time=parse_when(from_, option="--from"),
        to_time=parse_when(to, option="--to"),
        limit=limit,
    )
    credentials = PhoenixCredentials.from_env()
    store = app.store
    progress = Progress(
        SpinnerColumn(),
        TextColumn("pulling traces"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[fetched]} new"),
        TimeElapsedColumn(),
        console=app.err,
        transient=True,
        disable=as_json or not app.err.is_terminal,
    )
    with PhoenixApi(credentials, max_retries=retries) as api, progress:
        task = progress.add_task("pull", total=limit, fetched=0)
        counts = {"fetched": 0}

        def on_trace(_trace_id: str, fetched: bool) -> None:
            counts["fetched"] += int(fetched)
            progress.update(task, advance=1, fetched=counts["fetched"])

        report = pull_phoenix(store, api, options, on_trace=on_trace)
    if as_json:
        print_json(report)
        return
    for line in pull_summary(report):
        app.console.print(line, markup=False)
