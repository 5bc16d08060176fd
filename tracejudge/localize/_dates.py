"""Dates in text, whatever their format: shared by the clause search and the fact reader.

``2026-03-01``, ``March 1, 2026``, ``1 March 2026``, ``01.03.2026`` and ``2026年3月1日`` are one date.
``01/03/2026`` is 1 March in most of the world and January 3 in the US: both readings are kept, the
day-first one first, and nothing downstream picks one of them.
"""

from __future__ import annotations

import re
from datetime import date

__all__ = ["date_key", "date_spans"]

_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATES = [
    re.compile(
        r"(?<!\d)(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"
        r"(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?!\d)"
    ),
    re.compile(
        rf"(?<!\w)(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+(?:of\s+)?|-){_MONTH},?[\s-]+(?P<y>\d{{4}})(?!\d)",
        re.I,
    ),
    re.compile(rf"(?<!\w){_MONTH}\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})(?!\d)", re.I),
    re.compile(r"(?P<y>\d{4})\s*年\s*(?P<m>\d{1,2})\s*月\s*(?P<d>\d{1,2})\s*[日号]"),
    # Day first with dots, as written across most of Europe: 1.3.2026, 01.03.2026.
    re.compile(r"(?<![\d.,])(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})(?![\d]|[.,]\d)"),
    # 01/03/2026 is 1 March in most of the world and January 3 in the US: both readings are kept.
    re.compile(r"(?<![\d/.,-])(?P<d>\d{1,2})(?P<sep>[/-])(?P<m>\d{1,2})(?P=sep)(?P<y>\d{4})(?![\d]|[/-]\d)"),
]


def _date(y: str, m: int, d: str) -> date | None:
    try:
        return date(int(y), m, int(d))
    except ValueError:
        return None


def date_spans(text: str) -> list[tuple[int, int, date, frozenset[date]]]:
    """(start, end, first reading, every reading) of each date in the text."""
    found: list[tuple[int, int, date, frozenset[date]]] = []
    for rx in _DATES:
        for m in rx.finditer(text):
            if any(a < m.end() and m.start() < b for a, b, _, _ in found):
                continue
            read = _readings(m.groupdict())
            if read is not None:
                found.append((m.start(), m.end(), *read))
    return sorted(found, key=lambda f: (f[0], f[1]))


def _readings(g: dict[str, str]) -> tuple[date, frozenset[date]] | None:
    """The first reading of a matched date and every reading (day first, and month first for an
    ambiguous "01/03/2026"); None when no reading is a valid date."""
    month = _MONTHS[g["mon"][:3].lower()] if g.get("mon") else int(g["m"])
    day = _date(g["y"], month, g["d"])
    readings = {day} if day is not None else set()
    if g.get("sep"):
        swapped = _date(g["y"], int(g["d"]), g["m"])
        if swapped is not None:
            readings.add(swapped)
    if not readings:
        return None
    return (day if day is not None else next(iter(readings))), frozenset(readings)


def date_key(first: date, readings: frozenset[date]) -> str:
    """A canonical token for a date: ``date:2026-03-01``; an ambiguous one keeps both readings in
    order (day first, then month first), so "01/03/2026" matches only a date written the same
    ambiguous way, never "1 March 2026" (that would be a guess) nor "03/01/2026"."""
    others = sorted(readings - {first})
    return "date:" + "|".join(d.isoformat() for d in (first, *others))
