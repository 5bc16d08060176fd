"""What the pulling ``collect`` commands share: time options, retries, the progress bar, rendering."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

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

from tracejudge.cli import FROM_HELP, TO_HELP, App, print_json
from tracejudge.report import RunMetrics
from tracejudge.schema import RawSpan
from tracejudge.store import EncodedSpan, MetaSwap, Store

R = TypeVar("R", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])


from_option = click.option("--from", "from_", metavar="T", help=FROM_HELP)
to_option = click.option("--to", "to", metavar="T", help=TO_HELP)
limit_option = click.option(
    "--limit", type=click.IntRange(min=1), help="Fetch at most N new traces this run."
)
session_option = click.option(
    "--session",
    "session_id",
    metavar="SESSION_ID",
    default=None,
    help="Only the traces (turns) of this conversation, to triage it with its earlier turns.",
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


class _MeteredStore:
    """A store whose ``put_spans`` also reports (spans given, spans new); the rest passes through."""

    def __init__(self, store: Store, on_put: Callable[[int, int], None]) -> None:
        self._store = store
        self._on_put = on_put

    def put_spans(
        self,
        spans: Iterable[RawSpan | EncodedSpan],
        *,
        meta: Mapping[str, str] | None = None,
        swaps: Sequence[MetaSwap] = (),
    ) -> int:
        batch = spans if isinstance(spans, list) else list(spans)
        new = self._store.put_spans(batch, meta=meta, swaps=swaps)
        # Counted after the commit: spans that failed to store were not collected.
        self._on_put(len(batch), new)
        return new

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def metered_store(store: Store, on_put: Callable[[int, int], None]) -> Store:
    """``store``, calling ``on_put(given, new)`` after every committed ``put_spans``."""
    return cast(Store, _MeteredStore(store, on_put))


@contextlib.contextmanager
def collect_metrics(store: Store, *, source: str) -> Iterator[tuple[Store, RunMetrics | None]]:
    """OpenTelemetry metrics for one collect run when ``OTEL_EXPORTER_OTLP_*`` is set: the store to
    write through (new spans counted as ``tracejudge.collect.spans``) and the metrics, pushed
    periodically and once more when the block ends (None and the store itself when unset)."""
    metrics = RunMetrics.from_env()
    if metrics is None:
        yield store, None
        return
    bound = metrics

    def on_put(_given: int, new: int) -> None:
        bound.spans_collected(new, source=source)

    try:
        yield metered_store(store, on_put), metrics
    finally:
        metrics.close()


def pull_with_progress(
    app: App,
    *,
    total: int | None,
    quiet: bool,
    pull: Callable[[Callable[[str, bool], None]], R],
    metrics: RunMetrics | None = None,
    source: str = "",
) -> R:
    """Run ``pull(on_trace)`` under a progress bar on stderr (off for ``--json`` and non-terminals);
    with ``metrics``, every listed trace is counted as ``tracejudge.collect.traces``."""
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
            if metrics is not None:
                metrics.traces_listed(fetched=fetched, source=source)
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
