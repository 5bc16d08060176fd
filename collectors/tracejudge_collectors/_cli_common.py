"""What the pulling ``collect`` commands share: time options, retries, the progress bar, rendering."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import click
from pydantic import BaseModel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from tracejudge._errors import InputError
from tracejudge.cli import App, print_json

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

R = TypeVar("R", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])


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


from_option = click.option(
    "--from", "from_", metavar="T", help="Traces started at or after T (ISO 8601, or 24h / 7d back)."
)
to_option = click.option("--to", "to", metavar="T", help="Traces started before T.")
limit_option = click.option(
    "--limit", type=click.IntRange(min=1), help="Fetch at most N new traces this run."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the pull report as JSON.")


def retries_option(envvar: str) -> Callable[[F], F]:
    """``--retries`` (0-20, default 5), also read from ``envvar``."""
    return click.option(
        "--retries",
        type=click.IntRange(0, 20),
        default=5,
        show_default=True,
        envvar=envvar,
        help="Retries per request on rate limits, server errors and dropped connections.",
    )


def pull_with_progress(
    app: App, *, total: int | None, quiet: bool, pull: Callable[[Callable[[str, bool], None]], R]
) -> R:
    """Run ``pull(on_trace)`` under a progress bar on stderr (off for ``--json`` and non-terminals)."""
    progress = Progress(
        SpinnerColumn(),
        TextColumn("pulling traces"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[fetched]} new"),
        TimeElapsedColumn(),
        console=app.err,
        transient=True,
        disable=quiet or not app.err.is_terminal,
    )
    with progress:
        task = progress.add_task("pull", total=total, fetched=0)
        counts = {"fetched": 0}

        def on_trace(_trace_id: str, fetched: bool) -> None:
            counts["fetched"] += int(fetched)
            # With a total (--limit) the bar counts fetched traces: stored ones would overrun it.
            advance = 1 if total is None or fetched else 0
            progress.update(task, advance=advance, fetched=counts["fetched"])

        return pull(on_trace)


def render_pull(app: App, report: R, summary: Callable[[R], Sequence[str]], *, as_json: bool) -> None:
    """The pull report as JSON, or its summary lines for people."""
    if as_json:
        print_json(report)
        return
    for line in summary(report):
        app.console.print(line, markup=False)
