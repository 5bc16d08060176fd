"""Times as the trace backends' REST APIs send them. Pure functions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 time from the API (``Z`` or offset), None when absent or unparseable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00") if "Z" in value else value)
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def to_ns(value: Any) -> int:
    """Nanoseconds since the epoch of an ISO time (0 when absent)."""
    dt = parse_time(value)
    if dt is None:
        return 0
    return (dt - _EPOCH) // _MICROSECOND * 1000  # a timedelta made once: half of this call's time
