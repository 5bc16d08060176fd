"""Losing records never makes a verdict more definite in another direction (DESIGN 5.5).

Over every recorded trace in the repository — the fixtures of tests/fixtures/traces (under no manifest, the
recorded traces' manifests, and the recordings' own index as their tests give it; the Bedrock knowledge-base
recordings also as a knowledge base without sidecar ids returns their chunks, ``+sourced``, or a source
without metadata, ``+located``, and under an index naming their source URIs), the procurement example's
scenarios with their tickets and manifest, the DSPy-shaped traces of test_identification, and the traces
recorded outside this repository (every case of test_outside_traces, under its manifest variants) — take
records away as real exporters lose them, and triage again: the verdict stays or becomes ``unconfirmed``. The
kinds of loss (``KINDS``): one span, one attribute, one event (log records reach a trace as span events); a
span with its subtree (a dropped batch, a sampled-out child); every span that ended after a time (a trace
triaged on its first batch, before the rest arrived); another recorded run's spans merged in under the trace's
id (``merge``: a reused trace id — the next trace of the same framework and one of another, after, before and
during the run, as sent, collected back through Langfuse's API (``MERGES``: both API generations, compared
with the trace alone collected back alike) and with the other run's root lost; not a loss, but records of
another run the trace cannot tell from its own must only move the verdict toward ``unconfirmed`` too); every
span of one instrumentation scope (an instrumentor not installed); a content family on every span and event
(``CONTENT``: content capture switched off); one content attribute or a content family hidden (``REDACTED`` in
its place); one attribute, or every value, cut at an exporter's length limit (``LIMITS``). The few losses that
leave a trace indistinguishable from a real fault are listed in ``INDISTINGUISHABLE`` (and
test_outside_traces' own list) with the reason.

``make test`` draws a bounded number of losses (``TRACEJUDGE_REMOVAL_EXAMPLES``, default 1000; the kind
drawn first, so each kind gets its share); ``python tests/localize/test_removal_property.py [KIND ...]
[--case TEXT]`` tries every one and prints the violations, and per kind the losses tried.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.conftest import unwrap_openllmetry_openai
from tests.localize import conftest as mk
from tests.localize._langfuse_api import Generation, api_spans
from tracejudge._demo import load_example
from tracejudge.localize import load_manifest, load_ticket, localize
from tracejudge.normalize import normalize
from tracejudge.schema import ManifestEntry, RawSpan, Ticket
from tracejudge.store import open_store
from tracejudge.testing.openai_server import ScriptedOpenAIServer
from tracejudge_collectors.otel import decode_protobuf, iter_otlp_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "procurement"
EXAMPLES = int(os.environ.get("TRACEJUDGE_REMOVAL_EXAMPLES", "1000"))

_MANIFEST_DOCUMENTS = (
    "the manifest given puts v2 in a region the recorded filter excludes, and only the recorded"
    " documents showed it was returned anyway (the manifest is wrong for this trace): without them (not"
    " recorded, content capture off, or cut short and unreadable) the trace is a filter fault whose"
    " retrieval did not record its documents"
)
_MANIFEST_NAMESPACE = (
    "the manifest puts v2 in a namespace other than the one the query searched, and only the recorded match"
    " showed it was returned anyway (the manifest is wrong for this trace): without it (its event lost, its"
    " metadata off, hidden or cut short) the trace is a query of another namespace, a filter fault"
)
_NEVER_INDEXED = (
    "the manifest says the material was never indexed and only the retrieval shows it was returned (the"
    " manifest is wrong for this trace): without the retrieval's spans the trace is one whose retriever"
    " was not traced, and a never-indexed document is what the manifest then shows"
)
_LANGFUSE_OUTPUT = "attr contract-retriever:langfuse.observation.output"
_LANGFUSE_CUT = "truncate contract-retriever:langfuse.observation.output@128"
_GENAI_DOCUMENTS = "attr retrieval contracts-index:gen_ai.retrieval.documents"
_TRULENS_RETRIEVALS = {
    "outside/trulens/chain@never-indexed": (
        "langchain_core.runnables.base.RunnableSequence.invoke",
        "langchain_core.runnables.base.RunnableParallel.invoke",
        "langchain_core.vectorstores.base.VectorStoreRetriever.invoke",
        "langchain_core.vectorstores.base.VectorStoreRetriever._get_relevant_documents",
    ),
    "outside/trulens/llama@never-indexed": (
        "llama_index.core.query_engine.retriever_query_engine.RetrieverQueryEngine.retrieve",
    ),
    "outside/trulens/chain-unmarked-llm@never-indexed": (
        "langchain_core.runnables.base.RunnableSequence.invoke",
        "langchain_core.runnables.base.RunnableParallel.invoke",
        "langchain_core.retrievers.BaseRetriever.invoke",
    ),
}
# (case, removed record) -> why the trace without it is indistinguishable from a real fault. A removal's
# label may name several spans of one name: the entry covers each.
_LAST_CALL = (
    "the root records no answer, so the answer is the last model call's reply: without the whole span of the"
    " last call the trace is one whose only call gave the draft as its answer (no record says another call"
    " followed); losing the last call's output alone reads unconfirmed"
)
_POST_ANSWER = (
    "the model call made after the answer (a memory summary, a title) is the only record that another reply"
    " may have been the answer: without its span the trace is one whose last call answered after a tool"
    " step, as an agent's does, and that call's reply is read"
)
_SDK_STOP_REASON = (
    "the anthropic SDK's own span records the reply's stop_reason in anthropic.message.stop_reason alone (no"
    " GenAI finish reason, no response body): without it, a reply stopped at max_tokens in the middle of v1's"
    " cap reads as a whole answer stating it — a real ignored fault to the letter"
)
_WHOLE_RUN_LOST = (
    "each run of Langfuse's v2 decorator under langfuse_parent_trace_id is a top-level span of a trace"
    " that has no fields of its own: with one run's whole subtree lost, the trace is a trace of the other"
    " run alone, as a trace of one run is, and that run's verdict is read"
)
INDISTINGUISHABLE: dict[tuple[str, str], str] = {
    ("langfuse-v2/two_parented_runs_good_dropped", "subtree answer_question"): _WHOLE_RUN_LOST,
    **{
        (
            f"anthropic_sdk_tool_max_tokens.pb{m}",
            "attr anthropic.messages.create:anthropic.message.stop_reason",
        ): (_SDK_STOP_REASON)
        for m in ("@CN", "@EU", "@policy")
    },
    **{
        (f"post_answer_{run}.pb{m}", "span chat gpt-4.1-nano"): _POST_ANSWER
        for run in ("rag", "ignored")
        for m in ("", "@CN", "@EU", "@policy")
    },
    ("reading/genai-empty-after-draft", "span chat scripted-model"): _LAST_CALL,
    **{
        (f"genai_agent.json{m}", label): _MANIFEST_DOCUMENTS
        for m in ("@EU", "@policy")
        for label in (_GENAI_DOCUMENTS, "content documents", "content all")
    },
    **{
        (f"langfuse_sdk.pb{m}", label): _MANIFEST_DOCUMENTS
        for m in ("@EU", "@policy")
        for label in (
            _LANGFUSE_OUTPUT,
            "content outputs",
            "content all",
            _LANGFUSE_CUT,
            "truncate all@128",
            "redact outputs",
            "redact all",
            "redact contract-retriever:langfuse.observation.output",
        )
    },
    ("openinference_rag.pb@CN", "attr retrieve:tracejudge.retrieval.candidates"): (
        "the recorded candidates say the filter excluded the material while the manifest says the"
        " filter admits it; without the candidates the records consistently show a ranking cut"
    ),
    **{
        ("langgraph_filtered.pb+second-search@policy", label): (
            "a second search that recorded neither its filter nor its documents may have returned the"
            " material; without its span (dropped, sampled out) or its kind (no convention marks it a"
            " retrieval) the trace is one of a single search whose recorded filter excluded the material,"
            " a real filter fault: nothing left in the trace names the lost search"
        )
        for label in ("span ContractRetriever", "attr ContractRetriever:openinference.span.kind")
    },
    **{
        (case, f"subtree {name}"): _NEVER_INDEXED
        for case, names in _TRULENS_RETRIEVALS.items()
        for name in names
    },
    # OpenAI's hosted file_search, its results in the response OpenInference records whole (output.value):
    # hidden or cut short, the response no longer shows the search returned the material.
    **{
        ("outside/openai-file-search/results@never-indexed", label): _NEVER_INDEXED
        for label in (
            "content outputs",
            "content all",
            "redact outputs",
            "redact all",
            "redact Response:output.value",
            "truncate Response:output.value@128",
            "truncate Response:output.value@1024",
            "truncate all@128",
            "truncate all@1024",
        )
    },
    # A Pinecone query in namespace "procurement" returned v2, which the manifest puts in "legal".
    **{
        ("pinecone/returned@legal", label): _MANIFEST_NAMESPACE
        for label in (
            "event pinecone.query:db.query.result",
            "content documents",
            "content all",
            "redact documents",
            "redact all",
            "truncate all@128",
        )
    },
    # The replayed Pinecone run's three spans are three roots (its test made them under no parent): its first
    # batch, the embedding call alone, is a whole trace without the query, and nothing says more is to come.
    **{
        (f"outside/openllmetry-pinecone/{name}@never-indexed", "batch 1 of 3 end times"): _NEVER_INDEXED
        for name in ("returned", "returned-unstated")
    },
    # OpenLLMetry's Pinecone query: the matches' texts (its metadata's "text") identify the version returned;
    # without the instrumentation's span, or with the texts off, hidden or cut short (the metadata is one
    # Python literal), the trace shows the chunk's id returned in no version the manifest contradicts.
    **{
        (f"outside/openllmetry-pinecone/{name}@never-indexed", label): _NEVER_INDEXED
        for name in ("returned", "returned-unstated")
        for label in (
            "scope opentelemetry.instrumentation.pinecone",
            "content documents",
            "content all",
            "redact documents",
            "redact all",
            "truncate all@128",
            "truncate all@1024",
        )
    },
}


@dataclass(frozen=True)
class Case:
    name: str
    spans: tuple[RawSpan, ...]
    ticket: Ticket
    manifest: tuple[ManifestEntry, ...] | None


Kind = Literal[
    "span", "attr", "event", "subtree", "batch", "skew", "merge", "scope", "content", "redact", "truncate"
]
KINDS: tuple[Kind, ...] = (
    "span",
    "attr",
    "event",
    "subtree",
    "batch",
    "skew",
    "merge",
    "scope",
    "content",
    "redact",
    "truncate",
)
# How far a span's clock may be off (another service, a host whose clock drifts, an exporter rewriting times):
# a subtree shifted by each, back and forth. Not a loss, but the times that order a trace's calls are a record
# the trace may get wrong, and a wrong one must only move a verdict toward unconfirmed too.
SKEWS = (-3600 * 10**9, -2 * 10**9, 2 * 10**9, 3600 * 10**9)
# Where another run's spans are put when merged into a trace under its trace id (a reused trace id): after the
# run (the next request of a session the app gave one trace id), before it, and at its start (a propagated
# header reused by concurrent requests).
PLACEMENTS = ("after", "before", "during")
# How the merged trace is read: as sent (OTLP), collected back from a Langfuse server's API (each generation:
# several top-level observations adopted by one synthetic root, the trace's record one run's or none), or with
# the other run's root lost (its spans orphans naming a parent never received).
MERGES = ("", " langfuse-v3", " langfuse-v4", " rootless")
# What a redacting processor or a hide switch leaves in place of a hidden value.
REDACTED = "__REDACTED__"

# What an instrumentation's content-capture switch takes away (the GenAI instrumentations'
# OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, TRACELOOP_TRACE_CONTENT, OpenInference's
# hide_inputs/hide_outputs, OpenLIT's capture_message_content, a Langfuse mask...), one family at a time
# and all together: the keys, on every span and every event.
CONTENT: dict[str, re.Pattern[str]] = {
    "inputs": re.compile(
        r"input\.value|llm\.input_messages\..*|gen_ai\.input\.messages|gen_ai\.system_instructions"
        r"|gen_ai\.prompt\..*|gen_ai\.task\.input|traceloop\.entity\.input|langfuse\.observation\.input"
        r"|llm\.openai\.messages|llm\.prompt_template\..*|mlflow\.spanInputs|gcp\.vertex\.agent\.llm_request"
        r"|pydantic_ai\.all_messages|mirascope\.response\.messages|mirascope\.trace\.arg_values"
        r"|agentops\.entity\.input|atomic_agents\.input|function\.args|function\.kwargs"
        r"|metadata\.steps\..*\.input\..*|gen_ai\.retrieval\.query\.text|reranker\.query"
        r"|body|content|message"  # the log records of chat messages (gen_ai.user.message, gen_ai.choice)
    ),
    "outputs": re.compile(
        r"output\.value|llm\.output_messages\..*|gen_ai\.output\.messages|gen_ai\.completion\..*"
        r"|gen_ai\.task\.output|traceloop\.entity\.output|langfuse\.observation\.output|mlflow\.spanOutputs"
        r"|gcp\.vertex\.agent\.llm_response|mirascope\.response\.content|mirascope\.trace\.output"
        r"|agentops\.entity\.output|atomic_agents\.output|final_result|metadata\.result\..*"
        r"|metadata\.steps\..*\.output|logfire\.msg|body|content|message"
    ),
    "documents": re.compile(
        r"retrieval\.documents\..*\.document\.(content|metadata)|gen_ai\.retrieval\.documents"
        r"|reranker\.(input|output)_documents\..*\.document\.(content|metadata)|db\.query\.result\.(document|metadata)"
    ),
    "tools": re.compile(
        r"gen_ai\.tool\.call\.(arguments|result)|gen_ai\.tool\.args|tool_call\.function\.arguments"
        r"|llm\.(input|output)_messages\..*\.tool_call\.function\.arguments|gcp\.vertex\.agent\.tool_(call_args|response)"
        r"|agentops\.tool\.(input|output)|tool\.result"
    ),
}
CONTENT["all"] = re.compile("|".join(f"(?:{p.pattern})" for p in CONTENT.values()))
# Exporters cap attribute length (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, a backend's column), with no mark.
LIMITS = (128, 1024)


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, list):
        return [_cut(v, limit) for v in value]
    return value


def _ends(spans: tuple[RawSpan, ...]) -> list[int]:
    """The times the trace's spans ended, in order, each once."""
    return sorted({s.end_time_unix_nano for s in spans})


def _shifted(span: RawSpan, by: int) -> RawSpan:
    """The span with its times (and its events') moved by ``by`` nanoseconds."""
    events = [
        e.model_copy(update={"time_unix_nano": e.time_unix_nano + by}) if e.time_unix_nano else e
        for e in span.events
    ]
    return span.model_copy(
        update={
            "start_time_unix_nano": span.start_time_unix_nano + by,
            "end_time_unix_nano": span.end_time_unix_nano + by,
            "events": events,
        }
    )


def _descendants(spans: tuple[RawSpan, ...], index: int) -> set[int]:
    """The span at ``index`` and every span under it."""
    out, frontier = {index}, [spans[index].span_id]
    while frontier:
        parent = frontier.pop()
        for i, span in enumerate(spans):
            if span.parent_span_id == parent and i not in out:
                out.add(i)
                frontier.append(span.span_id)
    return out


def _other_run(spans: tuple[RawSpan, ...], other: tuple[RawSpan, ...], placement: str) -> list[RawSpan]:
    """Another run's spans as a trace that reuses ``spans``' trace id holds them: their trace id that one,
    their span ids (and parent ids) re-keyed so none is one of ``spans``' (the other run's generator made
    its own), their times moved so the run starts 1 s after ``spans`` end, ends 1 s before they start, or
    starts when they do (``placement``)."""
    mine, theirs = _bounds(spans), _bounds(other)
    by = {
        "after": mine[1] + 10**9 - theirs[0],
        "before": mine[0] - 10**9 - theirs[1],
        "during": mine[0] - theirs[0],
    }[placement]

    def rekey(span_id: str | None) -> str | None:
        return hashlib.sha256(f"other run:{span_id}".encode()).hexdigest()[:16] if span_id else span_id

    trace_id = spans[0].trace_id
    return [
        _shifted(s, by).model_copy(
            update={
                "trace_id": trace_id,
                "span_id": rekey(s.span_id),
                "parent_span_id": rekey(s.parent_span_id),
            }
        )
        for s in other
    ]


def _bounds(spans: tuple[RawSpan, ...]) -> tuple[int, int]:
    """When the spans' first starts and last ends (times not recorded, 0, left out)."""
    starts = [s.start_time_unix_nano for s in spans if s.start_time_unix_nano]
    ends = [s.end_time_unix_nano for s in spans if s.end_time_unix_nano]
    return min(starts, default=0), max(ends, default=0)


@functools.cache
def _partners(index: int) -> tuple[int, ...]:
    """The runs merged into case ``index``'s trace (``merge``): the next recorded trace of its framework (by
    the case's name) and one of another framework, half the corpus away — each a case index."""
    cases = corpus()
    traces = list({id(c.spans): i for i, c in reversed(list(enumerate(cases)))}.values())[::-1]
    here = next(p for p, i in enumerate(traces) if cases[i].spans is cases[index].spans)
    mine = _framework(cases[index].name)
    ring = [traces[(here + k) % len(traces)] for k in range(1, len(traces))]
    same = next((i for i in ring if _framework(cases[i].name) == mine), None)
    half = ring[len(ring) // 2 :] + ring[: len(ring) // 2]
    other = next(i for i in half if _framework(cases[i].name) != mine)
    return tuple(i for i in (same, other) if i is not None)


def _framework(name: str) -> str:
    """What recorded a case, from its name: ``outside/trulens`` of ``outside/trulens/chain@as-given``,
    ``langgraph`` of ``langgraph_filtered.pb@CN``."""
    base = name.split("@")[0]
    return base.rsplit("/", 1)[0] if "/" in base else base.split("_")[0].split(".")[0]


@dataclass(frozen=True)
class Removal:
    """One loss: a span, an attribute, an event (the first three kinds); a span with its subtree (a dropped
    batch, a sampled-out child); every span that ended after a time (the trace triaged on its first batch:
    exporters send spans as they end, the root last; ``span`` is the index of the last end time kept, in
    :func:`_ends`); a span's subtree with its times shifted by ``key`` nanoseconds (a clock that is off:
    ``SKEWS``); the spans of case ``span``'s trace merged in, placed ``key`` (``PLACEMENTS``: a trace id
    another run reused); every span of one instrumentation scope (an instrumentor not installed),
    a content family on every span (capture switched off), one content attribute or a content family
    hidden (``REDACTED`` in its place), one attribute or all cut at a length limit."""

    kind: Kind
    span: int = -1
    key: str | int = ""
    limit: int = 0

    def label(self, case: Case) -> str:
        if self.kind == "scope":
            return f"scope {self.key}"
        if self.kind == "content":
            return f"content {self.key}"
        if self.kind == "redact" and self.span < 0:
            return f"redact {self.key}"
        if self.kind == "truncate" and self.span < 0:
            return f"truncate all@{self.limit}"
        if self.kind == "batch":
            return f"batch {self.span + 1} of {len(_ends(case.spans))} end times"
        if self.kind == "skew":
            return f"skew {case.spans[self.span].name} by {int(self.key) / 1e9:+g} s"
        if self.kind == "merge":
            return f"merge {corpus()[self.span].name} {self.key}"
        span = case.spans[self.span]
        if self.kind == "span":
            return f"span {span.name}"
        if self.kind == "subtree":
            return f"subtree {span.name}"
        if self.kind == "attr":
            return f"attr {span.name}:{self.key}"
        if self.kind == "truncate":
            return f"truncate {span.name}:{self.key}@{self.limit}"
        if self.kind == "redact":
            return f"redact {span.name}:{self.key}"
        assert isinstance(self.key, int)
        return f"event {span.name}:{span.events[self.key].name}"

    def apply(self, case: Case) -> list[RawSpan]:
        spans = list(case.spans)
        if self.kind == "span":
            del spans[self.span]
        elif self.kind == "subtree":
            gone = _descendants(case.spans, self.span)
            spans = [s for i, s in enumerate(spans) if i not in gone]
        elif self.kind == "batch":
            last = _ends(case.spans)[self.span]
            spans = [s for s in spans if s.end_time_unix_nano <= last]
        elif self.kind == "skew":
            moved, by = _descendants(case.spans, self.span), int(self.key)
            spans = [_shifted(s, by) if i in moved else s for i, s in enumerate(spans)]
        elif self.kind == "merge":
            placement, _, how = str(self.key).partition(" ")
            other = _other_run(case.spans, corpus()[self.span].spans, placement)
            if how == "rootless":
                other = [s for s in other if s.parent_span_id]
            spans.extend(other)
            if how.startswith("langfuse-"):
                spans = api_spans(spans, _generation(how))
        elif self.kind == "scope":
            spans = [s for s in spans if s.scope_name != self.key]
        elif self.kind == "content":
            pattern = CONTENT[str(self.key)]
            spans = [_without_content(s, pattern) for s in spans]
        elif self.kind == "redact" and self.span < 0:
            pattern = CONTENT[str(self.key)]
            spans = [_redacted(s, pattern) for s in spans]
        elif self.kind == "redact":
            span = spans[self.span]
            attrs = {k: REDACTED if k == self.key else v for k, v in span.attributes.items()}
            spans[self.span] = span.model_copy(update={"attributes": attrs})
        elif self.kind == "truncate" and self.span < 0:
            spans = [_truncated(s, self.limit) for s in spans]
        elif self.kind == "truncate":
            span = spans[self.span]
            attrs = {k: _cut(v, self.limit) if k == self.key else v for k, v in span.attributes.items()}
            spans[self.span] = span.model_copy(update={"attributes": attrs})
        elif self.kind == "attr":
            span = spans[self.span]
            attrs = {k: v for k, v in span.attributes.items() if k != self.key}
            spans[self.span] = span.model_copy(update={"attributes": attrs})
        else:
            span = spans[self.span]
            events = [e for i, e in enumerate(span.events) if i != self.key]
            spans[self.span] = span.model_copy(update={"events": events})
        return spans


def _without_content(span: RawSpan, pattern: re.Pattern[str]) -> RawSpan:
    attrs = {k: v for k, v in span.attributes.items() if not pattern.fullmatch(k)}
    events = tuple(
        e.model_copy(
            update={"attributes": {k: v for k, v in e.attributes.items() if not pattern.fullmatch(k)}}
        )
        for e in span.events
    )
    return span.model_copy(update={"attributes": attrs, "events": events})


def _redacted(span: RawSpan, pattern: re.Pattern[str]) -> RawSpan:
    def hide(attrs: dict[str, Any]) -> dict[str, Any]:
        return {k: REDACTED if pattern.fullmatch(k) and isinstance(v, str) else v for k, v in attrs.items()}

    events = tuple(e.model_copy(update={"attributes": hide(e.attributes)}) for e in span.events)
    return span.model_copy(update={"attributes": hide(span.attributes), "events": events})


def _truncated(span: RawSpan, limit: int) -> RawSpan:
    events = tuple(
        e.model_copy(update={"attributes": {k: _cut(v, limit) for k, v in e.attributes.items()}})
        for e in span.events
    )
    attrs = {k: _cut(v, limit) for k, v in span.attributes.items()}
    return span.model_copy(update={"attributes": attrs, "events": events})


def _longest(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return max((_longest(v) for v in value), default=0)
    return 0


def _recorded() -> list[Path]:
    """The recorded traces (an OTLP/JSON file may hold a log request beside the trace request)."""
    return sorted(p for p in mk.RECORDED.iterdir() if p.suffix in (".pb", ".json"))


def _spans(path: Path) -> tuple[RawSpan, ...]:
    """A recorded trace's spans, its log records merged in by a real store (as ``collect file`` does)."""
    results = list(iter_otlp_file(path))
    spans = [s for r in results for s in r.spans]
    events = [e for r in results for e in r.log_events]
    if not events:
        return tuple(spans)
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(f"sqlite:///{Path(folder) / 'store.db'}")
        try:
            store.put_spans(spans)
            store.put_log_events(events)
            return tuple(store.get_spans(spans[0].trace_id))
        finally:
            store.close()


# recording -> the retriever ids the recordings' index lists (conftest ``policy_manifest``): where a recording
# identifies documents by those ids alone
_POLICY_IDS = {"dspy": "pid", "camel": "chunk", "instructor": "chunk", "litellm": "chunk", "logfire": "chunk"}
_POLICY_IDS |= {"openlit_langchain": "chunk"}


def _policy(name: str) -> dict[str, tuple[ManifestEntry, ...]]:
    """The recordings' own index (text and retriever ids, so returned text without an id is identified)
    as their tests give it: v2 in the EU, never indexed for a ``never_indexed`` run, ACLs for a
    permission run."""
    ids = next((v for k, v in _POLICY_IDS.items() if name.startswith(k + "_")), None)
    out = {"@policy": tuple(mk.policy_manifest("EU", ids=ids, acl="permission" in name))}
    if "never_indexed" in name:
        out["@never-indexed"] = tuple(mk.never_indexed_manifest(ids=ids))
    return out


def _manifests(name: str) -> dict[str, tuple[ManifestEntry, ...] | None]:
    """The manifests a recording is triaged under: none, the recorded traces' (v2 in CN, in the EU), and
    the recordings' own index (``_policy``)."""
    recorded = {"": None, "@CN": tuple(mk.recorded_manifest("CN")), "@EU": tuple(mk.recorded_manifest("EU"))}
    return {**recorded, **_policy(name)}


def _fixture_cases() -> Iterator[Case]:
    for path in _recorded():
        spans = _spans(path)
        for suffix, entries in _manifests(path.name).items():
            yield Case(path.name + suffix, spans, mk.ticket(), entries)


def _sourced_cases() -> Iterator[Case]:
    """The Bedrock knowledge-base recordings whose search records its chunks (test_recorded_bedrock's
    ``SOURCED``: plain, streamed, through ``invoke_model``) as a knowledge base without ``.metadata.json``
    sidecar ids returns their chunks (``+sourced``: each names only its source URI, a retriever's id the
    manifests do not use, and its text, no doc_id or version), and as a source without metadata returns
    them (``+located``: no chunk id or metadata, only the S3 location and the text); under the manifests of
    the recording with the sidecar, and under its own index naming each version's S3 file among its ids
    (``-uris``: the chunks identified by their URI, their text lost or not)."""
    from tests.localize import test_recorded_bedrock as bedrock

    for how, rewrite in {"+sourced": mk.sourced_only, "+located": mk.located_only}.items():
        for recording, run in bedrock.SOURCED:
            name = f"{recording}_{run}.pb"
            spans = tuple(rewrite(list(_spans(mk.RECORDED / name))))
            uris = {f"{k}-uris": tuple(mk.source_uri_ids(list(v))) for k, v in _policy(name).items()}
            for suffix, entries in {**_manifests(name), **uris}.items():
                yield Case(f"{name}{how}{suffix}", spans, mk.ticket(), entries)


def _second_retrieval_cases() -> Iterator[Case]:
    """A recorded filter fault with a second search that recorded neither its filter nor its documents (a
    copy of the retriever span beside it): which of the two left the material out is open, unconfirmed."""
    spans = _spans(mk.RECORDED / "langgraph_filtered.pb")
    (retriever,) = [s for s in spans if s.attributes.get("openinference.span.kind") == "RETRIEVER"]
    kept = ("openinference.span.kind", "input.value")
    second = retriever.model_copy(
        update={
            "span_id": "5ec0bd0000000001",
            "attributes": {k: v for k, v in retriever.attributes.items() if k in kept},
            "start_time_unix_nano": retriever.end_time_unix_nano,
            "end_time_unix_nano": retriever.end_time_unix_nano + 1_000_000,
        }
    )
    at = spans.index(retriever) + 1
    twice = (*spans[:at], second, *spans[at:])
    yield Case(
        "langgraph_filtered.pb+second-search@policy", twice, mk.ticket(), tuple(mk.policy_manifest("EU"))
    )


def _outside() -> ModuleType:
    from tests.localize import test_outside_traces

    return test_outside_traces


def _langfuse_v2_cases() -> Iterator[Case]:
    """Runs of Langfuse's v2 ``@observe`` decorator (one, and two under one trace id), as the v2 SDK sent
    them (tests/fixtures/langfuse_v2), folded as Langfuse's ingestion merges them and read as ``collect
    langfuse`` reads ``GET /traces/{id}`` (test_langfuse_v2_runs triages them through the stand-in)."""
    from tests.localize._langfuse_ingestion import FIXTURES, fold
    from tracejudge_collectors.langfuse import trace_to_spans

    manifest = (mk.entry(acl=None), mk.v1_entry())
    for path in sorted(FIXTURES.glob("*.json")):
        trace = fold(path.stem)
        spans = tuple(trace_to_spans(trace, trace["observations"]))
        yield Case(f"langfuse-v2/{path.stem}", spans, mk.ticket(), manifest)


def _outside_cases() -> Iterator[Case]:
    """The traces recorded outside this repository (tests/fixtures/outside): every case
    test_outside_traces lists, under its manifests (as given, the material never indexed, not yet in
    effect)."""
    outside = _outside()
    lists = [
        v for v in vars(outside).values() if isinstance(v, list) and v and isinstance(v[0], outside.Outside)
    ]
    originals = {case.name: case for found in lists for case in found}
    for original in originals.values():
        spans = tuple(outside._spans(original))
        for variant in outside.VARIANTS:
            case = outside._variant(original, variant)
            ticket = Ticket.model_validate({"trace_id": case.trace_id, **case.ticket})
            manifest = tuple(ManifestEntry.model_validate(e) for e in case.manifest)
            yield Case(f"outside/{case.name}", spans, ticket, manifest)


def _procurement_cases() -> Iterator[Case]:
    example = load_example(EXAMPLE)
    manifest = tuple(load_manifest(EXAMPLE / "manifest.jsonl"))
    with ScriptedOpenAIServer(example.model_rules()) as model:
        for scenario in example.load_scenarios(EXAMPLE):
            exporter = InMemorySpanExporter()
            example.run_scenarios([scenario], openai_base_url=model.base_url, exporter=exporter, base=EXAMPLE)
            encoded = encode_spans(exporter.get_finished_spans()).SerializeToString()
            spans = tuple(decode_protobuf(encoded).spans)
            yield Case(f"procurement/{scenario.name}", spans, load_ticket(scenario.ticket_path), manifest)


def _dspy_cases() -> Iterator[Case]:
    from tests.localize import test_identification as ident

    outer = [{"content": mk.V2_TEXT}, {"content": ident.OTHER_TEXT}]
    inner = [
        {"id": "C-17/attachment@v2", "content": mk.V2_TEXT, "score": 23.1},
        {"id": "C-12/contract@v1", "content": ident.OTHER_TEXT, "score": 11.4},
    ]
    for name, manifest in (("ids", ident.manifest(mk)), ("content", ident.manifest(mk, content=mk.V2_TEXT))):
        record_spans = ident.dspy_spans(mk, outer=outer, inner=inner if name == "ids" else None)
        yield Case(f"dspy/{name}", tuple(record_spans), mk.ticket(), tuple(manifest))


def _draft_cases() -> Iterator[Case]:
    """Two model calls whose first reply (a draft, stating the other version's cap, asking for a tool) is not
    the answer: the last call's reply is (it continues the first; the root records none). Losing the last
    reply must not make the draft read as the answer (found by hand once: an earlier call's text failed
    used_by_model, 60a3352), nor losing the last call's span (the draft, asking for a tool, is then last)."""
    from tests.localize import test_empty_answer as empty

    manifest = (mk.entry(acl=None), mk.v1_entry())
    for name, draft, answer in (
        ("good-after-stale-draft", empty.DRAFT, mk.GOOD),
        ("stale-after-good-draft", f"Checking: {mk.GOOD} Let me confirm.", mk.BAD),
    ):
        spans = empty.drafted(draft, answer)
        yield Case(f"drafts/{name}", tuple(spans), mk.ticket(), manifest)


def _reading_cases() -> Iterator[Case]:
    """Traces whose model said nothing in a way only some records show: an empty reply recorded by the GenAI
    instrumentation (a text part whose content is ""), after a draft stating v1's cap; a refusal, which
    openinference-instrumentation-openai keeps only in the response body (``output.value``); requests the
    API refused that sent a null message content or no message (only ``input.value`` shows it); a request
    history with an assistant turn of content null (a tool call, a legacy function call, a refusal) under
    each OpenAI instrumentation (test_null_message)."""
    from tests.localize import test_bad_request as bad
    from tests.localize import test_empty_answer as empty
    from tests.localize import test_refusal as refusal

    manifest = (mk.entry(acl=None), mk.v1_entry())
    genai = mk.genai_rag_trace([empty.Rule(reply=empty.DRAFT, times=1), empty.Rule(reply="")])
    yield Case("reading/genai-empty-after-draft", tuple(genai), mk.ticket(), manifest)
    yield Case("reading/refusal", tuple(refusal.refused_trace()), mk.ticket(), manifest)
    openllmetry = tuple(refusal.openllmetry_refused_trace())
    unwrap_openllmetry_openai()  # what it left wrapped would record into the traces made after it
    yield Case("reading/refusal-openllmetry", openllmetry, mk.ticket(), manifest)
    for name, messages in (("null-content", [{"role": "user", "content": None}]), ("no-messages", [])):
        yield Case(f"reading/bad-request-{name}", tuple(bad._refused(messages)), mk.ticket(), manifest)
    yield from _pinecone_cases()
    from tests.localize import test_null_message as null

    for recorder in null.RECORDERS:
        for history in null.HISTORIES:
            for material, text in (("", mk.V2_TEXT), ("-v1", mk.V1_TEXT)):
                spans = tuple(null.recorded(recorder, history, text))
                unwrap_openllmetry_openai()
                yield Case(f"reading/null-{history}{material}-{recorder}", spans, mk.ticket(), manifest)


def _pinecone_cases() -> Iterator[Case]:
    """OpenLLMetry's Pinecone query with its filter and namespace (tests/localize/test_pinecone.py): the
    material returned, a filter excluding it, no match under a filter excluding or admitting it, a namespace
    the manifest does not put it in, and the default namespace against a named one."""
    from tests.localize import test_pinecone as pc

    wide = {"region": {"$in": ["CN", "EU"]}}
    stale = [pc.match("v1", "CN", 0.8)]
    traces = {
        "returned": pc.pinecone_trace([pc.match("v2", "EU", 0.91)], flt=pc.EU_FILTER),
        "filtered": pc.pinecone_trace([pc.match("v1", "CN", 0.88)], flt=pc.CN_FILTER, answer=mk.BAD),
        "no-match-filtered": pc.pinecone_trace([], flt=pc.CN_FILTER, answer=pc.NO_ANSWER),
        "no-match-admitted": pc.pinecone_trace([], flt=pc.EU_FILTER, answer=pc.NO_ANSWER),
        "ranked-out": pc.pinecone_trace(stale, flt=wide, answer=mk.BAD),
        "default-namespace": pc.pinecone_trace(stale, flt=wide, namespace=None, answer=mk.BAD),
    }
    manifests = {
        "": pc.manifest(),
        "@legal": pc.manifest(namespace="legal"),
        "@none": pc.manifest(namespace=None),
    }
    for name, spans in traces.items():
        for suffix, entries in manifests.items():
            yield Case(f"pinecone/{name}{suffix}", tuple(spans), mk.ticket(), tuple(entries))


@functools.cache
def corpus() -> tuple[Case, ...]:
    return (
        *_fixture_cases(),
        *_sourced_cases(),
        *_second_retrieval_cases(),
        *_procurement_cases(),
        *_dspy_cases(),
        *_draft_cases(),
        *_reading_cases(),
        *_outside_cases(),
        *_langfuse_v2_cases(),
    )


def verdict(case: Case, spans: list[RawSpan]) -> str:
    loc = localize(normalize(spans), case.ticket, case.manifest)
    return loc.verdict + (f" ({loc.cause})" if loc.cause else "")


@functools.cache
def baseline(index: int) -> str:
    case = corpus()[index]
    return verdict(case, list(case.spans))


def _generation(how: str) -> Generation:
    return "v4" if how == "langfuse-v4" else "v3"


@functools.cache
def api_baseline(index: int, generation: Generation) -> str:
    """The case's verdict when its trace is collected back from a Langfuse server's API."""
    case = corpus()[index]
    return verdict(case, api_spans(case.spans, generation))


@functools.cache
def _rootless_differs(index: int) -> bool:
    """Whether case ``index``'s trace has a root and spans under it (merged rootless, they are orphans)."""
    spans = corpus()[index].spans
    return any(not s.parent_span_id for s in spans) and any(s.parent_span_id for s in spans)


def _span_removals(
    spans: tuple[RawSpan, ...], kinds: tuple[Kind, ...], index: int | None = None
) -> Iterator[Removal]:
    """The removals of whole spans: one, one with its subtree, those that ended after a time."""
    if len(spans) > 1 and "span" in kinds:  # a trace with no span is no trace
        yield from (Removal("span", i) for i in range(len(spans)))
    if len(spans) > 1 and "subtree" in kinds:
        yield from (
            Removal("subtree", i)
            for i in range(len(spans))
            if 1 < len(_descendants(spans, i)) < len(spans)  # one span is a "span" removal
        )
    if "batch" in kinds:
        yield from (Removal("batch", i) for i in range(len(_ends(spans)) - 1))
    if "merge" in kinds and index is not None:
        yield from (
            Removal("merge", other, placement + how)
            for other in _partners(index)
            for placement in PLACEMENTS
            for how in MERGES
            if how != " rootless" or _rootless_differs(other)
        )
    if "skew" in kinds:  # a span under a parent in the trace, with everything under it
        ids = {s.span_id for s in spans}
        yield from (
            Removal("skew", i, by)
            for i, span in enumerate(spans)
            if span.parent_span_id in ids
            for by in SKEWS
        )


def removals(case: Case, kinds: tuple[Kind, ...] = KINDS) -> list[Removal]:
    """Every removal of the given kinds that changes the case's spans."""
    spans = case.spans
    index = next((i for i, c in enumerate(corpus()) if c is case), None)
    out = list(_span_removals(spans, kinds, index))
    scopes = sorted({s.scope_name for s in spans})
    if len(scopes) > 1 and "scope" in kinds:
        out.extend(Removal("scope", key=scope) for scope in scopes)
    if "content" in kinds:
        for family, pattern in CONTENT.items():
            if any(_without_content(s, pattern) != s for s in spans):
                out.append(Removal("content", key=family))
    if "redact" in kinds:
        for family, pattern in CONTENT.items():
            if any(_redacted(s, pattern) != s for s in spans):
                out.append(Removal("redact", key=family))
    for i, span in enumerate(spans):
        if "redact" in kinds:
            out.extend(
                Removal("redact", i, key)
                for key, value in span.attributes.items()
                if CONTENT["all"].fullmatch(key) and isinstance(value, str) and value != REDACTED
            )
        if "attr" in kinds:
            out.extend(Removal("attr", i, key) for key in span.attributes)
        if "event" in kinds:
            out.extend(Removal("event", i, j) for j in range(len(span.events)))
        if "truncate" in kinds:
            out.extend(
                Removal("truncate", i, key, limit)
                for key, value in span.attributes.items()
                for limit in LIMITS
                if _longest(value) > limit
            )
    if "truncate" in kinds:
        out.extend(
            Removal("truncate", limit=limit)
            for limit in LIMITS
            if any(_truncated(s, limit) != s for s in spans)
        )
    return out


def violation(index: int, removal: Removal) -> str | None:
    """None when the removal keeps the property (or is listed); else what went wrong."""
    case = corpus()[index]
    api = str(removal.key).partition(" langfuse-")[2] if removal.kind == "merge" else ""
    # A trace read through Langfuse's API is compared with the same trace read through it alone.
    before = api_baseline(index, _generation(f"langfuse-{api}")) if api else baseline(index)
    after = verdict(case, removal.apply(case))
    if after in (before, "unconfirmed"):
        return None
    label = removal.label(case)
    if (case.name, label) in INDISTINGUISHABLE or (case.name, label) in _outside_listed():
        return None
    return f"{case.name}: {before} -> {after} after removing {label}"


def test_the_corpus_covers_every_recorded_trace_and_the_example() -> None:
    names = {case.name for case in corpus()}
    recorded = {p.name for p in _recorded()}
    assert recorded <= names
    assert sum(name.startswith("procurement/") for name in names) == len(
        list((EXAMPLE / "tickets").iterdir())
    )
    # The baselines are the verdicts the example's scenarios promise.
    assert baseline(next(i for i, c in enumerate(corpus()) if c.name == "procurement/ranked-out")) == (
        "not_retrieved (rank)"
    )


@functools.cache
def _by_kind(index: int) -> dict[str, list[Removal]]:
    out: dict[str, list[Removal]] = {}
    for removal in removals(corpus()[index]):
        out.setdefault(removal.kind, []).append(removal)
    return out


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_removing_a_record_leaves_the_verdict_or_makes_it_unconfirmed(data: st.DataObject) -> None:
    # The kind is drawn before the removal, so each kind gets its share (single attributes outnumber
    # the rest ten to one).
    index = data.draw(st.integers(0, len(corpus()) - 1), label="case")
    options = _by_kind(index)
    kind = data.draw(st.sampled_from(sorted(options)), label="kind")
    removal = data.draw(st.sampled_from(options[kind]), label="removal")
    assert violation(index, removal) is None


def _listed() -> list[tuple[str, str]]:
    """The listed exceptions, those of test_outside_traces included (under their name here)."""
    return [*INDISTINGUISHABLE, *_outside_listed()]


def _outside_listed() -> dict[tuple[str, str], str]:
    listed: dict[tuple[str, str], str] = getattr(_outside(), "INDISTINGUISHABLE", {})
    return {(f"outside/{case}", label): why for (case, label), why in listed.items()}


@pytest.mark.parametrize(("case_name", "label"), _listed())
def test_each_listed_exception_is_still_a_change_of_verdict(case_name: str, label: str) -> None:
    # A listed removal that no longer changes the verdict must leave the list: it stays short.
    index = next(i for i, c in enumerate(corpus()) if c.name == case_name)
    case = corpus()[index]
    found = [r for r in removals(case) if r.label(case) == label]
    assert found
    assert any(verdict(case, r.apply(case)) not in (baseline(index), "unconfirmed") for r in found)


def main(argv: list[str]) -> int:
    """Try every removal of the kinds named (all without any) on every case whose name contains the
    ``--case`` text; print each violation and, per kind, the removals tried and the violations."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("kinds", nargs="*", choices=[[], *KINDS], default=[])
    parser.add_argument("--case", default="", help="only the cases whose name contains this")
    args = parser.parse_args(argv)
    kinds = tuple(args.kinds) or KINDS
    tried = dict.fromkeys(kinds, 0)
    found = dict.fromkeys(kinds, 0)
    cases = [i for i, c in enumerate(corpus()) if args.case in c.name]
    for index in cases:
        for removal in removals(corpus()[index], kinds):
            tried[removal.kind] += 1
            problem = violation(index, removal)
            if problem is not None:
                found[removal.kind] += 1
                print(problem, flush=True)
    for kind in kinds:
        print(f"{kind}: {tried[kind]} removals, {found[kind]} violations")
    print(f"{sum(found.values())} violations over {len(cases)} cases, {len(_listed())} listed exceptions")
    return 1 if any(found.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
