"""Tolerant text matching: a clause in a (possibly huge) model input, whatever the formatting.

Both sides become canonical tokens: words lower-cased, punctuation dropped, CJK characters one
token each, numbers reduced to one canonical value ("30,000", "30000", "30 000", "30.000", "30k"
are all ``30000``). The clause is present when its token sequence occurs contiguously in the input.

The input is never tokenized whole when it can be avoided: its lower-cased copy is scanned for the
clause's rarest distinctive word (``str.count``/``str.find`` run in C), and only windows around
those occurrences are tokenized. That keeps a 10 MB input in milliseconds and linear in size.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from difflib import SequenceMatcher
from operator import attrgetter
from typing import NamedTuple

from tracejudge.localize._dates import date_key, date_spans

__all__ = [
    "AmbiguousDate",
    "ClauseMatch",
    "find_clause",
    "number_values",
    "one_line",
    "split_clause",
    "tokenize",
]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_GROUP_SEPS = ",.'’\u00a0\u202f "
# A number run: digit groups joined by one separator; a plain space only before exactly three digits,
# so "in 2026 100 items" stays two numbers while "30 000" is one.
_NUM_RUN = r"\d+(?:(?:[,.'’\u00a0\u202f]|[ ](?=\d{3}(?!\d)))\d+)*"
_MULTIPLIERS = {
    "k": Decimal(1000),
    "thousand": Decimal(1000),
    "mn": Decimal(10) ** 6,
    "million": Decimal(10) ** 6,
    "bn": Decimal(10) ** 9,
    "billion": Decimal(10) ** 9,
    "万": Decimal(10) ** 4,
    "亿": Decimal(10) ** 8,
}
# A currency or percent sign written next to a number becomes one canonical unit token after it, so
# "RMB 30,000", "30,000 RMB", "30000 yuan" and "30000元" read alike. "¥" is yuan or yen: it reads as
# the one its own text names (RMB/CNY/yuan/元/人民币 or JPY/yen/円/日元); when that text names neither,
# as the one the other side of the search names (the ticket's clause, or the model input); when a
# text names both, or nothing names either, it stays "¥", which only matches another "¥".
_YEN_OR_YUAN = "cny|jpy"
_UNITS = {
    "rmb": "cny", "cny": "cny", "yuan": "cny", "元": "cny",
    "usd": "usd", "us$": "usd", "$": "usd", "dollar": "usd", "dollars": "usd",
    "eur": "eur", "€": "eur", "euro": "eur", "euros": "eur",
    "gbp": "gbp", "£": "gbp", "pound": "gbp", "pounds": "gbp",
    "jpy": "jpy", "yen": "jpy", "円": "jpy", "日元": "jpy",
    "¥": _YEN_OR_YUAN, "￥": _YEN_OR_YUAN,
    "%": "percent", "percent": "percent", "per cent": "percent", "pct": "percent",
}  # fmt: skip
_TOKEN = re.compile(
    # The lookahead on the first character keeps the prefix attempt cheap at every other position.
    r"(?:(?=[$€£¥￥urcegj])"
    r"(?P<pre>us\$|[$€£¥￥]|(?<![^\W\d_])(?:rmb|cny|usd|eur|gbp|jpy)(?=[ \u00a0]?\d))[ \u00a0]?)?"
    rf"(?P<num>{_NUM_RUN})"
    rf"(?:[ \u00a0]?(?:(?P<mul>k|thousand|mn|million|bn|billion)(?![^\W\d_])|(?P<cjkmul>万|亿)))?"
    r"(?:[ \u00a0]?(?:(?P<post>per[ ]?cent|pct|rmb|cny|yuan|usd|dollars?|eur|euros?|gbp|pounds?|jpy|yen)"
    r"(?![^\W\d_])|(?P<sign>[%€£$¥￥]))|(?P<cjkpost>日元|元|円))?"
    rf"|(?P<cjk>[{_CJK}])"
    rf"|(?P<word>[^\W\d_{_CJK}]+)"
)
_ANCHORS = 4
# Longer than any date spelled out ("1st of September, 2026").
_EDGE = 32
_MAX_WINDOWS = 256
_PARTIAL_WINDOWS = 24


_YUAN_WORDS = re.compile(r"(?<![^\W\d_])(?:rmb|cny|yuan|renminbi)(?![^\W\d_])|人民币|(?<!日)元")
_YEN_WORDS = re.compile(r"(?<![^\W\d_])(?:jpy|yen)(?![^\W\d_])|円|日元")


def _yen_family(low: str) -> str | None:
    """Which of yuan ("cny") and yen ("jpy") a lower-cased text names; "both"; None for neither."""
    yuan, yen = _YUAN_WORDS.search(low) is not None, _YEN_WORDS.search(low) is not None
    return "both" if yuan and yen else "cny" if yuan else "jpy" if yen else None


def _yen_reading(own: str | None, other: str | None) -> str | None:
    """What "¥" means in a text naming ``own`` whose counterpart names ``other`` (None: undecided)."""
    if own in ("cny", "jpy"):
        return own
    if own is None and other in ("cny", "jpy"):
        return other
    return None


def _canon(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


_GROUP_SEP = re.compile(r"([,.'’\u00a0\u202f ])")


class _DigitGroups:
    """A digit run cut at its separators, read one number at a time (see :func:`number_values`)."""

    __slots__ = ("cents", "groups", "seps")

    def __init__(self, run: str) -> None:
        parts = _GROUP_SEP.split(run)
        self.groups, self.seps = parts[0::2], parts[1::2]
        # A run that is just "30,00" or "1,50": a decimal comma with cents, as prices are written
        # across Europe, not the list "30, 0". "1,2" (one digit) stays two numbers: lists write it.
        self.cents = len(self.groups) == 2 and self.seps == [","] and len(self.groups[1]) == 2

    def integer_part(self, i: int) -> tuple[str, int, str | None]:
        """The digits of the number starting at group ``i`` (thousands groups joined), the index of
        its last group and the thousands separator (None when the number is not grouped)."""
        groups, seps = self.groups, self.seps
        digits = groups[i]
        if len(digits) > 3 or i >= len(seps) or len(groups[i + 1]) != 3:
            return digits, i, None
        thousands = seps[i]
        j = i
        while j < len(seps) and seps[j] == thousands and len(groups[j + 1]) == 3:
            digits += groups[j + 1]
            j += 1
        return digits, j, thousands

    def decimal_part(self, j: int, thousands: str | None) -> tuple[str, int]:
        """The decimals after group ``j`` ("" for none) and the index of the number's last group."""
        if j >= len(self.seps):
            return "", j
        sep = self.seps[j]
        # The decimal mark is the other one of "," and "." once thousands are grouped: "30,000.50",
        # "30.000,50", and with space or apostrophe groups both occur ("30 000,50" in France,
        # "30'000.50" in Switzerland).
        if sep == "." and thousands != ".":
            return self.groups[j + 1], j + 1
        if sep == "," and (self.cents or thousands not in (None, ",")):
            return self.groups[j + 1], j + 1
        return "", j

    def readings(self, i: int, j: int, value: Decimal, grouped_by_dot: bool) -> frozenset[Decimal]:
        """Every plausible value of groups ``i..j`` read as ``value``."""
        if grouped_by_dot and j == i + 1:
            # "30.000" is thirty thousand in most of Europe, thirty elsewhere.
            return frozenset((value, Decimal(f"{self.groups[i]}.{self.groups[i + 1]}")))
        return frozenset((value,))


def number_values(run: str) -> list[tuple[Decimal, frozenset[Decimal]]]:
    """The numbers a digit run spells: ``[(primary value, every plausible reading)]``.

    "30,000.50" and "30.000,50" are one number each; "30.000" reads as thirty thousand (the
    alternative reading 30.0 is kept for fact comparisons); "30,00" and "1,50" are decimal commas;
    "1,2" is two numbers.
    """
    if run.isdigit():
        # The common case, one group of digits: nothing to read between groups.
        try:
            value = Decimal(run)
        except InvalidOperation:
            return []
        return [(value, frozenset((value,)))]
    run_groups = _DigitGroups(run)
    out: list[tuple[Decimal, frozenset[Decimal]]] = []
    i = 0
    while i < len(run_groups.groups):
        digits, j, thousands = run_groups.integer_part(i)
        decimal, j = run_groups.decimal_part(j, thousands)
        try:
            value = Decimal(f"{digits}.{decimal}" if decimal else digits)
        except InvalidOperation:
            i = j + 1
            continue
        out.append((value, run_groups.readings(i, j, value, thousands == "." and not decimal)))
        i = j + 1
    return out


class _Tok(NamedTuple):
    # A named tuple, not a dataclass: a 10 MB input is millions of these.
    text: str
    start: int
    end: int
    match: int
    word: bool


def _tokens(text: str, offset: int = 0, yen: str | None = None) -> list[_Tok]:
    # Dates first: each is one canonical token ("1 March 2026" and "2026-03-01" alike), and the
    # digits inside it are not read again as numbers.
    toks: list[_Tok] = []
    pos = n = 0
    for a, b, first, readings in date_spans(text):
        n = _plain_tokens(toks, text, pos, a, offset, yen, n)
        toks.append(_Tok(date_key(first, readings), offset + a, offset + b, n, False))
        pos, n = b, n + 1
    _plain_tokens(toks, text, pos, len(text), offset, yen, n)
    return toks


def _plain_tokens(
    toks: list[_Tok], text: str, pos: int, endpos: int, offset: int, yen: str | None, base: int
) -> int:
    """Append the word, CJK and number tokens of ``text[pos:endpos]``; return the next match number."""
    append = toks.append
    n = base
    for n, m in enumerate(_TOKEN.finditer(text, pos, endpos), base + 1):
        if m.group("num") is None:
            a, b = m.span()
            append(_Tok(m.group(0), offset + a, offset + b, n, True))
        else:
            _number_tokens(toks, m, offset, yen, n)
    # n is the last match number used (base when there was none): the next one is n + 1.
    return n + 1


def _number_tokens(toks: list[_Tok], m: re.Match[str], offset: int, yen: str | None, n: int) -> None:
    """Append the tokens of a number match: its canonical values (the multiplier applies to the
    last), then its unit's code when it has one."""
    start, end = offset + m.start(), offset + m.end()
    values = number_values(m.group("num"))
    mul_name = m.group("mul") or m.group("cjkmul")
    if mul_name and values:
        value, readings = values[-1]
        values[-1] = (value * _MULTIPLIERS[mul_name], readings)
    toks.extend(_Tok(_canon(value), start, end, n, False) for value, _ in values)
    code = _unit_code(m, yen)
    if code is not None:
        # Not a word token: the canonical code need not occur literally, so it is never an anchor.
        toks.append(_Tok(code, start, end, n, False))


def _unit_code(m: re.Match[str], yen: str | None) -> str | None:
    """The canonical code of a number match's currency or percent unit; None when it has none.
    "¥" reads as ``yen`` when that is decided (see ``_UNITS``)."""
    unit = m.group("post") or m.group("sign") or m.group("cjkpost") or m.group("pre")
    if unit is None:
        return None
    code = _UNITS[re.sub(r"\s+", " ", unit)]
    return yen if code == _YEN_OR_YUAN and yen is not None else code


def tokenize(text: str) -> list[str]:
    """Canonical tokens of a text (lower-cased words, CJK characters, canonical numbers)."""
    return [t.text for t in _tokens(text.lower())]


class AmbiguousDate(NamedTuple):
    """A date in the text that equals the clause's date under one reading of its order only."""

    text: str
    """The date as the text writes it, e.g. "01/03/2026"."""
    clause_text: str
    """The clause's date as the clause writes it, e.g. "1 March 2026"."""
    date: date
    """The clause's date."""
    day_first: bool
    """The reading that gives ``date``: day first (01/03 = 1 March) or month first (03/01 = 1 March)."""


@dataclass(frozen=True)
class ClauseMatch:
    """Where (and how much of) a clause occurs in a text."""

    found: bool
    """The whole clause occurs (after normalization)."""
    matched: int
    """Clause tokens in the best contiguous run found (all of them when ``found``)."""
    total: int
    """Tokens in the clause."""
    first: int
    """Index of the run's first token within the clause."""
    start: int | None
    """Character offset of the run in the text (None when nothing matched)."""
    end: int | None
    """Character offset just after the run."""
    excerpt: str
    """The run with a little context, whitespace collapsed."""
    differs: tuple[str, str] | None = None
    """Where the text goes on differently from the clause next to the best run: (the text's words,
    the clause's words), e.g. ("50,000 RMB", "30,000 RMB") for a stale value; None when the run
    is the whole clause or the text simply stops."""
    ambiguous: tuple[AmbiguousDate, ...] = ()
    """When the clause is not found as written but would be if the text's ambiguous dates
    ("01/03/2026") were read one way: those dates. ``found`` stays False (the order is a guess),
    and the offsets, excerpt and ``differs`` describe that reading's match."""

    @property
    def ratio(self) -> float:
        """Share of the clause's tokens in the best run."""
        return self.matched / self.total if self.total else 0.0


def one_line(text: str, n: int) -> str:
    """``text`` on one line (whitespace runs as one space), at most ``n`` characters, its end
    replaced by ``…`` when cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def _excerpt(text: str, start: int, end: int, pad: int = 40, limit: int = 240) -> str:
    a, b = max(0, start - pad), min(len(text), end + pad)
    if b - a > limit:
        b = a + limit
    flat = " ".join(text[a:b].split())
    return ("…" if a > 0 else "") + flat + ("…" if b < len(text) else "")


class _Haystack:
    """A text prepared once for several clause searches: lower-cased, tokenized lazily by window."""

    def __init__(self, text: str, *, unescaped: bool = False) -> None:
        self.text = text
        # Whether `text` had its JSON escapes read (prepare): a clause searched in it is read so too.
        self.unescaped = unescaped
        self.low = text.lower()
        # str.lower() can change the length (a handful of characters); offsets then refer to `low`.
        self.shown = text if len(self.low) == len(text) else self.low
        self._all: dict[str | None, list[_Tok]] = {}
        self._counts: dict[str, int] = {}
        self._yen: str | bool | None = False

    @property
    def yen_family(self) -> str | None:
        """Which of yuan and yen the text names (see :func:`_yen_family`), computed once."""
        if self._yen is False:
            self._yen = _yen_family(self.low)
        return self._yen if isinstance(self._yen, str) else None

    def has_yen_sign(self) -> bool:
        return "¥" in self.low or "￥" in self.low

    def count(self, word: str) -> int:
        n = self._counts.get(word)
        if n is None:
            n = self._counts[word] = self.low.count(word)
        return n

    def all_tokens(self, yen: str | None = None) -> list[_Tok]:
        toks = self._all.get(yen)
        if toks is None:
            toks = self._all[yen] = _tokens(self.low, 0, yen)
        return toks

    def window(self, a: int, b: int, yen: str | None = None) -> tuple[list[_Tok], int, int]:
        """Tokens of low[a:b] that are surely tokenized as in the whole text (edge matches dropped)."""
        a, b = max(0, a), min(len(self.low), b)
        toks = _tokens(self.low[a:b], a, yen)
        if not toks:
            return toks, 0, 0
        # A date or number cut by the window's edge reads differently ("arch 2026" of "1 March
        # 2026"), so tokens within reach of a cut edge are dropped with the edge match itself.
        lo = 0
        if a > 0:
            first = toks[0].match
            while lo < len(toks) and (toks[lo].match == first or toks[lo].start < a + _EDGE):
                lo += 1
        hi = len(toks)
        if b < len(self.low):
            last = toks[-1].match
            while hi > lo and (toks[hi - 1].match == last or toks[hi - 1].end > b - _EDGE):
                hi -= 1
        return toks, lo, hi


def _clause_anchors(ctoks: list[_Tok]) -> list[tuple[str, int]]:
    """Distinct word tokens of the clause with their first index, longest first."""
    seen: dict[str, int] = {}
    for i, t in enumerate(ctoks):
        if t.word and t.text not in seen:
            seen[t.text] = i
    return sorted(seen.items(), key=lambda kv: (-len(kv[0]), kv[1]))


def _run_at(toks: list[_Tok], lo: int, hi: int, at: int, ia: int, want: list[str]) -> bool | None:
    """Does the clause occur with its token ``ia`` at window token ``at``? None: the window is too small."""
    begin, end = at - ia, at - ia + len(want)
    if begin < lo or end > hi:
        # Check what is inside first: a mismatch there settles it without widening.
        for k, w in enumerate(want):
            p = begin + k
            if lo <= p < hi and toks[p].text != w:
                return False
        return None
    return all(toks[begin + k].text == w for k, w in enumerate(want))


class _Anchor(NamedTuple):
    """A clause word whose occurrences in the text are searched for the clause."""

    word: str
    position: int
    """Its token index in the clause."""
    before: int
    """Characters of the clause before it."""
    after: int
    """Characters of the clause from it to the end."""


def _find_exact(
    hay: _Haystack, clause_low: str, ctoks: list[_Tok], yen: str | None
) -> tuple[int, int] | bool | None:
    """Offsets of the clause, None when absent, False when the fast path cannot decide."""
    anchor = _choose_anchor(hay, clause_low, ctoks)
    if not isinstance(anchor, _Anchor):
        return anchor
    want = [t.text for t in ctoks]
    for pos in _occurrences(hay.low, anchor.word):
        where = _run_around(hay, pos, anchor, want, yen)
        if where is not None:
            return where
    return None


def _occurrences(low: str, word: str) -> Iterator[int]:
    """Offsets of ``word`` in ``low``, first to last (overlapping ones too)."""
    pos = low.find(word)
    while pos != -1:
        yield pos
        pos = low.find(word, pos + 1)


def _choose_anchor(hay: _Haystack, clause_low: str, ctoks: list[_Tok]) -> _Anchor | bool | None:
    """The clause word to search the text for; None when one of the clause's words is absent (so
    is the clause); False when none is rare enough for the fast path."""
    # Longest words first: they are usually the rarest, so one pass over the text tends to suffice.
    for w, i in _clause_anchors(ctoks)[:_ANCHORS]:
        n = hay.count(w)
        if n == 0:
            return None
        if n <= _MAX_WINDOWS:
            return _Anchor(w, i, ctoks[i].start, len(clause_low) - ctoks[i].start)
    return False


def _run_around(
    hay: _Haystack, pos: int, anchor: _Anchor, want: list[str], yen: str | None
) -> tuple[int, int] | None:
    """Offsets of the clause with its anchor word at ``pos``, widening the window around it until
    that is settled; None when the clause does not occur there."""
    scale = 4
    last: tuple[int, int] | None = None
    while True:
        a = max(0, pos - scale * anchor.before - 128)
        b = min(len(hay.low), pos + scale * anchor.after + 128)
        if (a, b) == last:
            return None  # the window cannot grow: the clause runs past the text's edge
        last = (a, b)
        toks, lo, hi = hay.window(a, b, yen)
        at = next((k for k, tok in enumerate(toks) if tok.start == pos), None)
        if at is None or toks[at].text != anchor.word:
            return None  # the occurrence is inside a longer word or number
        res = _run_at(toks, lo, hi, at, anchor.position, want) if lo <= at < hi else None
        if res is True:
            s = at - anchor.position
            return toks[s].start, toks[s + len(want) - 1].end
        if res is False:
            return None
        scale *= 4


def _locate(hay: _Haystack, clause_low: str, ctoks: list[_Tok], yen: str | None) -> tuple[int, int] | None:
    """Offsets of the clause's tokens in the text, None when absent: the fast path around its rare
    words, the whole text's tokens when that cannot decide."""
    where = _find_exact(hay, clause_low, ctoks, yen)
    if where is False:
        return _find_in_all(hay, [t.text for t in ctoks], yen)
    return where if isinstance(where, tuple) else None


def _find_in_all(hay: _Haystack, want: list[str], yen: str | None) -> tuple[int, int] | None:
    toks = hay.all_tokens(yen)
    sep = "\x1f"
    joined = sep + sep.join(t.text for t in toks) + sep
    needle = sep + sep.join(want) + sep
    at = joined.find(needle)
    if at == -1:
        return None
    index = joined.count(sep, 0, at)
    return toks[index].start, toks[index + len(want) - 1].end


@dataclass(frozen=True)
class _Partial:
    size: int
    first: int
    start: int
    end: int
    differs: tuple[tuple[int, int], tuple[int, int]] | None
    """Character spans of the differing text token and clause token next to the run."""


def _divergence(
    inner: list[_Tok], ctoks: list[_Tok], a: int, b: int, size: int
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The first token pair where text and clause part, right after the run, else right before it."""
    if b + size < len(ctoks) and a + size < len(inner):
        t, c = inner[a + size], ctoks[b + size]
        return (t.start, t.end), (c.start, c.end)
    if b > 0 and a > 0:
        t, c = inner[a - 1], ctoks[b - 1]
        return (t.start, t.end), (c.start, c.end)
    return None


def _best_partial(hay: _Haystack, ctoks: list[_Tok], yen: str | None) -> _Partial | None:
    """Longest run of clause tokens near its rarest words' occurrences."""
    want = [t.text for t in ctoks]
    anchors = [w for w, _ in _clause_anchors(ctoks)[: 2 * _ANCHORS]]
    windows = _anchor_windows(hay, want, anchors, yen) if anchors else _token_windows(hay, want, yen)
    runs = [run for run in (_longest_run(inner, ctoks, want) for inner in windows) if run is not None]
    return max(runs, key=attrgetter("size"), default=None)


def _anchor_windows(hay: _Haystack, want: list[str], anchors: list[str], yen: str | None) -> list[list[_Tok]]:
    """The tokens around the anchor words' occurrences, rarest words first, within one budget of
    windows: a run around a rare word is the informative one, and common words ("shall", "the")
    would only repeat the same windows."""
    reach = 2 * (len(" ".join(want)) + 64)
    present = sorted((hay.count(w), w) for w in anchors if hay.count(w) > 0)
    every = itertools.chain.from_iterable(_occurrences(hay.low, word) for _, word in present)
    spots = sorted(itertools.islice(every, _PARTIAL_WINDOWS))
    # Overlapping windows (a common word every few lines) are merged and tokenized once.
    merged: list[list[int]] = []
    for pos in spots:
        if merged and pos - reach <= merged[-1][1]:
            merged[-1][1] = pos + reach
        else:
            merged.append([pos - reach, pos + reach])
    return [toks[lo:hi] for toks, lo, hi in (hay.window(a, b, yen) for a, b in merged)]


def _token_windows(hay: _Haystack, want: list[str], yen: str | None) -> list[list[_Tok]]:
    """The whole text's tokens around the first occurrences of the clause's tokens (a clause with
    no word to search for: numbers, dates, units only)."""
    span = len(want) + 8
    toks = hay.all_tokens(yen)
    wanted = set(want)
    hits = [i for i, t in enumerate(toks) if t.text in wanted][:_PARTIAL_WINDOWS]
    return [toks[max(0, i - span) : i + span] for i in hits]


def _longest_run(inner: list[_Tok], ctoks: list[_Tok], want: list[str]) -> _Partial | None:
    """The longest run of clause tokens in a window's tokens; None when they share none."""
    if not inner:
        return None
    m = SequenceMatcher(None, [t.text for t in inner], want, autojunk=False).find_longest_match(
        0, len(inner), 0, len(want)
    )
    if not m.size:
        return None
    start, end = inner[m.a].start, inner[m.a + m.size - 1].end
    return _Partial(m.size, m.b, start, end, _divergence(inner, ctoks, m.a, m.b, m.size))


def _yen_readings(hay: _Haystack, clause_low: str) -> tuple[str | None, str | None]:
    """What "¥" means in the clause and in the text (None: undecided; see ``_UNITS``)."""
    clause_sign = "¥" in clause_low or "￥" in clause_low
    if not clause_sign and not hay.has_yen_sign():
        return None, None
    clause_family = _yen_family(clause_low)
    return _yen_reading(clause_family, hay.yen_family), _yen_reading(hay.yen_family, clause_family)


# More dates than this in one clause: the others must match as written (each adds a factor 3 of searches).
_AMBIGUOUS_SLOTS = 3
_AMBIGUOUS_SPELLING = re.compile(r"\d{1,2}([/-])\d{1,2}\1\d{4}")


def _ambiguous_keys(tok: _Tok) -> list[tuple[str, bool]]:
    """The tokens an ambiguous spelling of the clause's date reads as, with the reading that gives
    the clause's date: "01/03/2026" (day first) and "03/01/2026" (month first) for 1 March 2026.
    None for a day past 12, or equal to the month: those spellings are unambiguous already."""
    if tok.word or not tok.text.startswith("date:") or "|" in tok.text:
        return []
    d = date.fromisoformat(tok.text[5:])
    if d.day > 12 or d.day == d.month:
        return []
    swap = d.replace(month=d.day, day=d.month)
    return [
        (f"date:{d.isoformat()}|{swap.isoformat()}", True),
        (f"date:{swap.isoformat()}|{d.isoformat()}", False),
    ]


# (clause token index, the token an ambiguous spelling reads as, the reading is day first)
_DateReading = tuple[int, str, bool]


def _date_readings(slots: list[tuple[int, list[tuple[str, bool]]]]) -> Iterator[list[_DateReading]]:
    """Every way to read some of the clause's dates as ambiguous spellings (each date as written or
    as one of its spellings), except all as written: that is the clause already searched."""
    options = [[None, *((i, key, day_first) for key, day_first in keys)] for i, keys in slots]
    for choice in itertools.product(*options):
        picked = [c for c in choice if c is not None]
        if picked:
            yield picked


def _find_ambiguous(
    hay: _Haystack, clause: str, clause_low: str, ctoks: list[_Tok], yen: str | None
) -> ClauseMatch | None:
    """The clause found by reading the text's ambiguous dates one way (see ``ClauseMatch.ambiguous``)."""
    slots = [(i, keys) for i, t in enumerate(ctoks) if (keys := _ambiguous_keys(t))][:_AMBIGUOUS_SLOTS]
    if not slots or _AMBIGUOUS_SPELLING.search(hay.low) is None:
        return None
    for reading in _date_readings(slots):
        variant = _read_dates(ctoks, reading)
        where = _locate(hay, clause_low, variant, yen)
        if where is None:
            continue
        found = _tokens(hay.low[where[0] : where[1]], where[0], yen)
        if [t.text for t in found] == [t.text for t in variant]:
            return _ambiguous_match(hay, _shown(clause, clause_low), ctoks, found, reading, where)
        # else: cannot tell which text tokens stood for the dates
    return None


def _read_dates(ctoks: list[_Tok], reading: list[_DateReading]) -> list[_Tok]:
    """The clause's tokens with the dates of ``reading`` replaced by the ambiguous spelling's token."""
    variant = list(ctoks)
    for i, key, _ in reading:
        variant[i] = ctoks[i]._replace(text=key)
    return variant


def _ambiguous_match(
    hay: _Haystack,
    shown_clause: str,
    ctoks: list[_Tok],
    found: list[_Tok],
    reading: list[_DateReading],
    where: tuple[int, int],
) -> ClauseMatch:
    """The match at ``where`` of a clause whose dates the text spells ambiguously (``found``: the
    text's tokens there)."""
    dates = tuple(
        AmbiguousDate(
            hay.shown[found[i].start : found[i].end],
            shown_clause[ctoks[i].start : ctoks[i].end],
            date.fromisoformat(ctoks[i].text[5:]),
            day_first,
        )
        for i, _, day_first in reading
    )
    total = len(ctoks)
    start, end = where
    excerpt = _excerpt(hay.shown, start, end)
    differs = (dates[0].text, dates[0].clause_text)
    return ClauseMatch(False, total, total, 0, start, end, excerpt, differs, dates)


def _shown(clause: str, clause_low: str) -> str:
    """The clause as its tokens' offsets (into its lower-cased copy) can show it."""
    return clause if len(clause) == len(clause_low) else clause_low


def find_clause(text: str | _Haystack, clause: str, *, partial: bool = True) -> ClauseMatch:
    """Find ``clause`` in ``text`` tolerating case, whitespace, line breaks, punctuation spacing and
    number formats; when absent (and ``partial``), report the longest contiguous run of its tokens
    (so a clause cut off by truncation shows as its first N tokens)."""
    hay = text if isinstance(text, _Haystack) else _Haystack(text)
    if hay.unescaped:
        # Read as the text was: a clause holding a backslash sequence of its own ("\\times", "C:\\new")
        # would otherwise differ from the same words in the input and read as absent (DESIGN 5.5).
        clause = json_unescaped(clause)
    clause_low = clause.lower()
    clause_yen, text_yen = _yen_readings(hay, clause_low)
    ctoks = _tokens(clause_low, 0, clause_yen)
    total = len(ctoks)
    if not ctoks:
        return ClauseMatch(False, 0, 0, 0, None, None, "")
    where = _locate(hay, clause_low, ctoks, text_yen)
    if where is not None:
        return ClauseMatch(True, total, total, 0, where[0], where[1], _excerpt(hay.shown, *where))
    loose = _find_ambiguous(hay, clause, clause_low, ctoks, text_yen)
    if loose is not None:
        return loose
    best = _best_partial(hay, ctoks, text_yen) if partial else None
    if best is None:
        return ClauseMatch(False, 0, total, 0, None, None, "")
    differs = None
    if best.differs is not None:
        (ta, tb), (ca, cb) = best.differs
        shown_clause = _shown(clause, clause_low)
        differs = (" ".join(hay.shown[ta:tb].split()), " ".join(shown_clause[ca:cb].split()))
    excerpt = _excerpt(hay.shown, best.start, best.end)
    return ClauseMatch(False, best.size, total, best.first, best.start, best.end, excerpt, differs)


def prepare(text: str) -> _Haystack:
    """Prepare a model input once for several :func:`find_clause` calls, its JSON string escapes read
    (``json_unescaped``): offsets refer to that text."""
    return _Haystack(json_unescaped(text), unescaped=True)


# A JSON string escape: \uXXXX, a control character's, a quote, a slash or a backslash.
_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|([nrtbf])|(["/\\]))')
_CONTROL = {"n": "\n", "r": "\r", "t": "\t", "b": " ", "f": " "}


def _unescape(m: re.Match[str]) -> str:
    code, control, char = m.groups()
    return chr(int(code, 16)) if code else _CONTROL[control] if control else char


def json_unescaped(text: str) -> str:
    """``text`` with the escapes of the JSON strings it holds read, at most three levels deep (JSON text in
    a JSON string). A model input holds a tool's result as the JSON text the model was sent: its documents'
    line breaks ``\\n`` glued to the next word ("terms.\\nPrepayment") and non-ASCII text as ``\\uXXXX``
    (Python's json.dumps by default), so a clause the model was given read as absent (DESIGN 5.5)."""
    for _ in range(3):
        if "\\" not in text:
            break
        text = _JSON_ESCAPE.sub(_unescape, text)
    return text


_SPLIT_CONTEXT = 6


def _tail(text: str, toks: list[_Tok], k: int) -> str:
    """The text of the last ``k`` tokens, widened to at least ``_SPLIT_CONTEXT`` tokens."""
    return text[toks[-max(k, min(_SPLIT_CONTEXT, len(toks)))].start :]


def _head(text: str, toks: list[_Tok], k: int) -> str:
    """The text of the first ``k`` tokens, widened to at least ``_SPLIT_CONTEXT`` tokens."""
    return text[: toks[max(k, min(_SPLIT_CONTEXT, len(toks))) - 1].end]


def split_clause(first: str, second: str, clause: str) -> tuple[str, str] | None:
    """When ``first`` ends with the start of ``clause`` and ``second`` begins with its rest (two
    consecutive chunks of one document, possibly overlapping or cut mid-word), the two parts as
    they are written in the chunks, each widened by a few neighbouring words so that finding them
    in a model input means the chunk was there; else None."""
    want = [t.text for t in _tokens(clause.lower())]
    n = len(want)
    if n < 2:
        return None
    # Only the end of one chunk and the start of the other can hold the parts.
    reach = 4 * len(clause) + 256
    first, second = first[-reach:], second[:reach]
    a_low, b_low = first.lower(), second.lower()
    if len(a_low) != len(first) or len(b_low) != len(second):
        return None  # offsets of the lower-cased text would not fit the original
    ta, tb = _tokens(a_low), _tokens(b_low)
    if not ta or not tb:
        return None
    return _split_between_tokens(first, second, ta, tb, want) or _split_in_a_word(
        first, second, ta, tb, clause
    )


def _split_between_tokens(
    first: str, second: str, ta: list[_Tok], tb: list[_Tok], want: list[str]
) -> tuple[str, str] | None:
    """The chunk boundary falls between tokens: first ends with want[:k], second starts with
    want[j:], j <= k (k - j tokens repeated by an overlapping splitter)."""
    n = len(want)
    a_words = [t.text for t in ta]
    b_words = [t.text for t in tb]
    ends = [k for k in range(min(n - 1, len(ta)), 0, -1) if a_words[-k:] == want[:k]]
    starts = [j for j in range(max(1, n - len(tb)), n) if b_words[: n - j] == want[j:]]
    for k in ends:
        for j in starts:
            if j <= k:
                return _tail(first, ta, k), _head(second, tb, n - j)
    return None


def _split_in_a_word(
    first: str, second: str, ta: list[_Tok], tb: list[_Tok], clause: str
) -> tuple[str, str] | None:
    """The boundary cuts a word or a number in two: the clause shows only in the joined text."""
    cut = len(first)
    m = find_clause(first + second, clause, partial=False)
    if not m.found or m.start is None or m.end is None or not m.start < cut < m.end:
        return None
    return first[_widened_start(ta, m.start) :], second[: _widened_end(tb, m.end - cut)]


def _widened_start(toks: list[_Tok], start: int) -> int:
    """Where the text from ``start`` begins once widened by the ``_SPLIT_CONTEXT`` tokens before it."""
    before = [t for t in toks if t.end <= start][-_SPLIT_CONTEXT:]
    return min([start, *(t.start for t in before)])


def _widened_end(toks: list[_Tok], end: int) -> int:
    """Where the text up to ``end`` ends once widened by the ``_SPLIT_CONTEXT`` tokens after it."""
    after = [t for t in toks if t.start >= end][:_SPLIT_CONTEXT]
    return max([end, *(t.end for t in after)])
