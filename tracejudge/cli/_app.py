"""What every command shares: the resolved settings and the store, opened once at the edge — and
the output edge, where everything shown goes through the one redactor (``tracejudge._redact``)."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from tracejudge import _redact
from tracejudge._errors import TracejudgeError

if TYPE_CHECKING:
    from rich.console import Console

    from tracejudge.store import Store

F = TypeVar("F", bound=Callable[..., Any])


class App:
    """Settings resolved at the edge, passed to every command as ``ctx.obj``. The consoles and the
    store are made when a command first uses them (``score --json`` never needs a console)."""

    def __init__(
        self,
        store_url: str,
        console: Console | None = None,
        err: Console | None = None,
        *,
        statement_timeout_s: float | None = None,
    ) -> None:
        self.store_url = store_url
        self.statement_timeout_s = statement_timeout_s
        """``--store-statement-timeout``; None: the environment's or the default (store._postgres)."""
        self._console = console
        self._err = err
        self._store: Store | None = None
        self._reader: Store | None = None  # a read-only SQLite store, for the commands that only read

    # Both consoles write through the redactor: no secret reaches the terminal, whoever prints it.
    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=_redact.stdout(), highlight=False)
        return self._console

    @property
    def err(self) -> Console:
        if self._err is None:
            from rich.console import Console

            self._err = Console(file=_redact.stderr(), stderr=True, highlight=False)
        return self._err

    def err_is_terminal(self) -> bool:
        """Whether ``err`` is a terminal (progress is shown there) — without making the console, and
        importing rich, when it cannot be one: rich reads a terminal only from ``TTY_COMPATIBLE=1``,
        ``FORCE_COLOR`` or a tty (and may still say no)."""
        if self._err is None:
            env = os.environ
            if (
                env.get("TTY_COMPATIBLE") != "1"
                and env.get("FORCE_COLOR") is None
                and not _isatty(sys.stderr)
            ):
                return False
        return self.err.is_terminal

    @property
    def store(self) -> Store:
        """The store, upgraded in place first when it is at an older schema."""
        if self._store is None:
            from tracejudge.store import open_store

            self._store = open_store(self.store_url, statement_timeout_s=self.statement_timeout_s)
        return self._store

    @property
    def reader(self) -> Store:
        """The store for a command that only reads: one at an older schema is read as it is, not
        upgraded (an upgrade locks out the older tracejudge processes still using it), and an existing
        SQLite store is opened read-only — nothing written, no file left beside it, readable in a
        folder this process cannot write (``open_store(read_only=True)``). The store itself when
        the command has opened it already."""
        if self._store is not None:
            return self._store
        if self._reader is None:
            from tracejudge.store import open_store

            reader = open_store(
                self.store_url, upgrade=False, read_only=True, statement_timeout_s=self.statement_timeout_s
            )
            if getattr(reader, "read_only", False):
                self._reader = reader
            else:  # a store made on open (new, in memory, PostgreSQL): the one every later use shares
                self._store = reader
                return reader
        return self._reader

    def show(self, as_json: bool, data: Any, render: Callable[[], None]) -> None:
        """The one output switch of every command: ``data`` as JSON with ``--json``, else ``render()``."""
        if as_json:
            print_json(data)
        else:
            render()

    def close(self) -> None:
        for store in (self._reader, self._store):
            if store is not None:
                store.close()
        self._reader = self._store = None


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # closed
        return False


pass_app = click.make_pass_decorator(App)


def print_json(data: Any, *, as_record: bool = False) -> None:
    """Print a record or plain data as JSON on stdout, every string in it redacted (before encoding,
    so that JSON escaping cannot hide a secret from the redactor); ``as_record``: plain data a record
    gave, written as a record is."""
    from pydantic import BaseModel

    if isinstance(data, BaseModel):
        # As model_dump_json writes it: non-ASCII text as it is.
        text = _dumps(_redact.redact_data(data.model_dump(mode="json")), ensure_ascii=False)
    else:
        text = _dumps(_redact.redact_data(data), ensure_ascii=not as_record)
    sys.stdout.write(text + "\n")


def json_element(data: Any, *, depth: int) -> bytes | None:
    """``data`` (plain JSON-like data) as :func:`print_json` writes it where it sits ``depth`` levels
    into the printed document (redacted, indented, non-ASCII escaped) — rendered ahead, e.g. a run's
    items while its judge calls are out, and printed by :func:`print_json_elements`. None when only the
    whole document's fallback encoding can write it."""
    try:
        raw = orjson.dumps(_redact.redact_data(data), default=str, option=_ORJSON)
    except TypeError:
        return None
    raw = raw.replace(b"\n", b"\n" + b"  " * depth)
    if raw.isascii() and b"\x7f" not in raw:  # nothing to escape (the common case, without a decode)
        return raw
    return _ascii(raw.decode()).encode()


def print_json_elements(data: dict[str, Any], key: str, elements: list[bytes]) -> bool:
    """Print ``data`` with ``data[key]`` the list of ``elements`` (from :func:`json_element` at depth
    2): the text :func:`print_json` prints for the whole. False, printing nothing, when the rest of
    the document needs the fallback encoding (print it whole then)."""
    body = _redact.redact_data(data)
    body[_redact.redact(key)] = [orjson.Fragment(e) for e in elements]
    try:
        text = orjson.dumps(body, default=str, option=_ORJSON).decode()
    except TypeError:
        return False
    sys.stdout.write(_ascii(text) + "\n")
    return True


_ORJSON = (
    orjson.OPT_INDENT_2
    | orjson.OPT_NON_STR_KEYS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
# What ``json.dumps(ensure_ascii=True)`` escapes that orjson writes as it is.
_NOT_ASCII = re.compile(r"[^\x00-\x7e]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def _dumps(data: Any, *, ensure_ascii: bool) -> str:
    """``json.dumps(data, indent=2, default=str, ensure_ascii=...)``, written by orjson: a run's
    output of thousands of items in milliseconds instead of a fifth of a second. (Numbers read back
    the same; orjson spells some floats differently, 0.000066 for 6.6e-05, and NaN as null.)"""
    try:
        text = orjson.dumps(data, default=str, option=_ORJSON).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        # What orjson refuses and json writes: integers past 64 bits, lone surrogates.
        return json.dumps(data, indent=2, default=str, ensure_ascii=ensure_ascii)
    return _ascii(text) if ensure_ascii else text


def _ascii(text: str) -> str:
    """``text`` with what ``json.dumps(ensure_ascii=True)`` escapes escaped (no scan when there is none)."""
    if text.isascii() and "\x7f" not in text:
        return text
    return _NOT_ASCII.sub(_escape, text)


def exit_unless(ok: bool) -> None:
    """Exit 1 when a command's result says it failed (after its output was printed)."""
    if not ok:
        raise SystemExit(1)


def handle_errors(fn: F) -> F:
    """Turn tracejudge's exceptions into a message and its exit code instead of a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TracejudgeError as exc:
            click.echo(f"error: {_redact.redact(str(exc))}", err=True)
            raise SystemExit(exc.exit_code) from None

    return wrapper  # type: ignore[return-value]
