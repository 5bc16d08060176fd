"""Raw spans -> TaskRecord, reading OpenInference, OTel GenAI, OpenLLMetry and Langfuse spans.

Each span is classified once (first match wins: ``tracejudge.step`` / ``tracejudge.context.*``,
a typed Langfuse observation, ``openinference.span.kind``, ``gen_ai.operation.name``, OpenLLMetry
kinds and vector-store spans, then model attributes; a table's "other" yields to a later table's
specific step), then read by the table of its step. Readers
try every dialect, because one span often carries several (Langfuse metadata holding OpenInference
attributes, OpenLLMetry writing ``gen_ai.*``).

tracejudge's own attributes, where no convention exists:

- ``tracejudge.step``: force a span's step (``context``, ``retrieval``, ... any StepKind).
- Instrumentations that only record run metadata (LangChain's ``with_config(metadata=...)``) carry
  these keys there: OpenInference's ``metadata`` JSON, OpenLLMetry's
  ``traceloop.association.properties.tracejudge.*`` (see ``SpanView``).
- ``tracejudge.retrieval.filter``: JSON equality map or ``$``-operator filter the retrieval ran with.
- ``tracejudge.retrieval.principal``: who the retrieval ran as.
- ``tracejudge.retrieval.candidates``: JSON list ``[{"doc_id", "version", "score", "excluded_by"}]``
  of documents considered before filtering (``excluded_by``: filter, permission, rank or null).
- ``tracejudge.context.included`` / ``tracejudge.context.dropped``: JSON list of ``"doc_id@version"``
  strings or ``{"doc_id", "version", "reason"}`` objects: what context assembly kept and left out.
- ``tracejudge.context.budget``: the token or character budget (int).
- A span with ``tracejudge.step = "context"`` or any ``tracejudge.context.*`` attribute is a
  context-assembly step; its output (``output.value``, ``langfuse.observation.output``,
  ``traceloop.entity.output``) is the assembled context text.

Retrieval attributes are read from any span of a retrieval call: a retriever span and the
retrieval/vector-store spans below it form one call, anchored on the outermost.

Nothing here raises on bad attribute data: what cannot be read becomes a ``Gap``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, get_args

from tracejudge._errors import InputError
from tracejudge.normalize import _genai as genai
from tracejudge.normalize import _haystack as haystack
from tracejudge.normalize import _langfuse as langfuse
from tracejudge.normalize import _openinference as oi
from tracejudge.normalize import _openllmetry as oll
from tracejudge.normalize._shapes import (
    answer_text,
    documents_from_value,
    messages_from_value,
    request_text,
)
from tracejudge.normalize._values import (
    REDACTED,
    as_float,
    as_int,
    as_str,
    as_str_list,
    maybe_json,
    nanos_to_datetime,
    text_of,
)
from tracejudge.normalize._view import Gaps, SpanView
from tracejudge.schema import (
    Candidate,
    ContextAssembly,
    Document,
    Message,
    ModelCall,
    RawSpan,
    Reranking,
    RetrievalCall,
    SpanNode,
    StepKind,
    TaskRecord,
    ToolCall,
)

_STEP_KINDS: frozenset[str] = frozenset(get_args(StepKind))
_MODEL_KEYS = (
    "langfuse.observation.model.name",
    "gen_ai.response.model",
    "gen_ai.request.model",
    "llm.response.model",
    "llm.model_name",
    "llm.request.model",
)
_INPUT_KEYS = ("langfuse.observation.input", "input.value", "traceloop.entity.input")
_OUTPUT_KEYS = ("langfuse.observation.output", "output.value", "traceloop.entity.output")
_EXCLUDED_BY = frozenset({"filter", "permission", "rank"})
_STATUS: dict[int, Literal["unset", "ok", "error"]] = {1: "ok", 2: "error"}


def normalize(spans: Sequence[RawSpan]) -> TaskRecord:
    """Rebuild the task record of one trace from its spans (any order, any convention).

    Pure and linear in the size of the spans: every attribute is decoded at most once.
    """
    if not spans:
        raise InputError("no spans to normalize", hint="collect the trace first (tracejudge collect ...)")
    gaps = Gaps()
    unique: dict[str, RawSpan] = {}
    for span in spans:
        unique[span.span_id] = span  # a span delivered twice (retries) counts once
    views = [SpanView(span, gaps) for span in unique.values()]
    views.sort(key=lambda v: (v.raw.start_time_unix_nano, v.span_id))
    by_id = {v.span_id: v for v in views}

    for view in views:
        try:
            view.step, view.convention = _classify(view)
        except Exception as exc:  # bad data must never abort a trace; the gap says which span
            _internal(view, exc)

    parent: dict[str, str | None] = {}
    children: dict[str, list[SpanView]] = {}
    for view in views:
        pid = view.raw.parent_span_id or None
        if pid is not None and pid not in by_id:
            view.gap("missing_parent", f"parent span {pid} was not collected")
            pid = None
        parent[view.span_id] = pid
        if pid is not None:
            children.setdefault(pid, []).append(view)

    roots = [v for v in views if not v.raw.parent_span_id] or [v for v in views if parent[v.span_id] is None]
    root = roots[0]

    # An LLM span with another LLM span below it is a wrapper (LlamaIndex's ``LLM.predict`` around
    # ``LLM.chat``): the innermost span holds the messages actually sent, so only it is a model call.
    wrappers: set[str] = set()
    for view in views:
        if view.step == "model":
            pid = parent[view.span_id]
            while pid is not None and pid not in wrappers:
                if by_id[pid].step == "model":
                    wrappers.add(pid)
                pid = parent[pid]

    retrievals: list[RetrievalCall] = []
    rerank_views: list[SpanView] = []
    contexts: list[ContextAssembly] = []
    models: list[ModelCall] = []
    tools: list[ToolCall] = []
    for view in views:
        try:
            if view.step == "retrieval":
                anchor_parent = parent[view.span_id]
                if anchor_parent is not None and by_id[anchor_parent].step == "retrieval":
                    continue  # read as part of the enclosing retrieval call
                members = _members(view, children)
                if (
                    anchor_parent is not None
                    and oll.KIND not in view.attrs  # a traceloop task records its own query
                    and _is_retriever_task(by_id[anchor_parent])
                ):
                    members.append(by_id[anchor_parent])
                retrievals.append(_retrieval(view, members))
                if view.get("tool.name", "gen_ai.tool.name") is not None:
                    # A function tool marked as a retriever (openai-agents' ``tool_span_kinds``) was
                    # still called by the model: its arguments and result are a tool call too.
                    tools.append(_tool_call(view))
            elif view.step == "rerank":
                rerank_views.append(view)  # read once every retrieval is known (node ids below)
            elif view.step == "context":
                contexts.append(_context(view))
            elif view.step == "model" and view.span_id not in wrappers:
                models.append(_model_call(view))
            elif view.step == "tool":
                tools.append(_tool_call(view))
        except Exception as exc:  # see above
            _internal(view, exc)

    returned = {d.raw_id: d for call in retrievals for d in call.documents if d.raw_id is not None}
    rerankings: list[Reranking] = []
    for view in rerank_views:
        try:
            rerankings.append(_reranking(view, returned))
        except Exception as exc:  # see above
            _internal(view, exc)

    if not retrievals:
        gaps.add(
            "no_retrieval_span", None, "no span of the trace is a retrieval step" + _unmarked(tools, by_id)
        )
    tools = _with_call_ids(tools, models)
    if not models:
        detail = "no span of the trace is an LLM call"
        if any(oll.KIND in v.attrs for v in views):
            # OpenLLMetry's framework instrumentations (llama-index) leave LLM calls to the client's.
            detail += (
                "; OpenLLMetry records LLM calls with the LLM client's instrumentation"
                " (e.g. opentelemetry-instrumentation-openai): enable it beside the framework's"
            )
        gaps.add("no_model_span", None, detail)

    answer, answer_span = _final_answer(views, root, models)
    if answer is None:
        gaps.add("no_final_answer", None, "neither the root span nor a model call recorded an output")

    starts = [v.raw.start_time_unix_nano for v in views if v.raw.start_time_unix_nano > 0]
    ends = [v.raw.end_time_unix_nano for v in views if v.raw.end_time_unix_nano > 0]
    start = nanos_to_datetime(min(starts)) if starts else None
    end = nanos_to_datetime(max(ends)) if ends else None
    duration = (max(ends) - min(starts)) / 1e6 if starts and ends and max(ends) >= min(starts) else None

    name = _first(views, "langfuse.trace.name") or root.raw.name or None
    return TaskRecord(
        trace_id=root.raw.trace_id,
        name=as_str(name),
        start_time=start,
        end_time=end,
        duration_ms=duration,
        input=_task_input(views, root, models),
        final_answer=answer,
        final_answer_span_id=answer_span,
        retrievals=tuple(retrievals),
        rerankings=tuple(rerankings),
        context_assemblies=tuple(contexts),
        model_calls=tuple(models),
        tool_calls=tuple(tools),
        spans=tuple(_node(v, parent[v.span_id]) for v in views),
        gaps=gaps.items(),
        metadata=_metadata(views, root),
    )


def _internal(view: SpanView, exc: Exception) -> None:
    view.gap("attribute_unparseable", f"internal error reading span: {type(exc).__name__}")


# --- classification -----------------------------------------------------------------------------


def _classify(view: SpanView) -> tuple[StepKind, str]:
    a = view.attrs
    forced = a.get("tracejudge.step")
    if isinstance(forced, str) and forced in _STEP_KINDS:
        return forced, "tracejudge"  # type: ignore[return-value]  # checked against StepKind above
    if any(key.startswith("tracejudge.context.") for key in a):
        return "context", "tracejudge"
    step: StepKind | None = langfuse.classify(view)
    convention = "langfuse"
    if step is None:
        # "other" is a weak answer a later table may refine: OpenLLMetry writes gen_ai.operation.name
        # values the GenAI table does not know (execute_task, vector_db_retrieve) beside traceloop.*.
        for name, table in (("openinference", oi), ("gen_ai", genai), ("openllmetry", oll)):
            found = table.classify(view)
            if found is None or (found == "other" and step is not None):
                continue
            step, convention = found, name
            if found != "other":
                break
    if step is None and any(a.get(key) is not None for key in _MODEL_KEYS):
        step, convention = "model", "langfuse" if langfuse.is_langfuse(view) else "gen_ai"
    if step is None:
        step, convention = "other", "langfuse" if langfuse.is_langfuse(view) else ""
    if step == "other" and any(key.startswith("tracejudge.retrieval.") for key in a):
        return "retrieval", convention or "tracejudge"
    return step, convention


# --- retrieval ----------------------------------------------------------------------------------


def _members(anchor: SpanView, children: dict[str, list[SpanView]]) -> list[SpanView]:
    """The anchor, then retrieval and embedding spans below it (through retrieval spans), in start order."""
    out = [anchor]
    stack = list(reversed(children.get(anchor.span_id, [])))
    while stack:
        view = stack.pop()
        if view.step in ("retrieval", "embedding"):
            out.append(view)
            if view.step == "retrieval":
                stack.extend(reversed(children.get(view.span_id, [])))
    return out


def _is_retriever_task(view: SpanView) -> bool:
    """An OpenLLMetry task/tool span around a vector-store query: it holds the query text the store lacks."""
    return view.step in ("chain", "tool") and view.attrs.get(oll.KIND) in ("task", "tool")


def _documents(view: SpanView) -> list[Document] | None:
    docs = oi.documents(view, "retrieval.documents")
    if docs is None:
        docs = genai.retrieval_documents(view)
    if docs is None:
        docs = oll.result_documents(view)
    if docs is None:
        for key in _OUTPUT_KEYS:
            value = view.attrs.get(key)
            if value is None or value == REDACTED:
                continue
            docs = documents_from_value(view, maybe_json(value))
            if docs is not None:
                break
    return docs


def _query(view: SpanView) -> str | None:
    text = as_str(view.attrs.get("gen_ai.retrieval.query.text"))
    if text is None:
        for key in _INPUT_KEYS:
            value = view.attrs.get(key)
            if value is not None and value != REDACTED:
                text = request_text(value)
                if text:
                    break
    return text if text != REDACTED else None


def _retrieval_filter(view: SpanView) -> tuple[Any, str | None] | None:
    value = view.attrs.get("tracejudge.retrieval.filter")
    if value is not None:
        if isinstance(value, str):
            return view.json("tracejudge.retrieval.filter", value), value
        return value, None
    return oll.store_filter(view) or haystack.retriever_filter(view)


def _candidates(view: SpanView) -> tuple[Candidate, ...] | None:
    key = "tracejudge.retrieval.candidates"
    value = view.attrs.get(key)
    if value is None:
        return None
    parsed = view.json(key, value)
    if not isinstance(parsed, list):
        if parsed is not None:
            view.gap("attribute_unparseable", f"{key}: not a list")
        return None
    out: list[Candidate] = []
    for item in parsed:
        if isinstance(item, str):
            ident, at, version = item.rpartition("@")
            out.append(Candidate(doc_id=ident if at else version, version=version if at else None))
            continue
        doc_id = as_str(item.get("doc_id") or item.get("id")) if isinstance(item, dict) else None
        if not isinstance(item, dict) or doc_id is None:
            view.gap("attribute_unparseable", f"{key}: an entry has no doc_id")
            continue
        excluded = item.get("excluded_by")
        if excluded is not None and excluded not in _EXCLUDED_BY:
            view.gap("attribute_unparseable", f"{key}: unknown excluded_by {str(excluded)[:40]!r}")
            excluded = None
        out.append(
            Candidate(
                doc_id=doc_id,
                version=as_str(item.get("version")),
                score=as_float(item.get("score")),
                excluded_by=excluded,
            )
        )
    return tuple(out)


def _retrieval(anchor: SpanView, members: list[SpanView]) -> RetrievalCall:
    docs: list[Document] | None = None
    query: str | None = None
    filt: tuple[Any, str | None] | None = None
    principal: str | None = None
    candidates: tuple[Candidate, ...] | None = None
    top_k: int | None = None
    source: str | None = None
    for view in members:
        if view.step == "embedding":
            continue
        if docs is None:
            docs = _documents(view)
        query = query or _query(view)
        filt = filt or _retrieval_filter(view)
        principal = principal or as_str(view.attrs.get("tracejudge.retrieval.principal"))
        if candidates is None:
            candidates = _candidates(view)
        if top_k is None:
            top_k = as_int(
                view.get(
                    "gen_ai.retrieval.top_k",
                    "gen_ai.request.top_k",
                    "db.vector.query.top_k",
                    "db.chroma.query.n_results",
                )
            )
        source = source or as_str(view.get("gen_ai.data_source.id", "db.collection.name"))
    if docs is None:
        anchor.gap("retrieval_documents_not_recorded", "the retrieval call did not record what it returned")
    else:
        missing = sum(1 for d in docs if d.content is None)
        if missing:
            anchor.gap(
                "retrieval_content_not_recorded", f"{missing} of {len(docs)} documents have no content"
            )
    return RetrievalCall(
        span_id=anchor.span_id,
        span_ids=tuple(v.span_id for v in members),
        name=anchor.raw.name,
        query=query,
        documents=tuple(docs or ()),
        documents_recorded=docs is not None,
        filter=filt[0] if filt else None,
        filter_raw=filt[1] if filt else None,
        principal=principal,
        candidates=candidates,
        top_k=top_k,
        data_source=source,
        start_time=anchor.start,
    )


def _reranking(view: SpanView, returned: dict[str, Document]) -> Reranking:
    query = as_str(view.attrs.get("reranker.query"))
    inputs = oi.documents(view, "reranker.input_documents")
    outputs = oi.documents(view, "reranker.output_documents")
    if inputs is None and outputs is None:
        inputs = _node_documents(view, "input.value", returned)
        outputs = _node_documents(view, "output.value", returned)
    if inputs is None and outputs is None and oll.KIND in view.attrs:
        inputs = _resolved(oll.node_documents(view, "traceloop.entity.input"), returned)
        outputs = _resolved(oll.node_documents(view, "traceloop.entity.output"), returned)
        query = query or oll.node_query(view)
    return Reranking(
        span_id=view.span_id,
        query=None if query == REDACTED else query,
        input_documents=tuple(inputs or ()),
        output_documents=tuple(outputs or ()),
        top_k=as_int(view.attrs.get("reranker.top_k")),
    )


def _resolved(docs: list[Document] | None, returned: dict[str, Document]) -> list[Document] | None:
    """Documents a step passed on, as the retrieval returned them when their node id is known there
    (same identity and content), with this step's score and position."""
    if docs is None:
        return None
    out = []
    for doc in docs:
        known = returned.get(doc.raw_id) if doc.raw_id is not None else None
        out.append(
            doc if known is None else known.model_copy(update={"score": doc.score, "position": doc.position})
        )
    return out


def _node_documents(view: SpanView, key: str, returned: dict[str, Document]) -> list[Document] | None:
    """A LlamaIndex postprocessor's nodes (ids only) as the documents a retrieval returned under those ids."""
    value = view.attrs.get(key)
    refs = oi.node_refs(value) if value != REDACTED else None
    if refs is None:
        return None
    out = []
    for position, (node_id, score) in enumerate(refs):
        known = returned.get(node_id)
        if known is None:
            out.append(Document(doc_id=node_id, raw_id=node_id, score=score, position=position))
        else:
            out.append(known.model_copy(update={"score": score, "position": position}))
    return out


# --- context assembly ---------------------------------------------------------------------------


def _identities(view: SpanView, key: str) -> tuple[list[str], dict[str, str]]:
    value = view.attrs.get(key)
    if value is None:
        return [], {}
    parsed = view.json(key, value) if isinstance(value, str) else value
    if not isinstance(parsed, list):
        if parsed is not None:
            view.gap("attribute_unparseable", f"{key}: not a list")
        return [], {}
    ids: list[str] = []
    reasons: dict[str, str] = {}
    for item in parsed:
        if isinstance(item, str):
            ids.append(item)
            continue
        doc_id = as_str(item.get("doc_id") or item.get("id")) if isinstance(item, dict) else None
        if not isinstance(item, dict) or doc_id is None:
            view.gap("attribute_unparseable", f"{key}: an entry has no doc_id")
            continue
        version = as_str(item.get("version"))
        identity = f"{doc_id}@{version}" if version else doc_id
        ids.append(identity)
        reason = as_str(item.get("reason"))
        if reason:
            reasons[identity] = reason
    return ids, reasons


def _context(view: SpanView) -> ContextAssembly:
    included, _ = _identities(view, "tracejudge.context.included")
    dropped, reasons = _identities(view, "tracejudge.context.dropped")
    budget_value = view.attrs.get("tracejudge.context.budget")
    budget = as_int(budget_value)
    if budget_value is not None and budget is None:
        view.gap("attribute_unparseable", "tracejudge.context.budget: not an integer")
    output = view.get(*_OUTPUT_KEYS)
    text: str | None = None
    if output is not None and output != REDACTED:
        # A rendered chat prompt (OpenInference PROMPT spans) is a message list: all of it is context.
        messages = messages_from_value(maybe_json(output))
        if messages:
            text = "\n\n".join(m.content for m in messages if m.content) or None
        else:
            text = answer_text(output)
    return ContextAssembly(
        span_id=view.span_id,
        name=view.raw.name,
        included=tuple(included),
        dropped=tuple(dropped),
        dropped_reasons=reasons,
        budget=budget,
        output=text,
    )


# --- model calls --------------------------------------------------------------------------------


def _fallback_io(view: SpanView, keys: Iterable[str]) -> tuple[list[Message] | None, str | None, bool]:
    """Messages or text from free-form I/O attributes; and whether one of them was redacted."""
    redacted = False
    for key in keys:
        value = view.attrs.get(key)
        if value is None or value == "":
            continue
        if value == REDACTED:
            redacted = True
            continue
        parsed = maybe_json(value)
        messages = messages_from_value(parsed)
        if messages:
            return messages, None, redacted
        return None, text_of(parsed), redacted
    return None, None, redacted


def _model_call(view: SpanView) -> ModelCall:
    system, system_redacted = genai.system_instructions(view)
    raw_texts: list[str] = []
    redacted = system_redacted

    inputs = oi.messages(view, "llm.input_messages")
    if inputs is None:
        inputs, raw = genai.input_messages(view)
        if raw:
            raw_texts.append(raw)
    if inputs is None and not raw_texts:
        inputs = oll.messages(view, "gen_ai.prompt")
    if inputs is None and not raw_texts:
        prompts = oi.prompts(view)
        if prompts:
            redacted = redacted or any(p == REDACTED for p in prompts)
            raw_texts.extend(p for p in prompts if p != REDACTED)
    if inputs is None and not raw_texts:
        inputs, text, io_redacted = _fallback_io(view, (*_INPUT_KEYS, "gen_ai.prompt"))
        redacted = redacted or io_redacted
        if text:
            raw_texts.append(text)

    outputs = oi.messages(view, "llm.output_messages")
    out_raw: str | None = None
    out_redacted = False
    if outputs is None:
        outputs, out_raw = genai.output_messages(view)
    if outputs is None and out_raw is None:
        outputs = oll.messages(view, "gen_ai.completion")
    if outputs is None and out_raw is None:
        outputs, out_raw, out_redacted = _fallback_io(view, (*_OUTPUT_KEYS, "gen_ai.completion"))

    pieces = [system] if system else []
    for message in inputs or ():
        redacted = redacted or message.redacted
        if message.content:
            pieces.append(message.content)
    pieces.extend(raw_texts)
    input_text = "\n".join(pieces)

    out_redacted = out_redacted or any(m.redacted for m in outputs or ())
    output_text = next((m.content for m in outputs or () if m.content), None) or out_raw
    output_recorded = output_text is not None or any(m.tool_calls for m in outputs or ())

    if redacted:
        view.gap("model_input_redacted", "the model input was recorded redacted")
    elif not input_text:
        view.gap("model_input_not_recorded", "the LLM span carries no input content")
    if out_redacted:
        view.gap("model_output_redacted", "the model output was recorded redacted")
    elif not output_recorded:
        view.gap("model_output_not_recorded", "the LLM span carries no output content")

    usage: dict[str, int] = {}
    for table in (langfuse.usage(view), oi.usage(view), genai.usage(view)):
        for key, value in table.items():
            number = as_int(value)
            if number is not None and key not in usage:
                usage[key] = number
    return ModelCall(
        span_id=view.span_id,
        name=view.raw.name,
        model=as_str(view.get(*_MODEL_KEYS)),
        system_instructions=system,
        input_messages=tuple(inputs or ()),
        output_messages=tuple(outputs or ()),
        input_recorded=bool(input_text),
        input_redacted=redacted,
        output_recorded=output_recorded,
        input_text=input_text,
        output_text=output_text,
        usage=usage,
        prompt=langfuse.prompt(view),
        start_time=view.start,
    )


def _tool_call(view: SpanView) -> ToolCall:
    a = view.attrs
    name = as_str(view.get("tool.name", "gen_ai.tool.name"))
    if name is None and a.get(oll.KIND) == "tool":
        name = as_str(a.get("traceloop.entity.name"))
    arguments = view.get("gen_ai.tool.call.arguments", *_INPUT_KEYS)
    result = view.get("gen_ai.tool.call.result", *_OUTPUT_KEYS)
    return ToolCall(
        span_id=view.span_id,
        name=name or view.raw.name,
        call_id=as_str(view.get("gen_ai.tool.call.id", "tool.id", "tool_call.id")),
        arguments=maybe_json(arguments),
        result=maybe_json(result),
        start_time=view.start,
    )


def _unmarked(tools: list[ToolCall], by_id: dict[str, SpanView]) -> str:
    """A hint naming tools whose result reads as documents with ids, when nothing is a retrieval.

    Such a tool is not read as a retrieval: a list of records with ids may be orders or tickets as
    well as documents, and a wrong retrieval would give a confident wrong verdict. Marking it is cheap.
    """
    names: dict[str, int] = {}
    for call in tools:
        docs = documents_from_value(by_id[call.span_id], call.result) if call.result is not None else None
        if docs and all(d.doc_id is not None for d in docs):
            names.setdefault(call.name, len(docs))
    if not names:
        return ""
    listed = ", ".join(f"{name} ({count} documents)" for name, count in names.items())
    return (
        f"; tools returned documents with ids but are not marked as retrievers: {listed}."
        " Mark them: OpenInference span kind RETRIEVER (openai-agents instrumentation:"
        " tool_span_kinds={name: 'RETRIEVER'}), gen_ai.tool.type = datastore, or tracejudge.step = retrieval"
    )


def _with_call_ids(tools: list[ToolCall], models: list[ModelCall]) -> list[ToolCall]:
    """Tool calls whose span records no call id, given the id of the model's request they answer.

    Some instrumentations (openai-agents) put the id only on the model output's tool call; the
    request is the latest earlier one with the same name and arguments, each request used once.
    """
    if all(call.call_id is not None for call in tools):
        return tools
    requests: list[tuple[Any, str, str, Any]] = []
    for model in models:
        for message in model.output_messages:
            for request in message.tool_calls:
                call_id = as_str(request.get("id"))
                name = as_str(request.get("name"))
                if call_id and name:
                    requests.append((model.start_time, call_id, name, maybe_json(request.get("arguments"))))
    used = {call.call_id for call in tools if call.call_id is not None}
    out: list[ToolCall] = []
    for call in tools:
        if call.call_id is None:
            match = next(
                (
                    call_id
                    for start, call_id, name, arguments in reversed(requests)
                    if call_id not in used
                    and name == call.name
                    and arguments == call.arguments
                    and (start is None or call.start_time is None or start <= call.start_time)
                ),
                None,
            )
            if match is not None:
                used.add(match)
                call = call.model_copy(update={"call_id": match})
        out.append(call)
    return out


# --- trace level --------------------------------------------------------------------------------


def _first(views: list[SpanView], key: str) -> Any:
    for view in views:
        value = view.attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def _final_answer(
    views: list[SpanView], root: SpanView, models: list[ModelCall]
) -> tuple[str | None, str | None]:
    for view in [root, *views]:
        value = view.attrs.get("langfuse.trace.output")
        if value is not None and value != REDACTED:
            text = answer_text(value)
            if text:
                return text, view.span_id
    # A Haystack pipeline's output is every leaf component's result, replies as Python reprs.
    pipeline = haystack.is_pipeline(root)
    value = haystack.pipeline_answer(root) if pipeline else root.get(*_OUTPUT_KEYS)
    if value is not None and value != REDACTED:
        text = answer_text(value)
        if text:
            return text, root.span_id
    if "gen_ai.output.messages" in root.attrs:
        messages, raw = genai.output_messages(root)
        text = next((m.content for m in reversed(messages or []) if m.content), None) or raw
        if text:
            return text, root.span_id
    for call in reversed(models):
        if call.output_text:
            return call.output_text, call.span_id
    return None, None


def _task_input(views: list[SpanView], root: SpanView, models: list[ModelCall]) -> str | None:
    pipeline = haystack.is_pipeline(root)
    for value in (
        _first([root, *views], "langfuse.trace.input"),
        None if pipeline else root.get(*_INPUT_KEYS),
    ):
        if value is not None and value != REDACTED:
            text = request_text(value)
            if text:
                return text
    text = haystack.pipeline_input(root) if pipeline else None
    if text:
        return text
    if "gen_ai.input.messages" in root.attrs:
        messages, raw = genai.input_messages(root)
        text = next((m.content for m in reversed(messages or []) if m.role == "user" and m.content), None)
        if text or raw:
            return text or raw
    for call in models:
        text = next(
            (m.content for m in reversed(call.input_messages) if m.role == "user" and m.content), None
        )
        if text:
            return text
    return None


def _metadata(views: list[SpanView], root: SpanView) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ordered_views = [root, *views]
    service = as_str(root.resource.get("service.name"))
    if service is None:
        service = next((s for s in (as_str(v.resource.get("service.name")) for v in views) if s), None)
    if service:
        out["service_name"] = service
    for field, keys in (
        ("session_id", ("session.id", "langfuse.session.id", "gen_ai.conversation.id")),
        ("user_id", ("user.id", "langfuse.user.id")),
        ("environment", ("langfuse.environment", "deployment.environment.name", "deployment.environment")),
        ("release", ("langfuse.release",)),
    ):
        for key in keys:
            value = as_str(_first(ordered_views, key))
            if value is None and field == "environment":
                value = next(
                    (as_str(v.resource.get(key)) for v in ordered_views if v.resource.get(key)), None
                )
            if value is not None:
                out[field] = value
                break
    tags: dict[str, None] = {}
    for view in views:
        for key in ("langfuse.trace.tags", "tag.tags"):
            if view.attrs.get(key) is not None:
                tags.update(dict.fromkeys(as_str_list(view.attrs[key]) or ()))
    if tags:
        out["tags"] = list(tags)
    return out


def _node(view: SpanView, parent: str | None) -> SpanNode:
    status: Literal["unset", "ok", "error"] = _STATUS.get(view.raw.status_code, "unset")
    return SpanNode(
        span_id=view.span_id,
        parent_span_id=parent,
        name=view.raw.name,
        step=view.step,
        start_time=view.start,
        end_time=nanos_to_datetime(view.raw.end_time_unix_nano),
        status=status,
        convention=view.convention,
    )
