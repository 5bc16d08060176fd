"""``tracejudge serve``: the report live from the store, and ``/metrics`` for Prometheus."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracejudge.cli._app import App, handle_errors, pass_app


@click.command("serve")
@click.option(
    "--listen", default="127.0.0.1:8765", show_default=True, help="HOST:PORT (port 0: any free port)."
)
@click.option(
    "--token",
    envvar="TRACEJUDGE_SERVE_TOKEN",
    metavar="TOKEN",
    default=None,
    help="Require `Authorization: Bearer TOKEN` (or basic auth with TOKEN as password); env "
    "TRACEJUDGE_SERVE_TOKEN; required off loopback.",
)
@click.option(
    "--suite",
    "suites",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A regression suite folder to include (repeatable).",
)
@click.option(
    "--read-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    envvar="TRACEJUDGE_SERVE_READ_TIMEOUT",
    help="Seconds a request may take to arrive; slower connections are closed "
    "(env TRACEJUDGE_SERVE_READ_TIMEOUT).",
)
@pass_app
@handle_errors
def serve(app: App, listen: str, token: str | None, suites: tuple[Path, ...], read_timeout: float) -> None:
    """Serve the report live (GET /) and Prometheus metrics (GET /metrics), read-only, until Ctrl-C.

    Prints `listening on http://HOST:PORT` once ready."""
    from tracejudge.report import serve as run

    def ready(url: str) -> None:
        sys.stdout.write(f"listening on {url}\n")
        sys.stdout.flush()

    run(app.reader, listen, token=token or None, suites=suites, on_ready=ready, read_timeout=read_timeout)
