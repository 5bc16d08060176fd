"""``tracejudge collect langfuse``: parse, pull, render."""

from __future__ import annotations

import click

from tracejudge.cli import App, handle_errors, parse_when, pass_app
from tracejudge.write import LangfuseApi, LangfuseCredentials
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
from tracejudge_collectors.langfuse._pull import (
    PullOptions,
    detect,
    pull_langfuse,
    pull_summary,
    refresh_scores,
)

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
@session_option
@click.option(
    "--feedback",
    metavar="SCORE_NAME",
    help="Then refresh the scores of this name on every stored trace (feedback given after its pull).",
)
@click.option(
    "--queue",
    metavar="QUEUE_ID",
    help="Then refresh the scores made in this annotation queue on every stored trace.",
)
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
    session_id: str | None,
    feedback: str | None,
    queue: str | None,
    concurrency: int,
    retries: int,
    as_json: bool,
) -> None:
    """Pull traces from Langfuse's public API into the store (incremental; resumes after a crash).

    Reads LANGFUSE_BASE_URL (or LANGFUSE_HOST), LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY.
    Works with the v4 observations API and with the legacy traces API, whichever the server has.
    A trace is fetched once, with the scores it had then: --feedback / --queue bring in the scores
    given since (for `regress build --langfuse-feedback` / `--langfuse-queue`).
    """
    options = PullOptions(
        from_time=parse_when(from_, option="--from"),
        to_time=parse_when(to, option="--to"),
        name=name,
        tags=tags,
        environments=environments,
        limit=limit,
        session_id=session_id,
        concurrency=concurrency,
    )
    credentials = LangfuseCredentials.from_env()
    with (
        collect_metrics(app.store, source="langfuse") as (store, metrics),
        LangfuseApi(credentials, max_retries=retries, max_connections=concurrency + 2) as api,
    ):
        detection = detect(api)
        report = pull_with_progress(
            app,
            total=limit,
            quiet=as_json,
            pull=lambda on_trace: pull_langfuse(store, api, options, on_trace=on_trace, detection=detection),
            metrics=metrics,
            source="langfuse",
        )
        if feedback or queue:
            refreshed = refresh_scores(store, api, name=feedback, queue=queue, detection=detection)
            report = report.model_copy(update={"scores": refreshed})
    render_pull(app, report, pull_summary, as_json=as_json)
