"""AWS Bedrock Knowledge Bases as openinference-instrumentation-bedrock (0.1.61) records them, and a Cohere
rerank as OpenLLMetry's opentelemetry-instrumentation-cohere (0.62) records it.

Bedrock (OpenInference; ``bedrock-runtime`` ``converse`` / ``invoke_model`` are ordinary LLM spans):

- ``bedrock.retrieve`` (RETRIEVER): ``llm.invocation_parameters`` is JSON ``{"knowledgeBaseId",
  "retrieval_configuration": {"vectorSearchConfiguration": {"numberOfResults", "filter"}}}``; each
  ``retrieval.documents.N.document.metadata`` is ``{"location", "metadata", "type"}`` whose ``metadata`` holds
  the chunk's own: the service's ``x-amz-bedrock-kb-source-uri`` / ``-chunk-id`` / ``-data-source-id`` and the
  fields of the document's ``.metadata.json`` sidecar (``doc_id``, ``version``, what a filter selects on). A
  document is identified from that inner metadata (``doc_id`` / ``document_id`` / ``source`` as anywhere).
  Without one, a chunk is named by its source URI, else (no source URI, no chunk id: an external S3
  source's, whose own metadata is ``{}``) by its ``location`` (``s3Location.uri``, a web/Confluence/
  Salesforce/SharePoint ``url``, a custom document's ``id``), read as a retriever's id: it names a document
  when the manifest does, else the chunk's text may, else it stays unidentified (a source URI the manifest
  does not use is not another document: "not returned" never rests on it). A score of 0 is not recorded (the
  instrumentation tests the score for truth).
- ``bedrock.retrieve_and_generate`` (kind RETRIEVER, ``llm.model_name`` the generator; streamed,
  ``bedrock_agent.retrieve_and_generate_stream``, the same attributes): one call in which the
  service searched, built a prompt of what it found and had the model answer (``output.value``). It is read as
  a model call — its recorded input (``input.value``, the user's text) is not what the model was given: the
  prompt is recorded nowhere, so whether the clause reached the model cannot be known — and a retrieval whose
  documents are the *cited* references only (``retrievedReferences`` of each citation): a chunk retrieved and
  not cited is not recorded, so "not returned" is never concluded from them. The filter and the knowledge base
  are in ``retrieveAndGenerateConfiguration.knowledgeBaseConfiguration``.

``bedrock_agent.invoke_agent`` (AGENT, with ``enableTrace``): the instrumentation turns the agent's trace
events into spans — a ``knowledge_base`` RETRIEVER span per lookup (the query, the references as above,
``metadata`` naming the knowledge base; the ``sessionState`` filter the app gave is recorded nowhere) and an
``LLM`` span per model invocation whose input is the prompt the agent built (one message) — read as any
OpenInference spans.

The filter (``vectorSearchConfiguration.filter``) is Bedrock's: ``{"equals": {"key", "value"}}``,
``notEquals``, ``in``, ``notIn``, ``greaterThan(OrEquals)``, ``lessThan(OrEquals)``, ``andAll`` / ``orAll``
lists; it is read as the ``$``-operators tracejudge replays. ``startsWith``, ``listContains``,
``stringContains`` and any other are kept as operators the replay does not know (it settles nothing).

Cohere (OpenLLMetry, ``TRACELOOP_TRACE_CONTENT`` on): a ``cohere.rerank`` span with ``llm.request.type`` =
``rerank`` records the documents given as ``gen_ai.prompt.N`` (role ``system``, the text; ``N`` the index the
reply refers to), the query as the last prompt (role ``user``), and each document kept, best first, as
``gen_ai.completion.N.content`` = ``"Doc <index>, Score: <relevance>"`` (the document's text after a line
break when ``return_documents`` was set). It is a rerank step, never a model call (its prompts hold every
document it was given, which no model read). A document given is the one a retrieval of the trace returned
with the same text, when exactly one text matches.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tracejudge.normalize._convention import Filter, NoRecords
from tracejudge.normalize._openinference import documents as oi_documents
from tracejudge.normalize._shapes import make_document
from tracejudge.normalize._values import as_float, as_str, maybe_json, ordered
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, StepKind

__all__ = [
    "CONVENTION",
    "RAG_NOTE",
    "RAG_SWITCH",
    "bedrock_filter",
    "data_source",
    "is_retrieve_and_generate",
    "rerank_documents",
    "top_k",
]

_PARAMS = "llm.invocation_parameters"
_RAG_CONFIG = "retrieveAndGenerateConfiguration"
# The stream's span is named after the bedrock-agent-runtime client (0.1.26 to 0.1.61), the plain call's not.
_RAG_NAMES = frozenset({"bedrock.retrieve_and_generate", "bedrock_agent.retrieve_and_generate_stream"})
_KB_PREFIX = "x-amz-bedrock-kb-"
_SOURCE_URI = "x-amz-bedrock-kb-source-uri"
_ID_KEYS = ("doc_id", "document_id", "source")
# A span's keys (``SpanView.keys``) -> those of its documents' metadata. Every retrieval span of a kind has
# the same keys: they are picked out once (bounded).
_METADATA_KEYS: dict[str, list[str]] = {}
_METADATA_KEYS_MAX = 1024
_METADATA_KEYS_LENGTH = 4096

RAG_NOTE = (
    "Bedrock's RetrieveAndGenerate built the prompt inside the call from what it retrieved: the trace holds"
    " the user's text it was given, not the prompt the model read"
)
"""Why a ``retrieve_and_generate`` call's recorded input is not all the model was given."""
RAG_SWITCH = (
    "call the knowledge base's Retrieve and the model (Converse) yourself: the bedrock.retrieve span records"
    " every chunk returned and the bedrock.converse span the prompt"
)
"""What records what a ``retrieve_and_generate`` call hides."""

# Bedrock's comparison operators -> the ``$``-operators the replay knows.
_OPERATORS = {
    "equals": "$eq",
    "notEquals": "$ne",
    "in": "$in",
    "notIn": "$nin",
    "greaterThan": "$gt",
    "greaterThanOrEquals": "$gte",
    "lessThan": "$lt",
    "lessThanOrEquals": "$lte",
}
_LOGICAL = {"andAll": "$and", "orAll": "$or"}
_IMPLICIT = "implicitFilterConfiguration"
_NO_FILTER = "{} (the recorded vectorSearchConfiguration has no filter)"


def _params(view: SpanView) -> dict[str, Any]:
    value = maybe_json(view.attrs.get(_PARAMS))
    return value if isinstance(value, dict) else {}


def _may_name(value: Any, key: str) -> bool:
    """Whether the call's recorded parameters (``value``) may hold ``key``: False, without decoding them,
    when their JSON text lacks it (and spells no character as an escape)."""
    return not isinstance(value, str) or key in value or "\\u" in value


def is_retrieve_and_generate(view: SpanView) -> bool:
    """Whether the span is openinference-instrumentation-bedrock's ``retrieve_and_generate`` call."""
    if view.raw.name in _RAG_NAMES:
        return True
    value = view.attrs.get(_PARAMS)  # asked of every span: most record no parameters, or other ones
    return value is not None and _may_name(value, _RAG_CONFIG) and _RAG_CONFIG in _params(view)


def _kb_config(view: SpanView) -> dict[str, Any] | None:
    """The knowledge-base part of the call's parameters (``retrieve``: the parameters themselves)."""
    value = view.attrs.get(_PARAMS)
    if value is None or not (_may_name(value, _RAG_CONFIG) or _may_name(value, "knowledgeBaseId")):
        return None
    params = _params(view)
    rag = params.get(_RAG_CONFIG)
    if isinstance(rag, dict):
        kb = rag.get("knowledgeBaseConfiguration")
        return kb if isinstance(kb, dict) else None
    return params if "knowledgeBaseId" in params else None


def _vector_config(view: SpanView) -> dict[str, Any] | None:
    kb = _kb_config(view)
    if kb is None:
        return None
    retrieval = kb.get("retrieval_configuration", kb.get("retrievalConfiguration"))
    vector = retrieval.get("vectorSearchConfiguration") if isinstance(retrieval, dict) else None
    return vector if isinstance(vector, dict) else None


def top_k(view: SpanView) -> int | None:
    """``numberOfResults`` of the knowledge-base search."""
    vector = _vector_config(view)
    n = vector.get("numberOfResults") if vector is not None else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def data_source(view: SpanView) -> str | None:
    """The knowledge base searched (an agent's lookup names it in the span's ``metadata``)."""
    kb = _kb_config(view)
    if kb is not None:
        return as_str(kb.get("knowledgeBaseId"))
    metadata = maybe_json(view.attrs.get("metadata"))
    if isinstance(metadata, dict) and metadata.get("invocation_type") == "knowledge_base_lookup":
        return as_str(metadata.get("knowledge_base_id"))
    return None


def bedrock_filter(node: Any) -> Any:
    """A Bedrock retrieval filter as ``$``-operators; an operator the replay does not know stays one it
    does not know (``$bedrock:<name>``), so it settles nothing."""
    if not isinstance(node, dict) or len(node) != 1:
        return {"$bedrock:unreadable": node}
    ((op, arg),) = node.items()
    if op in _LOGICAL and isinstance(arg, list):
        return {_LOGICAL[op]: [bedrock_filter(item) for item in arg]}
    if isinstance(arg, dict) and isinstance(arg.get("key"), str):
        return {arg["key"]: {_OPERATORS.get(op, f"$bedrock:{op}"): arg.get("value")}}
    return {f"$bedrock:{op}": arg}


def _retrieval_filter(view: SpanView) -> Filter | None:
    vector = _vector_config(view)
    if vector is None:
        return None
    raw = vector.get("filter")
    if raw is None:
        # The instrumentation records the whole configuration the call was given: no filter in it is a search
        # of the whole knowledge base — unless Bedrock was to infer one from the query (implicit filtering).
        return None if _IMPLICIT in vector else ({}, _NO_FILTER)
    return bedrock_filter(raw), json.dumps(raw, sort_keys=True)


def _documents(view: SpanView) -> list[Document] | None:
    """The knowledge base's chunks, identified from their own metadata (nested in the instrumentation's), else
    by their location."""
    if not _may_hold_chunks(view):
        return None
    docs = oi_documents(view, "retrieval.documents")
    if docs is None or not any(_is_chunk(d.metadata) for d in docs):
        return None
    return [_unwrapped(view, d) for d in docs]


def _may_hold_chunks(view: SpanView) -> bool:
    """Whether a document's metadata may name a knowledge base's keys or a Bedrock location: False only when
    every one is a text without them (read without decoding: every OpenInference retrieval span comes
    here)."""
    joined, attrs = view.keys, view.attrs
    if ".document.metadata" not in joined:  # no key holds it (most spans)
        return False
    # The joined keys name the keys only when none holds a line break; short ones are kept.
    known = len(joined) <= _METADATA_KEYS_LENGTH and joined.count("\n") == len(attrs) - 1
    keys = _METADATA_KEYS.get(joined) if known else None
    if keys is None:
        keys = [k for k in attrs if ".document.metadata" in k and k.startswith("retrieval.documents.")]
        if known:
            if len(_METADATA_KEYS) >= _METADATA_KEYS_MAX:
                _METADATA_KEYS.clear()
            _METADATA_KEYS[joined] = keys
    try:
        # No text searched for holds a NUL: found in the joined texts, it is in one of them.
        values = "\0".join([attrs[key] for key in keys])
    except TypeError:  # a value not text
        return True
    return any(marker in values for marker in _CHUNK_MARKERS) or _KB_PREFIX in "\0".join(keys)


def _inner(metadata: dict[str, Any]) -> dict[str, Any] | None:
    inner = metadata.get("metadata")
    if isinstance(inner, dict) and any(str(k).startswith(_KB_PREFIX) for k in inner):
        return inner
    return None


# A chunk's location (RetrievalResultLocation): its type's own key, and the key naming the source in it.
_LOCATIONS = {
    "s3Location": "uri",
    "webLocation": "url",
    "confluenceLocation": "url",
    "salesforceLocation": "url",
    "sharePointLocation": "url",
    "kendraDocumentLocation": "uri",
    "customDocumentLocation": "id",
}
# What a chunk's metadata text holds when it may be Bedrock's (or spells a character as a \u escape).
_CHUNK_MARKERS = (_KB_PREFIX, *(f'{key}"' for key in _LOCATIONS), "\\u")


def _location_id(metadata: dict[str, Any]) -> str | None:
    """The source a chunk's ``location`` names (an S3 uri, a web page's url, a custom document's id)."""
    location = metadata.get("location")
    if not isinstance(location, dict):
        return None
    for key, field in _LOCATIONS.items():
        where = location.get(key)
        if isinstance(where, dict) and (found := as_str(where.get(field))):
            return found
    return None


def _is_chunk(metadata: dict[str, Any]) -> bool:
    """Whether a document's metadata is the instrumentation's ``{"location", "metadata", "type"}`` of a chunk:
    its own metadata holds a knowledge base's keys, or it has a location and no metadata of its own (a source
    without metadata: an external S3 source's chunks)."""
    if _inner(metadata) is not None:
        return True
    return not metadata.get("metadata") and _location_id(metadata) is not None


def _unwrapped(view: SpanView, doc: Document) -> Document:
    if not _is_chunk(doc.metadata):
        return doc
    md: dict[str, Any] = {**(_inner(doc.metadata) or {})}
    raw_id = doc.raw_id
    if not any(as_str(md.get(k)) for k in _ID_KEYS):
        # No document id of the sidecar's: the source the chunk comes from (its source URI, else the source
        # its location names), read as a retriever's own id — it names a document when the manifest does (as
        # a document or one of its ids), else the chunk's text may; one naming none stays unidentified, never
        # another document (whose "not returned" a rank verdict would rest on). The source URI is taken over
        # the chunk id (kept in the metadata): a manifest can name the file, not the id the service gave its
        # chunk. A chunk with no source URI keeps its chunk id, else is named by its location.
        raw_id = as_str(md.get(_SOURCE_URI)) or raw_id or _location_id(doc.metadata)
    if "location" in doc.metadata:
        md.setdefault("location", doc.metadata["location"])
    return make_document(
        view, raw_id=raw_id, content=doc.content, score=doc.score, metadata=md, position=doc.position
    )


# --- Cohere rerank (OpenLLMetry) ------------------------------------------------------------------------

_REQUEST_TYPE = "llm.request.type"
_NAMES = _RAG_NAMES | {"cohere.rerank"}
_KEPT = re.compile(r"Doc (\d+), Score: (-?[0-9.eE+-]+)")


def _is_rerank(view: SpanView) -> bool:
    # The span's name says so too: without its request type the span would read as a model call whose
    # input holds every document given.
    return view.attrs.get(_REQUEST_TYPE) == "rerank" or view.raw.name == "cohere.rerank"


def rerank_documents(
    view: SpanView, returned: list[Document]
) -> tuple[str | None, list[Document], list[Document]] | None:
    """The query, the documents given and the documents kept of a Cohere rerank span (None when the span is
    not one, or recorded no prompt); a text one returned document holds is that document."""
    if not _is_rerank(view):
        return None
    prompts = view.indexed("gen_ai.prompt") or {}
    if not prompts:
        return None
    last = max(prompts)
    query = as_str(prompts[last].get("content")) if prompts[last].get("role") == "user" else None
    given: dict[int, Document] = {}
    for index, item in prompts.items():
        if item.get("role") == "system":
            given[index] = _given(as_str(item.get("content")), index, returned)
    kept: list[Document] = []
    for position, item in enumerate(ordered(view.indexed("gen_ai.completion") or {})):
        found = _KEPT.match(as_str(item.get("content")) or "")
        doc = given.get(int(found.group(1))) if found else None
        if doc is None or found is None:
            # A kept entry that names no given document: what was kept is not known.
            return query, [given[i] for i in sorted(given)], []
        kept.append(doc.model_copy(update={"score": as_float(found.group(2)), "position": position}))
    return query, [given[i] for i in sorted(given)], kept


def _given(text: str | None, index: int, returned: list[Document]) -> Document:
    same = [d for d in returned if text is not None and d.content == text]
    if len({(d.doc_id, d.version) for d in same}) == 1:
        return same[0].model_copy(update={"position": index, "score": None})
    return Document(doc_id=None, content=text, position=index)


class Bedrock(NoRecords):
    """The Bedrock knowledge-base calls' records, and a Cohere rerank's step."""

    def classify(self, view: SpanView) -> StepKind | None:
        attrs = view.attrs
        # Asked of every span, first: one that records neither a request type nor parameters and has none of
        # the names is neither (no call made to tell).
        if _REQUEST_TYPE not in attrs and _PARAMS not in attrs and view.raw.name not in _NAMES:
            return None
        if _is_rerank(view):
            return "rerank"
        return "model" if is_retrieve_and_generate(view) else None

    def documents(self, view: SpanView) -> list[Document] | None:
        return _documents(view)

    def retrieval_filter(self, view: SpanView) -> Filter | None:
        return _retrieval_filter(view)


CONVENTION = Bedrock()
