"""Numbers as people write them: currency symbols and codes, thousands separators, decimal commas,
k/m suffixes, percent."""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNIT_ALIASES: dict[str, str] = {
    "$": "USD",
    "us$": "USD",
    "usd": "USD",
    "dollar": "USD",
    "dollars": "USD",
    "€": "EUR",
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "£": "GBP",
    "gbp": "GBP",
    "¥": "CNY",
    "￥": "CNY",
    "rmb": "CNY",
    "cny": "CNY",
    "yuan": "CNY",
    "元": "CNY",
    "jpy": "JPY",
    "yen": "JPY",
    "%": "%",
    "percent": "%",
    "chf": "CHF",
    "inr": "INR",
    "₹": "INR",
}
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}

_PREFIX = r"(?P<pre>US\$|\$|€|£|¥|￥|₹|USD|EUR|GBP|RMB|CNY|JPY|CHF|INR)?\s?"
_NUM = r"(?P<num>[-−]?\d{1,3}(?:[,.'\u00a0\u202f ]\d{3})+(?:[.,]\d+)?|[-−]?\d+(?:[.,]\d+)?)"
_SUFFIX = (
    r"(?:\s?(?P<scale>k|thousand|mn|m|million|bn|billion)\b)?"
    r"(?:\s?(?P<post>%|percent|dollars?|euros?|yuan|yen|元|USD|EUR|GBP|RMB|CNY|JPY|CHF|INR|€|£|¥)(?![A-Za-z]))?"
)
_NUMBER_RE = re.compile(_PREFIX + _NUM + _SUFFIX, re.IGNORECASE)


@dataclass(frozen=True)
class FoundNumber:
    """A number found in text."""

    value: float
    unit: str | None
    start: int
    text: str


def normalize_unit(unit: str | None) -> str | None:
    """Canonical unit code for a symbol, code or word (``$`` -> ``USD``); unknown units upper-cased."""
    if unit is None:
        return None
    key = unit.strip().lower()
    return _UNIT_ALIASES.get(key, unit.strip().upper())


# Marks that are never part of a number's value: the minus sign becomes "-", grouping spaces and
# apostrophes go.
_WRITTEN_MARKS = str.maketrans({"\u2212": "-", "\u00a0": None, "\u202f": None, "'": None, " ": None})


def _with_decimal_point(s: str) -> str:
    """The number with ``.`` as its only decimal mark and no grouping marks."""
    if "," in s and "." in s:
        # The mark that comes last is the decimal mark: 1,234.56 and 1.234,56.
        comma_last = s.rfind(",") > s.rfind(".")
        return s.replace(".", "").replace(",", ".") if comma_last else s.replace(",", "")
    if "," in s:
        head, _, tail = s.rpartition(",")
        grouped = len(tail) == 3 and head.lstrip("-") not in ("", "0")
        return s.replace(",", "") if grouped or s.count(",") > 1 else head + "." + tail
    if s.count(".") > 1:
        return s.replace(".", "")
    return s


def parse_number(raw: str) -> float | None:
    """Parse one written number, deciding which of ``,`` and ``.`` is the decimal mark."""
    s = raw.translate(_WRITTEN_MARKS)
    if not s:
        return None
    try:
        return float(_with_decimal_point(s))
    except ValueError:
        return None


def find_numbers(text: str) -> list[FoundNumber]:
    """Every number in ``text`` with its unit (prefix or suffix) and scale applied."""
    found: list[FoundNumber] = []
    for m in _NUMBER_RE.finditer(text):
        value = parse_number(m.group("num"))
        if value is None:
            continue
        scale = m.group("scale")
        if scale:
            value *= _SCALE[scale.lower()]
        unit = normalize_unit(m.group("pre") or m.group("post"))
        found.append(FoundNumber(value=value, unit=unit, start=m.start(), text=m.group(0).strip()))
    return found


def number_after(text: str, phrase: str, *, window: int = 80) -> list[FoundNumber]:
    """Numbers within ``window`` characters after each occurrence of ``phrase`` (nearest first)."""
    low = text.lower()
    needle = phrase.lower()
    out: list[FoundNumber] = []
    pos = low.find(needle)
    while pos >= 0:
        end = pos + len(needle)
        out.extend(n for n in find_numbers(text[end : end + window]))
        pos = low.find(needle, end)
    return out
