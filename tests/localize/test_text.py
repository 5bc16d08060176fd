"""Tolerant clause matching: formats, partial matches, and the windowed search over large inputs."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from tracejudge.localize import find_clause, tokenize
from tracejudge.localize._text import number_values, prepare, split_clause

CLAUSE = "Prepayment shall not exceed 30,000 RMB"


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("30,000", ["30000"]),
        ("30000", ["30000"]),
        ("30 000", ["30000"]),
        ("30.000", ["30000"]),
        ("30'000", ["30000"]),
        ("30k", ["30000"]),
        ("30 thousand", ["30000"]),
        ("30,000.50", ["30000.5"]),
        ("30.000,50", ["30000.5"]),
        ("3.5", ["3.5"]),
        ("1,2", ["1", "2"]),
        ("in 2026 100 items", ["in", "2026", "100", "items"]),
        ("3万元", ["30000", "cny"]),
        ("RMB 30,000", ["30000", "cny"]),
        ("30,000 RMB", ["30000", "cny"]),
        ("30 000,50 €", ["30000.5", "eur"]),
        ("US$ 30k", ["30000", "usd"]),
        (
            "JPY 3,000 or EUR 5 or GBP 7 or CNY 9 or €1 or £2",
            [
                "3000",
                "jpy",
                "or",
                "5",
                "eur",
                "or",
                "7",
                "gbp",
                "or",
                "9",
                "cny",
                "or",
                "1",
                "eur",
                "or",
                "2",
                "gbp",
            ],
        ),
        ("12 %", ["12", "percent"]),
        ("payment in USD only", ["payment", "in", "usd", "only"]),
        ("Pre-Payment, SHALL", ["pre", "payment", "shall"]),
    ],
)
def test_tokens(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_ambiguous_dot_keeps_both_readings() -> None:
    [(primary, readings)] = number_values("30.000")
    assert str(primary) == "30000"
    assert {str(r) for r in readings} == {"30000", "30.000"}


@pytest.mark.parametrize(
    "text",
    [
        "prepayment shall not exceed 30000 rmb",
        "PREPAYMENT\n\n   SHALL NOT\r\n EXCEED\t30 000\u00a0RMB",
        "Prepayment shall not exceed 30,000RMB.",
        "…terms: Prepayment shall not exceed 30.000 RMB; net 30",
    ],
)
def test_found_despite_formatting(text: str) -> None:
    m = find_clause(text, CLAUSE)
    assert m.found
    assert m.matched == m.total == 6
    assert m.start is not None
    assert m.end is not None
    assert "30" in text[m.start : m.end]


def test_different_number_is_not_found() -> None:
    m = find_clause("Prepayment shall not exceed 50,000 RMB", CLAUSE)
    assert not m.found
    assert m.matched == 4
    assert m.first == 0


def test_partial_match_shows_truncation() -> None:
    text = "context... " * 50 + "Prepayment shall not exc"
    m = find_clause(text, CLAUSE)
    assert not m.found
    assert (m.matched, m.first, m.total) == (3, 0, 6)
    assert m.excerpt.endswith("Prepayment shall not exc")
    assert m.ratio == 0.5


def test_words_inside_longer_words_do_not_match() -> None:
    assert not find_clause("prepayments shall not exceed 30,000 rmb", CLAUSE).found


def test_absent_and_empty() -> None:
    m = find_clause("nothing to see", CLAUSE)
    assert not m.found
    assert m.matched == 0
    assert m.start is None
    assert find_clause("anything", "  ,. ").total == 0


def test_common_anchor_falls_back_to_full_scan() -> None:
    # Every word of the clause occurs more than the window cap: the whole text is tokenized instead.
    text = "the net the net " * 400 + "the net 30 days"
    assert find_clause(text, "the net 30").found
    assert not find_clause(text, "the net 31").found


def test_number_only_clause() -> None:
    assert find_clause("amount: 30 000 rmb", "30,000").found
    m = find_clause("amount: 31 000 rmb", "30,000")
    assert not m.found


def test_window_grows_for_whitespace_heavy_input() -> None:
    spaced = "Prepayment" + " " * 2000 + "shall not exceed 30,000 RMB"
    assert find_clause("x " * 1000 + spaced + " y" * 1000, CLAUSE).found


def test_large_input_found_in_the_middle() -> None:
    filler = "Invoices are due within days of delivery, amount 12,345.\n" * 20000
    text = filler + "Prepayment shall not exceed 30 000 RMB." + filler
    m = find_clause(text, CLAUSE)
    assert m.found
    assert m.start == len(filler)


def test_cjk_clause() -> None:
    assert find_clause("合同规定：预付款不得超过3万元。", "预付款不得超过30,000元").found


def test_clause_cut_off_at_the_very_end_of_the_text() -> None:
    # Every word present up to the cut, and the text ends there: the window cannot grow past it.
    text = "terms " * 200 + "Prepayment shall not exceed 30,000"
    m = find_clause(text, CLAUSE)
    assert not m.found
    assert (m.matched, m.first) == (5, 0)
    text2 = "Prepayment shall not exceed 30,000 RMB"[8:] + " filler" * 100
    assert not find_clause(text2, CLAUSE).found


def test_best_partial_names_where_the_text_differs() -> None:
    m = find_clause("Prepayment shall not exceed 50,000 RMB per order.", CLAUSE)
    assert not m.found
    assert (m.matched, m.first) == (4, 0)
    assert m.differs == ("50,000 RMB", "30,000 RMB")
    inner = find_clause("The prepayment may not exceed 30,000 RMB.", CLAUSE)
    assert inner.differs == ("may", "shall")
    assert find_clause("see: Prepayment shall not", CLAUSE).differs is None  # the text just stops


@pytest.mark.parametrize(
    ("first", "second", "parts"),
    [
        (
            "Attachment v2. Payment terms. Prepayment shall not",
            "exceed 30,000 RMB per order. Net 30.",
            ("2. Payment terms. Prepayment shall not", "exceed 30,000 RMB per order. Net"),
        ),
        # An overlapping splitter repeats the boundary's words in both chunks.
        (
            "Payment terms. Prepayment shall not exceed",
            "not exceed 30,000 RMB per order.",
            ("Payment terms. Prepayment shall not exceed", "not exceed 30,000 RMB per order"),
        ),
        # A character splitter cuts a word, or a number, in two.
        ("Terms. Prepayment shall not exc", "eed 30,000 RMB per order.", None),
        ("Terms. Prepayment shall not exceed 30,", "000 RMB per order.", None),
    ],
)
def test_split_clause(first: str, second: str, parts: tuple[str, str] | None) -> None:
    got = split_clause(first, second, CLAUSE)
    assert got is not None
    if parts is not None:
        assert got == parts
    a, b = got
    assert first.endswith(a)
    assert second.startswith(b)
    # Each part is widened by neighbouring words so that finding it means the chunk was there.
    assert len(tokenize(a)) >= min(5, len(tokenize(first)))
    assert len(tokenize(b)) >= min(4, len(tokenize(second)))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Prepayment shall not", "exceed 50,000 RMB per order."),  # another value after the cut
        ("Prepayment shall not exceed 30,000 RMB", "Net 30."),  # whole in the first chunk
        ("Net 30.", "Prepayment shall not exceed 30,000 RMB"),
        ("exceed 30,000 RMB", "Prepayment shall not"),  # the wrong way round
    ],
)
def test_split_clause_only_across_a_boundary(first: str, second: str) -> None:
    assert split_clause(first, second, CLAUSE) is None


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("30,00", ["30"]),  # a decimal comma with cents, not the numbers 30 and 0
        ("1,50 EUR", ["1.5", "eur"]),
        ("1,2", ["1", "2"]),  # one digit after the comma: a list stays two numbers
        ("10,11,12", ["10", "11", "12"]),
    ],
)
def test_decimal_comma_without_thousands(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_decimal_comma_clause_found_in_another_format() -> None:
    assert find_clause("The fee is EUR 30.00 per page.", "fee is 30,00 EUR per page").found


@pytest.mark.parametrize(
    ("text", "clause", "found"),
    [
        # The text's own currency words say what "¥" is.
        (
            "Prepayment: ¥30,000 (人民币) per order",
            CLAUSE.replace("Prepayment shall not exceed", "Prepayment:"),
            True,
        ),
        ("Cap ¥30,000 per order; all sums in RMB", "Cap 30,000 RMB per order", True),
        ("Cap ¥30,000 per order; all sums in JPY", "Cap 30,000 RMB per order", False),
        ("Cap ¥30,000 per order; 30000日元 elsewhere", "Cap 30,000 RMB per order", False),
        # The text names neither: the clause's currency decides, both ways round.
        ("Cap ¥30,000 per order", "Cap 30,000 RMB per order", True),
        ("Cap 30,000 CNY per order", "Cap ¥30,000 per order", True),
        ("Cap 30,000 yen per order", "Cap ¥30,000 per order", True),
        # A text naming both, or nothing naming either: "¥" matches only "¥".
        ("Cap ¥30,000 per order (RMB or JPY)", "Cap 30,000 RMB per order", False),
        ("Cap ￥30,000 per order", "Cap ¥30,000 per order", True),
        ("Cap $30,000 per order", "Cap ¥30,000 per order", False),
    ],
)
def test_yen_sign_reads_by_the_currency_named(text: str, clause: str, found: bool) -> None:
    assert find_clause(text, clause).found is found


@pytest.mark.parametrize(
    "text",
    [
        "The attachment is effective from 2026-03-01 onwards.",
        "The attachment is EFFECTIVE FROM 01.03.2026 onwards.",
        "The attachment is effective from\nMarch 1st, 2026 onwards.",
        "The attachment is effective from 2026年3月1日 onwards.",
        "The attachment is effective from 2026-03-01T00:00:00Z onwards.",
    ],
)
def test_dates_found_whatever_the_format(text: str) -> None:
    m = find_clause(text, "effective from 1 March 2026")
    assert m.found, m
    assert find_clause(text, "effective from 2 March 2026").found is False


def test_ambiguous_dates_are_never_read_one_way() -> None:
    """01/03/2026 is 1 March or January 3: it matches only a date written the same ambiguous way."""
    text = "The attachment is effective from 01/03/2026 onwards."
    m = find_clause(text, "effective from 1 March 2026")
    assert not m.found
    assert m.differs == ("01/03/2026", "1 March 2026")  # the partial match says where it stops
    assert not find_clause(text, "effective from January 3, 2026").found
    assert find_clause(text, "effective from 01-03-2026").found
    assert not find_clause(text, "effective from 03/01/2026").found
    # A day past 12 settles the order: 13/03/2026 can only be 13 March.
    assert find_clause("effective from 13/03/2026", "effective from 2026-03-13").found


def test_date_found_in_a_large_input_via_the_windowed_search() -> None:
    filler = "Clause text about other matters, dated 2025-01-01. " * 20_000
    text = filler + "This attachment is effective from 1st of March, 2026 for all orders. " + filler
    m = find_clause(text, "attachment is effective from 01.03.2026 for all orders")
    assert m.found
    assert m.start is not None
    assert text[m.start : m.end].startswith("attachment")


@pytest.mark.parametrize(
    ("text", "day_first"),
    [("effective from 01/03/2026 onwards", True), ("Effective from 03-01-2026 onwards", False)],
)
def test_ambiguous_date_names_the_reading_that_would_match(text: str, day_first: bool) -> None:
    m = find_clause(text, "effective from 1 March 2026", partial=False)
    assert not m.found  # the order of day and month is not known: never a match
    assert len(m.ambiguous) == 1
    a = m.ambiguous[0]
    assert (a.text, a.clause_text, a.date.isoformat(), a.day_first) == (
        text[15:25],
        "1 March 2026",
        "2026-03-01",
        day_first,
    )
    assert m.start is not None
    assert text[m.start : m.end].lower().startswith("effective")


def test_ambiguous_date_reading_needs_the_rest_of_the_clause_and_a_matching_reading() -> None:
    # Neither reading of 01/04/2026 is 1 March; the rest of the clause must match as written.
    assert find_clause("effective from 01/04/2026", "effective from 1 March 2026").ambiguous == ()
    assert find_clause("valid from 01/03/2026", "effective from 1 March 2026").ambiguous == ()
    # An unambiguous spelling matches outright, with nothing ambiguous about it.
    for text in ("effective from 13/03/2026", "effective from 03/13/2026"):
        m = find_clause(text, "effective from 13 March 2026")
        assert m.found, text
        assert m.ambiguous == (), text


def test_ambiguous_dates_in_a_large_input() -> None:
    filler = "Clause text about other matters, dated 2025-01-01. " * 20_000
    text = filler + "This attachment is effective from 01/03/2026 for all orders. " + filler
    m = find_clause(text, "attachment is effective from 1 March 2026 for all orders")
    assert not m.found
    assert [a.text for a in m.ambiguous] == ["01/03/2026"]


def test_a_clause_in_a_tool_results_json_text_is_in_the_model_input(mk: ModuleType) -> None:
    # A tool's result reaches the model as the JSON text it was sent: the document's line break is "\n"
    # glued to the clause's first word, and json.dumps writes non-ASCII as \uXXXX. The clause was given
    # to the model: in_context passes (it read dropped_in_context), at one level of JSON or two.
    result = {"results": [{"doc_id": mk.DOC, "version": "v2", "content": mk.V2_TEXT}]}
    for context in (json.dumps(result), json.dumps(json.dumps(result))):
        loc = mk.localize(mk.task(model_calls=(mk.model(context=context),)), mk.ticket(), [mk.entry()])
        assert (loc.verdict, mk.statuses(loc)) == ("no_fault", ["pass", "pass", "pass", "pass"])
    clause = "预付款不得超过30,000元"
    assert find_clause(prepare(json.dumps({"content": f"附件二。{clause}"})), clause).found
    assert not find_clause(prepare(json.dumps({"content": "预付款不得超过50,000元"})), clause).found


@pytest.mark.parametrize(
    "clause",
    [
        r"the cap is 3 \times 10,000 RMB per order",
        r"invoices go to C:\new\reports and are paid net 30",
        r"terms are quoted as \"net 30\" from the invoice date",
    ],
)
def test_a_clause_with_backslashes_of_its_own_is_found_as_written_and_as_json(clause: str) -> None:
    # The model input's escapes are read (a tool result's JSON text); a clause holding a backslash
    # sequence of its own ("\times", a Windows path) is read the same way, or the same words given to
    # the model as written read as absent: dropped_in_context, a definite verdict the trace contradicts.
    assert find_clause(prepare(f"Context: {clause}."), clause).found
    assert find_clause(prepare(json.dumps({"content": clause})), clause).found
    assert find_clause(prepare(json.dumps(json.dumps({"content": clause}))), clause).found
    other = clause.replace("30", "60").replace("10,000", "20,000")
    assert not find_clause(prepare(f"Context: {other}."), clause).found
