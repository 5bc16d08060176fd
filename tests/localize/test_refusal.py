"""A model reply that is a refusal is a recorded answer, not a hidden one: the OpenAI chat API returns it in
the message's ``refusal`` field with ``content`` null, and openinference-instrumentation-openai records the
message's role only (``llm.output_messages.0.message.role``), the refusal in the response body it keeps in
``output.value``. Read as not recorded, triage named OpenInference's hide switches (capture was on) and
said the answer was missing. Through the real instrumentation and openai client against the local OpenAI
stand-in (the refusal sent as the API's body), the real SDK's OTLP encoder and tracejudge's decoder.

A refusal is also marked one (``Message.refusal``, in the task record and ``traces show``), where the trace
records it as such: OpenAI's ``refusal`` field (OpenInference's response body, any OpenAI message dict) and
OpenLLMetry's OpenAI instrumentation (0.62.3), which writes it as a GenAI ``refusal`` part of
``gen_ai.output.messages``. opentelemetry-instrumentation-openai-v2 records a chat refusal as a message with
no part (``model_output_empty``, test_empty_answer): its text is not in the trace, so it cannot be marked.

What triage says of it: the model was given the material (``in_context`` passed: the stage runs only then)
and refused, stating none of its facts — ``used_by_model`` fails (``ignored_by_model``: the fix is the prompt
or the model), its detail saying the model refused and its evidence quoting the refusal. The refusal is the
API's own record, not a reading of the answer's words; a refusal that states the material's facts passes as
any answer does, and a text that merely sounds like a refusal is read as any answer is."""

from __future__ import annotations

import json

from tests.localize import conftest as mk
from tests.localize import test_empty_answer as empty
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.normalize._shapes import messages_from_value
from tracejudge.schema import Message, RawSpan, TaskRecord
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
    assert [m.refusal for m in call.output_messages] == [REFUSAL]
    # The model had v2's clause in its input and refused: the model's fault, never "not recorded".
    loc = localize(task, mk.ticket(), [mk.entry(acl=None), mk.v1_entry()])
    used = next(s for s in loc.stages if s.name == "used_by_model")
    assert (loc.verdict, [s.status for s in loc.stages]) == (
        "ignored_by_model",
        ["pass", "pass", "pass", "fail"],
    )
    assert "the model refused to answer" in used.detail
    assert [e.note for e in used.evidence] == [f"refused: {REFUSAL!r}"]
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
    assert (message.role, message.content, message.refusal) == ("assistant", REFUSAL, REFUSAL)
    # An answer with text is no refusal.
    (answered,) = messages_from_value(json.loads(refusal_body(refusal=None, content=mk.GOOD))) or []
    assert (answered.content, answered.refusal) == (mk.GOOD, None)


def test_the_instrumentation_records_the_refusal_in_the_body_only() -> None:
    spans = refused_trace()
    (llm,) = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    assert "llm.output_messages.0.message.content" not in llm.attributes
    assert json.loads(str(llm.attributes["output.value"]))["choices"][0]["message"]["refusal"] == REFUSAL


def openllmetry_refused_trace() -> list[RawSpan]:
    """The same RAG turn, its chat call recorded by OpenLLMetry's OpenAI instrumentation."""
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor as TraceloopOpenAI

    return empty._trace([Rule(raw_body=refusal_body())], instrumentor=TraceloopOpenAI())


def test_openllmetry_records_the_refusal_as_a_refusal_part() -> None:
    spans = openllmetry_refused_trace()
    (chat,) = [s for s in spans if s.name == "openai.chat"]
    (recorded,) = json.loads(str(chat.attributes["gen_ai.output.messages"]))
    assert recorded["parts"] == [{"type": "refusal", "content": REFUSAL}]
    task = normalize(spans)
    (call,) = task.model_calls
    assert [(m.content, m.refusal) for m in call.output_messages] == [(REFUSAL, REFUSAL)]
    assert task.final_answer == REFUSAL
    loc = localize(task, mk.ticket(), [mk.entry(acl=None), mk.v1_entry()])
    assert (loc.verdict, mk.statuses(loc)) == ("ignored_by_model", ["pass", "pass", "pass", "fail"])
    # In the task record's JSON (traces show --json, the MCP show_trace) as in the model's message.
    dumped = task.model_dump(mode="json")
    assert dumped["model_calls"][0]["output_messages"][0]["refusal"] == REFUSAL


def _refusing(text: str, context: str = mk.V2_TEXT) -> TaskRecord:
    """A task whose one model call, given ``context``, answered ``text`` marked a refusal."""
    call = mk.model(context=context, output=text).model_copy(
        update={"output_messages": (Message(role="assistant", content=text, refusal=text),)}
    )
    return mk.task(model_calls=(call,), answer=text)


def test_a_refusal_stating_the_material_s_facts_used_it() -> None:
    said = "I can't approve that: prepayment is capped at 30,000 RMB, so 40,000 RMB is over the limit."
    assert localize(_refusing(said), mk.ticket(), [mk.entry(acl=None)]).verdict == "no_fault"
    stale = "I can't approve that: attachment v1 caps prepayment at 50,000 RMB."
    assert localize(_refusing(stale), mk.ticket(), [mk.entry(acl=None)]).verdict == "ignored_by_model"


def test_a_refusal_without_the_material_in_its_input_is_no_model_fault() -> None:
    loc = localize(_refusing(REFUSAL, context="unrelated"), mk.ticket(), [mk.entry(acl=None)])
    assert (loc.verdict, mk.statuses(loc)) == ("dropped_in_context", ["pass", "pass", "fail", "skipped"])


def test_text_that_sounds_like_a_refusal_is_read_as_any_answer() -> None:
    # Not marked a refusal by the API: it states no fact, so it is the judge's to read (here none).
    loc = localize(mk.task(answer=REFUSAL), mk.ticket(), [mk.entry(acl=None)])
    assert (loc.verdict, loc.stages[3].status) == ("unconfirmed", "unconfirmed")
