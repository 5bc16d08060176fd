"""The time options every command spells alike: ``--from T`` / ``--to T``, read by :func:`parse_when`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from tracejudge._errors import InputError

__all__ = ["FROM_HELP", "TO_HELP", "parse_when"]

FROM_HELP = "Traces started at or after T (ISO 8601, or 24h / 7d back)."
TO_HELP = "Traces started before T."

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(value: str | None, *, option: str, now: datetime | None = None) -> datetime | None:
    """An ISO 8601 date or time (UTC unless it says otherwise), or a span back from now:
    ``30m``, ``24h``, ``7d``."""
    if value is None:
        return None
    text = value.strip()
    match = _RELATIVE.match(text)
    if match:
        delta = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        return (now or datetime.now(UTC)) - delta
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"{option} {value!r} is not a time",
            hint="give an ISO 8601 time such as 2026-03-01 or 2026-03-01T09:30:00Z,"
            " or a span back from now: 24h, 7d",
        ) from None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
