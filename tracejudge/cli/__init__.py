"""Thin click commands: parse, call one library function, render."""

from __future__ import annotations

import sys
from importlib import metadata as _metadata

import click

from tracejudge import __version__
from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.cli._audit import audit
from tracejudge.cli._calibrate import calibrate_cmd
from tracejudge.cli._demo import demo
from tracejudge.cli._doctor import doctor
from tracejudge.cli._mcp import mcp
from tracejudge.cli._probe import probe
from tracejudge.cli._regress import regress
from tracejudge.cli._report import report
from tracejudge.cli._root import RootGroup as _RootGroup
from tracejudge.cli._root import redacted_excepthook
from tracejudge.cli._safe import escape, safe_text
from tracejudge.cli._score import score
from tracejudge.cli._serve import serve
from tracejudge.cli._ticket import ticket
from tracejudge.cli._traces import traces
from tracejudge.cli._triage import triage
from tracejudge.cli._when import FROM_HELP, TO_HELP, parse_when
from tracejudge.store import STORE_SCHEMA_VERSION as _STORE_SCHEMA_VERSION
from tracejudge.store import resolve_store_url as _resolve_store_url

__all__ = [
    "FROM_HELP",
    "TO_HELP",
    "App",
    "audit",
    "calibrate_cmd",
    "cli",
    "collect",
    "demo",
    "doctor",
    "escape",
    "handle_errors",
    "main",
    "mcp",
    "parse_when",
    "pass_app",
    "print_json",
    "probe",
    "redacted_excepthook",
    "regress",
    "report",
    "safe_text",
    "score",
    "serve",
    "ticket",
    "traces",
    "triage",
]


class _CollectGroup(click.Group):
    """``collect`` subcommands come from the ``tracejudge.collectors`` entry points."""

    def _load(self) -> None:
        if getattr(self, "_loaded", False):
            return
        self._loaded = True
        for ep in _metadata.entry_points(group="tracejudge.collectors"):
            if ep.name in self.commands:
                continue
            try:
                cmd = ep.load()
            except ImportError as exc:
                self.add_command(_broken(ep.name, str(exc)))
                continue
            self.add_command(cmd, ep.name)

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: ARG002 (click's signature)
        self._load()
        return sorted(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:  # noqa: ARG002
        self._load()
        return self.commands.get(cmd_name)


def _broken(name: str, why: str) -> click.Command:
    @click.command(name, help=f"(unavailable: {why})")
    def cmd() -> None:
        raise click.ClickException(f"the {name} collector cannot load: {why}; reinstall tracejudge")

    return cmd


@click.group(cls=_RootGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__,
    prog_name="tracejudge",
    message=f"%(prog)s %(version)s (store schema {_STORE_SCHEMA_VERSION})",
)
@click.option(
    "--store",
    "store",
    default=None,
    metavar="URL",
    help="Store URL (default sqlite:///.tracejudge/tracejudge.db; env TRACEJUDGE_STORE).",
)
@click.pass_context
def cli(ctx: click.Context, store: str | None) -> None:
    """tracejudge: find why a retrieval-augmented agent answered wrong, from its traces."""
    app = App(store_url=_resolve_store_url(store))
    ctx.obj = app
    ctx.call_on_close(app.close)


@cli.group(cls=_CollectGroup)
def collect() -> None:
    """Bring traces into the store (OTLP receiver, OTLP files, Langfuse, Phoenix)."""


cli.add_command(traces)
cli.add_command(score)
cli.add_command(triage)
cli.add_command(ticket)
cli.add_command(demo)
cli.add_command(regress)
cli.add_command(report)
cli.add_command(serve)
cli.add_command(calibrate_cmd)
cli.add_command(audit)
cli.add_command(probe)
cli.add_command(mcp)
cli.add_command(doctor)


def main() -> None:
    """Console entry point. Ctrl-C exits 130, not click's 1, so a gate (`score --gate` exits 1 on a
    failed gate) never reads an interrupted run as a failed one. A traceback (a bug) is redacted too."""
    sys.excepthook = redacted_excepthook
    try:
        code = cli.main(prog_name="tracejudge", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted: what was stored so far is kept; run the command again to resume", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
