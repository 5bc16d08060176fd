"""``tracejudge collect otlp`` and ``tracejudge collect file``: parse, call one function, render."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from tracejudge import redact
from tracejudge.cli import App, handle_errors, pass_app, print_json
from tracejudge.report import RunMetrics
from tracejudge_collectors.otel._files import FileImport, expand_paths, import_files
from tracejudge_collectors.otel._metered import serve_metered
from tracejudge_collectors.otel._receiver import DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES, serve

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
@pass_app
@handle_errors
def otlp_command(app: App, listen: str, token: str | None, max_body_bytes: int) -> None:
    """Receive traces over OTLP/HTTP (protobuf or JSON, optionally gzip) into the store.

    Senders point their OTLP exporter at http://HOST:PORT/v1/traces (also accepted:
    /api/public/otel/v1/traces). Prints `listening on http://HOST:PORT` once ready; stop with Ctrl-C.
    With OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT set, pushes request and span counts there while it runs.
    """

    def ready(url: str) -> None:
        sys.stdout.write(f"listening on {url}\n")
        sys.stdout.flush()

    metrics = RunMetrics.from_env()
    if metrics is None:
        serve(app.store, listen, token=token or None, max_body_bytes=max_body_bytes, on_ready=ready)
        return
    try:
        serve_metered(
            app.store,
            listen,
            metrics=metrics,
            token=token or None,
            max_body_bytes=max_body_bytes,
            on_ready=ready,
        )
    finally:
        metrics.close()


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
            summary = import_files(app.store, paths, on_file=advance)
        finally:
            if metrics is not None:
                metrics.close()
    if as_json:
        print_json(summary)
    else:
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
    failures = [f for f in summary.files if f.failed]
    for f in failures:
        click.echo(f"error: {redact(f.errors[-1])}", err=True)
    if failures:
        raise SystemExit(2)
