"""``tracejudge collect otlp`` and ``tracejudge collect file``: parse, call one function, render."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click
from rich.progress import Progress
from rich.table import Table

from tracejudge import redact
from tracejudge.cli import App, escape, handle_errors, pass_app, print_json
from tracejudge.report import RunMetrics
from tracejudge_collectors._cli_common import metered_store
from tracejudge_collectors.otel._files import FileImport, ImportSummary, expand_paths, import_files
from tracejudge_collectors.otel._metered import serve_metered
from tracejudge_collectors.otel._otlp import (
    DEFAULT_MAX_DECODED_BYTES,
    DEFAULT_MAX_NAME_CHARS,
    DEFAULT_MAX_SPANS,
    DecodeLimits,
)
from tracejudge_collectors.otel._receiver import (
    DEFAULT_LISTEN,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_READ_TIMEOUT,
    serve,
)

__all__ = ["file_command", "otlp_command"]


@click.command("otlp")
@click.option(
    "--listen",
    default=DEFAULT_LISTEN,
    envvar="TRACEJUDGE_OTLP_LISTEN",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to listen on (env TRACEJUDGE_OTLP_LISTEN); port 0 picks a free port.",
)
@click.option(
    "--token",
    default=None,
    envvar="TRACEJUDGE_OTLP_TOKEN",
    metavar="TOKEN",
    help="Require `Authorization: Bearer TOKEN` (env TRACEJUDGE_OTLP_TOKEN); required off loopback.",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    help="Largest request body after decompression (larger gets 413).",
)
@click.option(
    "--max-spans",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_SPANS,
    envvar="TRACEJUDGE_OTLP_MAX_SPANS",
    show_default=True,
    help="Most spans (or log records) in one request (more gets 413; env TRACEJUDGE_OTLP_MAX_SPANS).",
)
@click.option(
    "--max-decoded-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_DECODED_BYTES,
    envvar="TRACEJUDGE_OTLP_MAX_DECODED_BYTES",
    show_default=True,
    help="Largest estimated memory to decode one OTLP/JSON request (more gets 413; "
    "env TRACEJUDGE_OTLP_MAX_DECODED_BYTES).",
)
@click.option(
    "--max-name-chars",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_NAME_CHARS,
    envvar="TRACEJUDGE_OTLP_MAX_NAME_CHARS",
    show_default=True,
    help="Longest span/event/scope name or attribute key (longer gets 400; "
    "env TRACEJUDGE_OTLP_MAX_NAME_CHARS).",
)
@click.option(
    "--read-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_READ_TIMEOUT,
    envvar="TRACEJUDGE_OTLP_READ_TIMEOUT",
    show_default=True,
    help="Seconds a request's headers, and its body, may take to arrive or pause "
    "(slower gets 408 or a closed connection; env TRACEJUDGE_OTLP_READ_TIMEOUT).",
)
@pass_app
@handle_errors
def otlp_command(
    app: App,
    listen: str,
    token: str | None,
    max_body_bytes: int,
    max_spans: int,
    max_decoded_bytes: int,
    max_name_chars: int,
    read_timeout: float,
) -> None:
    """Receive traces over OTLP/HTTP (protobuf or JSON, optionally gzip) into the store.

    Senders point their OTLP exporter at http://HOST:PORT/v1/traces (also accepted:
    /api/public/otel/v1/traces). Prints `listening on http://HOST:PORT` once ready; stop with Ctrl-C
    (then it says on stderr how many spans it took and how many were new in the store).
    With OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT set, pushes request and span counts there while it runs.
    """

    def ready(url: str) -> None:
        sys.stdout.write(f"listening on {url}\n")
        sys.stdout.flush()

    limits = DecodeLimits(
        max_spans=max_spans, max_decoded_bytes=max_decoded_bytes, max_name_chars=max_name_chars
    )
    taken = _Taken()
    store = metered_store(app.store, taken.add)
    metrics = RunMetrics.from_env()
    # With OTLP metrics configured, the metered receiver counts requests and spans into them.
    run = serve if metrics is None else functools.partial(serve_metered, metrics=metrics)
    try:
        run(
            store,
            listen,
            token=token or None,
            max_body_bytes=max_body_bytes,
            on_ready=ready,
            limits=limits,
            read_timeout=read_timeout,
        )
    finally:
        if metrics is not None:
            metrics.close()
        # What this receiver stored, for whoever stopped it (stderr: stdout carries only the address).
        app.err.print(
            f"stopped: {taken.spans} span(s) taken in {taken.batches} export request(s),"
            f" {taken.new} new in the store",
            soft_wrap=True,
        )


class _Taken:
    """Spans the receiver handed to the store (after each commit) and how many were new there."""

    def __init__(self) -> None:
        self.spans = 0
        self.new = 0
        self.batches = 0

    def add(self, given: int, new: int) -> None:
        self.spans += given
        self.new += new
        self.batches += 1


@click.command("file")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@pass_app
@handle_errors
def file_command(app: App, paths: tuple[Path, ...], as_json: bool) -> None:
    """Read OTLP files into the store: protobuf ExportTraceServiceRequest (any extension but
    .json/.jsonl), OTLP/JSON (.json) or JSON lines (.jsonl), each optionally .gz. Folders are read
    recursively (files ending in .json, .jsonl, .pb, .binpb, .bin, .proto, .otlp, .protobuf, ±.gz).

    Exits 2 when a file cannot be read; spans read before that stay stored.
    """
    summary = _import_with_progress(app, paths)
    if as_json:
        print_json(summary)
    else:
        _print_summary(app, summary)
    failures = [f for f in summary.files if f.failed]
    for f in failures:
        click.echo(f"error: {redact(f.errors[-1])}", err=True)
    if failures:
        raise SystemExit(2)


def _import_with_progress(app: App, paths: tuple[Path, ...]) -> ImportSummary:
    """Import the files, with a progress bar on a terminal and span counts pushed when metrics are on."""
    files, _ = expand_paths(paths)
    show_progress = len(files) > 1 and app.err.is_terminal
    metrics = RunMetrics.from_env()
    with Progress(console=app.err, transient=True, disable=not show_progress) as progress:
        task = progress.add_task("reading", total=len(files))

        def advance(result: FileImport) -> None:
            progress.advance(task)
            if metrics is not None:
                metrics.spans_collected(result.new, source="file")

        try:
            return import_files(app.store, paths, on_file=advance)
        finally:
            if metrics is not None:
                metrics.close()


def _print_summary(app: App, summary: ImportSummary) -> None:
    """The table of files, the totals, and the first problems of each file that was read."""
    table = Table("file", "spans", "new", "rejected")
    for f in summary.files:
        mark = " [red](unreadable)[/red]" if f.failed else ""
        table.add_row(escape(f.path) + mark, str(f.spans), str(f.new), str(f.rejected))
    app.console.print(table)
    app.console.print(
        f"{summary.spans} spans read, {summary.new} new, {summary.rejected} rejected, "
        f"from {len(summary.files)} file(s)"
    )
    for f in summary.files:
        for line in f.errors[:5] if not f.failed else []:
            app.err.print(f"[yellow]{escape(f.path)}[/yellow]: {escape(line)}")
