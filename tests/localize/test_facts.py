"""Amounts, percentages and dates in answers; citations of a document version."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from tracejudge.localize import cites_version, extract_values, fact_value
from tracejudge.localize._facts import mentions


def numbers(text: str) -> list[set[Decimal]]:
    return [set(v.numbers) for v in extract_values(text) if v.kind == "number"]


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("30,000 RMB", {"CNY"}),
        ("RMB30,000", {"CNY"}),
        ("¥30,000", {"CNY", "JPY"}),
        ("30k", set()),
        ("30 000 元", {"CNY"}),
        ("3万元", {"CNY"}),
        ("$30,000", {"USD"}),
        ("30,000 euros", {"EUR"}),
    ],
)
def test_amounts(text: str, units: set[str]) -> None:
    [v] = extract_values(text)
    assert Decimal(30000) in v.numbers
    assert set(v.units) == units


def test_dates_are_not_numbers() -> None:
    values = extract_values("From 2026-03-01 (March 1, 2026; 1 March 2026; 2026年3月1日) the cap is 5%.")
    assert [v.day for v in values if v.kind == "date"] == [date(2026, 3, 1)] * 4
    assert numbers("From 2026-03-01 the cap is 5%.") == [{Decimal(5)}]


def test_fact_values() -> None:
    cap = fact_value("prepayment_cap_rmb", 30000)
    assert cap is not None
    assert cap.units == {"CNY"}
    assert fact_value("flag", True) is None
    text = fact_value("term", "net 30 days")
    assert text is not None
    assert text.kind == "text"
    when = fact_value("effective", date(2026, 3, 1))
    assert when is not None
    assert when.kind == "date"


@pytest.mark.parametrize(
    ("answer", "key", "value", "hit"),
    [
        ("capped at ¥30,000", "cap_rmb", 30000, True),
        ("capped at 30,000 USD", "cap_rmb", 30000, False),
        ("capped at 30,000", "cap_rmb", 30000, True),
        ("capped at 30,001 RMB", "cap", "30,000 RMB", False),
        ("rate 5%", "rate", 0.05, True),
        ("rate 5%", "rate_pct", 5, True),
        ("due March 1st, 2026", "due", "2026-03-01", True),
        ("due 2026-03-02", "due", "2026-03-01", False),
        ("Payment is net 30 days.", "term", "Net 30 Days", True),
    ],
)
def test_mentions(answer: str, key: str, value: object, hit: bool) -> None:
    fv = fact_value(key, value)
    assert fv is not None
    assert bool(mentions(answer, extract_values(answer), fv)) is hit


@pytest.mark.parametrize(
    ("text", "version", "cited"),
    [
        ("per attachment v1 the cap is higher", "v1", True),
        ("see C-17/attachment@v1", "v1", True),
        ("version 1 of the attachment", "v1", True),
        ("Attachment (v1)", "1", True),
        ("attachment v2 replaced the old one", "v1", False),
        ("the v1 rule", "v1", False),
    ],
)
def test_cites_version(text: str, version: str, cited: bool) -> None:
    assert cites_version(text, "C-17/attachment", version) is cited


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("effective 1.3.2026", {date(2026, 3, 1)}),
        ("effective 01.03.2026.", {date(2026, 3, 1)}),
        ("effective 1-Mar-2026", {date(2026, 3, 1)}),
        ("effective 15/03/2026", {date(2026, 3, 15)}),
        ("effective 03/15/2026", {date(2026, 3, 15)}),
        # Day or month first cannot be told: both readings are kept, neither is chosen.
        ("effective 01/03/2026", {date(2026, 3, 1), date(2026, 1, 3)}),
        ("effective 01-03-2026", {date(2026, 3, 1), date(2026, 1, 3)}),
    ],
)
def test_more_date_formats(text: str, days: set[date]) -> None:
    [v] = extract_values(text)
    assert v.kind == "date"
    assert set(v.readings()) == days


def test_invalid_dates_stay_numbers() -> None:
    assert [v.kind for v in extract_values("on 30/02/2026")] == ["number", "number", "number"]


@pytest.mark.parametrize(
    ("answer", "value", "hit"),
    [
        ("due 01.03.2026", date(2026, 3, 1), True),
        ("due 1.3.2026", "2026-03-01", True),
        ("due 01/03/2026", date(2026, 3, 1), True),
        ("due 01/03/2026", date(2026, 1, 3), True),
        ("due 01/03/2026", date(2026, 3, 3), False),
        ("due 1-Mar-2026", "March 1, 2026", True),
    ],
)
def test_date_facts_whatever_the_format(answer: str, value: object, hit: bool) -> None:
    fv = fact_value("due", value)
    assert fv is not None
    assert bool(mentions(answer, extract_values(answer), fv)) is hit


@pytest.mark.parametrize(
    "answer", ["capped at 30 000,00 RMB", "capped at RMB 30.000,00", "capped at 30’000.00 RMB"]
)
def test_european_amounts(answer: str) -> None:
    fv = fact_value("cap_rmb", 30000)
    assert fv is not None
    assert mentions(answer, extract_values(answer), fv)
