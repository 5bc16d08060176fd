"""OpenLLMetry (Traceloop) convention table.

Attributes read: ``traceloop.span.kind``, ``traceloop.entity.{name,input,output}``,
``gen_ai.prompt.N.{role,content}``, ``gen_ai.completion.N.{role,content,tool_calls.J.{id,name,arguments}}``,
``llm.request.type``, ``llm.usage.total_tokens``, ``gen_ai.usage.{prompt_tokens,completion_tokens}``;
vector stores: ``db.system``, ``db.operation``, ``db.vector.query.top_k``, ``db.chroma.query.n_results``,
``db.chroma.query.where`` (a Python literal: ``str(dict)``), ``db.milvus.search.filter``, and one
``db.query.result`` / ``db.search.result`` event per returned document with
``db.query.result.{id,score,distance,metadata,document}``. LangChain
(opentelemetry-instrumentation-langchain): ``gen_ai.operation.name = vector_db_retrieve`` marks a
retriever run, its query in ``traceloop.entity.input`` and its documents in
``traceloop.entity.output``; ``execute_task`` spans are tasks.
"""

from __future__ import annotations

from tracejudge.normalize._shapes import content_and_tools, make_document
from tracejudge.normalize._values import as_str, group_indexed, maybe_json, ordered
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, Message, StepKind

KIND = "traceloop.span.kind"

_STEPS: dict[str, StepKind] = {"workflow": "chain", "task": "chain", "agent": "agent", "tool": "tool"}
_QUERY_OPERATIONS = frozenset({"query", "_query", "search", "similarity_search", "retrieve", "get"})
_RESULT_EVENTS = ("db.query.result", "db.search.result")
# OpenLLMetry's LangChain instrumentation names a retriever run's operation this way (not an OTel value).
_RETRIEVE_OPERATIONS = frozenset({"vector_db_retrieve"})


def classify(view: SpanView) -> StepKind | None:
    a = view.attrs
    system = a.get("db.system")
    operation = a.get("db.operation")
    if isinstance(system, str) and isinstance(operation, str) and operation.lower() in _QUERY_OPERATIONS:
        return "retrieval"
    if any(event.name in _RESULT_EVENTS for event in view.raw.events):
        return "retrieval"
    operation_name = a.get("gen_ai.operation.name")
    if isinstance(operation_name, str) and operation_name in _RETRIEVE_OPERATIONS:
        return "retrieval"
    kind = a.get(KIND)
    if isinstance(kind, str):
        return _STEPS.get(kind.lower(), "other")
    request_type = a.get("llm.request.type")
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
        content, tools, redacted = content_and_tools(maybe_json(item.get("content")))
        for call in ordered(group_indexed(item).get("tool_calls")):
            tools.append(
                {
                    "id": as_str(call.get("id")),
                    "name": as_str(call.get("name")),
                    "arguments": maybe_json(call.get("arguments")),
                }
            )
        default = "assistant" if prefix == "gen_ai.completion" else "user"
        role = as_str(item.get("role")) or default
        out.append(Message(role=role, content=content, tool_calls=tuple(tools), redacted=redacted))
    return out


def result_documents(view: SpanView) -> list[Document] | None:
    """Documents from ``db.query.result`` events, one per returned document; None when no event."""
    docs: list[Document] = []
    seen_event = False
    for event in view.raw.events:
        if event.name not in _RESULT_EVENTS:
            continue
        seen_event = True
        prefix = event.name + "."
        fields = {k[len(prefix) :]: v for k, v in event.attributes.items() if k.startswith(prefix)}
        docs.append(
            make_document(
                view,
                raw_id=fields.get("id"),
                content=fields.get("document"),
                score=fields.get("score"),
                metadata=fields.get("metadata"),
                position=len(docs),
            )
        )
    if not seen_event:
        count = view.attrs.get("db.vector.query.result_count")
        return [] if count == 0 else None
    return docs


def store_filter(view: SpanView) -> tuple[object, str | None] | None:
    """The vector store's own filter: (parsed, raw string) or None when not recorded."""
    for key in ("db.chroma.query.where", "db.milvus.search.filter"):
        value = view.attrs.get(key)
        if value is None:
            continue
        if key == "db.milvus.search.filter":
            # Milvus filters are boolean expressions, not JSON: keep the text only.
            return None, as_str(value)
        if not isinstance(value, str):
            return value, None
        parsed = view.json(key, value, python_literal=True)
        return parsed, value
    return None
