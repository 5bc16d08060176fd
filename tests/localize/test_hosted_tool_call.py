"""A model call whose response ended on a tool call its recorded output does not hold ran a tool inside
the call: OpenLLMetry's OpenAI instrumentation records a Responses API call that used OpenAI's hosted
file_search (pydantic-ai's recorded call, tests/fixtures/outside/) with its answer and
``gen_ai.response.finish_reasons = ("tool_call",)``, and neither the request's tools nor the
``file_search_call`` item. What the search gave the model is in no record, so the request's messages are not
all its input: a clause found in none of them is not ``dropped_in_context`` (DESIGN 5.5) — the input reads
as partial and ``in_context`` stays unconfirmed, naming the finish reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.localize import conftest as mk
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan

TRACE = "4bf92f3577b34da6a3ce929d0e0e4737"


def _spans(finish_reasons: Any, output_parts: list[dict[str, Any]]) -> list[RawSpan]:
    """A root answering with v2's cap, a retrieval returning v2, and the model call as OpenLLMetry's OpenAI
    instrumentation records a Responses API call (the question alone in its input: no v2 clause)."""
    root, retrieval, t0 = mk.agent_and_retrieval(TRACE)
    output = [{"role": "assistant", "parts": output_parts, "finish_reason": "tool_call"}]
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": mk.QUESTION}]}]
        ),
        "gen_ai.output.messages": json.dumps(output),
    }
    if finish_reasons is not None:
        attributes["gen_ai.response.finish_reasons"] = finish_reasons
    llm = RawSpan(
        trace_id=TRACE,
        span_id="c" * 16,
        parent_span_id="a" * 16,
        name="openai.response",
        start_time_unix_nano=t0 + 3,
        end_time_unix_nano=t0 + 4,
        attributes=attributes,
    )
    return [root, retrieval, llm]


ANSWER = [{"type": "text", "content": mk.GOOD}]


def _in_context(spans: list[RawSpan]) -> tuple[str, str, tuple[str, ...]]:
    loc = localize(normalize(spans), mk.ticket(), [mk.entry(acl=None), mk.v1_entry()])
    stage = next(s for s in loc.stages if s.name == "in_context")
    return loc.verdict, stage.status, stage.missing


@pytest.mark.parametrize("finish_reasons", [("tool_call",), ["tool_calls"], '["tool_call"]', "['tool_call']"])
def test_a_tool_call_the_output_does_not_hold_keeps_in_context_unconfirmed(finish_reasons: Any) -> None:
    spans = _spans(finish_reasons, ANSWER)
    task = normalize(spans)
    (call,) = task.model_calls
    assert call.input_partial
    (gap,) = [g for g in task.gaps if g.kind == "model_input_truncated" and g.span_id == call.span_id]
    assert "finish_reason tool_call" in gap.detail
    verdict, status, missing = _in_context(spans)
    assert (verdict, status) == ("unconfirmed", "unconfirmed")
    assert any(call.span_id in m for m in missing)


@pytest.mark.parametrize("finish_reasons", [("stop",), None], ids=["stop", "no finish reason"])
def test_an_answer_that_ended_otherwise_reads_whole_and_the_drop_stays_definite(finish_reasons: Any) -> None:
    spans = _spans(finish_reasons, ANSWER)
    (call,) = normalize(spans).model_calls
    assert not call.input_partial
    assert _in_context(spans)[:2] == ("dropped_in_context", "fail")


def test_a_tool_call_the_output_holds_leaves_the_input_whole() -> None:
    # The model asked for the tool; what it returned comes in a later request, not inside this call.
    call_part = {"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": {}}
    (call,) = normalize(_spans(("tool_call",), [call_part])).model_calls
    assert not call.input_partial
