"""Which model call's reply is the answer when no span records it (``_answer``): the last call's, unless an
earlier call may have given it — one no later call continues (re-sends its messages unchanged after it
returned, or with only tool steps added). Then the ``answer_uncertain`` gap names them and no answer is
read: a title, a summary or a grader's reply is never read as what the user got (DESIGN 5.5).
Hand-written OpenInference spans, in table form."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan, TaskRecord

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT = "00000000000000a0"
T0 = 1_780_000_000_000_000_000
SYSTEM = ("system", "Answer from the contract excerpts.")
ASK = ("user", "Excerpts: prepayment shall not exceed 30,000 RMB. Question: can we prepay 45,000 RMB?")
ANSWER = "No: the cap is 30,000 RMB."
SEARCH = ("assistant", "", ("search",))
RESULT = ("tool", "prepayment shall not exceed 30,000 RMB")

Message = tuple[Any, ...]  # (role, content) or (role, content, tool names)


def call(
    number: int,
    sent: list[Message],
    reply: str | None = None,
    tools: tuple[str, ...] = (),
    *,
    start: int | None = None,
    end: int | None = None,
    extra: dict[str, Any] | None = None,
) -> RawSpan:
    """An LLM span sent ``sent``, replying ``reply`` or asking for ``tools``; by default the calls run one
    after another (call n from n ms to n ms + 0.5 ms)."""
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM"}
    for i, message in enumerate(sent):
        prefix = f"llm.input_messages.{i}.message."
        attrs[prefix + "role"] = message[0]
        if message[1]:
            attrs[prefix + "content"] = message[1]
        for j, name in enumerate(message[2] if len(message) > 2 else ()):
            attrs[f"{prefix}tool_calls.{j}.tool_call.function.name"] = name
            attrs[f"{prefix}tool_calls.{j}.tool_call.id"] = f"call-{j}"
    attrs["llm.output_messages.0.message.role"] = "assistant"
    if reply is not None:
        attrs["llm.output_messages.0.message.content"] = reply
    for j, name in enumerate(tools):
        attrs[f"llm.output_messages.0.message.tool_calls.{j}.tool_call.function.name"] = name
        attrs[f"llm.output_messages.0.message.tool_calls.{j}.tool_call.id"] = f"call-{j}"
    attrs.update(extra or {})
    begin = T0 + number * 1_000_000 if start is None else start
    return RawSpan(
        trace_id=TRACE,
        span_id=f"{number:016x}",
        parent_span_id=ROOT,
        name=f"chat-{number}",
        start_time_unix_nano=begin,
        end_time_unix_nano=begin + 500_000 if end is None else end,
        attributes=attrs,
    )


def trace(*calls: RawSpan, root: dict[str, Any] | None = None) -> TaskRecord:
    top = RawSpan(
        trace_id=TRACE,
        span_id=ROOT,
        name="agent",
        start_time_unix_nano=T0,
        end_time_unix_nano=T0 + 100_000_000,
        attributes={
            "openinference.span.kind": "AGENT",
            "input.value": "can we prepay 45,000 RMB?",
            **(root or {}),
        },
    )
    return normalize([top, *calls])


def rivals(record: TaskRecord) -> list[str] | None:
    """The calls the ``answer_uncertain`` gap names as maybe the answer; None without the gap."""
    gaps = [g for g in record.gaps if g.kind == "answer_uncertain"]
    if not gaps:
        return None
    (gap,) = gaps
    assert gap.span_id == record.model_calls[-1].span_id
    assert gap.switch.startswith("the reply the user got, as the root span's output")
    named = re.search(r"that of model call (.+?), which", gap.note)
    assert named is not None
    return named.group(1).split(", ")


TITLE_PROMPT = ("system", "Write a short title for this conversation.")
INLINE = ("user", f"User: {ASK[1]}\nAssistant: {ANSWER}")

# name -> the calls (last one's reply "LAST"), and the calls that may have answered instead (None: the last
# call's reply is the answer).
CASES: dict[str, tuple[list[RawSpan], list[int] | None]] = {
    "one call": ([call(1, [SYSTEM, ASK], ANSWER)], None),
    "a tool request, then the call that read its result": (
        [call(1, [SYSTEM, ASK], tools=("search",)), call(2, [SYSTEM, ASK, SEARCH, RESULT], ANSWER)],
        None,
    ),
    "two tool rounds": (
        [
            call(1, [SYSTEM, ASK], tools=("search",)),
            call(2, [SYSTEM, ASK, SEARCH, RESULT], tools=("search",)),
            call(3, [SYSTEM, ASK, SEARCH, RESULT, SEARCH, RESULT], ANSWER),
        ],
        None,
    ),
    "a tool result recorded without its request (OpenLIT)": (
        [call(1, [SYSTEM, ASK], tools=("search",)), call(2, [SYSTEM, ASK, RESULT], ANSWER)],
        None,
    ),
    "a tool result sent in a user message (pydantic-ai)": (
        [
            call(1, [SYSTEM, ASK], tools=("search",)),
            call(2, [SYSTEM, ASK, SEARCH, ("user", RESULT[1])], ANSWER),
        ],
        None,
    ),
    "a tool request recorded by its role alone, before its result (OpenLLMetry's mistralai)": (
        [call(1, [SYSTEM, ASK]), call(2, [SYSTEM, ASK, ("assistant", ""), RESULT], ANSWER)],
        None,
    ),
    "a role-only turn where the first call's reply records another request": (
        [
            call(1, [SYSTEM, ASK], tools=("search",)),
            call(2, [SYSTEM, ASK, ("assistant", ""), RESULT], ANSWER),
        ],
        [1],
    ),
    "a role-only assistant turn before no tool result (its content lost)": (
        [call(1, [SYSTEM, ASK]), call(2, [SYSTEM, ASK, ("assistant", ""), ("user", "Go on.")], ANSWER)],
        [1],
    ),
    "handed off to another agent with the tool steps": (
        [
            call(1, [SYSTEM, ASK], tools=("transfer",)),
            call(2, [("system", "You check caps."), ASK, ("assistant", "", ("transfer",)), RESULT], ANSWER),
        ],
        None,
    ),
    "sent again after the first returned another reply (a re-ask: either reply may be the answer)": (
        [call(1, [SYSTEM, ASK], "Checking v1: 50,000 RMB."), call(2, [SYSTEM, ASK], ANSWER)],
        [1],
    ),
    "sent again after the first failed (a retry)": (
        [call(1, [SYSTEM, ASK]).model_copy(update={"status_code": 2}), call(2, [SYSTEM, ASK], ANSWER)],
        None,
    ),
    "sent again after the first replied the same (a retry)": (
        [call(1, [SYSTEM, ASK], ANSWER), call(2, [SYSTEM, ASK], ANSWER)],
        None,
    ),
    "sent again after a first reply not recorded": (
        [call(1, [SYSTEM, ASK]), call(2, [SYSTEM, ASK], ANSWER)],
        [1],
    ),
    "sent again while the first ran (two answers at once)": (
        [call(1, [SYSTEM, ASK], "50,000 RMB.", end=T0 + 3_000_000), call(2, [SYSTEM, ASK], ANSWER)],
        [1],
    ),
    "a title asked for with the exchange inline": (
        [call(1, [SYSTEM, ASK], ANSWER), call(2, [TITLE_PROMPT, INLINE], "Prepayment cap")],
        [1],
    ),
    "a title asked for after the conversation": (
        [
            call(1, [SYSTEM, ASK], ANSWER),
            call(2, [SYSTEM, ASK, ("assistant", ANSWER), ("user", "Now a title for this chat.")], "Cap"),
        ],
        [1],
    ),
    "a title after an agent loop": (
        [
            call(1, [SYSTEM, ASK], tools=("search",)),
            call(2, [SYSTEM, ASK, SEARCH, RESULT], ANSWER),
            call(3, [TITLE_PROMPT, INLINE], "Prepayment cap"),
        ],
        [2],
    ),
    "a tool request whose result no recorded call read (the answering call lost)": (
        [call(1, [SYSTEM, ASK], tools=("search",)), call(3, [TITLE_PROMPT, INLINE], "Prepayment cap")],
        [1],
    ),
    "the same prompt asked under other instructions (a classifier)": (
        [call(1, [SYSTEM, ASK], ANSWER), call(2, [("system", "Classify the request."), ASK], "pricing")],
        [1],
    ),
    "the last call's input not recorded": (
        [call(1, [SYSTEM, ASK], tools=("search",)), call(2, [], ANSWER)],
        [1],
    ),
    "the last call's input hidden": (
        [
            call(1, [SYSTEM, ASK], tools=("search",)),
            call(2, [("system", "__REDACTED__"), ("user", "__REDACTED__")], ANSWER),
        ],
        [1],
    ),
}


@pytest.mark.parametrize(("calls", "expected"), list(CASES.values()), ids=list(CASES))
def test_the_last_reply_is_the_answer_only_when_no_earlier_call_may_have_given_it(
    calls: list[RawSpan], expected: list[int] | None
) -> None:
    record = trace(*calls)
    last = record.model_calls[-1]
    # The record keeps the calls that may have written the answer, for localize to read.
    assert record.answering_calls == (*(f"{n:016x}" for n in expected or ()), last.span_id)
    if expected is None:
        assert rivals(record) is None
        assert (record.final_answer, record.final_answer_span_id) == (last.output_text, last.span_id)
        return
    assert rivals(record) == [f"{n:016x}" for n in expected]
    assert (record.final_answer, record.final_answer_span_id) == (None, None)
    # The open answer is said once: no "no final answer" gap beside it.
    assert "no_final_answer" not in {g.kind for g in record.gaps}


def test_an_answer_the_root_records_is_read_whatever_calls_follow() -> None:
    record = trace(
        call(1, [SYSTEM, ASK], ANSWER), call(2, [TITLE_PROMPT, INLINE], "Cap"), root={"output.value": ANSWER}
    )
    assert (record.final_answer, record.final_answer_span_id) == (ANSWER, ROOT)
    assert rivals(record) is None
    # Which call's reply the root's answer is, is localize's to read: both calls may have written it.
    assert record.answering_calls == (f"{1:016x}", f"{2:016x}")


def test_removing_the_roots_answer_leaves_it_open_not_the_title() -> None:
    # DESIGN 5.5: without the root's record the title is not read in its place.
    record = trace(call(1, [SYSTEM, ASK], ANSWER), call(2, [TITLE_PROMPT, INLINE], "Cap"))
    assert record.final_answer is None
    assert rivals(record) == [f"{1:016x}"]


PREAMBLE = "Let me check the cap with the search tool."


@pytest.mark.parametrize(
    ("calls", "asked"),
    [
        ([call(1, [SYSTEM, ASK], PREAMBLE, tools=("search",))], "'search'"),
        (
            [
                call(1, [SYSTEM, ASK], tools=("search",)),
                call(2, [SYSTEM, ASK, SEARCH, RESULT], PREAMBLE, tools=("search",)),
            ],
            "'search'",
        ),
        # Choice 0 asks for a tool, choice 1 is text, and the request's n is not recorded.
        (
            [
                call(
                    1,
                    [SYSTEM, ASK],
                    tools=("search",),
                    extra={
                        "llm.output_messages.1.message.role": "assistant",
                        "llm.output_messages.1.message.content": ANSWER,
                    },
                )
            ],
            "'search'",
        ),
        # A tool request whose name is not recorded may be any tool.
        (
            [
                call(
                    1,
                    [SYSTEM, ASK],
                    PREAMBLE,
                    extra={"llm.output_messages.0.message.tool_calls.0.tool_call.id": "call-0"},
                )
            ],
            "''",
        ),
    ],
    ids=[
        "one call",
        "after a tool round",
        "a mixed reply, n not recorded",
        "a tool request without its name",
    ],
)
def test_text_beside_a_tool_request_is_no_answer(calls: list[RawSpan], asked: str) -> None:
    # The text may be a preamble: the app ran the tool and a call not in the trace answered from its result.
    record = trace(*calls)
    last = record.model_calls[-1]
    assert (record.final_answer, record.final_answer_span_id) == (None, None)
    (gap,) = [g for g in record.gaps if g.kind == "answer_uncertain"]
    assert gap.span_id == last.span_id
    assert f"asked for a tool ({asked}) beside its text" in gap.note
    assert "no_final_answer" not in {g.kind for g in record.gaps}
    # The root's record settles it.
    assert trace(*calls, root={"output.value": ANSWER}).final_answer == ANSWER


def test_text_after_a_tool_the_api_ran_inside_the_call_is_the_answer() -> None:
    # A Responses API reply: the hosted file search's item (OpenInference names it by its type), then the text
    # the model wrote with its results — one reply, the answer.
    hosted = call(
        1,
        [SYSTEM, ASK],
        tools=("file_search_call",),
        extra={
            "llm.output_messages.1.message.role": "assistant",
            "llm.output_messages.1.message.content": ANSWER,
        },
    )
    record = trace(hosted)
    assert (record.final_answer, record.final_answer_span_id) == (ANSWER, hosted.span_id)


def _asked(message: str, *requests: tuple[str, str | None, str | None]) -> dict[str, Any]:
    """The attributes of tool requests (name, arguments, id; None: not recorded) in message ``message``
    (``llm.input_messages.N`` or ``llm.output_messages.N``)."""
    attrs: dict[str, Any] = {}
    for j, (name, arguments, ident) in enumerate(requests):
        prefix = f"{message}.message.tool_calls.{j}.tool_call."
        attrs[prefix + "function.name"] = name
        if arguments is not None:
            attrs[prefix + "function.arguments"] = arguments
        if ident is not None:
            attrs[prefix + "id"] = ident
    return attrs


def _agent(first: dict[str, Any], resent: dict[str, Any]) -> TaskRecord:
    """A call asking for a tool (its output's requests ``first``), then a call sent its messages, an assistant
    turn asking for a tool (``resent``) and the tool's result, replying the answer."""
    out = "llm.output_messages.0"
    turn = {"llm.input_messages.2.message.role": "assistant", **resent}
    return trace(
        call(1, [SYSTEM, ASK], extra={f"{out}.message.role": "assistant", **first}),
        call(2, [SYSTEM, ASK, ("assistant", ""), RESULT], ANSWER, extra=turn),
    )


X, Y = '{"query": "prepayment cap"}', '{"query": "delivery terms"}'


@pytest.mark.parametrize(
    ("first", "resent", "continued"),
    [
        # The later call re-sends the request the first asked for: it continues it.
        (("search", X, "call_a"), ("search", X, "call_a"), True),
        (("search", X, None), ("search", X, None), True),
        (("search", None, "call_a"), ("search", None, "call_a"), True),
        (("search", X, None), ("search", X, "call_a"), True),  # an id only the re-sent turn records
        # The same tool asked with other arguments, or under another id: another call's request.
        (("search", X, "call_a"), ("search", Y, "call_a"), False),
        (("search", X, None), ("search", Y, None), False),
        (("search", None, "call_a"), ("search", None, "call_b"), False),
        # Neither arguments nor ids recorded (names alone): unsure.
        (("search", None, None), ("search", None, None), False),
        # The first's request not recorded (AgentOps, OpenLLMetry's LangChain spans): nothing to compare.
        (None, ("search", X, "call_a"), True),
    ],
)
def test_a_re_sent_tool_request_continues_the_call_that_asked_for_it(
    first: tuple[str, str | None, str | None] | None,
    resent: tuple[str, str | None, str | None],
    continued: bool,
) -> None:
    # Names alone made two calls asking the same tool (other arguments) read as one conversation going on:
    # the first's reply — a request whose result no recorded call read — was never a rival.
    asked = _asked("llm.output_messages.0", first) if first else {}
    record = _agent(asked, _asked("llm.input_messages.2", resent))
    assert rivals(record) == (None if continued else [f"{1:016x}"])


@pytest.mark.parametrize(("arguments", "continued"), [(X, True), (Y, False)])
def test_re_sent_turns_compare_by_arguments(arguments: str, continued: bool) -> None:
    # Both calls were sent a search turn and its result (the same text) before; the first then asked to
    # verify, and the later call re-sends that request with its result. Its search turn asked with other
    # arguments: the later call is another conversation's, and the first's request may have led to the answer.
    turn = {"llm.input_messages.2.message.role": "assistant"}
    first = call(
        1,
        [SYSTEM, ASK, ("assistant", ""), RESULT],
        tools=("verify",),
        extra={**turn, **_asked("llm.input_messages.2", ("search", X, "call_a"))},
    )
    later = {**turn, **_asked("llm.input_messages.2", ("search", arguments, "call_a"))}
    resent = [SYSTEM, ASK, ("assistant", ""), RESULT, ("assistant", "", ("verify",)), RESULT]
    record = trace(first, call(2, resent, ANSWER, extra=later))
    assert rivals(record) == (None if continued else [f"{1:016x}"])
