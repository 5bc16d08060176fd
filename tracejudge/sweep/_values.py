"""Values a document states: amounts, percentages, dates (the facts reader's), plus durations and
counts with their units ("sixty days", "14 Tage", "30 jours", "三十天", "3 shipments").

A value is compared by meaning, never by spelling: "50,000 RMB" = "¥50,000" = "5万元"; "sixty days" =
"60 days"; "1 March 2026" = "2026-03-01". Numbers glued to letters ("C-17", "v2", "ISO 9001"?) are
identifiers, not values, and are skipped.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import Decimal

from tracejudge.localize import FactValue, extract_values
from tracejudge.schema import ChangedValue, ValueKind

__all__ = ["Value", "agrees", "find_values", "sentence_values", "sentences", "value_keys"]

_DURATION_UNITS = {
    # English
    "day": "day", "days": "day", "calendar day": "day", "calendar days": "day",
    "business day": "business_day", "business days": "business_day",
    "working day": "business_day", "working days": "business_day",
    "week": "week", "weeks": "week", "month": "month", "months": "month",
    "year": "year", "years": "year", "hour": "hour", "hours": "hour",
    "minute": "minute", "minutes": "minute",
    # German
    "tag": "day", "tage": "day", "tagen": "day", "kalendertage": "day", "kalendertagen": "day",
    "werktag": "business_day", "werktage": "business_day", "werktagen": "business_day",
    "arbeitstag": "business_day", "arbeitstage": "business_day", "arbeitstagen": "business_day",
    "woche": "week", "wochen": "week", "monat": "month", "monate": "month", "monaten": "month",
    "jahr": "year", "jahre": "year", "jahren": "year", "stunde": "hour", "stunden": "hour",
    # French
    "jour": "day", "jours": "day", "jours ouvrables": "business_day", "jours ouvrés": "business_day",
    "semaine": "week", "semaines": "week", "mois": "month", "an": "year", "ans": "year",
    "année": "year", "années": "year", "heure": "hour", "heures": "hour",
    # Chinese / Japanese
    "天": "day", "日": "day", "个工作日": "business_day", "工作日": "business_day", "周": "week",
    "星期": "week", "个星期": "week", "个月": "month", "か月": "month", "ヶ月": "month", "年": "year",
    "小时": "hour", "个小时": "hour", "時間": "hour",
}  # fmt: skip
# Every duration unit contains one of these (a cheap test before the regular expressions).
_UNIT_STEMS = (
    "day", "week", "month", "year", "hour", "minute", "tag", "woche", "monat", "jahr", "stunde",
    "jour", "semaine", "mois", " an", "heure", "天", "日", "周", "星期", "月", "年", "小时", "時間",
)  # fmt: skip
_UNIT_RX = "|".join(sorted((re.escape(u) for u in _DURATION_UNITS), key=len, reverse=True))

_WORD_NUMBERS = {
    # English
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
    # German
    "ein": 1, "eine": 1, "einem": 1, "einer": 1, "zwei": 2, "drei": 3, "vier": 4, "fünf": 5, "sechs": 6,
    "sieben": 7, "acht": 8, "neun": 9, "zehn": 10, "elf": 11, "zwölf": 12, "vierzehn": 14,
    "fünfzehn": 15, "zwanzig": 20, "dreißig": 30, "vierzig": 40, "fünfzig": 50, "sechzig": 60,
    "neunzig": 90,
    # French
    "un": 1, "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "sept": 7, "huit": 8, "neuf": 9,
    "dix": 10, "onze": 11, "douze": 12, "quatorze": 14, "quinze": 15, "vingt": 20, "trente": 30,
    "quarante": 40, "cinquante": 50, "soixante": 60, "quatre-vingt-dix": 90,
}  # fmt: skip
_EN_TENS = r"(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
_EN_ONES = r"(?:one|two|three|four|five|six|seven|eight|nine)"
_WORD_RX = "|".join(sorted((re.escape(w) for w in _WORD_NUMBERS), key=len, reverse=True))
_CJK_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}

_SPELLED = re.compile(
    rf"(?<![^\W\d_])(?P<w>{_EN_TENS}-{_EN_ONES}|{_WORD_RX})(?:\s*\(\d+\))?\s+(?P<u>{_UNIT_RX})(?![^\W\d_])",
    re.I,
)
_CJK_SPELLED = re.compile(rf"(?P<w>[一二两三四五六七八九十]{{1,3}})\s*(?P<u>{_UNIT_RX})")
# What may follow a number as its unit: a duration word, else a noun counted ("3 shipments").
_AFTER_UNIT = re.compile(rf"[ \u00a0-]?(?P<u>{_UNIT_RX})(?![^\W\d_])", re.I)
_AFTER_NOUN = re.compile(r"[ \u00a0](?P<n>[^\W\d_]{3,})")
_NOT_NOUNS = frozenset(
    [
        "and",
        "or",
        "per",
        "of",
        "to",
        "the",
        "a",
        "an",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "than",
        "is",
        "are",
        "was",
        "be",
        "shall",
        "must",
        "may",
        "will",
        "not",
        "und",
        "oder",
        "pro",
        "je",
        "der",
        "die",
        "das",
        "den",
        "dem",
        "des",
        "von",
        "bis",
        "zu",
        "mit",
        "für",
        "ist",
        "sind",
        "et",
        "ou",
        "par",
        "le",
        "la",
        "les",
        "de",
        "des",
        "du",
        "au",
        "aux",
        "en",
        "pour",
        "avec",
        "est",
        "sont",
    ]
)
_SENTENCE = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[^\s])|(?<=[。！？；])|\n\s*\n|\n(?=\s*[-*•\d])")


@dataclass(frozen=True)
class Value:
    """A value found in a text."""

    kind: ValueKind
    """What it is."""
    text: str
    """As written."""
    start: int
    """Offset in the text."""
    end: int
    """End offset."""
    fact: FactValue | None = None
    """The facts reader's value (amounts, percents, dates, plain numbers)."""
    amount: Decimal | None = None
    """The number of a duration or count."""
    unit: str = ""
    """Canonical duration unit ("day", "month") or the noun counted ("shipment")."""

    @property
    def significant(self) -> bool:
        """Distinctive enough to say an answer took it from a document: dates, amounts, percents,
        durations, counts; a bare number only with three digits or a decimal part."""
        if self.kind != "number":
            return True
        assert self.fact is not None
        return any(abs(n) >= 100 or n != n.to_integral_value() for n in self.fact.numbers)

    def canonical(self) -> str:
        if self.kind in ("duration", "count"):
            return f"{_num(self.amount)} {self.unit}"
        assert self.fact is not None
        return self.fact.show()

    def record(self) -> ChangedValue:
        return ChangedValue(kind=self.kind, text=self.text, value=self.canonical())


def _num(n: Decimal | None) -> str:
    return format(n.normalize(), "f") if n is not None else "?"


def _cjk_number(word: str) -> int | None:
    if word == "十":
        return 10
    if "十" in word:
        tens, _, ones = word.partition("十")
        t = _CJK_DIGITS.get(tens, 1 if tens == "" else -100)
        o = _CJK_DIGITS.get(ones, 0 if ones == "" else -100)
        return t * 10 + o if t > 0 and o >= 0 else None
    return _CJK_DIGITS.get(word) if len(word) == 1 else None


def _glued(text: str, start: int) -> bool:
    """An identifier's digits: "C-17", "v2", "A4", "ISO-9001"."""
    before = text[max(0, start - 2) : start]
    return bool(before) and (_latin(before[-1]) or (before[-1] in "-/_#" and _latin(before[:1])))


def _latin(c: str) -> bool:
    # CJK text writes numbers right after words ("不得超过5万元"): only an alphabetic script glues.
    return c.isalpha() and ord(c) < 0x2E80


def _kind(fact: FactValue) -> ValueKind:
    if fact.kind == "date":
        return "date"
    if "%" in fact.units:
        return "percent"
    return "amount" if fact.units else "number"


def find_values(text: str) -> list[Value]:
    """Every value in a text, in order: the facts reader's dates, amounts and numbers, with a number
    followed by a duration word read as a duration and by a noun as a count; spelled-out durations."""
    # The spelled-out search is the costly one; most texts name no duration unit at all.
    low = text.lower()
    out = _spelled_durations(text) if any(stem in low for stem in _UNIT_STEMS) else []
    taken = [(v.start, v.end) for v in out]
    for fact in extract_values(text):
        if not any(a < fact.end and fact.start < b for a, b in taken) and not _glued(text, fact.start):
            out.append(_fact_value(text, fact))
    return sorted(out, key=lambda v: v.start)


def _spelled_durations(text: str) -> list[Value]:
    """Durations with the number spelled out: English words ("ninety days"), then CJK numerals
    where no English one was read."""
    out: list[Value] = []
    for m in _SPELLED.finditer(text):
        n = _WORD_NUMBERS.get(m.group("w").lower())
        if n is None and "-" in m.group("w"):
            tens, ones = m.group("w").lower().split("-")
            n = _WORD_NUMBERS[tens] + _WORD_NUMBERS[ones]
        unit = _DURATION_UNITS[m.group("u").lower()]
        out.append(Value("duration", m.group(0), m.start(), m.end(), amount=Decimal(n or 0), unit=unit))
    for m in _CJK_SPELLED.finditer(text):
        n = _cjk_number(m.group("w"))
        if n is not None and not any(v.start < m.end() and m.start() < v.end for v in out):
            unit = _DURATION_UNITS[m.group("u")]
            out.append(Value("duration", m.group(0), m.start(), m.end(), amount=Decimal(n), unit=unit))
    return out


def _fact_value(text: str, fact: FactValue) -> Value:
    """One value the facts reader found; a lone number followed by a duration word is a duration,
    by a noun a count of it."""
    kind = _kind(fact)
    if kind == "number" and len(fact.numbers) == 1:
        (number,) = fact.numbers
        unit_m = _AFTER_UNIT.match(text, fact.end)
        if unit_m is not None:
            unit = _DURATION_UNITS[unit_m.group("u").lower()]
            end = unit_m.end()
            return Value("duration", text[fact.start : end], fact.start, end, amount=number, unit=unit)
        noun_m = _AFTER_NOUN.match(text, fact.end)
        if noun_m is not None and noun_m.group("n").lower() not in _NOT_NOUNS:
            noun = noun_m.group("n").lower()
            noun = noun[:-1] if noun.endswith("s") and len(noun) > 3 else noun
            end = noun_m.end()
            return Value("count", text[fact.start : end], fact.start, end, amount=number, unit=noun)
    return Value(kind, text[fact.start : fact.end].strip(), fact.start, fact.end, fact=fact)


def significant_values(text: str) -> list[Value]:
    """The values of a text that can tell versions apart (see :attr:`Value.significant`)."""
    return [v for v in find_values(text) if v.significant]


@functools.lru_cache(maxsize=4096)
def sentence_values(text: str) -> tuple[Value, ...]:
    """:func:`find_values` of a manifest sentence, cached: a sweep reads the same few sentences for
    every flagged trace (bounded: manifest text, never trace text)."""
    return tuple(find_values(text))


def value_keys(v: Value) -> tuple[object, ...]:
    """What a value can match under :func:`agrees`: its numbers, its dates, or its amount and unit."""
    if v.kind in ("duration", "count"):
        return (("unit", v.amount, v.unit),)
    assert v.fact is not None
    if v.fact.kind == "date":
        return tuple(("date", d) for d in v.fact.readings())
    return tuple(("number", n.normalize()) for n in v.fact.numbers)


def agrees(a: Value, b: Value) -> bool:
    """Do two values state the same thing? An amount matches a bare number of the same size (an answer
    may drop the currency), a duration or count needs the same unit."""
    if a.kind in _MEASURES or b.kind in _MEASURES:
        return a.kind == b.kind and a.amount == b.amount and a.unit == b.unit
    assert a.fact is not None
    assert b.fact is not None
    return _facts_agree(a.fact, b.fact)


# Values that are an amount of a unit (``value_keys``: matched by amount and unit, not as facts).
_MEASURES = frozenset(("duration", "count"))


def _facts_agree(fa: FactValue, fb: FactValue) -> bool:
    """The same date (two dates sharing a reading), or the same number in a shared unit when both name one."""
    if fa.kind == "date" or fb.kind == "date":
        return fa.kind == fb.kind and bool(fa.readings() & fb.readings())
    if not fa.numbers & fb.numbers:
        return False
    if fa.units and fb.units:
        return bool(fa.units & fb.units)
    return True


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence (or list item) of a text, whitespace trimmed."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _SENTENCE.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    out = []
    for a, b in spans:
        seg = text[a:b]
        lead = len(seg) - len(seg.lstrip())
        trail = len(seg.rstrip())
        if trail > lead:
            out.append((a + lead, a + trail))
    return out
