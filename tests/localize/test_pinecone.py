"""OpenLLMetry's Pinecone query read whole: its filter, its namespace, and a query that returned no match.

opentelemetry-instrumentation-pinecone (0.60) records a query as a ``pinecone.query`` span with no
``db.operation``: ``pinecone.query.filter`` (``json.dumps`` of the filter), ``pinecone.query.namespace``
(left out for the default namespace), ``pinecone.query.top_k``, one ``db.query.result`` event per match,
and status OK once it has read the response. The filter was not read (so ``filtered`` was never concluded),
the namespace neither, and a query with no match — no event — was no retrieval at all: the gap said the
trace records no retriever call. Through the real ``pinecone`` client and instrumentation against a local
Pinecone query endpoint (it answers the matches a case gives and keeps each request body), the real
openinference-instrumentation-openai and ``openai`` client against the local OpenAI stand-in, the real SDK's
OTLP encoder and tracejudge's decoder.

What a query that returned nothing settles: a filter (or namespace) that excludes the material is a filter
fault (nothing was returned, so nothing returned was it); one that admits it does not say ranking cut it —
Pinecone returns its top_k nearest matches among what the filter admits, with no score threshold — so that
stays unconfirmed. A query whose response was not read (status unset) or that failed (status error) says
nothing of what it returned."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.instrumentation.pinecone import PineconeInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pinecone import Pinecone

from tests.localize import conftest as mk
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import Localization, ManifestEntry, RawSpan, RetrievalCall, TaskRecord
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge_collectors.otel import decode_protobuf

EU_FILTER = {"region": {"$eq": "EU"}}
CN_FILTER = {"region": "CN"}
NAMESPACE = "procurement"
NO_ANSWER = "I could not find the payment terms for this order."


def match(version: str, region: str, score: float) -> dict[str, Any]:
    """A match as Pinecone's query answers it: id, score, the chunk's metadata with its text."""
    text = mk.V2_TEXT if version == "v2" else mk.V1_TEXT
    metadata = {"doc_id": mk.DOC, "version": version, "region": region, "text": text}
    return {"id": f"{mk.DOC}#{version}", "score": score, "values": [], "metadata": metadata}


@dataclass
class _PineconeQueries:
    """A local Pinecone data-plane endpoint answering ``POST /query`` with ``matches`` (or ``status``)."""

    matches: list[dict[str, Any]]
    namespace: str
    status: int = 200
    sent: list[dict[str, Any]] = field(default_factory=list)

    @contextmanager
    def serving(self) -> Iterator[str]:
        answer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                answer.sent.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
                body = {"matches": answer.matches, "namespace": answer.namespace, "usage": {"readUnits": 5}}
                if answer.status != 200:
                    body = {"code": 3, "message": "Illegal condition for field region"}
                data = json.dumps(body).encode()
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_port}"
        finally:
            server.shutdown()
            server.server_close()


def pinecone_trace(
    matches: list[dict[str, Any]],
    *,
    flt: dict[str, Any] | None = None,
    namespace: str | None = NAMESPACE,
    status: int = 200,
    answer: str = mk.GOOD,
) -> list[RawSpan]:
    """An app's RAG turn (a root CHAIN span): Pinecone queried through the instrumented client, the
    matches' texts sent to the model as its context, the model's reply the answer."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag-app")
    instrumentors: list[Any] = [PineconeInstrumentor(), OpenAIInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=provider)
    queries = _PineconeQueries(matches, namespace or "", status)
    try:
        with queries.serving() as host, ScriptedOpenAIServer([Rule(reply=answer)]) as model:
            index = Pinecone(api_key="replay-not-a-key").Index(host=host)
            client = openai.OpenAI(base_url=model.base_url, api_key="sk-test-not-a-secret", max_retries=0)
            with tracer.start_as_current_span("agent") as root:
                root.set_attribute("openinference.span.kind", "CHAIN")
                root.set_attribute("input.value", mk.QUESTION)
                kwargs: dict[str, Any] = {"filter": flt} if flt is not None else {}
                if namespace is not None:
                    kwargs["namespace"] = namespace
                try:
                    found = index.query(vector=[0.1, 0.2, 0.3], top_k=3, include_metadata=True, **kwargs)
                    texts = [m["metadata"]["text"] for m in found.matches]
                except Exception:  # the query the endpoint refused: the app answers without context
                    texts = []
                context = "\n\n".join(texts) or "(no documents found)"
                client.chat.completions.create(
                    model="scripted-model",
                    messages=[
                        {"role": "system", "content": f"Context:\n{context}"},
                        {"role": "user", "content": mk.QUESTION},
                    ],
                )
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
    sent = queries.sent[-1]
    assert (sent.get("filter"), sent.get("namespace")) == (flt, namespace), "the client sent the query asked"
    return decode_protobuf(encode_spans(exporter.get_finished_spans()).SerializeToString()).spans


def manifest(region: str = "EU", namespace: str | None = NAMESPACE) -> list[ManifestEntry]:
    """v1 (CN) until 2026-03-01, v2 (``region``) after it; both in ``namespace`` when one is given."""
    extra = {} if namespace is None else {"namespace": namespace}
    return [
        mk.v1_entry(metadata={"region": "CN", **extra}, acl=None),
        mk.entry(metadata={"region": region, **extra}, acl=None),
    ]


def triage(spans: list[RawSpan], entries: list[ManifestEntry]) -> Localization:
    return localize(normalize(spans), mk.ticket(), entries)


def the_query(task: TaskRecord) -> RetrievalCall:
    (call,) = task.retrievals
    assert call.name == "pinecone.query"
    return call


@pytest.fixture(scope="module")
def returned() -> list[RawSpan]:
    return pinecone_trace([match("v2", "EU", 0.91)], flt=EU_FILTER)


@pytest.fixture(scope="module")
def filtered() -> list[RawSpan]:
    return pinecone_trace([match("v1", "CN", 0.88)], flt=CN_FILTER, answer=mk.BAD)


@pytest.fixture(scope="module")
def no_match_filtered() -> list[RawSpan]:
    return pinecone_trace([], flt=CN_FILTER, answer=NO_ANSWER)


@pytest.fixture(scope="module")
def no_match_admitted() -> list[RawSpan]:
    return pinecone_trace([], flt=EU_FILTER, answer=NO_ANSWER)


def test_the_filter_namespace_and_top_k_are_the_query_s(returned: list[RawSpan]) -> None:
    call = the_query(normalize(returned))
    assert (call.filter, call.filter_raw) == (EU_FILTER, json.dumps(EU_FILTER))
    assert (call.namespace, call.top_k) == (NAMESPACE, 3)
    assert [(d.doc_id, d.version, d.content) for d in call.documents] == [(mk.DOC, "v2", mk.V2_TEXT)]
    assert triage(returned, manifest()).verdict == "no_fault"


def test_a_recorded_filter_that_excludes_the_material_is_a_filter_fault(filtered: list[RawSpan]) -> None:
    # Before, the filter was not read: "the metadata filter of retrieval span … (tracejudge.retrieval.filter)"
    # was missing and the verdict unconfirmed.
    loc = triage(filtered, manifest())
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (
        "filtered",
        "filter",
        ["pass", "fail", "skipped", "skipped"],
    )
    retrieved = loc.stages[1]
    assert any("""{"region": "CN"} excludes C-17/attachment@v2""" in e.note for e in retrieved.evidence)


def test_a_query_with_no_match_is_a_retrieval_that_returned_nothing(no_match_filtered: list[RawSpan]) -> None:
    task = normalize(no_match_filtered)
    call = the_query(task)
    assert (call.documents, call.documents_recorded, call.filter) == ((), True, CN_FILTER)
    assert not {g.kind for g in task.gaps} & {"no_retrieval_span", "retrieval_documents_not_recorded"}
    # Nothing was returned and the filter excludes v2: a filter fault.
    loc = triage(no_match_filtered, manifest())
    assert (loc.verdict, loc.cause) == ("filtered", "filter")


def test_no_match_under_a_filter_that_admits_the_material_is_no_ranking_cut(
    no_match_admitted: list[RawSpan],
) -> None:
    # Pinecone returns its top_k nearest matches among what the filter admits (no score threshold): no
    # match at all says what it searched did not hold v2 (the manifest is wrong about the index, or the
    # namespace), not that ranking cut it.
    loc = triage(no_match_admitted, manifest())
    retrieved = loc.stages[1]
    assert (loc.verdict, retrieved.status) == ("unconfirmed", "unconfirmed")
    assert any("returned no match, though its filter admits" in e.note for e in retrieved.evidence)
    assert any("returned no match" in m for m in retrieved.missing)


def test_a_query_whose_response_was_not_read_says_nothing_of_its_matches(
    no_match_filtered: list[RawSpan],
) -> None:
    # Status unset: the instrumentation did not get to the response (no OK), so no event is no evidence.
    unset = [
        s.model_copy(update={"status_code": 0}) if s.name == "pinecone.query" else s
        for s in no_match_filtered
    ]
    call = the_query(normalize(unset))
    assert call.documents_recorded is False
    # The filter still excludes v2, so nothing the query returned can be it.
    assert triage(unset, manifest()).verdict == "filtered"
    assert triage(unset, manifest(region="CN")).verdict == "unconfirmed"


def test_a_failed_query_is_said_to_have_failed() -> None:
    spans = pinecone_trace([], flt={"region": {"$regex": "E.*"}}, status=400, answer=NO_ANSWER)
    task = normalize(spans)
    call = the_query(task)
    assert call.documents_recorded is False
    (gap,) = [g for g in task.gaps if g.kind == "retrieval_documents_not_recorded"]
    assert "the retrieval call failed" in gap.detail
    assert "400" in gap.detail
    assert triage(spans, manifest()).verdict == "unconfirmed"


def test_another_namespace_is_a_filter_fault(returned: list[RawSpan]) -> None:
    # The query searched "procurement"; the manifest puts v2 in "legal".
    loc = triage(returned, manifest(namespace="legal"))
    # v2 was returned all the same: the trace wins over the manifest (retrieved passes).
    assert loc.verdict == "no_fault"
    spans = pinecone_trace([match("v1", "CN", 0.8)], flt={"region": {"$in": ["CN", "EU"]}}, answer=mk.BAD)
    entries = [mk.v1_entry(metadata={"region": "CN", "namespace": NAMESPACE}, acl=None)]
    entries.append(mk.entry(metadata={"region": "EU", "namespace": "legal"}, acl=None))
    loc = triage(spans, entries)
    assert (loc.verdict, loc.cause) == ("filtered", "filter")
    assert any(
        "namespace 'procurement' does not hold C-17/attachment@v2" in e.note for e in loc.stages[1].evidence
    )
    # The same namespace: the filter and the namespace admit v2, the ranking cut it.
    same = triage(spans, manifest(region="EU"))
    assert (same.verdict, same.cause) == ("not_retrieved", "rank")
    # A manifest naming no namespace leaves it to the filter.
    assert triage(spans, manifest(namespace=None)).verdict == "not_retrieved"


def test_the_default_namespace_is_not_replayed_against_a_named_one() -> None:
    # The instrumentation leaves the default namespace out, as a lost attribute would be: against a manifest
    # that names v2's namespace, which one was searched is open.
    spans = pinecone_trace(
        [match("v1", "CN", 0.8)], flt={"region": {"$in": ["CN", "EU"]}}, namespace=None, answer=mk.BAD
    )
    call = the_query(normalize(spans))
    assert call.namespace == ""
    loc = triage(spans, manifest())
    assert (loc.verdict, loc.stages[1].status) == ("unconfirmed", "unconfirmed")
    assert any("pinecone.query.namespace" in m for m in loc.stages[1].missing)
    assert triage(spans, manifest(namespace=None)).verdict == "not_retrieved"
