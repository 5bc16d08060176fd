"""The CLI's output edge: the root group that redacts log records and click's own errors, and the
traceback hook that redacts what an unexpected exception prints (consoles, JSON and tracejudge's
errors are redacted in ``cli._app`` and where they are made). The root group also loads each
command's module when that command is used."""

from __future__ import annotations

import contextlib
import importlib
import sys
import traceback
from collections.abc import Iterable, Iterator
from gettext import gettext as _
from types import TracebackType
from typing import Any, NamedTuple

import click

from tracejudge._redact import install_log_redaction, redact


@contextlib.contextmanager
def _redacted_click_errors() -> Iterator[None]:
    try:
        yield
    except click.ClickException as exc:
        # A usage error may quote what was typed: a URL with a password, a key given as an argument.
        # (click types ``message`` as final; it is read only when the error is shown, after this.)
        setattr(exc, "message", redact(exc.message))  # noqa: B010
        raise


class LazyCommand(NamedTuple):
    """A command whose module is imported when the command is used."""

    name: str
    """The command's name on the command line."""
    module: str
    """The module that defines it."""
    attribute: str
    """The command object's name in that module."""
    summary: str
    """The first sentence of its help, for ``--help``'s list of commands without importing it."""


class RootGroup(click.Group):
    """The root command: every log record is redacted as it is made, and click's own errors are
    redacted before click shows them. The ``lazy`` commands are imported on first use."""

    def __init__(self, *args: Any, lazy: Iterable[LazyCommand] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = {c.name: c for c in lazy}

    def main(self, *args: Any, **kwargs: Any) -> Any:
        install_log_redaction()
        return super().main(*args, **kwargs)

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with _redacted_click_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with _redacted_click_errors():
            return super().invoke(ctx)

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: ARG002 (click's signature)
        return sorted(self.commands.keys() | self.lazy.keys())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:  # noqa: ARG002
        if cmd_name not in self.commands and cmd_name in self.lazy:
            lazy = self.lazy[cmd_name]
            self.add_command(getattr(importlib.import_module(lazy.module), lazy.attribute), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's list of commands, the ones not loaded yet shown by their summary."""
        rows: list[tuple[str, str | None]] = []  # name, and the summary of one not loaded yet
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name)
            if cmd is None and name in self.lazy:
                rows.append((name, self.lazy[name].summary))
            elif cmd is not None and not cmd.hidden:
                rows.append((name, None))
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _summary in rows)
        shown = [
            (
                name,
                self.commands[name].get_short_help_str(limit) if summary is None else _short(summary, limit),
            )
            for name, summary in rows
        ]
        with formatter.section(_("Commands")):
            formatter.write_dl(shown)


def _short(summary: str, limit: int) -> str:
    # As click shortens a command's own help.
    return click.Command(None, help=summary).get_short_help_str(limit)


def redacted_excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    """Print an unexpected exception's traceback as Python would, redacted: its message may quote a
    request or a backend's answer."""
    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))
