"""The procurement agent as ``tracejudge regress run`` replays it, and how its regression suite is made.

* ``agent`` is the deployed agent (the small ``gpt-4.1-nano`` model, which prefers the old 50,000 clause
  when both attachment versions reach it); ``agent_fixed`` is the fix: the context builder drops
  material that is no longer in effect at the task time, and the agent escalates when the material
  does not settle the question. Both take a :class:`tracejudge.regress.ReplayContext`.
* ``record_traces`` runs the demo's scenarios plus the positive-feedback scenario in ``feedback/``
  straight into a store; ``build_example_suite`` builds ``suite/`` from the tickets.

Regenerate ``suite/`` (offline)::

    python -m examples.procurement.regress
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import openai
import yaml
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracejudge.testing.openai_server import Rule

from .agent import (
    SYSTEM_PROMPT,
    AgentConfig,
    Hit,
    IndexedDocument,
    Retriever,
    Tracing,
    build_context,
    load_documents,
    run_agent,
)
from .scenarios import HERE, load_scenarios, model_rules, run_scenarios

DEPLOYED = AgentConfig(model="gpt-4.1-nano", filter={"region": "CN"})
"""The deployment the suite replays: the healthy settings, with the small model."""

JUDGE_MODEL = "judge-mini"

ANSWER_POLICY = (
    "Under the procurement policy, a prepayment request over the contract's cap is escalated to the "
    "finance controller and is not paid."
)
ANSWER_TERMS = "Invoices from Huadong Steel under contract C-17 are payable within sixty days of delivery."
ANSWER_REJECT = (
    "I cannot pay this: the prepayment cap for Huadong Steel is 30,000 RMB per order (attachment v2), "
    "so a 45,000 RMB prepayment is over the cap and needs the finance controller."
)
ESCALATION = " I have escalated this to the finance controller."

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def replay_model_rules() -> list[Rule]:
    """The scripted agent model (the demo's, plus the policy question) and a scripted judge."""
    high = {
        "score": 9,
        "reasoning": "The answer rests on the applicable material and takes the right action.",
    }
    low = {
        "score": 2,
        "reasoning": "The answer relies on superseded material or leaves the question hanging.",
    }

    def reply(score: dict[str, Any]) -> dict[str, Any]:
        names = ("rests_on_basis", "handles_missing_material", "addresses_feedback")
        return {"criteria": dict.fromkeys(names, score), "reasoning": score["reasoning"]}

    return [
        Rule(model=JUDGE_MODEL, any_message=r"handles_missing_material.*escalated", reply=reply(high)),
        Rule(model=JUDGE_MODEL, any_message=r"handles_missing_material", reply=reply(low)),
        Rule(model=JUDGE_MODEL, any_message=r"rests on C-17/attachment@v2.*is 50,000 RMB", reply=reply(low)),
        Rule(model=JUDGE_MODEL, reply=reply(high)),
        Rule(
            last_user=r"over the contract cap", any_message=r"escalated to the finance", reply=ANSWER_POLICY
        ),
        Rule(last_user=r"payment terms for invoices", any_message=r"within sixty days", reply=ANSWER_TERMS),
        # The small model still prefers the old 50,000 clause, even when asked to pay.
        Rule(model="gpt-4.1-nano", any_message=r"shall not exceed 50,000", reply=model_rules()[0].reply),
        Rule(last_user=r"45,000 RMB prepayment", any_message=r"shall not exceed 30,000", reply=ANSWER_REJECT),
        *model_rules(),
    ]


# --- the replayed agent -------------------------------------------------------------------------


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _document(row: Mapping[str, Any]) -> IndexedDocument:
    acl = row.get("acl")
    return IndexedDocument(
        doc_id=str(row["doc_id"]),
        version=str(row.get("version")),
        content=str(row.get("content") or ""),
        metadata=row.get("metadata") or {},
        acl=tuple(acl) if acl is not None else None,
        effective_from=_time(row.get("effective_from")),
        effective_to=_time(row.get("effective_to")),
        # The replay's materials are what was searchable at the task time.
        indexed_at=_EPOCH,
        removed_at=None,
    )


def _in_effect(doc: IndexedDocument, when: datetime) -> bool:
    return (doc.effective_from is None or doc.effective_from <= when) and (
        doc.effective_to is None or doc.effective_to > when
    )


def _hits(ctx: Any, config: AgentConfig, when: datetime) -> list[Hit]:
    if ctx.retrieval_mode == "fixed":
        return [Hit(_document(d), float(d.get("score") or 0.0)) for d in ctx.fixed_documents or []]
    retriever = Retriever([_document(m) for m in ctx.materials], as_of=when)
    principal = ctx.principal or config.principal
    return list(
        retriever.retrieve(ctx.message, principal=principal, flt=config.filter, top_k=config.top_k).hits
    )


def _answer(ctx: Any, *, fixed: bool, config: AgentConfig = DEPLOYED) -> dict[str, Any]:
    when = ctx.task_time or datetime.now(UTC)
    hits = _hits(ctx, config, when)
    if fixed:
        # The fix: material that no longer applies at the task time never reaches the model.
        hits = [h for h in hits if _in_effect(h.doc, when)]
    ctx.record_retrieval(
        [{"doc_id": h.doc.doc_id, "version": h.doc.version, "content": h.doc.content} for h in hits]
    )
    context = build_context(hits, config.budget_chars)
    user = f"Context:\n{context.text}\nQuestion: {ctx.message}"
    ctx.record_model_input(user)
    client = openai.OpenAI(
        base_url=os.environ.get("OPENAI_BASE_URL"),
        api_key=os.environ.get("OPENAI_API_KEY") or "demo",
        max_retries=0,
    )
    try:
        reply = client.chat.completions.create(
            model=config.model,
            messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
            temperature=0,
        )
    finally:
        client.close()
    answer = reply.choices[0].message.content or ""
    if reply.usage is not None:
        ctx.record_usage(input_tokens=reply.usage.prompt_tokens, output_tokens=reply.usage.completion_tokens)
    if fixed and "cannot confirm" in answer.lower():
        ctx.tools.call("escalate", reason=f"the documents do not settle: {ctx.message}")
        answer += ESCALATION
    if context.included:
        answer += "\nSources: " + ", ".join(context.included)
    return {"answer": answer}


def agent(ctx: Any) -> dict[str, Any]:
    """The deployed agent."""
    return _answer(ctx, fixed=False)


def agent_fixed(ctx: Any) -> dict[str, Any]:
    """The agent with the fix: superseded material is dropped, and unsettled questions are escalated."""
    return _answer(ctx, fixed=True)


# --- traces and the suite -------------------------------------------------------------------------


class StoreExporter(SpanExporter):
    """Exports spans straight into a tracejudge store, through the OTLP encoding the receiver decodes."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        from tracejudge_collectors.otel import decode_protobuf

        decoded = decode_protobuf(encode_spans(spans).SerializeToString())
        self.store.put_spans(decoded.spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def feedback_tickets(base: Path = HERE) -> list[Path]:
    """Tickets of verified positive feedback (``feedback/``), for the suite's success samples."""
    return sorted((base / "feedback").glob("*.yaml"))


def run_feedback(base: Path, openai_base_url: str, exporter: SpanExporter) -> dict[str, int]:
    """Run the agent for each positive-feedback ticket in ``feedback/`` (its ``question`` and ``agent``
    settings) against the model at ``openai_base_url`` (``replay_model_rules``), exporting every span
    through ``exporter``; returns the spans ended per trace id once they are flushed."""
    documents = load_documents(base / "manifest.jsonl")
    client = openai.OpenAI(base_url=openai_base_url, api_key="demo-key-not-secret", max_retries=0)
    tracing = Tracing(exporter)
    try:
        for path in feedback_tickets(base):
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
            when = _time(raw["task_time"])
            assert when is not None
            config = AgentConfig(**(raw.get("agent") or {}))
            run_agent(
                raw["question"],
                config,
                retriever=Retriever(documents, as_of=when),
                client=client,
                tracing=tracing,
                trace_id=str(raw["trace_id"]),
            )
        if not tracing.flush():
            raise RuntimeError("the span exporter did not flush in time")
    finally:
        tracing.shutdown()
        client.close()
    return dict(tracing.span_counts)


def record_traces(store: Any, openai_base_url: str, base: Path = HERE) -> None:
    """Run the demo's scenarios and the feedback scenarios, storing every span in ``store``."""
    run_scenarios(
        load_scenarios(base), openai_base_url=openai_base_url, exporter=StoreExporter(store), base=base
    )
    run_feedback(base, openai_base_url, StoreExporter(store))


def example_tickets(base: Path = HERE) -> list[Path]:
    """Every ticket the suite is built from: the demo's verified complaints and the positive feedback."""
    return [*sorted((base / "tickets").glob("*.yaml")), *feedback_tickets(base)]


def main() -> None:  # pragma: no cover - regenerates the committed suite
    import tempfile

    from tracejudge.localize import load_manifest
    from tracejudge.regress import build_suite
    from tracejudge.store import SqliteStore
    from tracejudge.testing.openai_server import ScriptedOpenAIServer

    with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAIServer(replay_model_rules()) as model:
        store = SqliteStore(Path(tmp) / "example.db")
        record_traces(store, model.base_url)
        report = build_suite(
            store, HERE / "suite", tickets=example_tickets(), manifest=load_manifest(HERE / "manifest.jsonl")
        )
        store.close()
    print(report.model_dump_json(indent=2))


if __name__ == "__main__":  # pragma: no cover
    main()
