"""Every gap names the switch that records what it says is missing, for the instrumentation that
produced the trace, and every switch a hint names exists: an attribute tracejudge reads, a name in
the installed instrumentation's source, or one a re-record script sets to record its fixtures."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.normalize.test_conventions import root, span
from tracejudge.normalize import normalize
from tracejudge.normalize._hints import HOSTED_FILE_SEARCH, HOSTED_WEB_SEARCH, SWITCHES, Switch, producer
from tracejudge.schema import Gap, TaskRecord
from tracejudge_collectors.otel import read_otlp_file

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "tests" / "fixtures" / "traces"
NAMED = [HOSTED_FILE_SEARCH, HOSTED_WEB_SEARCH]  # switches a reader names itself, outside the table
ALL = sorted(
    {id(s): s for s in [*NAMED, *(s for table in SWITCHES.values() for s in table.values())]}.values(),
    key=lambda s: s.text,
)


@cache
def _package_text(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"{module} is not installed (a dev dependency)"
    folders = list(spec.submodule_search_locations or [])
    return "\n".join(p.read_text(errors="replace") for folder in folders for p in Path(folder).rglob("*.py"))


def _source_text(switch: Switch) -> str:
    kind, _, where = switch.source.partition(":")
    if kind == "tracejudge":
        return "\n".join(
            p.read_text() for p in (REPO / "tracejudge" / "normalize").glob("*.py") if p.name != "_hints.py"
        )
    if kind == "package":
        return _package_text(where)
    assert kind == "recorded", switch.source
    return (TRACES / where).read_text()


@pytest.mark.parametrize("switch", ALL, ids=lambda s: s.names[0])
def test_every_switch_a_hint_names_exists(switch: Switch) -> None:
    text = _source_text(switch)
    for name in switch.names:
        assert name in text, f"{name} not found in {switch.source}"
        assert name in switch.text


def test_a_switch_a_gap_names_is_on_its_record() -> None:
    """Readers (triage's ``missing``, an answer the SDK cut) take a gap's switch from ``Gap.switch``, never
    out of its text: every gap of the recorded traces whose detail names one carries it there too."""
    named = 0
    for path in sorted(TRACES.glob("*.pb")):
        for gap in normalize(list(read_otlp_file(path))).gaps:
            where = (path.name, gap)
            if "; to record it: " in gap.detail:
                assert gap.switch, where
                assert gap.detail == f"{gap.note}; to record it: {gap.switch}", where
                named += 1
            elif ". Mark them: " in gap.detail:  # tools to mark as retrievers: named on the way
                assert gap.detail.endswith(f". Mark them: {gap.switch}"), where
                named += 1
            else:
                assert gap.switch == "", where
    assert named > 100


def test_a_gap_without_a_detail_is_its_switch() -> None:
    gap = Gap(kind="no_model_span").switched("set X=1")
    assert (gap.detail, gap.switch, gap.note) == ("set X=1", "set X=1", "")


def gaps(record: TaskRecord, kind: str) -> list[str]:
    return [g.detail for g in record.gaps if g.kind == kind]


def test_openinference_hidden_inputs_name_the_hide_variables() -> None:
    record = normalize(list(read_otlp_file(TRACES / "openai_hidden_inputs.pb")))
    (detail,) = gaps(record, "model_input_redacted")
    assert "OPENINFERENCE_HIDE_INPUTS" in detail


CHAT: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1-mini"}


@pytest.mark.parametrize(
    ("scope", "switch"),
    [
        ("opentelemetry.util.genai.handler", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only"),
        ("pydantic-ai", "include_content=True"),
        ("litellm", "USE_OTEL_LITELLM_REQUEST_SPAN=true"),
        ("semantic_kernel.connectors.ai.chat_completion_client_base", "DIAGNOSTICS_SENSITIVE=true"),
        ("opentelemetry.instrumentation.openai.v1", "TRACELOOP_TRACE_CONTENT=true"),
        ("openinference.instrumentation.dspy", "OPENINFERENCE_HIDE_INPUTS"),
    ],
)
def test_a_model_call_without_content_names_its_instrumentations_switch(scope: str, switch: str) -> None:
    record = normalize([root(), span("b1", CHAT, scope_name=scope)])
    (detail,) = gaps(record, "model_input_not_recorded")
    assert switch in detail
    (detail,) = gaps(record, "model_output_not_recorded")
    assert switch in detail


def test_litellm_without_its_request_span_names_the_switch() -> None:
    record = normalize([root({"openinference.span.kind": "CHAIN"}), span("b1", {}, scope_name="litellm")])
    (detail,) = gaps(record, "no_model_span")
    assert "USE_OTEL_LITELLM_REQUEST_SPAN=true" in detail


def test_no_retrieval_names_how_to_mark_one() -> None:
    record = normalize([root(), span("b1", CHAT, scope_name="pydantic-ai")])
    (detail,) = gaps(record, "no_retrieval_span")
    assert "gen_ai.tool.type = datastore" in detail
    assert "tracejudge.step = retrieval" in detail


def test_an_openinference_framework_without_llm_spans_names_the_client_instrumentation() -> None:
    agent = {"openinference.span.kind": "AGENT", "output.value": "No."}
    record = normalize([root(), span("b1", agent, scope_name="openinference.instrumentation.crewai")])
    (detail,) = gaps(record, "no_model_span")
    assert "OpenAIInstrumentor().instrument()" in detail


SEARCH: dict[str, Any] = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "search_policies",
    "gen_ai.tool.type": "datastore",
}


@pytest.mark.parametrize(
    ("scope", "switch"),
    [
        ("opentelemetry.util.genai.handler", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only"),
        ("pydantic-ai", "include_content=True"),
        ("langfuse-sdk", "capture_output"),
        ("gcp.vertex.agent", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY"),
        ("autogen-core", "openinference-instrumentation-autogen-agentchat"),
        ("openinference.instrumentation.langchain", "OPENINFERENCE_HIDE_OUTPUTS"),
        ("opentelemetry.instrumentation.chromadb", "TRACELOOP_TRACE_CONTENT=true"),
        # An instrumentation tracejudge does not know: the attributes it reads the documents from.
        ("my.own.retriever", "gen_ai.retrieval.documents"),
    ],
)
def test_a_retrieval_without_its_documents_names_the_switch(scope: str, switch: str) -> None:
    record = normalize([root(), span("b1", SEARCH, scope_name=scope)])
    (detail,) = gaps(record, "retrieval_documents_not_recorded")
    assert "; to record it: " in detail
    assert switch in detail


@pytest.mark.parametrize(
    ("scope", "name", "attrs", "expected", "scope_alone"),
    [
        # The first mark in table order wins, whether the scope or the span itself matched it.
        ("pydantic-ai", "litellm_request", {}, "litellm", "pydantic-ai"),
        (
            "opentelemetry.instrumentation.langchain",
            "chain",
            {"langfuse.observation.type": "SPAN"},
            "langfuse",
            "openllmetry",
        ),
        (
            "openinference.instrumentation.openai",
            "chat",
            {"langfuse.observation.type": "SPAN"},
            "openinference",
            "openinference",
        ),
        (
            "opentelemetry.instrumentation.openai_v2",
            "chat",
            {"traceloop.span.kind": "task"},
            "openai-v2",
            "openai-v2",
        ),
        ("my.own.app", "step", {"traceloop.span.kind": "task"}, "openllmetry", None),
        ("LiteLLM", "completion", {}, "litellm", "litellm"),
    ],
)
def test_a_spans_producer_is_the_first_mark_it_matches(
    scope: str, name: str, attrs: dict[str, Any], expected: str | None, scope_alone: str | None
) -> None:
    # Spans of one scope in turn, with and without what their own marks read: a scope is worked out
    # once, and each span still gets its own answer.
    for _ in range(2):
        assert producer(span("b1", attrs, scope_name=scope, name=name)) == expected
        assert producer(span("b2", {}, scope_name=scope, name="other")) == scope_alone


def _mistral_gaps(name: str, strip: bool = False) -> dict[str, set[str]]:
    """The model-call gaps' switches of an OpenLLMetry mistralai fixture, by kind; ``strip``: without every
    gen_ai.prompt / gen_ai.completion attribute (as recorded with TRACELOOP_TRACE_CONTENT off)."""
    spans = list(read_otlp_file(TRACES / name))
    if strip:
        spans = [
            s.model_copy(
                update={
                    "attributes": {
                        k: v
                        for k, v in s.attributes.items()
                        if not k.startswith(("gen_ai.prompt.", "gen_ai.completion."))
                    }
                }
            )
            for s in spans
        ]
    out: dict[str, set[str]] = {}
    for gap in normalize(spans).gaps:
        if gap.kind in ("model_input_not_recorded", "model_output_not_recorded"):
            out.setdefault(gap.kind, set()).add(gap.switch)
    return out


def test_openllmetry_mistral_with_content_on_names_what_is_missing() -> None:
    # TRACELOOP_TRACE_CONTENT was on (its recorder sets it): naming it sent the user after a switch already
    # on. Given dicts the prompt is a role alone; a reply asking for a tool is never recorded.
    dicts = _mistral_gaps("mistral_openllmetry_tool_rag.pb")
    ((inputs,), (outputs,)) = dicts["model_input_not_recorded"], dicts["model_output_not_recorded"]
    assert "messages passed as dicts" in inputs
    assert "UserMessage" in inputs
    assert "never a tool call" in outputs
    assert "MistralAIInstrumentor" in outputs
    assert "set TRACELOOP_TRACE_CONTENT" not in inputs + outputs
    objects = _mistral_gaps("mistral_openllmetry_objects_rag.pb")
    assert objects == {"model_output_not_recorded": {outputs}}
    # Recorded with the switch off, the span holds no prompt or completion attribute: the switch is the hint.
    off = _mistral_gaps("mistral_openllmetry_objects_rag.pb", strip=True)
    assert {switch for switches in off.values() for switch in switches} == {
        SWITCHES["model_input_not_recorded"]["openllmetry"].text
    }


def test_openllmetry_ollama_with_content_on_names_what_is_missing() -> None:
    # The prompt's content is recorded (TRACELOOP_TRACE_CONTENT on): the first reply, its role alone, asked
    # for the tool — naming the switch sent the user after one already on.
    gaps = _mistral_gaps("ollama_openllmetry_tool_rag.pb")
    ((outputs,),) = gaps.values()
    assert "never a reply's tool calls" in outputs
    assert "OllamaInstrumentor" in outputs
    assert "set TRACELOOP_TRACE_CONTENT" not in outputs
    # Recorded with the switch off, the span holds no prompt or completion attribute: the switch is the hint.
    off = _mistral_gaps("ollama_openllmetry_tool_rag.pb", strip=True)
    assert {switch for switches in off.values() for switch in switches} == {
        SWITCHES["model_input_not_recorded"]["openllmetry"].text
    }
