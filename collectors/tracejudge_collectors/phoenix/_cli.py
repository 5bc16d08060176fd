"""``tracejudge collect phoenix``: parse, pull, render."""

from __future__ import annotations

import os

import click

from tracejudge.cli import App, handle_errors, parse_when, pass_app
from tracejudge.write import PhoenixApi, PhoenixCredentials
from tracejudge_collectors._cli_common import (
    collect_metrics,
    from_option,
    json_option,
    limit_option,
    pull_with_progress,
    render_pull,
    retries_option,
    session_option,
    to_option,
)
from tracejudge_collectors.phoenix._pull import PullOptions, pull_phoenix, pull_summary


@click.command("phoenix")
@click.option(
    "--project",
    metavar="P",
    default=None,
    help="Phoenix project name or id [default: $PHOENIX_PROJECT_NAME, else 'default'].",
)
@from_option
@to_option
@limit_option
@session_option
@click.option(
    "--concurrency",
    type=click.IntRange(1, 32),
    default=4,
    show_default=True,
    help="Batches of traces fetched at once, beside the listing.",
)
@retries_option("TRACEJUDGE_PHOENIX_RETRIES")
@json_option
@pass_app
@handle_errors
def phoenix_command(
    app: App,
    project: str | None,
    from_: str | None,
    to: str | None,
    limit: int | None,
    session_id: str | None,
    concurrency: int,
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
        session_id=session_id,
        concurrency=concurrency,
    )
    credentials = PhoenixCredentials.from_env()
    with (
        collect_metrics(app.store, source="phoenix") as (store, metrics),
        PhoenixApi(credentials, max_retries=retries) as api,
    ):
        report = pull_with_progress(
            app,
            total=limit,
            quiet=as_json,
            pull=lambda on_trace: pull_phoenix(store, api, options, on_trace=on_trace),
            metrics=metrics,
            source="phoenix",
        )
    render_pull(app, report, pull_summary, as_json=as_json)
