"""``tracejudge collect langfuse``: parse, pull, render."""

from __future__ import annotations

import click

from tracejudge.cli import App, handle_errors, pass_app
from tracejudge.write import LangfuseApi, LangfuseCredentials
from tracejudge_collectors._cli_common import (
    from_option,
    json_option,
    limit_option,
    parse_when,
    pull_with_progress,
    render_pull,
    retries_option,
    to_option,
)
from tracejudge_collectors.langfuse._pull import PullOptions, pull_langfuse, pull_summary

__all__ = ["langfuse_command", "parse_when"]


@click.command("langfuse")
@from_option
@to_option
@click.option("--name", metavar="N", help="Only traces with this name.")
@click.option(
    "--tag", "tags", multiple=True, metavar="T", help="Only traces with this tag (repeat: all must match)."
)
@click.option(
    "--environment", "environments", multiple=True, metavar="E", help="Only this environment (repeat: any)."
)
@limit_option
@click.option(
    "--concurrency", type=click.IntRange(1, 32), default=4, show_default=True, help="Traces fetched at once."
)
@retries_option("TRACEJUDGE_LANGFUSE_RETRIES")
@json_option
@pass_app
@handle_errors
def langfuse_command(
    app: App,
    from_: str | None,
    to: str | None,
    name: str | None,
    tags: tuple[str, ...],
    environments: tuple[str, ...],
    limit: int | None,
    concurrency: int,
    retries: int,
    as_json: bool,
) -> None:
    """Pull traces from Langfuse's public API into the store (incremental; resumes after a crash).

    Reads LANGFUSE_BASE_URL (or LANGFUSE_HOST), LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY.
    Works with the v4 observations API and with the legacy traces API, whichever the server has.
    """
    options = PullOptions(
        from_time=parse_when(from_, option="--from"),
        to_time=parse_when(to, option="--to"),
        name=name,
        tags=tags,
        environments=environments,
        limit=limit,
        concurrency=concurrency,
    )
    credentials = LangfuseCredentials.from_env()
    store = app.store
    with LangfuseApi(credentials, max_retries=retries, max_connections=concurrency + 2) as api:
        report = pull_with_progress(
            app,
            total=limit,
            quiet=as_json,
            pull=lambda on_trace: pull_langfuse(store, api, options, on_trace=on_trace),
        )
    render_pull(app, report, pull_summary, as_json=as_json)
