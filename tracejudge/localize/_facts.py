"""Facts in an answer: amounts, numbers, percentages and dates, whatever their format.

``30,000 RMB``, ``¥30,000``, ``30k``, ``30 000`` and ``3万元`` are one amount; ``2026-03-01``,
``March 1, 2026``, ``1 March 2026`` and ``2026年3月1日`` are one date. A fact value from a ticket
is read the same way, so comparisons are value against value, never string against string.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal

from tracejudge.localize._dates import date_spans
from tracejudge.localize._text import _MULTIPLIERS, _NUM_RUN, find_clause, number_values, tokenize

__all__ = ["FactValue", "cites_version", "extract_values", "fact_value", "mentions"]

_CURRENCY = {
    "$": {"USD"}, "us$": {"USD"}, "usd": {"USD"}, "dollar": {"USD"}, "dollars": {"USD"},
    "€": {"EUR"}, "eur": {"EUR"}, "euro": {"EUR"}, "euros": {"EUR"},
    "£": {"GBP"}, "gbp": {"GBP"}, "pound": {"GBP"}, "pounds": {"GBP"},
    "¥": {"CNY", "JPY"}, "￥": {"CNY", "JPY"}, "rmb": {"CNY"}, "cny": {"CNY"}, "yuan": {"CNY"},
    "元": {"CNY"}, "jpy": {"JPY"}, "yen": {"JPY"}, "円": {"JPY"}, "日元": {"JPY"},
    "%": {"%"}, "percent": {"%"}, "per cent": {"%"}, "pct": {"%"},
}  # fmt: skip
_PRE = r"(?P<pre>us\$|[$€£¥￥]|rmb|cny|usd|eur|gbp|jpy)"
_POST = (
    r"(?P<post>%|[€£¥￥]|per\s?cent|pct|rmb|cny|yuan|日元|元|円|usd|dollars?|eur|euros?|gbp|pounds?|jpy|yen)"
)
_AMOUNT = re.compile(
    rf"(?:{_PRE}\s?)?(?<![\d.,])(?P<num>{_NUM_RUN})"
    r"(?:[ \u00a0]?(?:(?P<mul>k|thousand|mn|million|bn|billion)(?![^\W\d_])|(?P<cjkmul>万|亿)))?"
    rf"(?:\s?{_POST}(?![^\W\d_]))?",
    re.I,
)
_KEY_UNITS = {
    "rmb": {"CNY"}, "cny": {"CNY"}, "yuan": {"CNY"}, "usd": {"USD"}, "eur": {"EUR"}, "gbp": {"GBP"},
    "jpy": {"JPY"}, "pct": {"%"}, "percent": {"%"},
}  # fmt: skip


@dataclass(frozen=True)
class FactValue:
    """A value read from a ticket fact or found in an answer."""

    kind: Literal["number", "date", "text"]
    """What it is."""
    numbers: frozenset[Decimal] = frozenset()
    """Plausible numeric readings (several when separators are ambiguous)."""
    units: frozenset[str] = frozenset()
    """Currency codes or ``%``; empty when none was written."""
    day: date | None = None
    """The date, for dates."""
    days: frozenset[date] = frozenset()
    """Every plausible reading of an ambiguous date (03/01/2026: 3 January or March 1); empty when
    ``day`` is the only one."""
    text: str = ""
    """The text, for plain-text facts."""
    start: int = 0
    """Offset in the text it was found in."""
    end: int = 0
    """End offset."""

    def readings(self) -> frozenset[date]:
        """The dates this value may mean."""
        return self.days or (frozenset({self.day}) if self.day is not None else frozenset())

    def show(self) -> str:
        if self.kind == "date" and self.day is not None:
            return "|".join(d.isoformat() for d in sorted(self.readings()))
        if self.kind == "number":
            unit = "/".join(sorted(self.units))
            nums = "|".join(sorted(format(n.normalize(), "f") for n in self.numbers))
            return f"{nums} {unit}".strip()
        return repr(self.text)


def extract_values(text: str) -> list[FactValue]:
    """Every date and number (with its currency or percent sign) in a text, in order."""
    dates = date_spans(text)
    values = [
        FactValue("date", day=d, days=r if len(r) > 1 else frozenset(), start=a, end=b)
        for a, b, d, r in dates
    ]
    # Dates are blanked out so "2026-03-01" does not also read as the numbers 2026, 3 and 1.
    chars = list(text)
    for a, b, _, _ in dates:
        chars[a:b] = " " * (b - a)
    values += [v for m in _AMOUNT.finditer("".join(chars)) for v in _amount_values(m)]
    return sorted(values, key=lambda v: v.start)


def _amount_values(m: re.Match[str]) -> list[FactValue]:
    """The numbers an amount match spells: the multiplier applies to the last, the units to the
    first and the last ("1,2 RMB" is two numbers)."""
    mul = _MULTIPLIERS.get((m.group("mul") or m.group("cjkmul") or "").lower(), Decimal(1))
    units = _amount_units(m)
    readings = number_values(m.group("num"))
    last = len(readings) - 1
    return [
        FactValue(
            "number",
            numbers=frozenset(a * mul for a in alts) if k == last else alts,
            units=units if k in (0, last) else frozenset(),
            start=m.start(),
            end=m.end(),
        )
        for k, (_, alts) in enumerate(readings)
    ]


def _amount_units(m: re.Match[str]) -> frozenset[str]:
    """The currency codes (or ``%``) written before or after an amount."""
    units: set[str] = set()
    for part in (m.group("pre"), m.group("post")):
        if part:
            units |= _CURRENCY.get(re.sub(r"\s+", " ", part.lower()), set())
    return frozenset(units)


def fact_value(key: str, value: Any) -> FactValue | None:
    """Read a ticket fact; None when it cannot be checked in text (booleans, lists, objects, empty)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | Decimal):
        return FactValue("number", numbers=frozenset({Decimal(str(value))}), units=_key_units(key))
    if isinstance(value, datetime):
        return FactValue("date", day=value.date())
    if isinstance(value, date):
        return FactValue("date", day=value)
    if isinstance(value, str) and value.strip():
        return _text_fact(value, _key_units(key))
    return None


def _key_units(key: str) -> frozenset[str]:
    """The currency (or ``%``) a fact's key names ("amount_rmb", "rate_pct")."""
    units: set[str] = set()
    for part in re.split(r"[^a-z]+", key.lower()):
        units |= _KEY_UNITS.get(part, set())
    return frozenset(units)


def _text_fact(value: str, key_units: frozenset[str]) -> FactValue:
    """A fact written as text: the one date or amount it is (units from the key when it writes
    none), else plain text."""
    found = extract_values(value)
    if len(found) == 1:
        rest = (value[: found[0].start] + value[found[0].end :]).strip(" .,:;")
        if not rest:
            v = found[0]
            units = v.units or key_units
            return FactValue(v.kind, numbers=v.numbers, units=units, day=v.day, days=v.days, text=value)
    return FactValue("text", text=value)


def _agrees(found: FactValue, fact: FactValue) -> bool:
    if found.kind != fact.kind:
        return False
    if fact.kind == "date":
        return bool(found.readings() & fact.readings())
    readings = set(found.numbers)
    if "%" in found.units and "%" not in fact.units:
        readings |= {n / 100 for n in found.numbers}
    if not readings & fact.numbers:
        return False
    if found.units and fact.units:
        return bool(found.units & fact.units)
    return True


def mentions(text: str, values: Sequence[FactValue], fact: FactValue) -> list[tuple[int, int]]:
    """Where ``text`` (with ``values = extract_values(text)``) states ``fact``: a list of (start, end)."""
    if fact.kind == "text":
        m = find_clause(text, fact.text)
        return [(m.start or 0, m.end or 0)] if m.found else []
    return [(v.start, v.end) for v in values if _agrees(v, fact)]


def _version_patterns(version: str) -> list[list[str]]:
    m = re.fullmatch(r"\s*(?:v|ver|version|rev)?\.?\s*(\d+(?:\.\d+)*)\s*", version, re.I)
    if m is None:
        return [tokenize(version)]
    n = tokenize(m.group(1))
    return [[w, *n] for w in ("v", "version", "ver", "rev", "revision")]


def _seq_at(tokens: list[str], seq: list[str]) -> list[int]:
    k = len(seq)
    return [i for i in range(len(tokens) - k + 1) if tokens[i : i + k] == seq] if k else []


def cites_version(text: str, doc_id: str, version: str | None) -> bool:
    """Does the text name this version of this document ("attachment v1", "C-17/attachment@v1",
    "version 1 of the attachment")? The version must sit right next to the document's name."""
    if not version:
        return False
    tokens = tokenize(text)
    patterns = _version_patterns(version)
    return any(_version_beside(tokens, name, patterns) for name in _doc_names(doc_id))


def _doc_names(doc_id: str) -> list[list[str]]:
    """How a text may name a document: its id's tokens, or its id's last word alone (4+ letters)."""
    doc = tokenize(doc_id)
    names = [doc]
    words = [t for t in doc if not t[0].isdigit()]
    if words and len(words[-1]) >= 4 and [words[-1]] != doc:
        names.append([words[-1]])
    return names


def _version_beside(tokens: list[str], name: list[str], patterns: list[list[str]]) -> bool:
    """Whether a version pattern starts right after (or one token after) an occurrence of
    ``name``, or ends at most 3 tokens before one ("version 1 of the attachment")."""
    starts = _seq_at(tokens, name)
    if not starts:
        return False
    found = [(p, len(pat)) for pat in patterns for p in _seq_at(tokens, pat)]
    for s in starts:
        e = s + len(name)
        if any(e <= p <= e + 1 or s - 3 <= p + k <= s for p, k in found):
            return True
    return False
