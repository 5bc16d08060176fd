"""What every command shares: the resolved settings and the store, opened once at the edge."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
from pydantic import BaseModel
from rich.console import Console

from tracejudge._errors import TracejudgeError
from tracejudge.store import Store, open_store

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class App:
    """Settings resolved at the edge, passed to every command as ``ctx.obj``."""

    store_url: str
    console: Console = field(default_factory=lambda: Console(highlight=False))
    err: Console = field(default_factory=lambda: Console(stderr=True, highlight=False))
    _store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.store_url)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


pass_app = click.make_pass_decorator(App)


def print_json(data: Any) -> None:
    """Print a record or plain data as JSON on stdout."""
    if isinstance(data, BaseModel):
        sys.stdout.write(data.model_dump_json(indent=2) + "\n")
    else:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def handle_errors(fn: F) -> F:
    """Turn tracejudge's exceptions into a message and its exit code instead of a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TracejudgeError as exc:
            click.echo(f"error: {exc}", err=True)
            raise SystemExit(exc.exit_code) from None

    return wrapper  # type: ignore[return-value]
