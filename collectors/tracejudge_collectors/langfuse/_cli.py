"""``tracejudge collect langfuse``: parse, pull, render."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from tracejudge._errors import InputError
from tracejudge.cli import App, handle_errors, pass_app, print_json
from tracejudge.write import LangfuseApi, LangfuseCredentials
from tracejudge_collectors.langfuse._pull import PullOptions, pull_langfuse, pull_summary

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(value: str | None, *, option: str, now: datetime | None = None) -> datetime | None:
    """An ISO 8601 date or time (UTC unless it says otherwise), or a span back from now:
    ``30m``, ``24h``, ``7d``."""
    if value is None:
        return None
    text = value.strip()
    match = _RELATIVE.match(text)
    if match:
        delta = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        return (now or datetime.now(UTC)) - delta
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"{option} {value!r} is not a time",
            hint="give an ISO 8601 time such as 2026-03-01 or 2026-03-01T09:30:00Z,"
            " or a span back from now: 24h, 7d",
        ) from None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


@click.command("langfuse")
@click.option(
    "--from", "from_", metavar="T", help="Traces started at or after T (ISO 8601, or 24h / 7d back)."
)
@click.option("--to", "to", metavar="T", help="Traces started before T.")
@click.option("--name", metavar="N", help="Only traces with this name.")
@click.option(
    "--tag", "tags", multiple=True, metavar="T", help="Only traces with this tag (repeat: all must match)."
)
@click.option(
    "--environment", "environments", multiple=True, metavar="E", help="Only this environment (repeat: any)."
)
@click.option("--limit", type=click.IntRange(min=1), help="Fetch at most N new traces this run.")
@click.option(
    "--concurrency", type=click.IntRange(1, 32), default=4, show_default=True, help="Traces fetched at once."
)
@click.option(
    "--retries",
    type=click.IntRange(0, 20),
    default=5,
    show_default=True,
    envvar="TRACEJUDGE_LANGFUSE_RETRIES",
    help="Retries per request on rate limits, server errors and dropped connections.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the pull report as JSON.")
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
    with LangfuseApi(credentials, max_retries=retries, max_connections=concurrency + 2) as api, progress:
        task = progress.add_task("pull", total=limit, fetched=0)
        counts = {"fetched": 0}

        def on_trace(_trace_id: str, fetched: bool) -> None:
            counts["fetched"] += int(fetched)
            progress.update(task, advance=1, fetched=counts["fetched"])

        report = pull_langfuse(store, api, options, on_trace=on_trace)
    if as_json:
        print_json(report)
        return
    for line in pull_summary(report):
        app.console.print(line, markup=False)
