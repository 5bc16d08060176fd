"""The manifest's versions read once: each version's sentences and values, which were in effect when,
and the diff between any two versions of a document (computed once, on first use)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tracejudge.schema import Document, ManifestEntry, VersionDiff
from tracejudge.sweep._diff import Sentence, split_sentences, version_diff
from tracejudge.sweep._values import Value, agrees, value_keys

__all__ = ["DocVersion", "VersionIndex", "label", "utc"]


def id_words(doc_id: str) -> set[str]:
    """Words of three letters or more in a document id: every citation ``cites_version`` accepts holds
    them all, or the id's last word."""
    return set(re.findall(r"[^\W\d_]{3,}", doc_id.lower()))


def utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def label(doc_id: str, version: str | None) -> str:
    return f"{doc_id}@{version}" if version else doc_id


@dataclass(frozen=True)
class DocVersion:
    """One version of a document, with its content read."""

    entry: ManifestEntry
    """The manifest line."""
    sentences: tuple[Sentence, ...]
    """Its sentences (empty without ``content``)."""
    values: tuple[Value, ...]
    """Its distinctive values (see :attr:`Value.significant`)."""

    @property
    def version(self) -> str:
        return self.entry.version or ""

    @property
    def label(self) -> str:
        return label(self.entry.doc_id, self.entry.version)

    def in_effect(self, t: datetime) -> bool:
        start, end = utc(self.entry.effective_from), utc(self.entry.effective_to)
        return (start is None or start <= t) and (end is None or t < end)

    def window(self) -> str:
        start, end = utc(self.entry.effective_from), utc(self.entry.effective_to)
        a = start.date().isoformat() if start else "the start"
        return f"in effect from {a}" + (f" until {end.date().isoformat()}" if end else "")


@dataclass
class VersionIndex:
    """Documents of the manifest with at least two versions carrying ``content``: only those can tell
    what changed. Built once per sweep; read-only afterwards except for its caches."""

    docs: dict[str, tuple[DocVersion, ...]]
    """Versions of each such document, oldest effective date first."""
    _diffs: dict[tuple[str, str, str], VersionDiff] = field(default_factory=dict)
    _by_key: dict[object, list[tuple[DocVersion, Value]]] = field(default_factory=dict)
    """Every version's values (single-version documents too) by what they can match: a number, a date,
    a duration's or count's amount. A trace's answer looks its few values up instead of scanning."""
    _by_word: dict[str, set[str]] = field(default_factory=dict)
    """Versioned documents by the words of their id (three letters or more): who an answer may cite."""
    _unnamed: tuple[str, ...] = ()
    """Versioned documents whose id has no such word: always checked for citations."""

    @classmethod
    def build(cls, manifest: Sequence[ManifestEntry]) -> VersionIndex:
        versions = [_read(e) for e in manifest]
        docs = _versioned(versions)
        by_word, unnamed = _by_id_word(docs)
        return cls(docs=docs, _by_key=_by_value_key(versions), _by_word=by_word, _unnamed=unnamed)

    def version(self, doc_id: str, version: str | None) -> DocVersion | None:
        return next((v for v in self.docs.get(doc_id, ()) if v.version == version), None)

    def holders(self, value: Value) -> list[tuple[DocVersion, Value]]:
        """Every (version, its value) of the manifest that states ``value``."""
        seen: set[int] = set()
        out = []
        for key in value_keys(value):
            for dv, v in self._by_key.get(key, ()):
                if id(v) not in seen and agrees(value, v):
                    seen.add(id(v))
                    out.append((dv, v))
        return out

    def named_in(self, low: str) -> list[str]:
        """Versioned documents a lower-cased text may cite (it holds a word of their id)."""
        words = set(re.findall(r"[^\W\d_]{3,}", low))
        found = {d for w in words & self._by_word.keys() for d in self._by_word[w]}
        return [d for d in self.docs if d in found or d in self._unnamed]

    def diff(self, old: DocVersion, new: DocVersion) -> VersionDiff:
        key = (old.entry.doc_id, old.version, new.version)
        found = self._diffs.get(key)
        if found is None:
            found = self._diffs[key] = version_diff(old.entry.content or "", new.entry.content or "")
        return found

    def identify(self, doc: Document) -> tuple[str, str | None] | None:
        """(doc_id, version) of a returned document this index knows; "doc@v2" ids are split."""
        doc_id, version = doc.doc_id, doc.version
        if doc_id is None:
            return None
        if doc_id in self.docs:
            return doc_id, version
        base, sep, tail = doc_id.rpartition("@")
        if sep and base in self.docs and version is None:
            return base, tail
        return None


def _read(e: ManifestEntry) -> DocVersion:
    """A manifest line with its content split into sentences and its distinctive values."""
    sents = tuple(split_sentences(e.content)) if e.content else ()
    return DocVersion(e, sents, tuple(v for s in sents for v in s.values if v.significant))


def _by_value_key(versions: Sequence[DocVersion]) -> dict[object, list[tuple[DocVersion, Value]]]:
    """Every version's values by each key they can match (``value_keys``), in manifest order."""
    by_key: dict[object, list[tuple[DocVersion, Value]]] = {}
    for dv in versions:
        for v in dv.values:
            for key in value_keys(v):
                by_key.setdefault(key, []).append((dv, v))
    return by_key


_FAR_PAST = datetime.min.replace(tzinfo=UTC)


def _effective_from(v: DocVersion) -> datetime:
    return utc(v.entry.effective_from) or _FAR_PAST


def _versioned(versions: Sequence[DocVersion]) -> dict[str, tuple[DocVersion, ...]]:
    """Documents with two or more versions carrying content, each's versions oldest effective date first."""
    by_doc: dict[str, list[DocVersion]] = {}
    for dv in versions:
        if dv.entry.content and dv.entry.version:
            by_doc.setdefault(dv.entry.doc_id, []).append(dv)
    return {
        d: tuple(sorted(vs, key=_effective_from))
        for d, vs in by_doc.items()
        if len({v.version for v in vs}) > 1
    }


def _by_id_word(docs: Iterable[str]) -> tuple[dict[str, set[str]], tuple[str, ...]]:
    """Documents by each word of their id (``id_words``), and those whose id has none."""
    by_word: dict[str, set[str]] = {}
    unnamed = []
    for d in docs:
        words = id_words(d)
        for w in words:
            by_word.setdefault(w, set()).add(d)
        if not words:
            unnamed.append(d)
    return by_word, tuple(unnamed)
