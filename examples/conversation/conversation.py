"""A procurement assistant that holds a conversation, traced with OpenTelemetry.

Each turn is one trace: an AGENT root, a RETRIEVER span when the turn looks documents up, and the
LLM span written by ``openinference-instrumentation-openai``. Every span carries the conversation's
``session.id`` (the instrumentor's through ``using_session``). The retrieved documents go into that
turn's user message; later turns send the conversation so far, so what turn 1 retrieved reaches
the model in turn 3 through the history — unless the history is cut to its last messages.

Two conversations (``CONVERSATIONS``), three turns each, differing only in the history kept:

- ``history-kept``: turn 3 asks whether a 45,000 RMB prepayment is fine; the 30,000 RMB clause of
  attachment v2 is in its model input through the history, and the model answers from the
  superseded 50,000 RMB cap (``ignored_by_model``, the clause retrieved in turn 1).
- ``history-cut``: the same, with the history cut to the last two messages: the clause never
  reaches turn 3's model (``dropped_in_context``).

Each turn's trace is recorded at the turn's time (the conversation's start plus a minute a turn:
its spans are shifted to it on export), so the task time triage reads from the trace is the same
whenever the example runs.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import openai
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator

from tracejudge.testing.openai_server import Rule

HERE = Path(__file__).resolve().parent
MODEL = "gpt-4.1-mini"
SYSTEM = "You are a procurement assistant. Answer from the contract documents in the conversation."

TURNS = (
    ("What is the prepayment cap for Huadong Steel?", True),
    ("Where does Huadong Steel deliver?", True),
    ("So I can prepay 45,000 RMB on order 7?", False),
)
"""(question, whether the turn retrieves): turn 3 relies on what the conversation already holds."""

TURN_INTERVAL = timedelta(minutes=1)
"""Between one turn's start and the next's."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ns(when: datetime) -> int:
    """Nanoseconds since the epoch, exactly (a float timestamp loses the last digits)."""
    return (when - _EPOCH) // timedelta(microseconds=1) * 1000


@dataclass(frozen=True)
class Conversation:
    """One scripted conversation: its session id, the trace id of each turn, the history it keeps."""

    name: str
    session_id: str
    trace_ids: tuple[str, str, str]
    keep_messages: int | None
    """How many earlier messages each turn sends (None: all of them)."""


CONVERSATIONS = (
    Conversation(
        "history-kept",
        "conv-8812",
        (
            "8812000000000000000000000000a001",
            "8812000000000000000000000000a002",
            "8812000000000000000000000000a003",
        ),
        None,
    ),
    Conversation(
        "history-cut",
        "conv-8813",
        (
            "8813000000000000000000000000b001",
            "8813000000000000000000000000b002",
            "8813000000000000000000000000b003",
        ),
        2,
    ),
)


def model_rules() -> list[Rule]:
    """The scripted model: right in turns 1 and 2, and in turn 3 it answers from the old cap."""
    return [
        Rule(
            last_user=r"prepay 45,000",
            reply="Yes. The prepayment cap is 50,000 RMB per order, so 45,000 RMB on order 7 is fine.",
        ),
        Rule(
            last_user=r"Huadong Steel deliver",
            reply="Deliveries go to the Shanghai warehouse within ten working days (contract C-17).",
        ),
        Rule(
            last_user=r"prepayment cap",
            reply="Attachment 2 version 2 caps prepayment at 30,000 RMB per order.",
        ),
    ]


# --- documents and retrieval ------------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    doc_id: str
    version: str
    content: str
    effective_from: datetime | None
    effective_to: datetime | None


def _time(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def load_documents(manifest: Path = HERE / "manifest.jsonl") -> list[Doc]:
    docs = []
    for line in manifest.read_text("utf-8").splitlines():
        if line.strip():
            e = json.loads(line)
            docs.append(
                Doc(
                    e["doc_id"],
                    e["version"],
                    e["content"],
                    _time(e["effective_from"]),
                    _time(e["effective_to"]),
                )
            )
    return docs


def retrieve(docs: Sequence[Doc], question: str, as_of: datetime, top_k: int = 2) -> list[tuple[Doc, float]]:
    """Documents in effect at ``as_of``, ranked by shared words with the question."""
    words = {w.strip("?.,").lower() for w in question.split()}
    live = [
        d
        for d in docs
        if (d.effective_from is None or d.effective_from <= as_of)
        and (d.effective_to is None or d.effective_to > as_of)
    ]
    scored = [
        (d, len(words & {w.strip("?.,()").lower() for w in d.content.split()}) / (len(words) or 1))
        for d in live
    ]
    return sorted([p for p in scored if p[1] > 0], key=lambda p: -p[1])[:top_k]


# --- tracing ----------------------------------------------------------------------------------


class FixedTraceIds(IdGenerator):
    """Fixed trace ids per turn (so tickets can name them); random span ids."""

    def __init__(self) -> None:
        self._next: int | None = None
        self._rand = random.Random(8812)

    @contextmanager
    def use(self, trace_id: str) -> Iterator[None]:
        self._next = int(trace_id, 16)
        try:
            yield
        finally:
            self._next = None

    def generate_trace_id(self) -> int:
        return self._next if self._next is not None else self._rand.getrandbits(128)

    def generate_span_id(self) -> int:
        return self._rand.getrandbits(64)


class AtTurnTime(SpanExporter):
    """Exports each turn's spans shifted by that turn's offset (see :meth:`Agent.turn`), so its trace
    starts at the turn's time, not the wall clock's: the task time a ticket without ``task_time``
    takes from the trace is then the same on every run."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter
        self.offsets: dict[int, int] = {}
        """Per trace id: nanoseconds added to its spans' times."""

    def _shift(self, span: ReadableSpan) -> ReadableSpan:
        offset = self.offsets.get(span.context.trace_id) if span.context is not None else None
        if not offset:
            return span

        def at(ns: int | None) -> int | None:
            return ns + offset if ns is not None else None

        return ReadableSpan(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=span.attributes,
            events=[Event(e.name, e.attributes, at(e.timestamp)) for e in span.events],
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
class Agent:
    """The assistant: one traced turn per call of :meth:`turn`."""

    exporter: SpanExporter
    client: openai.OpenAI
    docs: list[Doc] = field(default_factory=load_documents)
    ids: FixedTraceIds = field(default_factory=FixedTraceIds)

    def __post_init__(self) -> None:
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": "procurement-chat"}), id_generator=self.ids
        )
        self.at_turn_time = AtTurnTime(self.exporter)
        self.provider.add_span_processor(BatchSpanProcessor(self.at_turn_time))
        self.tracer = self.provider.get_tracer("procurement-chat", "1.0")

    def turn(
        self,
        conv: Conversation,
        history: list[dict[str, str]],
        question: str,
        *,
        retrieves: bool,
        trace_id: str,
        as_of: datetime,
    ) -> str:
        """Answer ``question`` given ``history`` (appended to), as one trace of the conversation,
        recorded as if the turn started at ``as_of``."""
        from openinference.instrumentation import using_session

        with (
            self.ids.use(trace_id),
            using_session(conv.session_id),
            self.tracer.start_as_current_span("procurement-chat") as root,
        ):
            # The root's own start, read before any span of the turn ends (and is exported): the
            # trace then starts exactly at the turn's time.
            started = getattr(root, "start_time", None) or time.time_ns()
            self.at_turn_time.offsets[int(trace_id, 16)] = _ns(as_of) - started
            root.set_attribute("openinference.span.kind", "AGENT")
            root.set_attribute("session.id", conv.session_id)
            root.set_attribute("input.value", question)
            content = question
            if retrieves:
                with self.tracer.start_as_current_span("retrieve_contracts") as span:
                    hits = retrieve(self.docs, question, as_of)
                    span.set_attribute("openinference.span.kind", "RETRIEVER")
                    span.set_attribute("session.id", conv.session_id)
                    span.set_attribute("input.value", question)
                    for i, (doc, score) in enumerate(hits):
                        prefix = f"retrieval.documents.{i}.document"
                        span.set_attribute(f"{prefix}.id", f"{doc.doc_id}@{doc.version}")
                        span.set_attribute(f"{prefix}.content", doc.content)
                        span.set_attribute(f"{prefix}.score", score)
                        span.set_attribute(
                            f"{prefix}.metadata",
                            json.dumps({"doc_id": doc.doc_id, "version": doc.version}),
                        )
                context = "\n".join(d.content for d, _ in hits)
                content = f"Documents:\n{context}\nQuestion: {question}"
            sent = history if conv.keep_messages is None else history[-conv.keep_messages :]
            messages = [
                {"role": "system", "content": SYSTEM},
                *sent,
                {"role": "user", "content": content},
            ]
            reply = self.client.chat.completions.create(model=MODEL, messages=messages, temperature=0)  # type: ignore[arg-type]
            answer = reply.choices[0].message.content or ""
            root.set_attribute("output.value", answer)
        history += [{"role": "user", "content": content}, {"role": "assistant", "content": answer}]
        return answer

    def close(self) -> None:
        self.provider.force_flush()
        self.provider.shutdown()
        self.client.close()


def run_conversations(
    exporter: SpanExporter,
    openai_base_url: str,
    as_of: datetime,
    conversations: Sequence[Conversation] = CONVERSATIONS,
) -> dict[str, list[str]]:
    """Hold every conversation, three turns each, exporting the spans; returns the answers. Every
    conversation starts at ``as_of``, its turns a :data:`TURN_INTERVAL` apart."""
    from openinference.instrumentation.openai import OpenAIInstrumentor

    client = openai.OpenAI(base_url=openai_base_url, api_key="demo-key-not-secret", max_retries=0)
    agent = Agent(exporter, client)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=agent.provider)
    answers: dict[str, list[str]] = {}
    try:
        for conv in conversations:
            history: list[dict[str, str]] = []
            answers[conv.name] = [
                agent.turn(conv, history, q, retrieves=r, trace_id=tid, as_of=as_of + n * TURN_INTERVAL)
                for n, ((q, r), tid) in enumerate(zip(TURNS, conv.trace_ids, strict=True))
            ]
    finally:
        instrumentor.uninstrument()
        agent.close()
    return answers


def main(argv: Sequence[str]) -> int:
    """Record both conversations over OTLP into a store (``--store PATH``, default
    ``.tracejudge/conversation.db``) against the scripted model, and print what to run next."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from tracejudge.store import SqliteStore
    from tracejudge.testing.openai_server import ScriptedOpenAIServer
    from tracejudge_collectors.otel import serve_in_thread

    db = Path(argv[1]) if argv[:1] == ["--store"] and len(argv) > 1 else Path(".tracejudge/conversation.db")
    db.parent.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(db)
    expected = {tid for conv in CONVERSATIONS for tid in conv.trace_ids}
    try:
        with ScriptedOpenAIServer(model_rules()) as model, serve_in_thread(store) as url:
            run_conversations(
                OTLPSpanExporter(endpoint=f"{url}/v1/traces"),
                model.base_url,
                as_of=datetime(2026, 11, 18, 9, 30, tzinfo=UTC),
            )
            deadline = time.monotonic() + 30
            while not expected <= {t.trace_id for t in store.list_traces()} and time.monotonic() < deadline:
                time.sleep(0.05)
        stored = expected & {t.trace_id for t in store.list_traces()}
    finally:
        store.close()
    if stored != expected:
        print(f"only {len(stored)} of {len(expected)} turns reached the store {db}", file=sys.stderr)
        return 1
    here = HERE.relative_to(Path.cwd()) if HERE.is_relative_to(Path.cwd()) else HERE
    print(f"recorded {len(CONVERSATIONS)} conversations, 3 turns each, into {db}; then:")
    manifest = here / "manifest.jsonl"
    for conv in CONVERSATIONS:
        ticket = next((HERE / "tickets").glob(f"*-{conv.name}.yaml")).relative_to(HERE)
        print(f"  tracejudge --store sqlite:///{db} traces show --session {conv.session_id}")
        print(f"  tracejudge --store sqlite:///{db} triage --ticket {here / ticket} --manifest {manifest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
