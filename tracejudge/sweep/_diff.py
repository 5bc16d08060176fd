"""What changed between two versions of a document: the sentences that differ and the values that changed.

Pure. Sentences are compared by their canonical tokens (case, spacing, punctuation and number formats
do not count), so a clause that only moved is unchanged. Sentences present in one version only are
paired with their closest counterpart in the other (values masked, so "not exceed 50,000 RMB" pairs
with "not exceed 30,000 RMB", and a reworded sentence pairs with its rewording); the rest were added
or removed. A value changed when one version states it and the other states it nowhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from tracejudge.localize import tokenize
from tracejudge.schema import ChangedValue, SentenceChange, VersionDiff
from tracejudge.sweep._values import Value, agrees, find_values, sentences

__all__ = ["Sentence", "split_sentences", "version_diff"]

# Below this share of common (value-masked) tokens two sentences are unrelated: one was removed and the
# other added, not reworded.
_PAIR_AT = 0.5


@dataclass(frozen=True)
class Sentence:
    """A sentence of a version with its values."""

    text: str
    """The sentence as written."""
    tokens: tuple[str, ...]
    """Canonical tokens (what equality means)."""
    masked: tuple[str, ...]
    """Tokens with numbers and dates replaced by one placeholder (what pairing compares)."""
    values: tuple[Value, ...]
    """Values it states (offsets within the sentence)."""


def _mask(token: str) -> str:
    return "#" if token[:1].isdigit() or token.startswith("date:") else token


def split_sentences(content: str) -> list[Sentence]:
    """The sentences of a version's content, with their tokens and values."""
    out = []
    for a, b in sentences(content):
        text = content[a:b]
        tokens = tuple(tokenize(text))
        if not tokens:
            continue
        out.append(Sentence(text, tokens, tuple(_mask(t) for t in tokens), tuple(find_values(text))))
    return out


def _only(values: Sequence[Value], others: Sequence[Value]) -> tuple[ChangedValue, ...]:
    seen: list[ChangedValue] = []
    for v in values:
        if not any(agrees(v, o) for o in others):
            rec = v.record()
            if rec not in seen:
                seen.append(rec)
    return tuple(seen)


def _similarity(a: Sentence, b: Sentence) -> float:
    return SequenceMatcher(None, a.masked, b.masked, autojunk=False).ratio()


def _unmatched(these: Sequence[Sentence], others: Sequence[Sentence]) -> list[Sentence]:
    """The sentences of ``these`` that ``others`` do not hold (by canonical tokens)."""
    keys = {s.tokens for s in others}
    return [s for s in these if s.tokens not in keys]


def _pairs(gone: Sequence[Sentence], fresh: Sequence[Sentence]) -> dict[int, int]:
    """Index in ``fresh`` -> index in ``gone`` of each rewording: greedy pairing, closest pairs first;
    each sentence pairs at most once, and not below :data:`_PAIR_AT`."""
    scored = sorted(
        ((_similarity(o, n), i, j) for i, o in enumerate(gone) for j, n in enumerate(fresh)),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    pair_of_new: dict[int, int] = {}
    used_old: set[int] = set()
    for score, i, j in scored:
        if score < _PAIR_AT:
            break
        if i in used_old or j in pair_of_new:
            continue
        used_old.add(i)
        pair_of_new[j] = i
    return pair_of_new


def _change(
    n: Sentence, o: Sentence | None, old_all: Sequence[Value], new_all: Sequence[Value]
) -> SentenceChange:
    """A sentence of the new version only: a rewording of ``o``, or added when it pairs with none."""
    new_vals = _only(n.values, old_all)
    if o is None:
        return SentenceChange(kind="added", new=n.text, new_values=new_vals)
    return SentenceChange(
        kind="changed", old=o.text, new=n.text, old_values=_only(o.values, new_all), new_values=new_vals
    )


def version_diff(old: str, new: str) -> VersionDiff:
    """The sentences of ``new`` that differ from ``old`` (changed, added, removed) and the values that
    changed, each side's values listed only when the other version states them nowhere."""
    olds, news = split_sentences(old), split_sentences(new)
    gone, fresh = _unmatched(olds, news), _unmatched(news, olds)
    old_all = [v for s in olds for v in s.values]
    new_all = [v for s in news for v in s.values]
    pair_of_new = _pairs(gone, fresh)
    paired = set(pair_of_new.values())
    changes = [
        _change(n, gone[pair_of_new[j]] if j in pair_of_new else None, old_all, new_all)
        for j, n in enumerate(fresh)
    ]
    changes += [
        SentenceChange(kind="removed", old=o.text, old_values=_only(o.values, new_all))
        for i, o in enumerate(gone)
        if i not in paired
    ]
    return VersionDiff(
        changes=tuple(changes),
        old_values=_only(old_all, new_all),
        new_values=_only(new_all, old_all),
    )
