"""A chat request the API refused is read for what it sent: a message sent with ``content`` null, or no
message at all, is an input recorded with nothing in it — not an input the instrumentation hid, and not
the request's JSON as the task's input. openinference-instrumentation-openai records the request body in
``input.value`` and, per message, ``llm.input_messages.N.message.role`` (no content attribute for a null
content). envoyproxy/ai-gateway recorded both (tests/fixtures/outside/envoy_ai_gateway/chat-bad-request.json;
its ``chat-no-messages`` span, not kept there, is the same call with ``messages: []``); here they are made
again through the real instrumentation and openai client against the local OpenAI stand-in answering 400."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.fixtures.outside import _formats as fmt
from tests.localize import conftest as mk
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan, TaskRecord
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge_collectors.otel import decode_json, decode_protobuf


def _refused(messages: list[dict[str, Any]]) -> list[RawSpan]:
    """One chat call (the trace's only span, as envoy's recordings) that the API answers with HTTP 400."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with ScriptedOpenAIServer([Rule(status=400)]) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-not-a-secret", max_retries=0)
            with pytest.raises(openai.BadRequestError):
                client.chat.completions.create(model="gpt-5-nano", messages=messages)  # type: ignore[arg-type]
    finally:
        instrumentor.uninstrument()
    return decode_protobuf(encode_spans(exporter.get_finished_spans()).SerializeToString()).spans


def _gaps(task: TaskRecord) -> dict[str, Any]:
    return {g.kind: g for g in task.gaps}


def test_a_null_message_content_is_said_to_have_been_sent_not_hidden() -> None:
    task = normalize(_refused([{"role": "user", "content": None}]))
    (call,) = task.model_calls
    gaps = _gaps(task)
    assert "model_input_not_recorded" not in gaps
    sent = gaps["model_input_empty"]
    assert (sent.span_id, sent.switch) == (call.span_id, "")
    assert sent.detail == (
        "the model input was recorded empty: the request sent message 0 (user) with content null"
    )
    assert not [g for g in task.gaps if "OPENINFERENCE_HIDE" in g.detail]
    assert task.input is None
    # Nothing in the input: in_context is not read as a fault of the context (the call failed), and its
    # missing record says what was sent, not that capture was off.
    loc = localize(task, mk.ticket(), [mk.entry(acl=None)])
    assert loc.verdict == "unconfirmed"


def test_a_request_without_messages_has_no_task_input_and_an_empty_model_input() -> None:
    task = normalize(_refused([]))
    assert task.input is None  # it was the request's JSON: {"messages": [], "model": "gpt-5-nano"}
    gaps = _gaps(task)
    assert "model_input_not_recorded" not in gaps
    assert (
        gaps["model_input_empty"].detail == "the model input was recorded empty: the request sent no messages"
    )


def test_a_message_whose_content_was_hidden_still_asks_for_the_switch() -> None:
    # A message with text, hidden (OPENINFERENCE_HIDE_INPUTS): the request body is hidden with it, and
    # nothing shows the message was sent empty.
    spans = _refused([{"role": "user", "content": mk.QUESTION}])
    hidden = [
        s.model_copy(
            update={
                "attributes": {
                    k: v for k, v in s.attributes.items() if k != "input.value" and "message.content" not in k
                }
            }
        )
        for s in spans
    ]
    gaps = _gaps(normalize(hidden))
    assert "model_input_empty" not in gaps
    assert "OPENINFERENCE_HIDE_INPUTS" in gaps["model_input_not_recorded"].detail


def test_a_message_with_text_reads_as_before() -> None:
    task = normalize(_refused([{"role": "user", "content": mk.QUESTION}]))
    (call,) = task.model_calls
    assert call.input_text == mk.QUESTION
    assert task.input == mk.QUESTION
    assert not {"model_input_empty", "model_input_not_recorded"} & set(_gaps(task))


def test_envoy_s_recorded_bad_request_says_what_was_sent() -> None:
    # envoyproxy/ai-gateway's recording of the same call (gpt-5-nano, the real API's 400): its gap said the
    # input was hidden, naming OPENINFERENCE_HIDE_INPUTS.
    request = fmt.envoy("chat-bad-request", f"{7:032x}", 1_763_456_400_000_000_000)
    task = normalize(decode_json(json.dumps(request)).spans)
    gaps = _gaps(task)
    assert "model_input_not_recorded" not in gaps
    assert gaps["model_input_empty"].detail == (
        "the model input was recorded empty: the request sent message 0 (user) with content null"
    )
    assert gaps["model_input_empty"].switch == ""
