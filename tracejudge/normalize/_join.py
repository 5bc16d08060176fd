"""Nested retriever spans of one retrieval call are one retrieval (DESIGN 5.4).

A framework's retrieval step often wraps its retriever client, and each level records part of what
was returned: DSPy's ``Retrieve.forward`` records the passages' text, the ``ColBERTv2.__call__``
span inside it their ids, text and scores. A document's id, version, content and score are joined
from every level: levels are matched by id, else by text (the same passage, whitespace aside).
What an inner level returned that matches nothing above it is kept when it has an id (it was
returned, and cut or renamed on the way out); text alone there (LlamaIndex's inner spans record
node reprs as their output) adds nothing the outer level's record lacks.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracejudge.schema import Document

# Shorter texts ("Yes.") match too much to identify a passage by containment.
_MIN_CONTAINED = 20


def _text(doc: Document) -> str | None:
    return " ".join(doc.content.split()).casefold() if doc.content else None


def explicit_identity(doc: Document) -> bool:
    """Whether the document's identity was recorded as a document id (metadata or a field other
    than the retriever's own id), not only as the retriever's id."""
    return doc.doc_id is not None and doc.doc_id != doc.raw_id


def _same(a: Document, b: Document) -> bool:
    if a.raw_id is not None and a.raw_id == b.raw_id:
        return True
    if explicit_identity(a) and explicit_identity(b):
        return a.doc_id == b.doc_id and (a.version is None or b.version is None or a.version == b.version)
    return _same_text(_text(a), _text(b))


def _same_text(ta: str | None, tb: str | None) -> bool:
    """Equal texts, or one (long enough to tell) contained in the other."""
    if ta is None or tb is None:
        return False
    if ta == tb:
        return True
    short, long = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
    return len(short) >= _MIN_CONTAINED and short in long


def _merged(a: Document, b: Document) -> Document:
    """``a`` (the outer level's) completed with what ``b`` recorded."""
    if explicit_identity(a) or (not explicit_identity(b) and a.doc_id is not None):
        doc_id = a.doc_id
    else:
        doc_id = b.doc_id
    return a.model_copy(
        update={
            "doc_id": doc_id,
            "version": a.version if a.version is not None else b.version,
            "raw_id": a.raw_id if a.raw_id is not None else b.raw_id,
            "content": a.content if a.content is not None else b.content,
            "score": a.score if a.score is not None else b.score,
            "metadata": {**b.metadata, **a.metadata},
        }
    )


def join_levels(levels: Sequence[Sequence[Document]]) -> list[Document]:
    """The documents of one retrieval call from the lists its spans recorded, outermost first."""
    out = list(levels[0])
    for level in levels[1:]:
        used: set[int] = set()
        for doc in level:
            match = next((i for i, known in enumerate(out) if i not in used and _same(known, doc)), None)
            if match is None:
                if doc.doc_id is not None:
                    out.append(doc)
            else:
                used.add(match)
                out[match] = _merged(out[match], doc)
    return out
