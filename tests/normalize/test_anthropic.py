"""The task record read from the Anthropic SDK recordings (tests/fixtures/traces/record_anthropic.py): the
``system`` parameter, the ``tool_use`` -> ``tool_result`` pairing, ``document`` and ``search_result`` blocks,
and replies that stopped before the model finished, under openinference-instrumentation-anthropic and
OpenLLMetry's opentelemetry-instrumentation-anthropic.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracejudge.normalize import normalize
from tracejudge.schema import TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
INSTRUCTIONS = "You answer procurement questions. Search the contract documents first and cite what they say."
ANSWER = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."
CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
INSTRUMENTATIONS = ["openinference", "openllmetry"]
# and the anthropic SDK's own spans (scope com.anthropic.sdk.python, content mode on)
TRACED = [*INSTRUMENTATIONS, "sdk"]


def load(name: str) -> TaskRecord:
    return normalize(list(read_otlp_file(TRACES / f"anthropic_{name}.pb")))


def _system(task: TaskRecord) -> str | None:
    """The instructions as the model calls recorded them: OpenLLMetry's ``gen_ai.system_instructions``, or
    OpenInference's ``system`` message (it records the parameter as the first message)."""
    call = task.model_calls[-1]
    if call.system_instructions is not None:
        return call.system_instructions
    return next((m.content for m in call.input_messages if m.role == "system"), None)


@pytest.mark.parametrize("app", ["tool", "search_results"])
@pytest.mark.parametrize("inst", TRACED)
def test_the_tool_result_answers_the_tool_use(inst: str, app: str) -> None:
    task = load(f"{inst}_{app}_rag")
    assert (task.input, task.final_answer) == (QUESTION, ANSWER)
    assert _system(task) == INSTRUCTIONS
    first, last = task.model_calls
    (asked,) = [c for m in first.output_messages for c in m.tool_calls]
    assert (asked["id"], asked["name"]) == ("toolu_01SearchContracts", "search")
    # The next call was sent the tool_use and its tool_result (a tool message holding the documents' text).
    roles = [m.role for m in last.input_messages if m.role != "system"]
    assert roles == ["user", "assistant", "tool"]
    assert CLAUSE_V2 in (last.input_messages[-1].content or "")
    # The app's tool span is paired with the request it answers (same name and arguments): OpenInference's
    # ``input.value`` is the arguments, the GenAI ``execute_tool`` span names the call's id; Traceloop's
    # ``{"args": [], "kwargs": {...}}`` is not the arguments: unpaired.
    (tool,) = task.tool_calls
    paired = None if inst == "openllmetry" else "toolu_01SearchContracts"
    assert (tool.name, tool.call_id) == ("search", paired)


@pytest.mark.parametrize("inst", INSTRUMENTATIONS)
def test_document_blocks_are_read_from_their_source(inst: str) -> None:
    task = load(f"{inst}_documents_rag")
    (call,) = task.model_calls
    assert _system(task) == INSTRUCTIONS  # the system parameter as a list of text blocks
    (user,) = [m for m in call.input_messages if m.role == "user"]
    assert CLAUSE_V2 in (user.content or "")
    assert QUESTION in (user.content or "")
    assert user.unread == ()
    assert task.final_answer == ANSWER


@pytest.mark.parametrize("inst", TRACED)
def test_a_reply_stopped_at_max_tokens_may_be_incomplete(inst: str) -> None:
    task = load(f"{inst}_tool_max_tokens")
    assert task.final_answer == "Yes: contract C-17 allows prepayment up to 50,000 RMB"
    (gap,) = [g for g in task.gaps if g.kind == "model_output_truncated"]
    assert gap.span_id == task.final_answer_span_id
    assert "max_tokens" in gap.detail or "length" in gap.detail  # the SDK: anthropic.message.stop_reason


def test_a_refusal_body_is_the_models_refusal() -> None:
    task = load("openinference_tool_refusal")
    (message,) = task.model_calls[-1].output_messages
    assert message.refusal == "stop_reason refusal (cyber): The reply was stopped by a classifier."
    assert task.final_answer == message.refusal


@pytest.mark.parametrize("run", ["rag", "ignored"])
def test_the_reply_citations_openinference_records(run: str) -> None:
    # openinference-instrumentation-anthropic keeps the reply's citations in the response body and in
    # ``metadata``: the passage the answer cites (v2's in rag, v1's in ignored). OpenLLMetry and the SDK's
    # own spans record none.
    cap = "30,000" if run == "rag" else "50,000"
    (message,) = load(f"openinference_documents_{run}").model_calls[-1].output_messages
    assert message.cited == (f"Prepayment shall not exceed {cap} RMB per order.",)
    for inst in ("openllmetry", "sdk"):
        assert [m.cited for m in load(f"{inst}_documents_{run}").model_calls[-1].output_messages] == [()]
