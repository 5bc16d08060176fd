"""Which returned document is which, against the index manifest (DESIGN 5.3, 5.4).

normalize reads what a trace recorded and knows no manifest; here the manifest names documents:

- an id a retriever gave (a chunk or node id) is the version whose manifest ``ids`` list it;
- a returned text with no id is the version whose manifest ``content`` contains it, when exactly
  one does (when several versions of one document do, the document is known and its version not);
- a tool whose result names manifest documents (``doc_id`` and ``version``, or an id in ``ids``)
  is a retrieval call, its documents read from the result.

Pure: a task record and a manifest in, the task record with what they identify out. A document
nothing identifies keeps ``doc_id`` None (or its retriever id) and is reported as unidentified by
the ``retrieved`` stage (:func:`unidentified`), which then never concludes "not returned".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tracejudge.schema import Document, ManifestEntry, RetrievalCall, TaskRecord

# Texts shorter than this ("Net 30.") are contained in too many documents to identify one.
_MIN_TEXT = 20
_DOC_KEYS = ("doc_id", "document_id", "source")


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass
class _Index:
    by_id: dict[str, list[ManifestEntry]] = field(default_factory=dict)
    doc_ids: set[str] = field(default_factory=set)
    versions: set[tuple[str, str]] = field(default_factory=set)
    texts: list[tuple[ManifestEntry, str]] = field(default_factory=list)

    @classmethod
    def of(cls, manifest: Sequence[ManifestEntry]) -> _Index:
        index = cls()
        for entry in manifest:
            index.doc_ids.add(entry.doc_id)
            if entry.version is not None:
                index.versions.add((entry.doc_id, entry.version))
            for ident in entry.ids:
                index.by_id.setdefault(ident, []).append(entry)
            if entry.content:
                index.texts.append((entry, _norm(entry.content)))
        return index

    def names_version(self, doc: Document) -> bool:
        """Whether the document names a manifest document version: ``doc_id`` and ``version`` (or
        ``doc@version``) of an entry (ids in an entry's ``ids`` were resolved to these already)."""
        for ident in (doc.doc_id, doc.raw_id):
            if ident is None:
                continue
            base, at, tail = ident.rpartition("@")
            doc_id, version = (base, tail) if at else (ident, doc.version)
            if version is not None and (doc_id, version) in self.versions:
                return True
        return False

    def by_retriever_id(self, doc: Document) -> tuple[str, str | None] | None:
        """The document (and version) the manifest ``ids`` give for the document's id, the
        retriever's own id first; None when neither is listed or its entries name several."""
        ident = next((i for i in (doc.raw_id, doc.doc_id) if i is not None and i in self.by_id), None)
        return _one(self.by_id[ident]) if ident is not None else None

    def by_content(self, content: str | None) -> tuple[str, str | None] | None:
        """The document (and version) whose manifest content contains a returned text, when exactly
        one does; None for a text too short to tell."""
        text = _norm(content or "")
        if len(text) < _MIN_TEXT:
            return None
        return _one([entry for entry, whole in self.texts if text in whole])

    def names(self, doc: Document) -> bool:
        """Whether the document's own identity is a manifest document (``doc_id``, ``doc@version``)."""
        for ident in (doc.doc_id, doc.raw_id):
            if ident is not None and (ident in self.doc_ids or ident.rsplit("@", 1)[0] in self.doc_ids):
                return True
        return False


def _one(entries: Sequence[ManifestEntry]) -> tuple[str, str | None] | None:
    """The document (and version, when only one) a set of manifest entries names; None when several."""
    doc_ids = {e.doc_id for e in entries}
    if len(doc_ids) != 1:
        return None
    versions = {e.version for e in entries}
    return next(iter(doc_ids)), (next(iter(versions)) if len(versions) == 1 else None)


def _identify(doc: Document, index: _Index) -> Document:
    if index.names(doc) or any(doc.metadata.get(k) is not None for k in _DOC_KEYS):
        return doc
    found = index.by_retriever_id(doc)
    if found is None and (doc.doc_id is None or _retriever_id_only(doc)):  # a passage id names no document
        found = index.by_content(doc.content)
    if found is None:
        return doc
    doc_id, version = found
    return doc.model_copy(update={"doc_id": doc_id, "version": doc.version or version})


def identify(task: TaskRecord, manifest: Sequence[ManifestEntry]) -> TaskRecord:
    """``task`` with its returned documents identified against ``manifest``, and tool calls whose
    results name manifest documents read as retrieval calls."""
    if not manifest:
        return task
    index = _Index.of(manifest)
    retrievals = [
        call.model_copy(update={"documents": tuple(_identify(d, index) for d in call.documents)})
        for call in task.retrievals
    ]
    retrievals.extend(_tool_retrievals(task, index))
    return task.model_copy(update={"retrievals": tuple(retrievals)})


def _tool_retrievals(task: TaskRecord, index: _Index) -> Iterator[RetrievalCall]:
    """Tool calls (not already read as retrievals) whose results name manifest document versions,
    as retrieval calls with their documents identified."""
    seen = {span for call in task.retrievals for span in call.span_ids}
    for tool in task.tool_calls:
        if tool.span_id in seen or not tool.documents:
            continue
        docs = tuple(_identify(d, index) for d in tool.documents)
        if any(index.names_version(d) for d in docs):
            yield RetrievalCall(
                span_id=tool.span_id,
                span_ids=(tool.span_id,),
                name=tool.name,
                documents=docs,
                # A result that may be cut (an MCP tools/call span) settles what was returned, not what not.
                documents_recorded=not tool.result_partial,
                start_time=tool.start_time,
            )


def _retriever_id_only(doc: Document) -> bool:
    """Whether all the document says of itself is the retriever's own id: no document id apart from
    it, no version (a chunk or node id; ``doc@version`` and a recorded version name a document)."""
    ident = doc.doc_id or ""
    return ident == doc.raw_id and doc.version is None and "@" not in ident


def unidentified(task: TaskRecord, manifest: Sequence[ManifestEntry]) -> list[tuple[RetrievalCall, Document]]:
    """Returned documents whose identity is not known: no id at all, or (with a manifest) only the
    retriever's own id, which names no manifest document (it may be a chunk of any)."""
    index = _Index.of(manifest)
    out = []
    for call in task.retrievals:
        for doc in call.documents:
            if doc.doc_id is None or (manifest and _retriever_id_only(doc) and not index.names(doc)):
                out.append((call, doc))
    return out
