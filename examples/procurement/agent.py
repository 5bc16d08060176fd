"""A small contract-compliance agent, traced with OpenTelemetry the way tracejudge reads it.

The pipeline is the one tracejudge localizes faults in:

    index (what was ingested by the task time)
      -> retriever (metadata filter, principal's ACL, top-k by score)
      -> context builder (character budget: documents that do not fit are dropped or cut)
      -> model (an OpenAI-compatible endpoint, through the real ``openai`` client)
      -> answer

Every step is a span: an AGENT root, a RETRIEVER span with OpenInference document attributes
and tracejudge's ``tracejudge.retrieval.*`` attributes (filter, principal, candidates), a
context-builder CHAIN span with ``tracejudge.context.*`` attributes, and the LLM span written
by ``openinference-instrumentation-openai`` when it is installed (hand-written OpenInference
attributes otherwise).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import openai
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import Tracer

SYSTEM_PROMPT = (
    "You are a procurement compliance assistant. Answer from the contract documents in the "
    "context only, and name the document you relied on. If the documents do not settle the "
    "question, say so."
)


# --- the index ------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexedDocument:
    """One document version as the ingestion pipeline recorded it (a line of manifest.jsonl)."""

    doc_id: str
    version: str
    content: str
    metadata: Mapping[str, Any]
    acl: tuple[str, ...] | None
    effective_from: datetime | None
    effective_to: datetime | None
    indexed_at: datetime | None
    removed_at: datetime | None

    @property
    def key(self) -> str:
        return f"{self.doc_id}@{self.version}"

    def in_index_at(self, when: datetime) -> bool:
        """Whether the index held this version at ``when``."""
        if self.indexed_at is None or self.indexed_at > when:
            return False
        return self.removed_at is None or self.removed_at > when


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def load_documents(manifest: Path) -> list[IndexedDocument]:
    """Read the ingestion manifest (DESIGN 5.3, with each document's ``content``)."""
    docs = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        acl = row.get("acl")
        docs.append(
            IndexedDocument(
                doc_id=row["doc_id"],
                version=row["version"],
                content=row.get("content") or "",
                metadata=row.get("metadata") or {},
                acl=tuple(acl) if acl is not None else None,
                effective_from=_time(row.get("effective_from")),
                effective_to=_time(row.get("effective_to")),
                indexed_at=_time(row.get("indexed_at")),
                removed_at=_time(row.get("removed_at")),
            )
        )
    return docs


# --- retrieval ------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "to",
        "for",
        "is",
        "are",
        "be",
        "by",
        "in",
        "on",
        "under",
        "what",
        "which",
        "with",
        "this",
        "that",
        "it",
        "its",
    ]
)


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def score(query: str, doc: IndexedDocument) -> float:
    """Share of the query's terms found in the document (a stand-in for a vector similarity)."""
    q = _terms(query)
    if not q:
        return 0.0
    d = _terms(doc.content) | _terms(" ".join(str(v) for v in doc.metadata.values()))
    return round(len(q & d) / len(q), 4)


def matches_filter(metadata: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Equality map with ``{"$in": [...]}`` / ``{"$ne": x}`` values (part of DESIGN 5.4)."""
    if not flt:
        return True
    for key, want in flt.items():
        have = metadata.get(key)
        if isinstance(want, Mapping):
            if "$in" in want and have not in want["$in"]:
                return False
            if "$ne" in want and have == want["$ne"]:
                return False
        elif have != want:
            return False
    return True


@dataclass(frozen=True)
class Hit:
    doc: IndexedDocument
    score: float


@dataclass(frozen=True)
class Retrieval:
    """What a retrieval call returned, and what it considered."""

    hits: tuple[Hit, ...]
    candidates: tuple[dict[str, Any], ...]


class Retriever:
    """Top-k lexical retrieval over the documents indexed at ``as_of``, with filter and ACL."""

    def __init__(self, documents: Iterable[IndexedDocument], as_of: datetime) -> None:
        self.documents = [d for d in documents if d.in_index_at(as_of)]

    def retrieve(self, query: str, *, principal: str, flt: Mapping[str, Any] | None, top_k: int) -> Retrieval:
        ranked = sorted(self.documents, key=lambda d: (-score(query, d), d.doc_id, d.version))
        candidates: list[dict[str, Any]] = []
        hits: list[Hit] = []
        for doc in ranked:
            s = score(query, doc)
            excluded: str | None = None
            if not matches_filter(doc.metadata, flt):
                excluded = "filter"
            elif doc.acl is not None and principal not in doc.acl:
                excluded = "permission"
            elif s <= 0 or len(hits) >= top_k:
                excluded = "rank"
            else:
                hits.append(Hit(doc, s))
            candidates.append(
                {"doc_id": doc.doc_id, "version": doc.version, "score": s, "excluded_by": excluded}
            )
        return Retrieval(tuple(hits), tuple(candidates))


# --- context --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    text: str
    included: tuple[str, ...]
    dropped: tuple[str, ...]
    cut: tuple[str, ...]


MIN_EXCERPT = 120
"""Below this many characters of room, a document that does not fit is dropped rather than cut."""


def build_context(hits: Sequence[Hit], budget_chars: int) -> Context:
    """Pack documents in rank order into ``budget_chars``; cut the one that overflows, drop the rest."""
    parts: list[str] = []
    included: list[str] = []
    dropped: list[str] = []
    cut: list[str] = []
    used = 0
    for hit in hits:
        block = f"[{hit.doc.key}]\n{hit.doc.content}\n"
        room = budget_chars - used
        if len(block) <= room:
            parts.append(block)
            included.append(hit.doc.key)
            used += len(block)
        elif room >= MIN_EXCERPT:
            parts.append(block[: room - 2] + "…\n")
            included.append(hit.doc.key)
            cut.append(hit.doc.key)
            used = budget_chars
        else:
            dropped.append(hit.doc.key)
    return Context("\n".join(parts), tuple(included), tuple(dropped), tuple(cut))


# --- tracing --------------------------------------------------------------------------------


class FixedTraceIds(IdGenerator):
    """Random ids, except while :meth:`use` is active: then the trace id is fixed and span ids
    are derived from it, so a rerun of a scenario sends the very same ids (and a store that keeps
    spans by id deduplicates them)."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._trace_id: int | None = None
        self._counter = 0

    @contextmanager
    def use(self, trace_id_hex: str) -> Iterator[None]:
        self._trace_id, self._counter = int(trace_id_hex, 16), 0
        try:
            yield
        finally:
            self._trace_id = None

    def generate_trace_id(self) -> int:
        return self._trace_id if self._trace_id is not None else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        if self._trace_id is None:
            return self._random.generate_span_id()
        self._counter += 1
        digest = hashlib.sha256(f"{self._trace_id:032x}/{self._counter}".encode()).digest()
        return int.from_bytes(digest[:8], "big") or 1


class _CountEnded(SpanProcessor):
    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None:
            tid = f"{span.context.trace_id:032x}"
            self.counts[tid] = self.counts.get(tid, 0) + 1


class _AsOf(SpanExporter):
    """Exports each span of a trace run "as of" another time shifted by that trace's offset, so a
    scenario replayed today is recorded at its task time (the trace's start is its task time, as in a
    real deployment, and a sweep reads it so)."""

    def __init__(self, exporter: SpanExporter, offsets: dict[int, int]) -> None:
        self.exporter = exporter
        self.offsets = offsets

    def _shift(self, span: ReadableSpan) -> ReadableSpan:
        offset = self.offsets.get(span.context.trace_id) if span.context is not None else None
        if not offset:
            return span

        def at(ns: int | None) -> int | None:
            return ns + offset if ns is not None else None

        events = [Event(e.name, e.attributes, at(e.timestamp)) for e in span.events]
        return ReadableSpan(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=span.attributes,
            events=events,
            links=span.links,
            kind=span.kind,
            status=span.status,
            start_time=at(span.start_time),
            end_time=at(span.end_time),
            instrumentation_scope=span.instrumentation_scope,
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.exporter.export([self._shift(s) for s in spans])

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.exporter.force_flush(timeout_millis)


@dataclass
class Tracing:
    """A tracer provider exporting through ``exporter``, with fixed ids per scenario and a count
    of the spans ended per trace (so a caller knows how many to wait for)."""

    exporter: SpanExporter
    service_name: str = "procurement-agent"
    ids: FixedTraceIds = field(default_factory=FixedTraceIds)
    span_counts: dict[str, int] = field(default_factory=dict)
    offsets: dict[int, int] = field(default_factory=dict)
    """Per trace id: nanoseconds added to its spans' times on export (see :meth:`as_of`)."""

    def __post_init__(self) -> None:
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": self.service_name}), id_generator=self.ids
        )
        self.provider.add_span_processor(BatchSpanProcessor(_AsOf(self.exporter, self.offsets)))
        self.provider.add_span_processor(_CountEnded(self.span_counts))
        self.tracer: Tracer = self.provider.get_tracer("procurement-agent", "1.0")

    def flush(self, timeout_ms: int = 30_000) -> bool:
        return self.provider.force_flush(timeout_ms)

    def as_of(self, trace_id_hex: str, when: datetime) -> None:
        """Record the trace ``trace_id_hex``, about to run, as if it started at ``when``."""
        self.offsets[int(trace_id_hex, 16)] = int(when.timestamp() * 1e9) - time.time_ns()

    def shutdown(self) -> None:
        self.provider.shutdown()


try:  # the real OpenInference instrumentor, when installed (the dev extra has it)
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.openai import OpenAIInstrumentor

    HAVE_INSTRUMENTOR = True
except ImportError:  # pragma: no cover - exercised only without the dev extra
    HAVE_INSTRUMENTOR = False


@contextmanager
def instrument_openai(
    tracing: Tracing, *, capture_content: bool, use_instrumentor: bool = True
) -> Iterator[bool]:
    """Instrument the ``openai`` client for one run; yields whether the real instrumentor is active."""
    if not (use_instrumentor and HAVE_INSTRUMENTOR):
        yield False
        return
    instrumentor = OpenAIInstrumentor()
    config = TraceConfig(hide_inputs=not capture_content, hide_input_messages=not capture_content)
    instrumentor.instrument(tracer_provider=tracing.provider, config=config)
    try:
        yield True
    finally:
        instrumentor.uninstrument()


# --- the agent ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentConfig:
    """How one deployment of the agent is set up (each scenario changes one thing)."""

    principal: str = "procurement"
    filter: Mapping[str, Any] | None = None
    top_k: int = 4
    budget_chars: int = 4000
    model: str = "gpt-4.1-mini"
    capture_content: bool = True
    """False: the model input and the assembled context are not recorded (the LLM span hides its inputs)."""


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def run_agent(
    question: str,
    config: AgentConfig,
    *,
    retriever: Retriever,
    client: openai.OpenAI,
    tracing: Tracing,
    trace_id: str | None = None,
    use_instrumentor: bool = True,
    as_of: datetime | None = None,
) -> str:
    """Answer ``question``; every step is recorded on ``tracing`` (under ``trace_id`` when given, and
    at the time ``as_of`` when given with it)."""
    ids = tracing.ids.use(trace_id) if trace_id else nullcontext()
    if trace_id and as_of is not None:
        tracing.as_of(trace_id, as_of)
    auto_llm = instrument_openai(
        tracing, capture_content=config.capture_content, use_instrumentor=use_instrumentor
    )
    with ids, auto_llm as auto:
        return _run(question, config, retriever, client, tracing.tracer, instrumented=auto)


def _run(
    question: str,
    config: AgentConfig,
    retriever: Retriever,
    client: openai.OpenAI,
    tracer: Tracer,
    *,
    instrumented: bool,
) -> str:
    with tracer.start_as_current_span("procurement-agent") as root:
        root.set_attribute("openinference.span.kind", "AGENT")
        root.set_attribute("input.value", question)

        with tracer.start_as_current_span("retrieve_contracts") as span:
            result = retriever.retrieve(
                question, principal=config.principal, flt=config.filter, top_k=config.top_k
            )
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            span.set_attribute("input.value", question)
            span.set_attribute("tracejudge.retrieval.filter", _json(config.filter or {}))
            span.set_attribute("tracejudge.retrieval.principal", config.principal)
            span.set_attribute("tracejudge.retrieval.candidates", _json(list(result.candidates)))
            for i, hit in enumerate(result.hits):
                prefix = f"retrieval.documents.{i}.document"
                span.set_attribute(f"{prefix}.id", hit.doc.key)
                span.set_attribute(f"{prefix}.content", hit.doc.content)
                span.set_attribute(f"{prefix}.score", hit.score)
                meta = {"doc_id": hit.doc.doc_id, "version": hit.doc.version, **hit.doc.metadata}
                span.set_attribute(f"{prefix}.metadata", _json(meta))

        with tracer.start_as_current_span("build_context") as span:
            context = build_context(result.hits, config.budget_chars)
            span.set_attribute("openinference.span.kind", "CHAIN")
            span.set_attribute("tracejudge.context.included", _json(list(context.included)))
            span.set_attribute("tracejudge.context.dropped", _json(list(context.dropped)))
            span.set_attribute("tracejudge.context.budget", config.budget_chars)
            if context.cut:
                span.set_attribute("tracejudge.context.cut", _json(list(context.cut)))
            if config.capture_content:
                span.set_attribute("output.value", context.text)

        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"Context:\n{context.text}\nQuestion: {question}"},
        ]
        if instrumented:
            answer = _complete(client, config.model, messages)
        else:
            answer = _complete_traced(client, config.model, messages, tracer, config.capture_content)

        root.set_attribute("output.value", answer)
        return answer


def _complete(client: openai.OpenAI, model: str, messages: list[dict[str, str]]) -> str:
    reply = client.chat.completions.create(model=model, messages=messages, temperature=0)  # type: ignore[arg-type]
    return reply.choices[0].message.content or ""


def _complete_traced(
    client: openai.OpenAI, model: str, messages: list[dict[str, str]], tracer: Tracer, capture: bool
) -> str:
    """The LLM span by hand, with the attributes OpenInference's instrumentor would write."""
    with tracer.start_as_current_span("ChatCompletion") as span:
        span.set_attribute("openinference.span.kind", "LLM")
        span.set_attribute("llm.model_name", model)
        span.set_attribute("llm.provider", "openai")
        if capture:
            span.set_attribute("input.value", _json({"model": model, "messages": messages}))
            for i, m in enumerate(messages):
                span.set_attribute(f"llm.input_messages.{i}.message.role", m["role"])
                span.set_attribute(f"llm.input_messages.{i}.message.content", m["content"])
        answer = _complete(client, model, messages)
        span.set_attribute("output.value", answer)
        span.set_attribute("llm.output_messages.0.message.role", "assistant")
        span.set_attribute("llm.output_messages.0.message.content", answer)
        return answer
