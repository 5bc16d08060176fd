"""OpenLLMetry (Traceloop) convention table.

Attributes read: ``traceloop.span.kind``, ``traceloop.entity.{name,input,output}``,
``gen_ai.prompt.N.{role,content}``, ``gen_ai.completion.N.{role,content,tool_calls.J.{id,name,arguments}}``,
``llm.request.type``, ``llm.usage.total_tokens``, ``gen_ai.usage.{prompt_tokens,completion_tokens}``; vector
stores: ``db.system``, ``db.operation``, ``db.vector.query.top_k``, ``db.chroma.query.n_results``,
``db.chroma.query.where`` (a Python literal: ``str(dict)``), ``db.milvus.search.{filter,limit}`` (a Milvus
expression, on Milvus spans only; on a LanceDB span the query, read when it is text), and one
``db.query.result`` / ``db.search.result`` event per returned document with
``db.query.result.{id,score,metadata,document}`` (a ``distance`` is not read: ``_vectorstores.py`` says why;
Pinecone's and Milvus' events carry no document: its text is the metadata's — Milvus: the ``entity``'s —
``text``); Qdrant's spans, which record no ``db.operation``, by their name (``_vectorstores.py`` says what
each store's instrumentation records). Pinecone (opentelemetry-instrumentation-pinecone 0.60) sets no
``db.operation``: its query is the ``pinecone.query`` span (``db.system`` ``Pinecone``), with
``pinecone.query.filter`` (the filter as JSON), ``pinecone.query.namespace`` (left out for the default
namespace, ``""``) and ``pinecone.query.top_k``; it adds one ``db.query.result`` event per match and then sets
the status OK, so a query whose status is OK and that has no result event returned no match. LangChain
(opentelemetry-instrumentation-langchain): ``gen_ai.operation.name = vector_db_retrieve`` marks a retriever
run, its query in ``traceloop.entity.input`` and its documents in ``traceloop.entity.output``;
``execute_task`` spans are tasks.

MCP (opentelemetry-instrumentation-mcp): a client's ``tools/call`` request is a tool span
``<tool>.tool`` whose ``traceloop.entity.output`` is ``{"result": <text>}`` — the text of the result's first
content item only (a tool returning a list sends an item per element): what it holds was returned, what it
lacks may have been too (:func:`mcp_result`).

LlamaIndex (opentelemetry-instrumentation-llamaindex) records every instrumented call as a
``<Class>.task`` / ``<Class>.workflow`` span whose ``traceloop.entity.input`` is the call's bound
arguments as JSON and whose ``traceloop.entity.output`` its result: a retriever's result is a JSON
list of JSON-encoded ``NodeWithScore`` strings (``node.id_``, ``node.text``, ``node.metadata``,
``score``), so a task span returning nodes is a retrieval, and one that also received ``nodes``
(a node postprocessor) is a rerank step. It makes no span for LLMs whose client another OpenLLMetry
instrumentation covers (OpenAI …): the model call is that instrumentation's span (``openai.chat``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracejudge.normalize._convention import Filter, ModelIO, NoRecords
from tracejudge.normalize._shapes import (
    content_and_tools,
    documents_from_value,
    make_document,
    request_text,
)
from tracejudge.normalize._values import REDACTED, as_str, group_indexed, maybe_json, ordered
from tracejudge.normalize._vectorstores import (
    lancedb_query,
    marqo_hit,
    marqo_query,
    milvus_filter,
    milvus_filter_text,
    named_search,
)
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, Message, StepKind

KIND = "traceloop.span.kind"
INPUT = "traceloop.entity.input"
OUTPUT = "traceloop.entity.output"

_STEPS: dict[str, StepKind] = {"workflow": "chain", "task": "chain", "agent": "agent", "tool": "tool"}
_QUERY_OPERATIONS = frozenset({"query", "_query", "search", "similarity_search", "retrieve", "get"})
_RESULT_EVENTS = ("db.query.result", "db.search.result")
_METADATA_TEXT = "text"
# OpenLLMetry's LangChain instrumentation names a retriever run's operation this way (not an OTel value).
_RETRIEVE_OPERATIONS = frozenset({"vector_db_retrieve"})


def classify(view: SpanView) -> StepKind | None:
    if _is_retrieval(view):
        return "retrieval"
    kind = view.attrs.get(KIND)
    if isinstance(kind, str):
        return _kind_step(view, kind.lower())
    return _llm_step(view)


def _is_retrieval(view: SpanView) -> bool:
    """A vector-store query (a ``db.system`` with a query operation), a span with query result
    events, or a LangChain retriever run."""
    a = view.attrs
    operation = a.get("db.operation")
    if (
        isinstance(a.get("db.system"), str)
        and isinstance(operation, str)
        and operation.lower() in _QUERY_OPERATIONS
    ):
        return True
    if any(event.name in _RESULT_EVENTS for event in view.raw.events) or named_search(view):
        return True
    operation_name = a.get("gen_ai.operation.name")
    if isinstance(operation_name, str) and operation_name in _RETRIEVE_OPERATIONS:
        return True
    return pinecone_query(view)


PINECONE_SCOPE = "opentelemetry.instrumentation.pinecone"
PINECONE_NAMESPACE = "pinecone.query.namespace"


def pinecone_query(view: SpanView) -> bool:
    """A query of OpenLLMetry's Pinecone instrumentation: the ``pinecone.query`` span of its scope, or one
    whose ``db.system`` is Pinecone (its upsert and delete spans are named otherwise)."""
    if view.raw.name != "pinecone.query":
        return False
    system = view.attrs.get("db.system")
    return view.raw.scope_name == PINECONE_SCOPE or (isinstance(system, str) and system.lower() == "pinecone")


def pinecone_namespace(view: SpanView) -> str | None:
    """The namespace a Pinecone query searched: ``pinecone.query.namespace``; ``""`` for a Pinecone query
    that records none (the default namespace, which the instrumentation leaves out — or the attribute was
    lost: the two read alike); None for any other span."""
    recorded = as_str(view.attrs.get(PINECONE_NAMESPACE))
    if recorded:
        return recorded
    return "" if pinecone_query(view) else None


def _kind_step(view: SpanView, kind: str) -> StepKind:
    """The step of a ``traceloop.span.kind``; a task or workflow that returned nodes is a node step."""
    nodes = _node_step(view) if kind in ("task", "workflow") else None
    return nodes or _STEPS.get(kind, "other")


def _llm_step(view: SpanView) -> StepKind | None:
    """A model or embedding call of an LLM client's instrumentation."""
    request_type = view.attrs.get("llm.request.type")
    if isinstance(request_type, str):
        return "embedding" if request_type == "embedding" else "model"
    if view.indexed("gen_ai.prompt") or view.indexed("gen_ai.completion"):
        return "model"
    return None


def messages(view: SpanView, prefix: str) -> list[Message] | None:
    """``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` as Messages; None when absent."""
    items = ordered(view.indexed(prefix))
    if not items:
        return None
    out: list[Message] = []
    for item in items:
        calls = [
            {
                "id": as_str(call.get("id")),
                "name": as_str(call.get("name")),
                "arguments": maybe_json(call.get("arguments")),
            }
            for call in ordered(group_indexed(item).get("tool_calls"))
        ]
        default = "assistant" if prefix == "gen_ai.completion" else "user"
        role = as_str(item.get("role")) or default
        out.append(content_and_tools(maybe_json(item.get("content"))).message(role, calls))
    return out


def result_documents(view: SpanView) -> list[Document] | None:
    """Documents from ``db.query.result`` events, one per returned document; None when no event."""
    events = [event for event in view.raw.events if event.name in _RESULT_EVENTS]
    if not events:
        count = view.attrs.get("db.vector.query.result_count")
        return [] if count == 0 or _pinecone_no_match(view) else None
    return [
        _result_document(view, event.name, event.attributes, position)
        for position, event in enumerate(events)
    ]


def _result_document(view: SpanView, name: str, attributes: Mapping[str, Any], position: int) -> Document:
    """The document one result event records: its ``<event>.{id,score,metadata,document}``, or a Marqo hit."""
    prefix = name + "."
    fields = {k[len(prefix) :]: v for k, v in attributes.items() if k.startswith(prefix)}
    hit = None if fields else marqo_hit(view, attributes)
    if hit is not None:
        raw_id, score, own = hit
        text = "\n".join(v for v in own.values() if isinstance(v, str)) or None
        return make_document(view, raw_id=raw_id, content=text, score=score, metadata=own, position=position)
    # Milvus records a hit's output fields as its ``entity`` (str(dict)), the others as ``metadata``.
    key = "metadata" if "metadata" in fields else "entity"
    metadata = fields.get(key)
    if isinstance(metadata, str):
        metadata = view.json(f"{name}.{key}", metadata, python_literal=True)
    content = fields.get("document")
    if content is None and isinstance(metadata, dict):
        # Pinecone and Milvus keep no document: the text is the match's metadata (Milvus: output field)
        # "text" (the key LangChain's and Pinecone's own examples store a chunk under), which their
        # instrumentations record as str(metadata).
        content = metadata.get(_METADATA_TEXT)
    return make_document(
        view,
        raw_id=fields.get("id"),
        content=content,
        score=fields.get("score"),
        metadata=metadata,
        position=position,
    )


def _pinecone_no_match(view: SpanView) -> bool:
    """A Pinecone query that returned no match: its status is OK (the instrumentation sets it once it has
    recorded the response's matches, one event each) and it holds no result event. A query that failed
    (status error) or whose response was not read (status unset) did not say what it returned."""
    return view.raw.status_code == 1 and pinecone_query(view)


def store_filter(view: SpanView) -> tuple[object, str | None] | None:
    """The vector store's own filter: (parsed, raw string) or None when not recorded. Chroma's is
    ``str(dict)``, Pinecone's ``json.dumps`` of the filter (both parse here), Milvus' a boolean expression."""
    expression = milvus_filter_text(view)
    if expression is not None:
        # Milvus filters are boolean expressions, not JSON: read as $-operators where they translate.
        return milvus_filter(expression), expression
    for key in ("db.chroma.query.where", "pinecone.query.filter"):
        value = view.attrs.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            return value, None
        parsed = view.json(key, value, python_literal=True)
        return parsed, value
    return None


_NODE_CLASS = "NodeWithScore"


def _node_step(view: SpanView) -> StepKind | None:
    """A LlamaIndex task that returned nodes: a retriever, or a postprocessor when it was given nodes.

    Decided on the raw text (the JSON is decoded once, when the step is read): the node list is a
    JSON array whose items name their class ``NodeWithScore``.
    """
    output = view.attrs.get("traceloop.entity.output")
    if not isinstance(output, str) or not output.startswith("["):
        return None
    given = view.attrs.get("traceloop.entity.input")
    takes_nodes = isinstance(given, str) and '"nodes": [' in given and _NODE_CLASS in given
    # An empty list says something only from a postprocessor or a retriever, not any other task.
    if _NODE_CLASS not in output and not (output == "[]" and (takes_nodes or _named_retriever(view))):
        return None
    return "rerank" if takes_nodes else "retrieval"


def _named_retriever(view: SpanView) -> bool:
    entity = as_str(view.attrs.get("traceloop.entity.name")) or view.raw.name
    return (entity.rpartition(".")[0] or entity).endswith("Retriever")


def node_documents(view: SpanView, key: str) -> list[Document] | None:
    """The nodes of a LlamaIndex task's recorded input (``{"nodes": [...]}``) or output (``[...]``)."""
    value = view.attrs.get(key)
    if not isinstance(value, str) or value == REDACTED:
        return None
    return documents_from_value(view, maybe_json(value))


def node_query(view: SpanView) -> str | None:
    """The query a LlamaIndex postprocessor ran with (``query_bundle`` / ``query_str`` arguments)."""
    value = maybe_json(view.attrs.get("traceloop.entity.input"))
    if not isinstance(value, dict):
        return None
    given: Any = {k: value.get(k) for k in ("query_bundle", "query_str") if value.get(k) is not None}
    return request_text(given) if given else None


MCP_SCOPE = "opentelemetry.instrumentation.mcp.instrumentation"


def mcp_result(view: SpanView) -> Any | None:
    """What an MCP client's ``tools/call`` span (opentelemetry-instrumentation-mcp, a ``traceloop.span.kind``
    tool span) records of the tool's result: ``traceloop.entity.output`` is ``{"result": <the first content
    item's text>}`` (``"is_error": true`` beside it for a tool error) — the text, parsed when JSON; None for
    any other span (the instrumentation's server-side tool span records every item, as a list)."""
    if view.raw.scope_name != MCP_SCOPE or view.attrs.get(KIND) != "tool":
        return None
    value = view.attrs.get(OUTPUT)
    if not isinstance(value, str) or value == REDACTED:
        return None
    parsed = maybe_json(value)
    if not isinstance(parsed, dict) or "result" not in parsed:
        return None
    return maybe_json(parsed["result"])


# What records a tools/call result whole, for the gap of a result that may be cut.
MCP_WHOLE = (
    "return the tool's result as one content item (one text: opentelemetry-instrumentation-mcp records"
    " the first item of a tools/call result only), or record what it returned on a retrieval span of your own"
)


class OpenLLMetry(NoRecords):
    """OpenLLMetry: ``traceloop.*`` kinds, ``gen_ai.prompt.N`` / ``gen_ai.completion.N``, vector stores."""

    name = "openllmetry"

    def classify(self, view: SpanView) -> StepKind | None:
        return classify(view)

    def input_messages(self, view: SpanView) -> ModelIO | None:
        found = messages(view, "gen_ai.prompt")
        return None if found is None else ModelIO(messages=tuple(found))

    def output_messages(self, view: SpanView) -> ModelIO | None:
        found = messages(view, "gen_ai.completion")
        return None if found is None else ModelIO(messages=tuple(found))

    def documents(self, view: SpanView) -> list[Document] | None:
        return result_documents(view)

    def retrieval_filter(self, view: SpanView) -> Filter | None:
        return store_filter(view)

    def query(self, view: SpanView) -> str | None:
        return lancedb_query(view) or marqo_query(view)

    def tool_result(self, view: SpanView) -> Any | None:
        return mcp_result(view)


CONVENTION = OpenLLMetry()
