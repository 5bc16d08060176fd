"""The Vercel AI SDK's ``ai.*`` attributes, hand-written around its recorded spans
(tests/fixtures/outside/openinference_vercel): what the shapes not in those recordings read as."""

from __future__ import annotations

import json
from typing import Any

from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _span(span_id: str, attrs: dict[str, Any], parent: str | None = None) -> RawSpan:
    return RawSpan(
        trace_id=TRACE,
        span_id=span_id.rjust(16, "0"),
        parent_span_id=parent,
        name=str(attrs.get("ai.operationId", "span")),
        start_time_unix_nano=1_780_000_000_000_000_000 + int(span_id, 16),
        end_time_unix_nano=1_780_000_000_100_000_000,
        attributes=attrs,
    )


def _call(**attrs: Any) -> RawSpan:
    return _span("a0", {"ai.operationId": "ai.generateText", "ai.prompt": '{"prompt": "cap?"}', **attrs})


def _request(**attrs: Any) -> RawSpan:
    return _span("b1", {"ai.operationId": "ai.generateText.doGenerate", **attrs}, parent="00000000000000a0")


def test_a_tool_call_request_is_a_tool_call_and_the_call_span_holds_the_answer() -> None:
    calls = [{"toolCallType": "function", "toolCallId": "c1", "toolName": "search", "args": '{"q": "cap"}'}]
    record = normalize(
        [
            _call(**{"ai.response.text": "The cap is 30,000 RMB."}),
            _request(
                **{
                    "ai.prompt.messages": json.dumps(
                        [{"role": "user", "content": [{"type": "text", "text": "cap?"}]}]
                    ),
                    "ai.response.toolCalls": json.dumps(calls),
                }
            ),
        ]
    )
    (call,) = record.model_calls
    ((message,),) = [call.output_messages]
    assert (message.content, message.tool_calls) == (
        None,
        ({"id": "c1", "name": "search", "arguments": {"q": "cap"}},),
    )
    assert (record.input, record.final_answer) == ("cap?", "The cap is 30,000 RMB.")


def test_messages_that_are_not_a_message_list_are_not_recorded_and_say_why() -> None:
    record = normalize([_call(), _request(**{"ai.prompt.messages": '"cap?"', "ai.response.text": "30,000"})])
    (call,) = record.model_calls
    assert (call.input_recorded, call.output_text) == (False, "30,000")
    assert any(g.kind == "attribute_unparseable" and "ai.prompt.messages" in g.detail for g in record.gaps)


def test_an_object_is_the_answer_of_generate_object() -> None:
    answer = '{"cap_rmb": 30000}'
    record = normalize([_call(**{"ai.operationId": "ai.generateObject", "ai.response.object": answer})])
    assert record.final_answer == answer
