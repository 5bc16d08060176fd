"""The answer read from the last model call is only read when the trace says it is the reply the user got
(DESIGN 5.5). Two ways a recorded trace does not: the call returned several choices (OpenAI ``n``), or which
call is last rests on times the trace shows are skewed (a span outside its parent's time range). Both leave
the answer open — ``answer_uncertain`` naming the call, ``used_by_model`` unconfirmed — unless the root
records the answer. Recorded through the real openinference-instrumentation-openai and openai client against
the local OpenAI stand-in (``test_empty_answer._trace``), then changed as a real trace can be: a second
choice recorded beside the first, one call's subtree shifted in time as a clock that is off shifts it."""

from __future__ import annotations

import json

import openai
import pytest

from tests.localize import conftest as mk
from tests.localize import test_empty_answer as empty
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import Localization, RawSpan
from tracejudge.testing.openai_server import Rule

SECOND = 2 * 10**9
HOUR = 3600 * 10**9
MS = 10**6


def _triage(spans: list[RawSpan]) -> Localization:
    return localize(normalize(spans), mk.ticket(), [mk.entry(acl=None), mk.v1_entry()])


def _gap(spans: list[RawSpan]) -> str:
    (gap,) = [g for g in normalize(spans).gaps if g.kind == "answer_uncertain"]
    return gap.note


def _llm(spans: list[RawSpan]) -> list[RawSpan]:
    return sorted(
        (s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"),
        key=lambda s: s.start_time_unix_nano,
    )


def _with(spans: list[RawSpan], span: RawSpan, **attributes: object) -> list[RawSpan]:
    changed = span.model_copy(update={"attributes": {**span.attributes, **attributes}})
    return [changed if s.span_id == span.span_id else s for s in spans]


def _shifted(spans: list[RawSpan], span: RawSpan, delta: int) -> list[RawSpan]:
    """The spans with ``span`` and its subtree moved by ``delta`` nanoseconds (a clock that is off)."""
    moved = {span.span_id}
    for s in sorted(spans, key=lambda s: s.start_time_unix_nano):
        if s.parent_span_id in moved:
            moved.add(s.span_id)
    return [
        s.model_copy(
            update={
                "start_time_unix_nano": s.start_time_unix_nano + delta,
                "end_time_unix_nano": s.end_time_unix_nano + delta,
            }
        )
        if s.span_id in moved
        else s
        for s in spans
    ]


# --- several choices -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_call() -> list[RawSpan]:
    """One chat call replying v2's cap (the root records no answer)."""
    return empty._trace([Rule(reply=mk.GOOD)])


def _two_choices(spans: list[RawSpan], first: str, second: str) -> list[RawSpan]:
    # OpenInference records each choice as an output message (llm.output_messages.N, N the choice index).
    (llm,) = _llm(spans)
    second_choice = "llm.output_messages.1.message."
    return _with(
        spans,
        llm,
        **{
            "llm.output_messages.0.message.content": first,
            second_choice + "role": "assistant",
            second_choice + "content": second,
        },
    )


@pytest.mark.parametrize(("first", "second"), [(mk.GOOD, mk.BAD), (mk.BAD, mk.GOOD)])
def test_a_call_with_two_choices_gives_no_answer(one_call: list[RawSpan], first: str, second: str) -> None:
    # Read from choice 0 alone it was no_fault (GOOD first) or ignored_by_model (BAD first): the user may
    # have been shown the other one.
    assert _triage(one_call).verdict == "no_fault"
    spans = _two_choices(one_call, first, second)
    task = normalize(spans)
    (llm,) = task.model_calls
    assert (task.final_answer, task.final_answer_span_id) == (None, None)
    (gap,) = [g for g in task.gaps if g.kind == "answer_uncertain"]
    assert gap.span_id == llm.span_id
    assert "returned 2 choices" in gap.note
    loc = _triage(spans)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
    assert llm.span_id in loc.stages[3].detail


def test_a_second_choice_lost_is_still_asked_for(one_call: list[RawSpan]) -> None:
    # The request recorded n=2 (llm.invocation_parameters): losing the second choice's record (an attribute
    # dropped, content capture cut) leaves the answer open, not read from the one choice left.
    (llm,) = _llm(one_call)
    params = json.loads(str(llm.attributes["llm.invocation_parameters"]))
    spans = _with(one_call, llm, **{"llm.invocation_parameters": json.dumps(params | {"n": 2})})
    task = normalize(spans)
    assert task.final_answer is None
    assert "was asked for 2 choices (OpenAI n), 1 of them recorded" in _gap(spans)
    assert _triage(spans).verdict == "unconfirmed"
    two = _two_choices(spans, mk.GOOD, mk.BAD)
    (llm,) = _llm(two)
    attrs = {k: v for k, v in llm.attributes.items() if not k.startswith("llm.output_messages.1.")}
    lost = [llm.model_copy(update={"attributes": attrs}) if s.span_id == llm.span_id else s for s in two]
    assert _triage(lost).verdict == "unconfirmed"


@pytest.mark.parametrize(("answer", "verdict"), [(mk.GOOD, "no_fault"), (mk.BAD, "ignored_by_model")])
def test_the_roots_answer_says_which_choice(one_call: list[RawSpan], answer: str, verdict: str) -> None:
    # The root's answer is choice 1 or choice 0: the call is named as the answering call either way.
    spans = _two_choices(one_call, mk.GOOD, mk.BAD)
    root = next(s for s in spans if s.parent_span_id is None)
    loc = _triage(_with(spans, root, **{"output.value": answer}))
    assert loc.verdict == verdict


def _tool_or_text(context: str) -> list[RawSpan]:
    """One chat call sent ``context`` and asked for two choices (n=2), the stand-in returning a tool request
    as choice 0 and the stale answer as choice 1 (a body as OpenAI's API sends it)."""
    body = {
        "id": "chatcmpl-two-choices",
        "object": "chat.completion",
        "created": 1780000000,
        "model": "scripted-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_terms",
                            "type": "function",
                            "function": {"name": "check_terms", "arguments": '{"order": 7}'},
                        }
                    ],
                },
            },
            {"index": 1, "finish_reason": "stop", "message": {"role": "assistant", "content": mk.BAD}},
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60},
    }

    def ask(client: openai.OpenAI) -> None:
        messages = [
            {"role": "system", "content": f"Context:\n{context}"},
            {"role": "user", "content": mk.QUESTION},
        ]
        client.chat.completions.create(model="scripted-model", n=2, messages=messages)

    return empty._trace([Rule(raw_body=json.dumps(body))], ask=ask)


def test_a_choice_asking_for_a_tool_leaves_the_answering_call_open() -> None:
    # Choice 0 asked for a tool, choice 1 answered (v1's cap), and the input lacks v2's clause. Had the app
    # followed choice 0, the call that read the tool's result answered — not recorded, its input unknown. Only
    # the first choice's text was looked at: in_context failed (dropped_in_context).
    spans = _tool_or_text(mk.V1_TEXT)
    task = normalize(spans)
    (llm,) = task.model_calls
    assert [bool(m.tool_calls) for m in llm.output_messages] == [True, False]
    assert llm.choices == 2
    assert "was asked for 2 choices (OpenAI n)" in _gap(spans)
    loc = _triage(spans)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
    assert (
        "the last recorded model call asked for a tool and no recorded call answered" in loc.stages[2].detail
    )


# --- skewed times ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def drafts() -> dict[str, list[RawSpan]]:
    """An agent's two calls, the first replying a draft and asking for a tool, the last — sent the first's
    messages and the tool's result — the answer: the draft read stale (v1's cap) before a good answer, and a
    draft stating v2's cap before a stale answer."""
    return {
        "good-after-stale-draft": empty.drafted(empty.DRAFT, mk.GOOD),
        "stale-after-good-draft": empty.drafted(f"Checking: {mk.GOOD} Let me confirm.", mk.BAD),
    }


SKEWS = [
    # (which call's subtree, by how much, whether it puts the draft last): each puts the call outside its
    # parent's time range.
    ("answer", -HOUR, True),
    ("answer", -SECOND, True),
    ("draft", HOUR, True),
    ("draft", SECOND, True),
    ("answer", HOUR, False),
    ("draft", -SECOND, False),
]


@pytest.mark.parametrize("name", ["good-after-stale-draft", "stale-after-good-draft"])
@pytest.mark.parametrize(("which", "delta", "flips"), SKEWS)
def test_calls_ordered_by_skewed_times_give_no_answer(
    drafts: dict[str, list[RawSpan]], name: str, which: str, delta: int, flips: bool
) -> None:
    spans = drafts[name]
    before = _triage(spans).verdict
    assert before == ("no_fault" if name.startswith("good") else "ignored_by_model")
    draft, answer = _llm(spans)
    skewed = _shifted(spans, answer if which == "answer" else draft, delta)
    loc = _triage(skewed)
    if flips:
        assert (loc.verdict, loc.stages[3].status) == ("unconfirmed", "unconfirmed")
        assert "the trace's times are skewed" in _gap(skewed)
    else:
        # The answering call re-sends the draft's messages with its tool step: the order the messages show
        # does not rest on the clocks.
        assert loc.verdict == before


@pytest.mark.parametrize("delta", [-5 * MS, 5 * MS])
def test_a_few_milliseconds_past_the_parent_is_no_skew(delta: int) -> None:
    # Within one process an instrumentation may end a span just after its parent (up to ~0.6 ms in the
    # recordings) and Langfuse keeps milliseconds: the tolerance (10 ms) keeps such a trace definite. A retry
    # after a failed call is told by times (it started after the failed call ended).
    spans = empty.retried(mk.GOOD)
    assert _triage(spans).verdict == "no_fault"
    root = next(s for s in spans if s.parent_span_id is None)
    failed, answer = _llm(spans)
    edge = (
        root.model_copy(update={"end_time_unix_nano": answer.end_time_unix_nano + delta})
        if delta < 0
        else root.model_copy(update={"start_time_unix_nano": failed.start_time_unix_nano + delta})
    )
    assert _triage([edge if s.span_id == root.span_id else s for s in spans]).verdict == "no_fault"
    # Past the tolerance the failed call's order against the answer rests on skewed times: it stays open.
    far = (
        root.model_copy(update={"end_time_unix_nano": answer.end_time_unix_nano - SECOND})
        if delta < 0
        else root.model_copy(update={"start_time_unix_nano": failed.start_time_unix_nano + SECOND})
    )
    assert _triage([far if s.span_id == root.span_id else s for s in spans]).verdict == "unconfirmed"


@pytest.mark.parametrize(("which", "delta", "flips"), SKEWS)
def test_an_empty_answer_after_a_draft_stays_open_whatever_the_clock(
    which: str, delta: int, flips: bool
) -> None:
    # The GenAI instrumentation records the last reply empty after a draft stating v1's cap: unconfirmed.
    # A skew that put the draft last read it as the answer (ignored_by_model) for 4 of these 6 shifts.
    spans = mk.genai_rag_trace([Rule(reply=empty.DRAFT, times=1), Rule(reply="")])
    assert _triage(spans).verdict == "unconfirmed"
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time_unix_nano)
    draft, answer = chats
    assert _triage(_shifted(spans, answer if which == "answer" else draft, delta)).verdict == "unconfirmed"


# --- the same input asked twice -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "whole"),
    [
        (empty.DRAFT, mk.GOOD, "no_fault"),
        (f"Checking: {mk.GOOD} Let me confirm.", mk.BAD, "ignored_by_model"),
    ],
)
def test_the_same_input_asked_again_with_another_reply_gives_no_answer(
    first: str, second: str, whole: str
) -> None:
    # The app sent one request twice and got two replies (a self-consistency re-ask, a reply it rejected and
    # asked again for): which one the user got is not recorded. The second read as the answer (the first
    # taken for an attempt retried) gave no_fault / ignored_by_model.
    spans = empty._trace([Rule(reply=first, times=1), Rule(reply=second)])
    task = normalize(spans)
    one, two = task.model_calls
    assert (task.final_answer, task.answering_calls) == (None, (one.span_id, two.span_id))
    assert f"that of model call {one.span_id}, which no later call continues" in _gap(spans)
    loc = _triage(spans)
    assert (loc.verdict, loc.stages[3].status) == ("unconfirmed", "unconfirmed")
    # The root recording the answer settles it.
    root = next(s for s in spans if s.parent_span_id is None)
    assert _triage(_with(spans, root, **{"output.value": second})).verdict == whole


def test_a_retry_after_a_failed_call_or_with_the_same_reply_is_the_answer() -> None:
    # The first attempt failed (HTTP 500: the span's status is error), or both replies are the same text:
    # the last reply is the one the user got.
    spans = empty.retried(mk.GOOD)
    failed, _ = _llm(spans)
    assert failed.status_code == 2
    assert _triage(spans).verdict == "no_fault"
    assert _triage(empty._trace([Rule(reply=mk.GOOD, times=1), Rule(reply=mk.GOOD)])).verdict == "no_fault"


# --- text beside a tool request -------------------------------------------------------------------------


def _preamble(context: str, text: str) -> list[RawSpan]:
    """One chat call sent ``context`` whose reply holds ``text`` and a tool request (OpenAI's content beside
    tool_calls, as an OpenAI-compatible server sends it); the app's call that read the tool's result is not in
    the trace (made with a client nothing instruments, or its span lost)."""

    def ask(client: openai.OpenAI) -> None:
        messages = [
            {"role": "system", "content": f"Context:\n{context}"},
            {"role": "user", "content": mk.QUESTION},
        ]
        reply = client.chat.completions.create(model="scripted-model", messages=messages)
        assert reply.choices[0].message.content == text
        assert reply.choices[0].message.tool_calls

    check = {"name": "check_terms", "arguments": {"order": 7}}
    return empty._trace([Rule(reply=text, tool_calls=[check])], ask=ask)


@pytest.mark.parametrize(
    ("context", "before"), [(mk.V1_TEXT, "dropped_in_context"), (mk.V2_TEXT, "ignored_by_model")]
)
def test_text_beside_a_tool_request_is_not_read_as_the_answer(context: str, before: str) -> None:
    # The reply states v1's cap and asks for check_terms: a preamble the app sends ahead of the tool, whose
    # result a later call read and answered from. Read as the answer, it gave dropped_in_context (v2's clause
    # in no input) or ignored_by_model (v2's clause in the input, the text stating v1's cap).
    spans = _preamble(context, mk.BAD)
    task = normalize(spans)
    (llm,) = task.model_calls
    assert llm.output_text == mk.BAD
    assert (task.final_answer, task.answering_calls) == (None, (llm.span_id,))
    assert "asked for a tool ('check_terms') beside its text" in _gap(spans)
    loc = _triage(spans)
    assert loc.verdict == "unconfirmed", before
    if context == mk.V1_TEXT:
        assert "the last recorded model call asked for a tool" in loc.stages[2].detail
    # The root recording the reply as the answer settles it: the preamble was what the user got.
    root = next(s for s in spans if s.parent_span_id is None)
    assert _triage(_with(spans, root, **{"output.value": mk.BAD})).verdict == before


def test_a_mixed_reply_whose_n_is_lost_gives_no_answer() -> None:
    # Choice 0 asks for a tool, choice 1 states v1's cap; the input lacks v2's clause. With the request's n
    # lost (llm.invocation_parameters dropped: one text choice left), choice 1 was read as the answer and
    # in_context failed (dropped_in_context). A tool request beside text leaves it open, whatever n.
    spans = _tool_or_text(mk.V1_TEXT)
    (llm,) = _llm(spans)
    attrs = {k: v for k, v in llm.attributes.items() if k != "llm.invocation_parameters"}
    lost = [llm.model_copy(update={"attributes": attrs}) if s.span_id == llm.span_id else s for s in spans]
    task = normalize(lost)
    assert (task.model_calls[0].choices, task.final_answer) == (1, None)
    assert "asked for a tool ('check_terms') beside its text" in _gap(lost)
    loc = _triage(lost)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
