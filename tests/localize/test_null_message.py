"""A request message sent with ``content: null`` is read as what it was, not as a message whose content was
lost — and a message whose content was lost still reads as lost.

An assistant turn in a request's history often has no content: it called tools (``tool_calls``), called a
function by OpenAI's legacy ``function_call``, or refused (``refusal``). What the three OpenAI
instrumentations record of it, each seen here through the real instrumentation and ``openai`` client
against the local OpenAI stand-in, the real SDK's OTLP encoder and tracejudge's decoder:

- a tool call: all three record the message with its tool calls (it read as whole before too);
- a legacy function call: openinference-instrumentation-openai records ``message.function_call_name`` /
  ``function_call_arguments_json`` (not read before: the message read as lost), opentelemetry-
  instrumentation-openai-v2 a message with ``parts: []``, and OpenLLMetry's OpenAI instrumentation (0.62.3)
  a message with ``parts: []`` — and no ``function`` message at all: the function's result, which may hold
  the material, is not in the trace, so there the input stays partial;
- a refusal: OpenInference records the role alone (the refusal is in the request body it keeps in
  ``input.value``), openai-v2 and OpenLLMetry ``parts: []``.

Each read as lost (``model_input_not_recorded`` naming a content switch, though capture was on), so a
clause sent in no message could not be concluded absent: ``in_context`` unconfirmed, not failed. Now
OpenInference's turn is read whole: its function call as a call, its role-only message by the request body
at its place. A ``parts: []`` message stays one the trace holds no text of (the input partial), its gap
saying what it may have been and naming no switch: openai-v2 writes ``parts: []`` for content given as parts
too (text included), and after OpenLLMetry's the function message is missing. A message whose content is
lost reads as before: the body shows text sent there, or no body says what was sent."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.localize import conftest as mk
from tests.localize import test_empty_answer as empty
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.normalize._answer import unrecorded_requests
from tracejudge.schema import Localization, ModelCall, RawSpan
from tracejudge.testing.openai_server import Rule

SEARCH = {"name": "search_contracts", "arguments": json.dumps({"query": "prepayment cap"})}
REFUSED = "I can't help with getting around the contract's limits."
SYSTEM = {"role": "system", "content": "You answer procurement questions from the contracts."}
ASK = {"role": "user", "content": mk.QUESTION}


# Request histories whose third message is an assistant turn with content null; the material (v2's clause
# unless another text is given) is in the tool (or function) result, or, after the refusal, in the system
# message.
def history(name: str, material: str = mk.V2_TEXT) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": SEARCH}
    histories: dict[str, list[dict[str, Any]]] = {
        "tool-call": [
            SYSTEM,
            ASK,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": material},
        ],
        "function-call": [
            SYSTEM,
            ASK,
            {"role": "assistant", "content": None, "function_call": SEARCH},
            {"role": "function", "name": "search_contracts", "content": material},
        ],
        "refusal": [
            {"role": "system", "content": f"Context:\n{material}"},
            {"role": "user", "content": "How do I get around the prepayment cap?"},
            {"role": "assistant", "content": None, "refusal": REFUSED},
            ASK,
        ],
        # Not a null message: content given as parts, which openai-v2 records as no part either.
        "content-parts": [
            SYSTEM,
            {
                "role": "user",
                "content": [{"type": "text", "text": f"{mk.QUESTION}\n\nContract:\n{material}"}],
            },
        ],
    }
    return histories[name]


HISTORIES = ("tool-call", "function-call", "refusal", "content-parts")
RECORDERS = ("openinference", "openai-v2", "openllmetry")


def _instrumentor(recorder: str) -> Any:
    """The recorder's instrumentor; None for OpenInference's (``empty._trace``'s own, content on)."""
    if recorder == "openinference":
        return None
    if recorder == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as GenAIInstrumentor

        return GenAIInstrumentor()
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor as TraceloopOpenAI

    return TraceloopOpenAI()


def recorded(recorder: str, name: str, material: str = mk.V2_TEXT) -> list[RawSpan]:
    """A RAG turn (``empty._trace``: root CHAIN, the app's retriever returning v2) whose one chat call sends
    the history ``name`` holding ``material``, recorded by ``recorder``; the model answers with v1's cap
    (ignored_by_model once the input is read whole and holds v2's clause)."""

    def ask(client: openai.OpenAI) -> None:
        client.chat.completions.create(model="scripted-model", messages=history(name, material))

    with pytest.MonkeyPatch.context() as env:
        # openai-v2 records content on the span under the latest GenAI conventions (read at each call).
        env.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        env.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
        return empty._trace([Rule(reply=mk.BAD)], instrumentor=_instrumentor(recorder), ask=ask)


def triage(spans: list[RawSpan]) -> Localization:
    return localize(normalize(spans), mk.ticket(), [mk.entry(acl=None), mk.v1_entry()])


def the_call(spans: list[RawSpan]) -> ModelCall:
    (call,) = normalize(spans).model_calls
    return call


# (recorder, history) -> what the trace leaves of the input: whole, or partial (a message it holds no text
# of) and where v2's clause then is — in a recorded message or only in the one whose text is missing.
PARTIAL = {
    ("openai-v2", "function-call"): "recorded",
    ("openai-v2", "refusal"): "recorded",
    ("openai-v2", "content-parts"): "missing",
    ("openllmetry", "function-call"): "missing",  # the function message is not recorded at all
    ("openllmetry", "refusal"): "recorded",
}


@pytest.fixture(scope="module")
def traces() -> dict[tuple[str, str], list[RawSpan]]:
    return {(r, h): recorded(r, h) for r in RECORDERS for h in HISTORIES}


@pytest.mark.parametrize("recorder", RECORDERS)
@pytest.mark.parametrize("history", HISTORIES)
def test_a_null_content_turn_reads_as_the_trace_shows_it(
    traces: dict[tuple[str, str], list[RawSpan]], recorder: str, history: str
) -> None:
    spans = traces[recorder, history]
    call = the_call(spans)
    task = normalize(spans)
    partial = PARTIAL.get((recorder, history))
    assert call.input_partial is (partial is not None)
    inputs = [g for g in task.gaps if g.kind.startswith("model_input")]
    if partial is None:
        assert inputs == []
    else:
        # Capture was on: the gap says what the message may have been and names no content switch.
        (gap,) = inputs
        assert (gap.kind, gap.switch) == ("model_input_truncated", "")
        assert "recorded with no part" in gap.detail
    loc = triage(spans)
    if partial == "missing":
        assert (loc.verdict, loc.stages[2].status) == ("unconfirmed", "unconfirmed")
    else:
        assert (loc.verdict, mk.statuses(loc)) == ("ignored_by_model", ["pass", "pass", "pass", "fail"])


@pytest.mark.parametrize("recorder", RECORDERS)
@pytest.mark.parametrize("history", HISTORIES)
def test_a_clause_in_no_message_is_dropped_only_where_the_input_reads_whole(
    recorder: str, history: str
) -> None:
    # v1's text sent where v2's clause should have been. Read whole, the clause is absent from the input
    # (OpenInference's function call and refusal read unconfirmed before: their turn read as a message whose
    # content was lost); partial, the message the trace holds no text of may have held it.
    loc = triage(recorded(recorder, history, material=mk.V1_TEXT))
    if (recorder, history) in PARTIAL:
        assert (loc.verdict, loc.stages[2].status) == ("unconfirmed", "unconfirmed")
    else:
        assert (loc.verdict, mk.statuses(loc)) == ("dropped_in_context", ["pass", "pass", "fail", "skipped"])


def test_openinference_reads_a_legacy_function_call_as_the_call_it_was(
    traces: dict[tuple[str, str], list[RawSpan]],
) -> None:
    assistant = the_call(traces["openinference", "function-call"]).input_messages[2]
    assert (assistant.content, assistant.tool_calls) == (
        None,
        ({"id": None, "name": "search_contracts", "arguments": {"query": "prepayment cap"}},),
    )


def test_openinference_reads_an_earlier_refusal_from_the_request_body(
    traces: dict[tuple[str, str], list[RawSpan]],
) -> None:
    spans = traces["openinference", "refusal"]
    (llm,) = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    assert "llm.input_messages.2.message.content" not in llm.attributes  # the role alone
    assistant = the_call(spans).input_messages[2]
    assert (assistant.role, assistant.content, assistant.refusal) == ("assistant", REFUSED, REFUSED)


def test_openai_v2_records_no_part_for_null_content_and_for_content_parts(
    traces: dict[tuple[str, str], list[RawSpan]],
) -> None:
    # Why openai-v2's no-part message cannot be read as having said nothing: content parts look the same.
    for history, at in (("refusal", 2), ("content-parts", 1)):
        (chat,) = [s for s in traces["openai-v2", history] if s.name.startswith("chat")]
        sent = json.loads(str(chat.attributes["gen_ai.input.messages"]))
        assert sent[at]["parts"] == []


def _without(spans: list[RawSpan], *keys: str) -> list[RawSpan]:
    for key in keys:
        spans = mk.drop_attribute(spans, key)
    return spans


@pytest.mark.parametrize("history", ["tool-call", "function-call"])
def test_a_lost_message_still_reads_lost(traces: dict[tuple[str, str], list[RawSpan]], history: str) -> None:
    # The tool (function) result's content lost, v2's clause with it: the request body shows text was sent
    # there, so the input is partial and in_context unconfirmed — never dropped_in_context.
    spans = traces["openinference", history]
    for lost in (
        _without(spans, "llm.input_messages.3.message.content"),
        _without(spans, "llm.input_messages.3.message.content", "input.value"),
    ):
        call = the_call(lost)
        assert call.input_partial
        assert (triage(lost).verdict, triage(lost).stages[2].status) == ("unconfirmed", "unconfirmed")


def test_a_lost_system_message_beside_a_refusal_still_reads_lost(
    traces: dict[tuple[str, str], list[RawSpan]],
) -> None:
    spans = _without(traces["openinference", "refusal"], "llm.input_messages.0.message.content")
    assert the_call(spans).input_partial
    assert triage(spans).stages[2].status == "unconfirmed"
    # Without the body, the refusal's message is lost too.
    bare = _without(spans, "input.value")
    assert [m.content for m in the_call(bare).input_messages][:3] == [
        None,
        "How do I get around the prepayment cap?",
        None,
    ]


def test_a_lost_function_call_is_not_taken_for_a_null_message(
    traces: dict[tuple[str, str], list[RawSpan]],
) -> None:
    # The body shows a function_call sent there, which the attributes lost: not "said nothing" (content "").
    spans = _without(
        traces["openinference", "function-call"], "llm.input_messages.2.message.function_call_name"
    )
    call = the_call(spans)
    assert call.input_messages[2].content is None
    # A role-only assistant turn before the function's result is the request it answers, its details not
    # recorded (as OpenLLMetry's mistralai records every such turn): no text of the input is lost — a
    # request's name and arguments are no model input text — and the result is there.
    assert not call.input_partial
    assert unrecorded_requests(call.input_messages) == {2}
