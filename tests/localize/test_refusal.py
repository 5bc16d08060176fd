"""A model reply that is a refusal is a recorded answer, not a hidden one: the OpenAI chat API returns it in
the message's ``refusal`` field with ``content`` null, and openinference-instrumentation-openai records the
message's role only (``llm.output_messages.0.message.role``), the refusal in the response body it keeps in
``output.value``. Read as not recorded, triage named OpenInference's hide switches (capture was on) and
said the answer was missing. Through the real instrumentation and openai client against the local OpenAI
stand-in (the refusal sent as the API's body), the real SDK's OTLP encoder and tracejudge's decoder."""

from __future__ import annotations

import json

from tests.localize import conftest as mk
from tests.localize import test_empty_answer as empty
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.normalize._shapes import messages_from_value
from tracejudge.schema import RawSpan
from tracejudge.testing.openai_server import Rule

REFUSAL = "I'm sorry, I can't help with questions about this contract."


def refusal_body(refusal: str | None = REFUSAL, content: str | None = None) -> str:
    """An OpenAI chat completion whose message refuses (``refusal`` set, ``content`` null)."""
    message = {"role": "assistant", "content": content, "refusal": refusal}
    return json.dumps(
        {
            "id": "chatcmpl-refused",
            "object": "chat.completion",
            "created": 1763456400,
            "model": "scripted-model",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
        }
    )


def refused_trace() -> list[RawSpan]:
    return empty._trace([Rule(raw_body=refusal_body())])


def test_a_refusal_is_the_model_output_and_the_answer() -> None:
    task = normalize(refused_trace())
    (call,) = task.model_calls
    assert (call.output_text, call.output_recorded) == (REFUSAL, True)
    assert task.final_answer == REFUSAL
    kinds = {g.kind for g in task.gaps}
    assert not kinds & {"model_output_not_recorded", "no_final_answer", "model_output_empty"}
    assert not [g for g in task.gaps if "OPENINFERENCE_HIDE" in g.detail]
    # The refusal states no fact: used_by_model is the judge's to read (here none), never "not recorded".
    loc = localize(task, mk.ticket(), [mk.entry(acl=None), mk.v1_entry()])
    used = next(s for s in loc.stages if s.name == "used_by_model")
    assert used.status == "unconfirmed"
    assert "no final answer recorded" not in used.detail


def test_a_refusal_read_from_the_response_body_is_lost_with_it() -> None:
    # Without output.value the span holds the role alone: not recorded (the reading rests on that record).
    spans = [
        s.model_copy(update={"attributes": {k: v for k, v in s.attributes.items() if k != "output.value"}})
        for s in refused_trace()
    ]
    task = normalize(spans)
    assert task.final_answer is None
    assert "model_output_not_recorded" in {g.kind for g in task.gaps}


def test_a_refusal_in_an_openai_message_dict_is_read_too() -> None:
    # The same message where a convention records the API's message as JSON (a Langfuse generation's
    # output, OpenInference's output.value read as messages): its refusal is its text.
    (message,) = messages_from_value(json.loads(refusal_body())) or []
    assert (message.role, message.content) == ("assistant", REFUSAL)


def test_the_instrumentation_records_the_refusal_in_the_body_only() -> None:
    spans = refused_trace()
    (llm,) = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    assert "llm.output_messages.0.message.content" not in llm.attributes
    assert json.loads(str(llm.attributes["output.value"]))["choices"][0]["message"]["refusal"] == REFUSAL
