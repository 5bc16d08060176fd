"""One root for every exception tracejudge raises; each says what to do next."""

from __future__ import annotations

from tracejudge._redact import redact


class TracejudgeError(Exception):
    """Root of tracejudge's exceptions. ``hint`` tells the user what to do next.

    Message and hint are redacted as the error is made: they often carry a backend's words (an
    error body that may echo the request's credentials), and an error is shown, logged and kept."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.hint = None if hint is None else redact(hint)

    def __str__(self) -> str:
        return f"{self.message}\n  → {self.hint}" if self.hint else self.message


class InputError(TracejudgeError):
    """A file or argument the user gave cannot be used (exit code 2)."""

    exit_code = 2


class StoreError(TracejudgeError):
    """The store cannot be opened or written."""


class StoreDamageError(StoreError):
    """What the store holds does not read back: its file was damaged (a disk error, a copy taken without
    its WAL) or changed by another program. Only what it names is lost; the rest of the store still reads
    (``tracejudge doctor --deep`` lists what does not)."""

    @property
    def reason(self) -> str:
        """One line for the value that stands in for what was lost (an unscored item, a skipped source,
        a warning), so that a loop over the store goes on with the rest."""
        return damaged_reason(self.message)


def damaged_reason(what: str) -> str:
    """:attr:`StoreDamageError.reason` for ``what`` was lost."""
    return f"store_damaged: {what}; run `tracejudge doctor --deep` to list what else is lost"


class StoreUnreachableError(StoreError):
    """The store's server dropped the connection (a PostgreSQL restart, a failover) or does not take a
    new one yet. Nothing of the statement's transaction was committed — or, when its COMMIT was under
    way, it may have been: whoever repeats the work must be able to tell. A later statement may work."""


class MissingDependencyError(TracejudgeError):
    """An optional third-party package is needed for this command."""

    exit_code = 2

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"this needs the Python package {package!r}, which is not installed",
            hint=f"pip install 'tracejudge[{extra}]'",
        )
