"""A trace id given to more than one run (DESIGN 5.5).

A trace id is all that ties a trace's spans together, and applications set it themselves: Langfuse's
``trace_id`` per session or request, a conversation id hashed into the trace id, a propagated header reused
across requests, id generators seeded alike. Here real runs of an agent (its chat calls recorded by
openinference-instrumentation-openai against the scripted OpenAI stand-in) run under the OpenTelemetry SDK
with an id generator that gives every run the same trace id, each run under a root span of its own; the
trace is collected and triaged as a user would (``collect file``, ``triage --json``). Read as one run, the
trace's answer, question, retrievals and model inputs were any run's, and the verdict was another run's, or
one no run has: definite verdicts the trace cannot support. Each root and the spans under it are now
checked on their own: a verdict every run gives stands, else ``unconfirmed`` names the roots.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from click.testing import CliRunner
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from tests.fixtures.outside._formats import encode_spans_json
from tests.localize import conftest as mk
from tracejudge.cli import cli
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

TRACE_ID = 0x5E5510A0000000000000000000000C01
"""The trace id the application gives every run (one per conversation, say)."""


class _SessionIds(RandomIdGenerator):
    """Span ids at random, the trace id the application's: every run of the session gets ``TRACE_ID``."""

    def generate_trace_id(self) -> int:
        return TRACE_ID


@dataclass(frozen=True)
class Run:
    """One request the agent served: what its search returned, what it sent the model, what it answered."""

    name: str
    documents: tuple[tuple[str, str], ...]
    context: str | None
    """The text put in the system message (None: the question alone)."""
    answer: str
    alone: str
    """The verdict of the run in a trace of its own."""
    excluded: bool = False
    """Whether the search records v2 among its candidates, excluded by its filter."""


V1 = (f"{mk.DOC}@v1", mk.V1_TEXT)
V2 = (f"{mk.DOC}@v2", mk.V2_TEXT)
GOOD = Run("good", (V2,), mk.V2_TEXT, mk.GOOD, "no_fault")
STALE = Run("stale", (V1,), mk.V1_TEXT, mk.BAD, "filtered", excluded=True)
DROPPED = Run("dropped", (V2,), None, mk.BAD, "dropped_in_context")
IGNORED = Run("ignored", (V2,), mk.V2_TEXT, mk.BAD, "ignored_by_model")
MANIFEST = [mk.entry(acl=None), mk.v1_entry()]


def _serve(tracer: Any, client: Any, run: Run, *, root_answer: bool) -> None:
    with tracer.start_as_current_span("agent") as root:
        root.set_attribute("openinference.span.kind", "CHAIN")
        root.set_attribute("input.value", mk.QUESTION)
        with tracer.start_as_current_span("retrieve") as span:
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            span.set_attribute("input.value", mk.QUESTION)
            for n, (doc_id, content) in enumerate(run.documents):
                span.set_attribute(f"retrieval.documents.{n}.document.id", doc_id)
                span.set_attribute(f"retrieval.documents.{n}.document.content", content)
            if run.excluded:
                excluded = [{"doc_id": mk.DOC, "version": "v2", "score": 0.91, "excluded_by": "filter"}]
                span.set_attribute("tracejudge.retrieval.candidates", json.dumps(excluded))
        messages = [{"role": "user", "content": mk.QUESTION}]
        if run.context is not None:
            messages.insert(0, {"role": "system", "content": f"Context:\n{run.context}"})
        reply = client.chat.completions.create(model="scripted-model", messages=messages)
        if root_answer:
            root.set_attribute("output.value", reply.choices[0].message.content)


def record(runs: Sequence[Run], *, root_answer: bool = True) -> list[ReadableSpan]:
    """The runs served one after another by one process whose id generator gives each the same trace id."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=_SessionIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        rules = [Rule(reply=run.answer, times=1) for run in runs]
        with ScriptedOpenAIServer(rules) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-not-a-secret", max_retries=0)
            for run in runs:
                _serve(provider.get_tracer("rag-app"), client, run, root_answer=root_answer)
    finally:
        instrumentor.uninstrument()
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _cli(db: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", *args, "--json"])
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.output)
    return out


def triage(tmp_path: Path, spans: Sequence[ReadableSpan]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``collect file`` of the spans, then ``triage --json`` and ``traces show --json`` of their trace."""
    db, trace = tmp_path / "s.db", tmp_path / "trace.json"
    trace.write_text(json.dumps(encode_spans_json(spans)))
    _cli(db, "collect", "file", str(trace))
    ticket, manifest = tmp_path / "ticket.yaml", tmp_path / "manifest.jsonl"
    ticket.write_text(yaml.safe_dump({**mk.ticket().model_dump(mode="json"), "trace_id": f"{TRACE_ID:032x}"}))
    manifest.write_text("".join(e.model_dump_json() + "\n" for e in MANIFEST))
    got = _cli(db, "triage", "--ticket", str(ticket), "--manifest", str(manifest))
    return got, _cli(db, "traces", "show", f"{TRACE_ID:032x}")


@pytest.mark.parametrize("run", [GOOD, STALE, DROPPED, IGNORED], ids=lambda r: r.name)
def test_a_run_in_a_trace_of_its_own_reads_as_before(run: Run, tmp_path: Path) -> None:
    got, record_ = triage(tmp_path, record([run]))
    assert got["verdict"] == run.alone, got["summary"]
    assert record_["runs"] == []
    assert not any(g["kind"] == "several_runs" for g in record_["gaps"])


# (first run, second run, whether the root records the answer) -> what the trace read as one run gave: the
# root's answer was the first run's, the retrievals and inputs either's (stale then good: a verdict neither
# run has); with no root answer, the last call's reply was the second run's.
MERGED = [
    (GOOD, DROPPED, True, "no_fault"),
    (STALE, GOOD, True, "dropped_in_context"),
    (IGNORED, GOOD, True, "ignored_by_model"),
    (DROPPED, STALE, False, "dropped_in_context"),
    (IGNORED, GOOD, False, "no_fault"),
    (GOOD, IGNORED, False, "ignored_by_model"),
]


@pytest.mark.parametrize(
    ("first", "second", "root_answer", "before"),
    MERGED,
    ids=[f"{a.name}-{b.name}{'' if root else '-no-root-answer'}" for a, b, root, _ in MERGED],
)
def test_two_runs_under_one_trace_id_that_differ_are_unconfirmed_naming_both_roots(
    first: Run, second: Run, root_answer: bool, before: str, tmp_path: Path
) -> None:
    spans = record([first, second], root_answer=root_answer)
    roots = [f"{s.context.span_id:016x}" for s in spans if s.parent is None]
    assert len(roots) == 2
    assert first.alone != second.alone
    got, task = triage(tmp_path, spans)
    assert got["verdict"] == "unconfirmed", got["summary"]  # it was `before`
    deciding = next(s for s in got["stages"] if s["status"] == "unconfirmed")
    assert all(root in deciding["detail"] for root in roots)
    assert f"run {roots[0]} (agent): " in deciding["detail"]
    assert any("a trace id of its own for each run" in m for m in deciding["missing"])
    (gap,) = [g for g in task["gaps"] if g["kind"] == "several_runs"]
    assert all(root in gap["detail"] for root in roots)
    assert gap["switch"].startswith("a trace id of its own for each run")
    # Each run's record; the trace's answer only when both runs answered alike.
    assert [r["final_answer"] for r in task["runs"]] == [first.answer, second.answer]
    assert task["final_answer"] == (first.answer if first.answer == second.answer else None)


@pytest.mark.parametrize("run", [GOOD, STALE, DROPPED, IGNORED], ids=lambda r: r.name)
def test_runs_under_one_trace_id_that_agree_keep_their_verdict(run: Run, tmp_path: Path) -> None:
    # Whichever run the ticket is about, the verdict holds: every run gives it.
    got, task = triage(tmp_path, record([run, run]))
    assert got["verdict"] == run.alone, got["summary"]
    assert "the trace holds 2 runs" in got["summary"]
    assert "each gives this verdict" in got["summary"]
    assert len(task["runs"]) == 2
    assert task["final_answer"] == run.answer
