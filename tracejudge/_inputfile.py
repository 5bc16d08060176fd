"""Reading a file the user named on the command line, with an error that says which option to fix."""

from __future__ import annotations

from pathlib import Path

from tracejudge._errors import InputError

__all__ = ["read_input"]


def read_input(path: Path, what: str, option: str) -> str:
    """The UTF-8 text of ``path``; an unreadable file is ``cannot read the <what> <path>: <reason>``
    with the hint to check ``option``."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read the {what} {path}: {exc.strerror}", hint=f"check the {option} path"
        ) from exc
