"""The CLI's output edge: the root group that redacts log records and click's own errors, and the
traceback hook that redacts what an unexpected exception prints (consoles, JSON and tracejudge's
errors are redacted in ``cli._app`` and where they are made)."""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Iterator
from types import TracebackType
from typing import Any

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


class RootGroup(click.Group):
    """The root command: every log record is redacted as it is made, and click's own errors are
    redacted before click shows them."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        install_log_redaction()
        return super().main(*args, **kwargs)

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with _redacted_click_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with _redacted_click_errors():
            return super().invoke(ctx)


def redacted_excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    """Print an unexpected exception's traceback as Python would, redacted: its message may quote a
    request or a backend's answer."""
    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))
