"""``tracejudge mcp``: serve tracejudge's triage to coding agents over the Model Context Protocol."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracejudge._errors import InputError
from tracejudge.cli._app import App, handle_errors, pass_app


@click.command("mcp")
@click.option(
    "--http",
    "listen",
    metavar="HOST:PORT",
    default=None,
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any free port).",
)
@click.option(
    "--token",
    envvar="TRACEJUDGE_MCP_TOKEN",
    metavar="TOKEN",
    default=None,
    help="With --http: require `Authorization: Bearer TOKEN` (env TRACEJUDGE_MCP_TOKEN); required off"
    " loopback.",
)
@click.option(
    "--tickets",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A folder of ticket files, served as ticket://NAME resources (and readable by the tools).",
)
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Another folder the tools may read files from (repeatable; the working directory always).",
)
@click.option(
    "--allow-write",
    is_flag=True,
    help="Let tools write: build_sample's files and write-back. Read-only without it.",
)
@pass_app
@handle_errors
def mcp(
    app: App,
    listen: str | None,
    token: str | None,
    tickets: Path | None,
    roots: tuple[Path, ...],
    allow_write: bool,
) -> None:
    """Model Context Protocol server: list and read task records, triage a ticket, build a regression
    sample — the same JSON as the CLI's --json. Stdio by default (for an MCP client's `command`);
    --http for streamable HTTP, loopback only unless --token is given."""
    from tracejudge.mcp import McpOptions, Toolbox, build_server, run_http, run_stdio

    if token and not listen:
        raise InputError("--token goes with --http", hint="add --http HOST:PORT, or leave out --token")
    folders = [Path.cwd().resolve(), *(p.resolve() for p in roots)]
    if tickets is not None:
        folders.append(tickets.resolve())
    options = McpOptions(roots=folders, tickets=tickets, allow_write=allow_write)
    server = build_server(
        Toolbox(app.store, roots=folders, allow_write=allow_write, store_url=app.store_url), options
    )
    if listen is None:
        run_stdio(server)
        return

    def ready(url: str) -> None:
        # stderr: a client may read stdout; the URL is for the person who started it.
        sys.stderr.write(f"MCP on {url}\n")
        sys.stderr.flush()

    run_http(server, listen, token=token or None, on_ready=ready)
