"""``earlier_answers`` compares a call with the later ones only when one of them may continue it
(``_answer._may_be_continued``): the shortcut must never pass over a call that continues it — whatever
``_continues`` reads, over drawn inputs (instructions, user messages, assistant replies and tool requests,
tool results, inputs not recorded whole), times (overlapping, one after another, not recorded) and
failures."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tracejudge.normalize import _answer
from tracejudge.normalize._answer import earlier_answers
from tracejudge.schema import Message, ModelCall

# Few distinct texts, so that inputs often re-send one another.
_TEXTS = st.sampled_from(["", "a", "b"])
_MESSAGES = st.builds(
    lambda role, text, tools: Message(
        role=role, content=text or None, tool_calls=tuple({"name": name} for name in tools)
    ),
    st.sampled_from(["system", "developer", "user", "assistant", "tool", "model"]),
    _TEXTS,
    st.lists(st.sampled_from(["search", "fetch"]), max_size=1),
)


@st.composite
def _calls(draw: st.DrawFn) -> tuple[list[ModelCall], dict[str, tuple[int, int]], set[str]]:
    calls: list[ModelCall] = []
    times: dict[str, tuple[int, int]] = {}
    shared = draw(st.lists(_MESSAGES, max_size=3))  # a history several calls start from
    for i in range(draw(st.integers(2, 6))):
        own = draw(st.lists(_MESSAGES, max_size=3))
        sent = (shared + own) if draw(st.booleans()) else own
        reply = draw(_TEXTS)
        calls.append(
            ModelCall(
                span_id=f"{i:016x}",
                system_instructions=draw(st.sampled_from([None, "a", "s"])),
                input_messages=tuple(sent),
                input_text=draw(_TEXTS),
                input_recorded=draw(st.sampled_from([True, True, True, False])),
                input_partial=draw(st.sampled_from([False, False, False, True])),
                output_recorded=draw(st.booleans()),
                output_text=reply or None,
                output_messages=(Message(role="assistant", content=reply or None),),
            )
        )
        start = draw(st.sampled_from([0, 10 * i, 10 * i + 5]))
        times[calls[-1].span_id] = (start, draw(st.sampled_from([0, start, start + 3, start + 20])))
    failed = {call.span_id for call in calls if draw(st.booleans())}
    return calls, times, failed


@settings(max_examples=400, deadline=None)
@given(_calls())
def test_no_call_that_continues_another_is_passed_over(
    drawn: tuple[list[ModelCall], dict[str, tuple[int, int]], set[str]],
) -> None:
    calls, times, failed = drawn
    sent = {call.span_id: _answer._items(call) for call in calls}
    for call in calls:  # the sizes counted are those of the items compared
        items = sent[call.span_id]
        assert _answer._size(call) == (None if items is None else (len(items), len(_answer._unsystem(items))))
    sizes = [_answer._size(call) for call in calls]
    reach = _answer._reach(calls, sizes, times)
    for i, earlier in enumerate(calls[:-1]):
        continuing = [
            later.span_id
            for later in calls[i + 1 :]
            if _answer._continues(later, earlier, sent, times, failed, _answer._Replies(calls, {}))
        ]
        if continuing:
            assert _answer._may_be_continued(sizes[i], reach[i + 1], times[earlier.span_id][1]), continuing
    # And so the calls found are those no later call continues, compared pair by pair.
    plain = [
        call
        for i, call in enumerate(calls[:-1])
        if not any(
            _answer._continues(later, call, sent, times, failed, _answer._Replies(calls, {}))
            for later in calls[i + 1 :]
        )
    ]
    assert earlier_answers(calls, times, failed=failed) == plain


def test_the_same_input_sent_again_without_end_times_is_never_continued() -> None:
    """A benchmark's, a load test's or a self-consistency loop's calls: no time shows a retry, so each may
    have given the answer, and the shortcut says so without comparing them pair by pair."""
    sent = (Message(role="system", content="s" * 10_000), Message(role="user", content="q"))
    calls = [
        ModelCall(span_id=f"{i:016x}", input_messages=sent, input_recorded=True, output_text="a")
        for i in range(5)
    ]
    times = {call.span_id: (i + 1, 0) for i, call in enumerate(calls)}
    sizes = [_answer._size(call) for call in calls]
    reach = _answer._reach(calls, sizes, times)
    assert not any(_answer._may_be_continued(sizes[i], reach[i + 1], 0) for i in range(len(calls)))
    assert earlier_answers(calls, times) == calls[:-1]
