"""OpenInference (Arize) convention table.

Attributes read: ``openinference.span.kind``, ``input.value``, ``output.value``,
``retrieval.documents.N.document.{id,content,score,metadata}``,
``reranker.{input_documents,output_documents}.N.document.*``, ``reranker.query``, ``reranker.top_k``,
``llm.{input,output}_messages.N.message.{role,content,name,tool_call_id}``,
``…message.contents.K.message_content.{type,text}``,
``…message.tool_calls.J.tool_call.{id,function.name,function.arguments}``, ``llm.prompts``,
``llm.choices.N.completion.text``,
``llm.model_name``, ``llm.token_count.{prompt,completion,total}``, ``tool.{name,id}``,
``session.id``, ``user.id``, ``tag.tags``, ``metadata``. Hidden values are ``__REDACTED__``. An OpenAI call's
``input.value`` / ``output.value`` (``application/json``) are the request and response bodies: they show a
request whose messages held no text (content null, none sent) and a reply's ``refusal``, which the
``llm.*_messages`` attributes leave out.

Span kinds: ``PROMPT`` ("the rendering of a prompt template") is a context-assembly step; its
``output.value`` is the rendered prompt. LlamaIndex node postprocessors (``*._postprocess_nodes``)
are recorded as ``CHAIN`` spans whose input and output are node reprs
(``NodeWithScore(node=TextNode(id_=...), score=...)``): they are read as rerank steps, the node ids
resolved against the documents the trace's retrievals returned (real rerankers emit ``RERANKER``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import content_and_tools, make_document, media_kind
from tracejudge.normalize._values import REDACTED, as_float, as_str, group_indexed, maybe_json, ordered
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, Message, StepKind

KIND = "openinference.span.kind"
INPUT = "input.value"
OUTPUT = "output.value"

_STEPS: dict[str, StepKind] = {
    "LLM": "model",
    "CHAIN": "chain",
    "TOOL": "tool",
    "RETRIEVER": "retrieval",
    "RERANKER": "rerank",
    "EMBEDDING": "embedding",
    "AGENT": "agent",
    "GUARDRAIL": "guardrail",
    "PROMPT": "context",
}
# LlamaIndex's BaseNodePostprocessor span names; the node lists in and out are what it kept.
_POSTPROCESS_SUFFIXES = ("._postprocess_nodes", ".postprocess_nodes")
_NODE_REPR = re.compile(r"\w*(?:Node|Document)\(id_=([^,)\s]+)\)(?:, score=(-?[0-9.eE+-]+))?")


def classify(view: SpanView) -> StepKind | None:
    kind = view.attrs.get(KIND)
    if not isinstance(kind, str):
        return None
    kind = kind.upper()
    if kind == "CHAIN" and view.raw.name.endswith(_POSTPROCESS_SUFFIXES):
        return "rerank"
    return _STEPS.get(kind, "other")


def node_refs(value: Any) -> list[tuple[str, float | None]] | None:
    """``(node id, score)`` of the LlamaIndex node reprs in a postprocessor's input or output.

    The input is ``{"nodes": [repr, ...]}``, the output ``[repr, ...]`` (JSON); an empty list is
    every node dropped. None when the value is absent or of another shape.
    """
    parsed = maybe_json(value)
    if isinstance(parsed, dict):
        parsed = parsed.get("nodes")
    if not isinstance(parsed, list) or not all(isinstance(item, str) for item in parsed):
        return None
    out: list[tuple[str, float | None]] = []
    for item in parsed:
        match = _NODE_REPR.search(item)
        if match is None:
            return None
        out.append((match.group(1), as_float(match.group(2))))
    return out


def documents(view: SpanView, prefix: str) -> list[Document] | None:
    """``<prefix>.N.document.*`` as Documents; None when the span recorded none."""
    group = view.indexed(prefix)
    if not group:
        return None
    # A hole in the indices is a document whose every attribute was lost: it was returned, and
    # nothing identifies it (an empty record, not a shorter list).
    size = max(max(group) + 1, len(group)) if all(i >= 0 for i in group) else len(group)
    items = [group.get(i, {}) for i in range(size)] if size <= 4 * len(group) + 16 else ordered(group)
    return [
        make_document(
            view,
            raw_id=item.get("document.id"),
            content=item.get("document.content"),
            score=item.get("document.score"),
            metadata=item.get("document.metadata"),
            position=position,
        )
        for position, item in enumerate(items)
    ]


def messages(view: SpanView, prefix: str) -> list[Message] | None:
    """``llm.input_messages`` / ``llm.output_messages`` as Messages; None when absent."""
    items = ordered(view.indexed(prefix))
    if not items:
        return None
    return [_message(item) for item in items]


def _message(item: dict[str, Any]) -> Message:
    """One ``message.*`` item: its content, then the texts of its ``message.contents`` parts."""
    nested = group_indexed(item)
    found = content_and_tools(item.get("message.content"))
    texts, parts_redacted, parts_unread = _parts(ordered(nested.get("message.contents")))
    calls = [
        {
            "id": as_str(call.get("tool_call.id")),
            "name": as_str(call.get("tool_call.function.name")),
            "arguments": maybe_json(call.get("tool_call.function.arguments")),
        }
        for call in ordered(nested.get("message.tool_calls"))
    ]
    function = as_str(item.get("message.function_call_name"))
    if function is not None:
        # OpenAI's legacy ``function_call`` (content null): a call the ``function`` message answers.
        arguments = maybe_json(item.get("message.function_call_arguments_json"))
        calls.append({"id": None, "name": function, "arguments": arguments})
    found = found._replace(
        text="\n".join(([found.text] if found.text else []) + texts) if texts else found.text,
        redacted=found.redacted or parts_redacted,
        unread=found.unread + parts_unread,
    )
    return found.message(as_str(item.get("message.role")) or "unknown", calls)


def _parts(parts: list[dict[str, Any]]) -> tuple[list[str], bool, tuple[str, ...]]:
    """The texts of ``message.contents`` parts, whether any was redacted, and the kinds of those holding
    no text (flattened parts name their kind in ``message_content.type``: "image", ...)."""
    texts: list[str] = []
    redacted = False
    unread: list[str] = []
    for part in parts:
        found = content_and_tools(_block(part))
        redacted = redacted or found.redacted
        if found.text:
            texts.append(found.text)
        kind = media_kind(part.get("message_content.type"))
        if kind is not None:
            unread.append(kind)
        elif part.get("message_content.type") in _JSON_BLOCKS and not _whole(part):
            # A document block whose JSON is not on the span, or is cut short: it held text (the retrieved
            # material, as a rule) the trace does not (all) hold.
            unread.append(str(part["message_content.type"]))
        unread.extend(found.unread)
    return texts, redacted, tuple(unread)


# Anthropic content blocks openinference-instrumentation-anthropic records whole, as the block's JSON text.
_JSON_BLOCKS = ("document", "search_result")


def _block(part: dict[str, Any]) -> Any:
    """A ``message.contents`` part's text; an Anthropic ``document`` / ``search_result`` block (recorded as
    its JSON) as the block, whose text is its source's (a PDF or file source: none: the part is unread)."""
    text = part.get("message_content.text")
    if part.get("message_content.type") in _JSON_BLOCKS and isinstance(text, str) and text[:1] == "{":
        block = maybe_json(text)
        if isinstance(block, dict) and block.get("type") == part.get("message_content.type"):
            return block
    return text


def _whole(part: dict[str, Any]) -> bool:
    """Whether a ``document`` / ``search_result`` block's JSON is on the span, whole as far as its form shows
    (it parses; a redacted one is read as redacted)."""
    text = part.get("message_content.text")
    return text is not None and (text == REDACTED or isinstance(maybe_json(text), dict))


def prompts(view: SpanView) -> list[str] | None:
    """``llm.prompts`` (completion-style LLM spans): a list, or flattened ``llm.prompts.N``."""
    value = view.attrs.get("llm.prompts")
    if isinstance(value, list):
        return [p for p in (as_str(v) for v in value) if p is not None]
    items = view.indexed("llm.prompts")
    if items:
        return [p for p in (as_str(i.get("")) or as_str(i.get("prompt.text")) for i in ordered(items)) if p]
    return None


def choices(view: SpanView) -> list[str] | None:
    """``llm.choices.N.completion.text`` (completion-style LLM spans): the texts the model completed, where
    ``output.value`` holds the whole response body."""
    items = view.indexed("llm.choices")
    if not items:
        return None
    return [c for c in (as_str(i.get("completion.text")) for i in ordered(items)) if c]


def refusals(view: SpanView) -> dict[int, str]:
    """The refusals of the chat completion ``output.value`` holds (the whole response body), by choice
    position: OpenAI returns a refusal in the message's ``refusal`` field with ``content`` null, and the
    instrumentation records only the message's role in ``llm.output_messages``. Empty for any other value."""
    if view.attrs.get("output.mime_type") != "application/json":
        return {}
    body = maybe_json(view.attrs.get(OUTPUT))
    refused = anthropic_refusal(body)
    if refused is not None:
        return {0: refused}
    found = body.get("choices") if isinstance(body, dict) else None
    out: dict[int, str] = {}
    for i, choice in enumerate(found if isinstance(found, list) else []):
        message = choice.get("message") if isinstance(choice, dict) else None
        refusal = as_str(message.get("refusal")) if isinstance(message, dict) else None
        if refusal:
            out[i] = refusal
    return out


def stop_reasons(view: SpanView) -> list[str]:
    """How the response body ``output.value`` holds says the reply ended: an Anthropic message's
    ``stop_reason``, a Gemini response's candidates' ``finish_reason``; none for any other value (hidden,
    cut, another API's)."""
    if view.attrs.get("output.mime_type") != "application/json":
        return []
    value = view.attrs.get(OUTPUT)
    if not isinstance(value, str) or ('"stop_reason"' not in value and '"finish_reason"' not in value):
        return []
    body = maybe_json(value)
    if not isinstance(body, dict):
        return []
    if body.get("type") == "message":
        return [r for r in (as_str(body.get("stop_reason")),) if r]
    candidates = body.get("candidates")
    items = candidates if isinstance(candidates, list) else []
    return [r for r in (as_str(c.get("finish_reason")) for c in items if isinstance(c, dict)) if r]


def anthropic_refusal(body: Any) -> str | None:
    """The refusal an Anthropic Messages API response body is: ``stop_reason`` ``refusal`` (the API's
    classifier stopped the reply) with no content block, as the text naming it (``stop_details``' category
    and explanation where given). None for any other body — one holding text before the stop is a reply
    cut short, read as such from the finish reason."""
    if not isinstance(body, dict) or body.get("type") != "message" or body.get("stop_reason") != "refusal":
        return None
    if body.get("content") != []:
        return None
    details = body.get("stop_details")
    details = details if isinstance(details, dict) else {}
    category, explanation = as_str(details.get("category")), as_str(details.get("explanation"))
    said = f"stop_reason refusal{f' ({category})' if category else ''}"
    return f"{said}: {explanation}" if explanation else said


def _with_refusals(view: SpanView, found: list[Message]) -> list[Message]:
    """Output messages holding nothing (no text, no tool call) given the refusal the response body holds
    at their position: the model's reply, recorded (not hidden)."""
    if any(m.content or m.tool_calls or m.redacted for m in found):
        return found
    refused = refusals(view)
    return [
        m.model_copy(update={"content": refused[i], "refusal": refused[i]}) if i in refused else m
        for i, m in enumerate(found)
    ]


def citations(view: SpanView) -> tuple[str, ...]:
    """The passages an Anthropic reply cites (its text blocks' citations' ``cited_text``), as
    openinference-instrumentation-anthropic records them twice: in the response body ``output.value`` and in
    ``metadata`` (``{"citations": {"<block>": [...]}}``). Either one read whole is enough; a value hidden,
    cut short (no longer JSON) or of another API gives none."""
    cited: list[str] = []
    body = (
        maybe_json(view.attrs.get(OUTPUT))
        if view.attrs.get("output.mime_type") == "application/json"
        else None
    )
    if isinstance(body, dict) and body.get("type") == "message" and isinstance(body.get("content"), list):
        for block in body["content"]:
            found = block.get("citations") if isinstance(block, dict) else None
            cited += _cited_texts(found)
    metadata = maybe_json(view.attrs.get("metadata"))
    by_block = metadata.get("citations") if isinstance(metadata, dict) else None
    if isinstance(by_block, dict):
        for found in by_block.values():
            cited += _cited_texts(found)
    return tuple(dict.fromkeys(cited))


def _cited_texts(found: Any) -> list[str]:
    """The ``cited_text`` of each citation of a list (the API's citation objects)."""
    items = found if isinstance(found, list) else []
    return [t for t in (as_str(c.get("cited_text")) for c in items if isinstance(c, dict)) if t]


def _with_citations(view: SpanView, found: list[Message]) -> list[Message]:
    """The one output message (an Anthropic reply is one) given the passages its response cites."""
    cited = citations(view) if len(found) == 1 and found[0].content else ()
    return [found[0].model_copy(update={"cited": cited})] if cited else found


def empty_response(view: SpanView) -> str | None:
    """How the chat completion ``output.value`` holds (the whole response body) ended, when no choice's
    message holds text or a tool call: the model returned nothing to read (the instrumentation records
    no ``message.content`` for an empty one, only its role). None when any holds something, or the value
    is no chat completion (hidden, cut, another API's)."""
    if view.attrs.get("output.mime_type") != "application/json":
        return None
    body = maybe_json(view.attrs.get(OUTPUT))
    found = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(found, list) or not found or not all(isinstance(c, dict) for c in found):
        return None
    reasons = []
    for choice in found:
        message = choice.get("message")
        if not isinstance(message, dict) or message.get("content") not in ("", None):
            return None
        if message.get("tool_calls") or message.get("function_call") or message.get("refusal"):
            return None
        reasons.append(as_str(choice.get("finish_reason")) or "not recorded")
    return ", ".join(dict.fromkeys(reasons))


def _role_only(message: Message) -> bool:
    return message.content is None and not message.tool_calls and not message.redacted


def _sent_empty(view: SpanView, found: list[Message]) -> list[Message]:
    """Input messages recorded with their role only, read by what the request body (``input.value``) shows
    was sent at their place: content null with a ``refusal`` (an assistant's earlier refusal: its text) or
    with nothing else (it said nothing: content ""). The instrumentation records no ``message.content`` for
    either. A body whose messages do not line up with the recorded ones (count, roles), that is hidden, cut
    or absent, or that shows text (or a tool call the attributes lost) sent there leaves the message lost."""
    if not any(map(_role_only, found)) or view.attrs.get("input.mime_type") != "application/json":
        return found
    body = maybe_json(view.attrs.get(INPUT))
    sent = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(sent, list) or len(sent) != len(found):
        return found
    if any(
        not isinstance(s, dict) or as_str(s.get("role")) != m.role for s, m in zip(sent, found, strict=True)
    ):
        return found
    out = []
    for message, item in zip(found, sent, strict=True):
        said = item.get("content")
        if (
            _role_only(message)
            and said in (None, "")
            and not item.get("tool_calls")
            and not item.get("function_call")
        ):
            refusal = as_str(item.get("refusal"))
            message = message.model_copy(update={"content": refusal or "", "refusal": refusal})
        out.append(message)
    return out


def empty_request(view: SpanView) -> str | None:
    """What the chat completion request ``input.value`` holds (the whole request body) sent, when no message
    of it holds text: no message at all, or messages whose ``content`` is null (the instrumentation records
    no ``message.content`` for those, only the role). None when any message holds something (text, parts,
    a tool call), or the value is no chat request (hidden, cut, another API's)."""
    if view.attrs.get("input.mime_type") != "application/json":
        return None
    body = maybe_json(view.attrs.get(INPUT))
    sent = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(sent, list) or not all(isinstance(m, dict) for m in sent):
        return None
    if not sent:
        return "the request sent no messages"
    if any(m.get("content") is not None or m.get("tool_calls") or m.get("function_call") for m in sent):
        return None
    listed = ", ".join(f"{i} ({as_str(m.get('role')) or 'no role'})" for i, m in enumerate(sent))
    return f"the request sent message{'s' if len(sent) > 1 else ''} {listed} with content null"


def hosted_search(view: SpanView) -> str | None:
    """The search a model call ran inside itself, by its request: OpenAI's ``web_search_options``, or a
    ``web_search…`` / ``file_search`` tool (``llm.invocation_parameters``' tools, or ``llm.tools``, where the
    instrumentation writes a Responses API request's tools); None when it ran none. What a web search found
    comes back to no span (the API returns the answer and, at most, citations); a file search's results
    only when asked (:func:`file_searches`)."""
    params = maybe_json(view.attrs.get("llm.invocation_parameters"))
    if isinstance(params, dict) and params.get("web_search_options") is not None:
        return "web_search"
    tools = params.get("tools") if isinstance(params, dict) else None
    listed = [maybe_json(t.get("tool.json_schema")) for t in ordered(view.indexed("llm.tools") or {})]
    for tool in [*(tools if isinstance(tools, list) else []), *listed]:
        kind = as_str(tool.get("type")) if isinstance(tool, dict) else None
        if kind is not None and (kind.startswith("web_search") or kind == "file_search"):
            return "web_search" if kind.startswith("web_search") else "file_search"
    return None


@dataclass(frozen=True)
class FileSearch:
    """One run of OpenAI's hosted ``file_search`` inside a Responses API call."""

    queries: tuple[str, ...]
    results: tuple[Any, ...] | None
    """What it returned, in rank order; None when the request did not ask for it (``include``)."""


def file_searches(view: SpanView) -> list[FileSearch]:
    """The hosted file searches a model call ran, read from the Responses API response that
    ``output.value`` records whole (openinference-instrumentation-openai): each ``file_search_call``
    output item's ``queries`` and ``results`` (null unless the request had
    ``include=["file_search_call.results"]``). Empty for any other span or a value that does not parse
    (cut short: what was found is then unknown, and nothing is read as found)."""
    value = view.attrs.get("output.value")
    if not isinstance(value, str) or "file_search_call" not in value:
        return []
    response = maybe_json(value)
    if not isinstance(response, dict) or response.get("object") != "response":
        return []
    items = response.get("output")
    found = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("type") != "file_search_call":
            continue
        queries = item.get("queries")
        results = item.get("results")
        found.append(
            FileSearch(
                queries=tuple(q for q in queries if isinstance(q, str)) if isinstance(queries, list) else (),
                results=tuple(results) if isinstance(results, list) else None,
            )
        )
    return found


def file_search_documents(view: SpanView, search: FileSearch) -> list[Document]:
    """A hosted file search's results as documents: ``file_id`` the id a manifest may list, ``text`` the
    chunk, ``score``; the vector store file's ``attributes`` the metadata (``doc_id`` / ``version`` there
    name the document), beside ``filename`` and ``vector_store_id``."""
    docs = []
    for position, result in enumerate(search.results or ()):
        if not isinstance(result, dict):
            continue
        attributes = result.get("attributes")
        metadata = {
            **{k: result[k] for k in ("filename", "vector_store_id") if result.get(k) is not None},
            **(attributes if isinstance(attributes, dict) else {}),
        }
        docs.append(
            make_document(
                view,
                raw_id=result.get("file_id"),
                content=result.get("text"),
                score=result.get("score"),
                metadata=metadata,
                position=position,
            )
        )
    return docs


def _texts(given: list[str] | None) -> ModelIO | None:
    """A model call's input or output recorded as plain texts (``llm.prompts``, ``llm.choices``): the
    texts, hidden ones (``__REDACTED__``) marking it redacted; None when there are none."""
    if not given:
        return None
    return ModelIO(
        texts=tuple(t for t in given if t and t != REDACTED), redacted=any(t == REDACTED for t in given)
    )


def usage(view: SpanView) -> dict[str, Any]:
    return {
        "input": view.attrs.get("llm.token_count.prompt"),
        "output": view.attrs.get("llm.token_count.completion"),
        "total": view.attrs.get("llm.token_count.total"),
    }


class OpenInference(NoRecords):
    """OpenInference: span kinds, ``llm.*_messages``, ``llm.prompts``, ``retrieval.documents``, tokens."""

    name = "openinference"

    def classify(self, view: SpanView) -> StepKind | None:
        return classify(view)

    def input_messages(self, view: SpanView) -> ModelIO | None:
        found = messages(view, "llm.input_messages")
        if found is not None:
            return ModelIO(messages=tuple(_sent_empty(view, found)))
        return _texts(prompts(view))

    def output_messages(self, view: SpanView) -> ModelIO | None:
        found = messages(view, "llm.output_messages")
        if found is not None:
            return ModelIO(messages=tuple(_with_citations(view, _with_refusals(view, found))))
        return _texts(choices(view))

    def documents(self, view: SpanView) -> list[Document] | None:
        return documents(view, "retrieval.documents")

    def usage(self, view: SpanView) -> Mapping[str, Any] | None:
        return usage(view)


CONVENTION = OpenInference()
