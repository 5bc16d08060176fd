"""The manifest's versions read once: each version's sentences and values, which were in effect when,
and the diff between any two versions of a document (computed once, on first use)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tracejudge.schema import Document, ManifestEntry, VersionDiff
from tracejudge.sweep._diff import Sentence, split_sentences, version_diff
from tracejudge.sweep._values import Value

__all__ = ["DocVersion", "VersionIndex", "label", "utc"]


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
    _effect: dict[tuple[str, ...], tuple[Value, ...]] = field(default_factory=dict)
    _all: tuple[DocVersion, ...] = ()

    @classmethod
    def build(cls, manifest: Sequence[ManifestEntry]) -> VersionIndex:
        every: list[DocVersion] = []
        by_doc: dict[str, list[DocVersion]] = {}
        for e in manifest:
            sents = tuple(split_sentences(e.content)) if e.content else ()
            dv = DocVersion(e, sents, tuple(v for s in sents for v in s.values if v.significant))
            every.append(dv)
            if e.content and e.version:
                by_doc.setdefault(e.doc_id, []).append(dv)
        far = datetime.min.replace(tzinfo=UTC)
        docs = {
            d: tuple(sorted(vs, key=lambda v: utc(v.entry.effective_from) or far))
            for d, vs in by_doc.items()
            if len({v.version for v in vs}) > 1
        }
        return cls(docs=docs, _all=tuple(every))

    def version(self, doc_id: str, version: str | None) -> DocVersion | None:
        return next((v for v in self.docs.get(doc_id, ()) if v.version == version), None)

    def effect_values(self, t: datetime) -> tuple[Value, ...]:
        """Values stated by any document version in effect at ``t`` (each distinct set computed once)."""
        live = tuple(v.label for v in self._all if v.in_effect(t))
        found = self._effect.get(live)
        if found is None:
            found = self._effect[live] = tuple(x for v in self._all if v.in_effect(t) for x in v.values)
        return found

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
