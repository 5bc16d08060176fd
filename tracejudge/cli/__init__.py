"""Thin click commands: parse, call one library function, render.

Each command's module is imported when that command runs (or its help is asked for): ``tracejudge
score`` does not pay for importing ``regress``, ``audit`` or ``serve``, and ``tracejudge --help``
lists every command from the table below without importing any.
"""

from __future__ import annotations

import importlib
import signal
import sys
import typing as _typing
from importlib import metadata as _metadata

import click

from tracejudge import __version__
from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.cli._gc import process_ends_with_the_command as _process_ends_with_the_command
from tracejudge.cli._gc import skip_exit_collection as _skip_exit_collection
from tracejudge.cli._root import LazyCommand as _Lazy
from tracejudge.cli._root import RootGroup as _RootGroup
from tracejudge.cli._root import redacted_excepthook
from tracejudge.cli._safe import escape, safe_text
from tracejudge.cli._when import FROM_HELP, TO_HELP, parse_when

if _typing.TYPE_CHECKING:
    from tracejudge.cli._audit import audit
    from tracejudge.cli._calibrate import calibrate_cmd
    from tracejudge.cli._demo import demo
    from tracejudge.cli._doctor import doctor
    from tracejudge.cli._mcp import mcp
    from tracejudge.cli._probe import probe
    from tracejudge.cli._regress import regress
    from tracejudge.cli._report import report
    from tracejudge.cli._score import score
    from tracejudge.cli._serve import serve
    from tracejudge.cli._ticket import ticket
    from tracejudge.cli._traces import traces
    from tracejudge.cli._triage import triage

__all__ = [
    "FROM_HELP",
    "TO_HELP",
    "App",
    "audit",
    "calibrate_cmd",
    "cli",
    "collect",
    "console_main",
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

# The commands loaded on use: where each lives, and the first sentence of its help as ``--help``
# lists it (a test holds each to the command's own).
_COMMANDS = (
    _Lazy(
        "audit",
        "tracejudge.cli._audit",
        "audit",
        "Audit a scoring run (default: the newest): reasoning vs score, stability, position, drift.",
    ),
    _Lazy(
        "calibrate",
        "tracejudge.cli._calibrate",
        "calibrate_cmd",
        "Measure the judge against people's labels: kappa, leniency, confusion, threshold, raters.",
    ),
    _Lazy(
        "demo",
        "tracejudge.cli._demo",
        "demo",
        "Run the bundled procurement agent through every fault scenario and triage each ticket.",
    ),
    _Lazy(
        "doctor",
        "tracejudge.cli._doctor",
        "doctor",
        "Check what this setup can reach: the store (and its schema), the receiver's address, Langfuse"
        " (keys, API generation, project), Phoenix, the judge (a one-token call with --judge) and the OTLP"
        " metrics endpoint.",
    ),
    _Lazy(
        "mcp",
        "tracejudge.cli._mcp",
        "mcp",
        "Model Context Protocol server: list and read task records, triage a ticket, build a regression"
        " sample — the same JSON as the CLI's --json.",
    ),
    _Lazy(
        "probe",
        "tracejudge.cli._probe",
        "probe",
        'Change an amount, swap a citation, claim "paused" over a submission, reword: does the verdict'
        " move as it must?",
    ),
    _Lazy(
        "regress",
        "tracejudge.cli._regress",
        "regress",
        "Regression sets from verified feedback: build, check, anonymize, push, run.",
    ),
    _Lazy(
        "report",
        "tracejudge.cli._report",
        "report",
        "Write one self-contained HTML report (no network, no script; charts as inline SVG): triage"
        " verdicts and stage evidence, scoring pass rates over runs with judge/rubric/prompt change"
        " markers, judge calibration and audit, regression suites.",
    ),
    _Lazy(
        "score",
        "tracejudge.cli._score",
        "score",
        "Score stored traces with a rubric: hard checks, then an LLM judge for the rest.",
    ),
    _Lazy(
        "serve",
        "tracejudge.cli._serve",
        "serve",
        "Serve the report live (GET /) and Prometheus metrics (GET /metrics), read-only, until Ctrl-C.",
    ),
    _Lazy(
        "ticket",
        "tracejudge.cli._ticket",
        "ticket",
        "Tickets: draft one from a trace and its feedback, for a person to verify.",
    ),
    _Lazy("traces", "tracejudge.cli._traces", "traces", "Inspect the traces in the store."),
    _Lazy(
        "triage",
        "tracejudge.cli._triage",
        "triage",
        "Localize why a trace's answer was wrong: not indexed, filtered, not retrieved, dropped in"
        " context, ignored by the model — or unconfirmed, with the records that would settle it.",
    ),
)
_BY_ATTRIBUTE = {c.attribute: c for c in _COMMANDS}


def __getattr__(name: str) -> click.Command:
    """The command objects (``tracejudge.cli.score``, ...), imported when first asked for."""
    lazy = _BY_ATTRIBUTE.get(name)
    if lazy is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    command: click.Command = getattr(importlib.import_module(lazy.module), name)
    return command


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


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``, as click's version option prints it; the store schema read only when asked."""
    if not value or ctx.resilient_parsing:
        return
    from tracejudge.store import STORE_SCHEMA_VERSION

    click.echo(f"tracejudge {__version__} (store schema {STORE_SCHEMA_VERSION})", color=ctx.color)
    ctx.exit()


@click.group(cls=_RootGroup, lazy=_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
@click.option(
    "--store",
    "store",
    default=None,
    metavar="URL",
    help="Store URL (default sqlite:///.tracejudge/tracejudge.db; env TRACEJUDGE_STORE).",
)
@click.option(
    "--store-statement-timeout",
    "statement_timeout_s",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="PostgreSQL: close the connection of a statement unanswered this long (a frozen server) and"
    " fail it as unreachable (env TRACEJUDGE_STORE_STATEMENT_TIMEOUT; default 120; 0: no bound).",
)
@click.pass_context
def cli(ctx: click.Context, store: str | None, statement_timeout_s: float | None) -> None:
    """tracejudge: find why a retrieval-augmented agent answered wrong, from its traces."""
    from tracejudge.store import resolve_store_url

    app = App(store_url=resolve_store_url(store), statement_timeout_s=statement_timeout_s)
    ctx.obj = app
    ctx.call_on_close(app.close)


@cli.group(cls=_CollectGroup)
def collect() -> None:
    """Bring traces into the store (OTLP receiver, OTLP files, Langfuse, Phoenix)."""


def main() -> None:
    """Console entry point. Ctrl-C exits 130, not click's 1, so a gate (`score --gate` exits 1 on a
    failed gate) never reads an interrupted run as a failed one; SIGTERM (what Kubernetes, systemd and
    `timeout` send) stops a command the same way and exits 143. A traceback (a bug) is redacted too."""
    sys.excepthook = redacted_excepthook
    stopped_by: list[int] = []

    def terminate(signum: int, _frame: object) -> None:
        # As Ctrl-C: a worker's claims go back to the others at once and what it stored stays, where
        # the default action ended the process on the spot. A receiver installs its own while it serves.
        stopped_by.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    try:
        code = cli.main(prog_name="tracejudge", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted: what was stored so far is kept; run the command again to resume", err=True)
        sys.exit(128 + (stopped_by[-1] if stopped_by else signal.SIGINT))
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    # The command is done and its store closed: the interpreter's exit need not go through everything
    # start-up made once more (0.2-2 s after `score` printed its output).
    _skip_exit_collection()
    sys.exit(code if isinstance(code, int) else 0)


def console_main() -> None:
    """``tracejudge`` (the console script) and ``python -m tracejudge``: :func:`main`, then the process
    ends as soon as the command is done — the exit hooks run (logging's flush, finalizers) and the
    output is flushed, but the interpreter's teardown is skipped: it frees one by one every object the
    process made (the ``openai`` package's modules, a run's items and output), ~0.1 s after ``score``
    printed its output at load 7, 0.03 s without. When another thread still runs (the normal exit
    waits for it), when the exit code is not a number, or when the output cannot be flushed, the
    process exits the usual way."""
    _process_ends_with_the_command()
    try:
        main()
    except SystemExit as exc:
        code = exc.code
        if code is not None and not isinstance(code, int):
            raise
        _end_now(code or 0)
        raise


def _end_now(code: int) -> None:
    """``os._exit(code)`` after the exit hooks and a flush; returns (the caller exits the usual way)
    when a thread other than this one is still running or a stream cannot be flushed."""
    import atexit
    import os
    import threading

    here = threading.current_thread()
    if any(t is not here and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: Python's own exit reports it as it always has
        return
    os._exit(code)
