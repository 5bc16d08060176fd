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
