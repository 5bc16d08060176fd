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
from datetime import timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from click.testing import CliRunner
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from tests.fixtures.outside._formats import encode_spans_json
from tests.localize import conftest as mk
from tracejudge.checks import part_data, part_text
from tracejudge.cli import cli
from tracejudge.localize import STILL_ARRIVING, localize
from tracejudge.normalize import normalize
from tracejudge.schema import Localization, TaskRecord
from tracejudge.store import open_store
from tracejudge.testing.langfuse_server import LangfuseServer, synthetic_trace
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge_collectors.otel import decode_protobuf

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


# --- a Langfuse API trace holding two runs ------------------------------------------------------------------


def _langfuse_runs(answers: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Runs of a Langfuse-traced agent (an AGENT observation with its retriever and generation under it, as
    the Langfuse stand-in's ``synthetic_trace`` shapes it), each ``(the clause put in its context, its
    answer)``, under the first one's trace id: the application gave every run of the conversation one trace
    id. The trace record is the last run's (each run writes it; the last write wins)."""
    traces = [
        synthetic_trace(n, clause=clause, answer=answer, spacing=timedelta(minutes=1))
        for n, (clause, answer) in enumerate(answers)
    ]
    observations = [o for t in traces for o in t["observations"]]
    return {**traces[-1], "id": traces[0]["id"], "observations": observations}


def _collected(tmp_path: Path, generation: str, trace: dict[str, Any]) -> Path:
    db = tmp_path / f"{generation}.db"
    server = LangfuseServer(generation=generation).start()  # type: ignore[arg-type]
    try:
        server.add_trace(trace)
        env = {
            "LANGFUSE_BASE_URL": server.base_url,
            "LANGFUSE_PUBLIC_KEY": server.public_key,
            "LANGFUSE_SECRET_KEY": server.secret_key,
        }
        result = CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", "collect", "langfuse"], env=env)
        assert result.exit_code == 0, result.output
    finally:
        server.stop()
    assert server.response_errors == []
    return db


def _triage_stored(tmp_path: Path, db: Path, trace_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    ticket, manifest = tmp_path / "ticket.yaml", tmp_path / "manifest.jsonl"
    ticket.write_text(yaml.safe_dump({**mk.ticket().model_dump(mode="json"), "trace_id": trace_id}))
    manifest.write_text("".join(e.model_dump_json() + "\n" for e in MANIFEST))
    got = _cli(db, "triage", "--ticket", str(ticket), "--manifest", str(manifest))
    return got, _cli(db, "traces", "show", trace_id)


V1_CLAUSE = "Prepayment shall not exceed 50,000 RMB"
LANGFUSE_GOOD = ("Prepayment shall not exceed 30,000 RMB", "The prepayment cap is 30,000 RMB.")
LANGFUSE_DROPPED = (V1_CLAUSE, "The prepayment cap is 50,000 RMB.")


@pytest.mark.parametrize("generation", ["v3", "v4"])
@pytest.mark.parametrize(
    ("runs", "alone"),
    [((LANGFUSE_GOOD,), "no_fault"), ((LANGFUSE_DROPPED,), "dropped_in_context")],
    ids=["good", "dropped"],
)
def test_a_langfuse_run_in_a_trace_of_its_own_reads_as_before(
    generation: str, runs: tuple[tuple[str, str], ...], alone: str, tmp_path: Path
) -> None:
    trace = _langfuse_runs(runs)
    got, task = _triage_stored(tmp_path, _collected(tmp_path, generation, trace), trace["id"])
    assert got["verdict"] == alone, got["summary"]
    assert task["runs"] == []


@pytest.mark.parametrize("generation", ["v3", "v4"])
@pytest.mark.parametrize("order", ["good-dropped", "dropped-good"])
def test_a_langfuse_trace_id_given_to_two_runs_is_read_run_by_run(
    generation: str, order: str, tmp_path: Path
) -> None:
    # Collected back, the two AGENT observations are top-level, adopted by one synthetic root: read as one run
    # (the last run's answer on the trace record, either run's retrieval and generation), it gave a verdict
    # whichever run the ticket is about may not have — each has its own input and output and its generation
    # under it: each is a run.
    runs = (LANGFUSE_GOOD, LANGFUSE_DROPPED) if order == "good-dropped" else (LANGFUSE_DROPPED, LANGFUSE_GOOD)
    trace = _langfuse_runs(runs)
    got, task = _triage_stored(tmp_path, _collected(tmp_path, generation, trace), trace["id"])
    roots = [o["id"] for o in trace["observations"] if o["parentObservationId"] is None]
    assert got["verdict"] == "unconfirmed", got["summary"]
    deciding = next(s for s in got["stages"] if s["status"] == "unconfirmed")
    assert all(f"run {root} (rag-answer): " in deciding["detail"] for root in roots)
    (gap,) = [g for g in task["gaps"] if g["kind"] == "several_runs"]
    assert "top-level observations" in gap["detail"]
    assert [r["final_answer"] for r in task["runs"]] == [answer for _, answer in runs]
    assert task["final_answer"] is None


@pytest.mark.parametrize("generation", ["v3", "v4"])
def test_an_observation_whose_parent_was_not_received_is_read_as_this_runs_and_as_another_run(
    generation: str, tmp_path: Path
) -> None:
    # The dropped run's AGENT observation never reached Langfuse: its retriever and generation name it as
    # their parent. The collector adopts them beside the good run's AGENT; read as the good run's, the trace
    # said no_fault or dropped_in_context — which run they are is not recorded.
    trace = _langfuse_runs((LANGFUSE_GOOD, LANGFUSE_DROPPED))
    lost = trace["observations"][4]
    assert lost["parentObservationId"] is None
    assert lost["type"] == "AGENT"
    trace["observations"] = [o for o in trace["observations"] if o is not lost]
    got, task = _triage_stored(tmp_path, _collected(tmp_path, generation, trace), trace["id"])
    assert got["verdict"] == "unconfirmed", got["summary"]
    assert "read whole" in got["summary"]
    assert any(g["kind"] == "missing_parent" and lost["id"] in g["detail"] for g in task["gaps"])
    assert len(task["runs"]) == 2


# --- what the judge and the sweep read of a trace holding several runs -------------------------------------


def _stored_task(tmp_path: Path, spans: Sequence[ReadableSpan]) -> tuple[Path, TaskRecord]:
    """The spans collected into a store, and their task record (as the judge and the sweep read it)."""
    db, trace = tmp_path / "s.db", tmp_path / "trace.json"
    trace.write_text(json.dumps(encode_spans_json(spans)))
    _cli(db, "collect", "file", str(trace))
    store = open_store(f"sqlite:///{db}")
    try:
        return db, normalize(store.get_spans(f"{TRACE_ID:032x}"))
    finally:
        store.close()


def test_the_judge_reads_each_runs_documents_under_its_run(tmp_path: Path) -> None:
    # Both runs answered alike, so the answer is read; the documents and model inputs are each run's own.
    _, task = _stored_task(tmp_path, record([STALE, DROPPED]))
    assert task.final_answer == mk.BAD
    labels = [run.run_label() for run in task.runs]
    context = part_data(task, "context")
    assert [(item["run"], item["document"]) for item in context] == [
        (labels[0], f"{mk.DOC}@v1"),
        (labels[1], f"{mk.DOC}@v2"),
    ]
    text = part_text(task, "context")
    assert text is not None
    assert text.index(f"[{labels[0]}]") < text.index(mk.V1_TEXT) < text.index(labels[1])
    model_input = part_text(task, "model_input")
    assert model_input is not None
    assert all(f"[{label}]" in model_input for label in labels)


def test_the_judge_reads_a_single_run_as_before(tmp_path: Path) -> None:
    _, task = _stored_task(tmp_path, record([STALE]))
    assert part_data(task, "context") == [{"document": f"{mk.DOC}@v1", "content": mk.V1_TEXT}]
    assert part_text(task, "context") == f"[{mk.DOC}@v1]\n{mk.V1_TEXT}"


def test_the_sweeps_evidence_names_the_run_that_retrieved_each_version(tmp_path: Path) -> None:
    db, task = _stored_task(tmp_path, record([STALE, DROPPED]))
    labels = [run.run_label() for run in task.runs]
    manifest = tmp_path / "manifest.jsonl"
    entries = [mk.entry(acl=None, content=mk.V2_TEXT), mk.v1_entry(content=mk.V1_TEXT)]
    manifest.write_text("".join(e.model_dump_json() + "\n" for e in entries))
    (flag,) = _cli(db, "triage", "--sweep", "--manifest", str(manifest))["flagged"]
    notes = [e["note"] for e in flag["evidence"]]
    assert f"{labels[0]}: retrieved {mk.DOC}@v1 (not in effect then)" in notes
    assert f"{labels[1]}: retrieved {mk.DOC}@v2 (in effect then)" in notes
    # The stale clause was in the first run's model input only.
    held = [n for n in notes if "the model input holds" in n]
    assert held
    assert all(n.startswith(f"{labels[0]}: ") for n in held)


# --- another run whose root was lost -----------------------------------------------------------------------

ROOTLESS = [(GOOD, DROPPED), (DROPPED, GOOD), (IGNORED, GOOD), (GOOD, IGNORED)]


def _second_root_lost(first: Run, second: Run) -> tuple[TaskRecord, Localization, str]:
    """The two runs under one trace id, the second's root lost, triaged long after the trace ended (no longer
    arriving); and the lost root's span id."""
    spans = decode_protobuf(encode_spans(record([first, second])).SerializeToString()).spans
    second_root = [s for s in spans if not s.parent_span_id][1]
    task = normalize([s for s in spans if s is not second_root])
    assert task.end_time is not None
    got = localize(task, mk.ticket(), MANIFEST, now=task.end_time + STILL_ARRIVING)
    return task, got, second_root.span_id


@pytest.mark.parametrize(("first", "second"), ROOTLESS, ids=[f"{a.name}-{b.name}" for a, b in ROOTLESS])
def test_another_run_whose_root_was_lost_is_not_read_as_this_runs_alone(first: Run, second: Run) -> None:
    # The root ends last, so it is what a lost last batch or a process ended before flushing loses. The first
    # run's root records its answer; the second run's retrieval and chat call name a parent never received —
    # read as the first run's (as a lost span of it would be), long after the trace ended, the verdict was the
    # first run's or one no run has.
    task, got, lost = _second_root_lost(first, second)
    assert got.verdict == "unconfirmed", got.summary
    assert "read whole" in got.summary
    deciding = next(s for s in got.stages if s.status == "unconfirmed")
    assert any("not received" in m for m in deciding.missing)
    # Each reading is in the record: the first run's, the orphans' (their root named as not received).
    assert len(task.runs) == 2
    assert task.runs[0].final_answer == first.answer
    assert any(g.kind == "missing_parent" and lost in g.detail for g in task.gaps)


def test_a_run_whose_lost_span_left_orphans_keeps_its_verdict_where_every_reading_gives_it() -> None:
    # Two good runs, the second's root lost: whichever run the orphans are, each reading gives no_fault.
    _, got, _ = _second_root_lost(GOOD, GOOD)
    assert got.verdict == "no_fault", got.summary


def test_traces_show_names_each_runs_spans_without_their_records_again(tmp_path: Path) -> None:
    # The trace's own lists hold every run's records; each run gives its own fields and its spans' ids.
    spans = record([GOOD, DROPPED])
    _, task = _stored_task(tmp_path, spans)
    shown = _cli(tmp_path / "s.db", "traces", "show", f"{TRACE_ID:032x}")
    assert {k: v for k, v in shown.items() if k != "runs"} == {
        k: v for k, v in task.model_dump(mode="json").items() if k != "runs"
    }
    for run, full in zip(shown["runs"], task.runs, strict=True):
        assert run["span_ids"] == [s.span_id for s in full.spans]
        assert (run["input"], run["final_answer"], run["gaps"]) == (
            full.input,
            full.final_answer,
            [g.model_dump(mode="json") for g in full.gaps],
        )
        assert not {"spans", "retrievals", "model_calls"} & set(run)
    # Every run's retrievals are the trace's entries of its spans.
    ids = [set(run["span_ids"]) for run in shown["runs"]]
    assert [[r["span_id"] for r in shown["retrievals"] if r["span_id"] in mine] for mine in ids] == [
        [r.span_id for r in full.retrievals] for full in task.runs
    ]
    assert len(json.dumps(shown)) < 0.7 * len(task.model_dump_json())


def test_a_run_whose_root_was_lost_is_named_by_the_missing_parent(tmp_path: Path) -> None:
    # The orphan run has no root of its own: it was labelled plain "run", told from no other. It is named by
    # the span its spans name as their parent, wherever a run is named: the deciding stage, the summary,
    # traces show (text and JSON).
    spans = decode_protobuf(encode_spans(record([GOOD, DROPPED])).SerializeToString()).spans
    lost = [s for s in spans if not s.parent_span_id][1].span_id
    kept = [s for s in spans if s.span_id != lost]
    task = normalize(kept)
    assert task.end_time is not None
    got = localize(task, mk.ticket(), MANIFEST, now=task.end_time + STILL_ARRIVING)
    first, orphans = task.runs
    assert first.run_label() == f"run {first.spans[0].span_id} (agent)"
    assert orphans.run_label() == f"run under missing span {lost}"
    deciding = next(s for s in got.stages if s.status == "unconfirmed")
    assert f"run under missing span {lost}: " in deciding.detail
    assert f"under missing span {lost}" in got.summary
    db = tmp_path / "s.db"
    store = open_store(f"sqlite:///{db}")
    try:
        store.put_spans(kept)
    finally:
        store.close()
    shown = _cli(db, "traces", "show", f"{TRACE_ID:032x}")
    assert [r["label"] for r in shown["runs"]] == [first.run_label(), f"run under missing span {lost}"]
    text = CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", "traces", "show", f"{TRACE_ID:032x}"])
    assert text.exit_code == 0, text.output
    flat = " ".join(text.output.split())
    assert f"run under missing span {lost}: " in flat
    assert f"{first.run_label()}: " in flat


def test_a_run_label_names_every_missing_parent() -> None:
    # Two spans whose parents were not received (the run normalize makes of them has no root): named by both.
    spans = decode_protobuf(encode_spans(record([GOOD])).SerializeToString()).spans
    root = next(s for s in spans if not s.parent_span_id)
    under = [s for s in spans if s.parent_span_id == root.span_id]
    assert len(under) >= 2
    orphans = [under[0], under[1].model_copy(update={"parent_span_id": "00000000000000aa"})]
    task = normalize(orphans)
    assert task.run_label() == f"run under missing spans 00000000000000aa, {root.span_id}"
    assert normalize(spans).run_label() == f"run {root.span_id} (agent)"
