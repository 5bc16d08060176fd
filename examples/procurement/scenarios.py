"""The demo's scenarios: load them, script the model, run the agent once per scenario."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import openai
import yaml
from opentelemetry.sdk.trace.export import SpanExporter

from tracejudge.testing.openai_server import Rule

from .agent import AgentConfig, Retriever, Tracing, load_documents, run_agent

HERE = Path(__file__).resolve().parent

ANSWER_30K = (
    "The prepayment cap for Huadong Steel is 30,000 RMB per order, "
    "per the revised payment schedule attached to the supply agreement."
)
ANSWER_50K = (
    "The prepayment cap for Huadong Steel is 50,000 RMB per order, "
    "per the payment schedule attached to the supply agreement."
)
ANSWER_NONE = (
    "The documents provided do not state a prepayment cap for Huadong Steel, so I cannot confirm one."
)


def model_rules() -> list[Rule]:
    """The scripted model: it answers from what is in its input, except the small model, which
    prefers the old 50,000 clause whenever both versions are in front of it."""
    return [
        Rule(model="gpt-4.1-nano", any_message=r"shall not exceed 50,000", reply=ANSWER_50K),
        Rule(any_message=r"shall not exceed 30,000", reply=ANSWER_30K),
        Rule(any_message=r"shall not exceed 50,000", reply=ANSWER_50K),
        Rule(reply=ANSWER_NONE),
    ]


@dataclass(frozen=True)
class Scenario:
    """One scenario of scenarios.yaml, with its ticket's trace id and task time."""

    name: str
    about: str
    ticket_path: Path
    trace_id: str
    task_time: datetime
    question: str
    config: AgentConfig
    expect_verdict: str
    expect_cause: str | None


def _settings(values: Mapping[str, Any] | None) -> dict[str, Any]:
    known = set(AgentConfig.__dataclass_fields__)
    unknown = set(values or {}) - known
    if unknown:
        raise ValueError(f"unknown agent settings {sorted(unknown)}; known: {sorted(known)}")
    return dict(values or {})


def load_scenarios(base: Path = HERE) -> list[Scenario]:
    """Read ``scenarios.yaml`` and each scenario's ticket (for its trace id and task time)."""
    spec = yaml.safe_load((base / "scenarios.yaml").read_text(encoding="utf-8"))
    defaults = AgentConfig(**_settings(spec.get("defaults")))
    out = []
    for s in spec["scenarios"]:
        ticket_path = base / s["ticket"]
        ticket = yaml.safe_load(ticket_path.read_text(encoding="utf-8"))
        task_time = ticket["task_time"]
        if isinstance(task_time, str):
            task_time = datetime.fromisoformat(task_time.replace("Z", "+00:00"))
        expect = s["expect"]
        out.append(
            Scenario(
                name=s["name"],
                about=s.get("about", ""),
                ticket_path=ticket_path,
                trace_id=str(ticket["trace_id"]).lower(),
                task_time=task_time,
                question=s.get("question", spec["question"]),
                config=replace(defaults, **_settings(s.get("config"))),
                expect_verdict=expect["verdict"],
                expect_cause=expect.get("cause"),
            )
        )
    return out


@dataclass(frozen=True)
class ScenarioRun:
    """What one scenario's run produced."""

    scenario: Scenario
    answer: str
    span_count: int


def run_scenarios(
    scenarios: Sequence[Scenario],
    *,
    openai_base_url: str,
    exporter: SpanExporter,
    base: Path = HERE,
    use_instrumentor: bool = True,
) -> list[ScenarioRun]:
    """Run the agent once per scenario against the model at ``openai_base_url``, exporting every
    span through ``exporter``; returns after the spans are flushed."""
    documents = load_documents(base / "manifest.jsonl")
    client = openai.OpenAI(base_url=openai_base_url, api_key="demo-key-not-secret", max_retries=0)
    tracing = Tracing(exporter)
    answers = []
    try:
        for sc in scenarios:
            retriever = Retriever(documents, as_of=sc.task_time)
            answers.append(
                run_agent(
                    sc.question,
                    sc.config,
                    retriever=retriever,
                    client=client,
                    tracing=tracing,
                    trace_id=sc.trace_id,
                    use_instrumentor=use_instrumentor,
                    as_of=sc.task_time,
                )
            )
        if not tracing.flush():
            raise RuntimeError("the span exporter did not flush in time")
    finally:
        tracing.shutdown()
        client.close()
    return [
        ScenarioRun(sc, answer, tracing.span_counts.get(sc.trace_id, 0))
        for sc, answer in zip(scenarios, answers, strict=True)
    ]
