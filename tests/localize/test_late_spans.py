"""A trace triaged before all of it arrived (DESIGN 5.5).

Exporters send spans as they end, a batch at a time (the SDK's BatchSpanProcessor, each service its own),
so the first spans of a trace reach the store before the rest — the root, which ends last, always after.
Here a real agent (its chat calls recorded by openinference-instrumentation-openai against the scripted
OpenAI stand-in) runs under the OpenTelemetry SDK's BatchSpanProcessor, flushed once mid-run as its
schedule would; the first batch is collected and triaged as a user would (``collect file``, ``triage
--json``), then the second. What the first batch lacks is what the run did after it: a verdict from it
that rests on a record not being there (not returned, not in the model input, an earlier call's reply
read as the answer, a manifest no retrieval contradicts yet) was definite, and another one once the rest
arrived. While the root has not been received such a verdict is ``unconfirmed``, naming what is awaited.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from click.testing import CliRunner
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from tests.fixtures.outside._formats import encode_spans_json
from tests.localize import conftest as mk
from tracejudge.cli import cli
from tracejudge.localize import STILL_ARRIVING, localize
from tracejudge.normalize import normalize
from tracejudge.schema import Localization
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge_collectors.otel import decode_protobuf

DRAFT = "Checking: attachment v1 allowed prepayment up to 50,000 RMB; let me confirm the current terms."
REWRITE = "prepayment cap for supplier Acme, order 7"
CONTEXT = [{"role": "system", "content": f"Context:\n{mk.V2_TEXT}"}, {"role": "user", "content": mk.QUESTION}]


class _Batches(SpanExporter):
    """Keeps each export call's spans apart: the batches as a collector receives them."""

    def __init__(self) -> None:
        self.batches: list[Sequence[ReadableSpan]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches.append(list(spans))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


@dataclass(frozen=True)
class Run:
    """What the agent does: steps before the mid-run export, steps after it, the replies it gets."""

    name: str
    before: Callable[[Any, Any], None]
    after: Callable[[Any, Any], None]
    replies: Callable[[], list[Rule]]
    """The scripted model's rules (made anew for each run: a rule counts its uses)."""
    manifest: list[Any]
    first: str
    """The verdict the first batch gave before it was read as a trace that may be incomplete."""
    whole: str
    """The verdict of the whole trace (a query rewrite before the call that answers leaves which reply the
    user got open: no span records it, and the answering call does not continue the rewrite's)."""
    answer: str | None = None
    """What the root records as the answer (``output.value``), set as it ends: in the last batch."""


def _search(
    tracer: Any, documents: list[tuple[str, str]], candidates: list[dict[str, Any]] | None = None
) -> None:
    with tracer.start_as_current_span("retrieve") as span:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        span.set_attribute("input.value", mk.QUESTION)
        for n, (doc_id, content) in enumerate(documents):
            span.set_attribute(f"retrieval.documents.{n}.document.id", doc_id)
            span.set_attribute(f"retrieval.documents.{n}.document.content", content)
        if candidates is not None:
            span.set_attribute("tracejudge.retrieval.candidates", json.dumps(candidates))


def _chat(client: Any, messages: list[dict[str, str]]) -> None:
    client.chat.completions.create(model="scripted-model", messages=messages)


V2 = (f"{mk.DOC}@v2", mk.V2_TEXT)
OTHER = ("C-17/main@v3", "Main terms v3. Delivery within 14 days of the order.")
MANIFEST = [mk.entry(acl=None), mk.v1_entry()]
RUNS = [
    # The first call's reply is a draft stating v1's cap; the answer is the second call's, which the root
    # records (sent the same input twice, the calls alone do not say which reply the user got).
    Run(
        "draft-then-answer",
        lambda t, c: (_search(t, [V2]), _chat(c, CONTEXT)),
        lambda t, c: _chat(c, CONTEXT),
        lambda: [Rule(reply=DRAFT, times=1), Rule(reply=mk.GOOD)],
        MANIFEST,
        first="ignored_by_model",
        whole="no_fault",
        answer=mk.GOOD,
    ),
    Run(
        "good-draft-then-stale-answer",
        lambda t, c: (_search(t, [V2]), _chat(c, CONTEXT)),
        lambda t, c: _chat(c, CONTEXT),
        lambda: [Rule(reply=f"Checking: {mk.GOOD} Let me confirm.", times=1), Rule(reply=mk.BAD)],
        MANIFEST,
        first="no_fault",
        whole="ignored_by_model",
        answer=mk.BAD,
    ),
    # A query rewrite (no context) first, then the call given the retrieved clause.
    Run(
        "rewrite-then-answer",
        lambda t, c: (_search(t, [V2]), _chat(c, [{"role": "user", "content": mk.QUESTION}])),
        lambda t, c: _chat(c, CONTEXT),
        lambda: [Rule(reply=REWRITE, times=1), Rule(reply=mk.GOOD)],
        MANIFEST,
        first="dropped_in_context",
        whole="unconfirmed",
    ),
    # A first search whose filter excluded v2 (its recorded candidates say so), then a second that found it.
    Run(
        "filtered-then-found",
        lambda t, c: _search(
            t,
            [OTHER],
            [{"doc_id": mk.DOC, "version": "v2", "score": 0.91, "excluded_by": "filter"}],
        ),
        lambda t, c: (_search(t, [V2]), _chat(c, CONTEXT)),
        lambda: [Rule(reply=mk.GOOD)],
        MANIFEST,
        first="filtered",
        whole="no_fault",
    ),
    # A manifest that says v2 was never indexed, which the search still to come contradicts.
    Run(
        "never-indexed-then-found",
        lambda t, c: _chat(c, [{"role": "user", "content": mk.QUESTION}]),
        lambda t, c: (_search(t, [V2]), _chat(c, CONTEXT)),
        lambda: [Rule(reply=REWRITE, times=1), Rule(reply=mk.GOOD)],
        [mk.entry(acl=None, indexed_at=None), mk.v1_entry()],
        first="not_indexed",
        whole="unconfirmed",
    ),
]


def _batches(run: Run) -> list[Sequence[ReadableSpan]]:
    """The run's spans as the BatchSpanProcessor exported them: what had ended at the mid-run flush, then
    the rest (the root among them) at shutdown."""
    exporter = _Batches()
    provider = TracerProvider()
    # No scheduled export and room for every span: the flush below is the one mid-run export.
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=3_600_000))
    tracer = provider.get_tracer("rag-app")
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with ScriptedOpenAIServer(run.replies()) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-not-a-secret", max_retries=0)
            with tracer.start_as_current_span("agent") as root:
                root.set_attribute("openinference.span.kind", "CHAIN")
                root.set_attribute("input.value", mk.QUESTION)
                run.before(tracer, client)
                provider.force_flush()
                run.after(tracer, client)
                if run.answer is not None:
                    root.set_attribute("output.value", run.answer)
    finally:
        instrumentor.uninstrument()
    provider.shutdown()
    return exporter.batches


def _cli(db: Path | str, *args: str) -> dict[str, Any]:
    store = db if isinstance(db, str) else f"sqlite:///{db}"
    result = CliRunner().invoke(cli, ["--store", store, *args, "--json"])
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.output)
    return out


def collect_batch(db: Path | str, path: Path, batch: Sequence[ReadableSpan]) -> None:
    """One exported batch into the store ``db`` (a SQLite file, or a store URL) as a collector receives it:
    ``collect file`` of its OTLP JSON, written to ``path``."""
    path.write_text(json.dumps(encode_spans_json(batch)))
    _cli(db, "collect", "file", str(path))


def _triage(db: Path, tmp_path: Path, run: Run, trace_id: str) -> dict[str, Any]:
    ticket = tmp_path / "ticket.yaml"
    ticket.write_text(
        yaml.safe_dump(
            {
                "ticket": "EXP-311",
                "trace_id": trace_id,
                "required": [
                    {
                        "doc_id": mk.DOC,
                        "version": "v2",
                        "clause": mk.CLAUSE,
                        "facts": {"prepayment_cap_rmb": 30000},
                    }
                ],
                "superseded": [{"doc_id": mk.DOC, "version": "v1", "facts": {"prepayment_cap_rmb": 50000}}],
            }
        )
    )
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(e.model_dump_json() + "\n" for e in run.manifest))
    return _cli(db, "triage", "--ticket", str(ticket), "--manifest", str(manifest))


@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_a_trace_whose_root_has_not_arrived_concludes_nothing_from_what_it_lacks(
    run: Run, tmp_path: Path
) -> None:
    first, rest = _batches(run)
    assert "agent" not in {s.name for s in first}
    assert "agent" in {s.name for s in rest}
    trace_id = f"{first[0].context.trace_id:032x}"
    db = tmp_path / "s.db"
    for n, batch in enumerate((first, rest)):
        collect_batch(db, tmp_path / f"batch-{n}.json", batch)
        got = _triage(db, tmp_path, run, trace_id)
        if n == 0:
            # It was run.first: a verdict the rest of the trace overturns.
            assert got["verdict"] == "unconfirmed", got["summary"]
            assert run.first not in (run.whole, "unconfirmed")
            assert any("root span has not been received" in note for note in got["notes"])
            deciding = next(s for s in got["stages"] if s["status"] == "unconfirmed")
            assert "the trace may be incomplete" in deciding["detail"]
            assert any("triage again once it has arrived" in m for m in deciding["missing"])
        else:
            assert got["verdict"] == run.whole, got["summary"]
            assert not got.get("notes")


def _first_batch(run: Run, now: Any) -> Localization:
    first, _ = _batches(run)
    task = normalize(decode_protobuf(encode_spans(first).SerializeToString()).spans)
    assert task.end_time is not None
    return localize(task, mk.ticket(), run.manifest, now=None if now is None else task.end_time + now)


@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_a_trace_that_lacks_spans_long_after_its_last_one_ended_reads_as_it_is(run: Run) -> None:
    # Its missing spans are not on their way (lost, or never exported: a span filter, a service that exports
    # elsewhere): the trace reads as it is — here the first verdict, which the rest would have overturned.
    late = _first_batch(run, STILL_ARRIVING)
    assert late.verdict == run.first
    # Just after, or at an unknown time, it may still be arriving.
    for now in (STILL_ARRIVING / 10, None):
        assert _first_batch(run, now).verdict == "unconfirmed"
