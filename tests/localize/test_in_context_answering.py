"""``in_context`` counts the material as reaching the model only in the input of a call that could have
written the answer: the answering call and the calls it continues. A call before it that it does not
continue (a compression or rewrite step, a sub-agent) leaves open whether its reply carried the material
on; a call after it cannot have; and when the trace does not say which call answered, a call that may have
answered without the material leaves in_context unconfirmed (DESIGN 5.5)."""

from __future__ import annotations

from datetime import timedelta
from types import ModuleType

from tracejudge.normalize import RECORD_ANSWER
from tracejudge.schema import Message, ModelCall

SUMMARY = "Payment terms: prepayment is allowed; net 30."


def _at(call: ModelCall, seconds: int, mk: ModuleType) -> ModelCall:
    return call.model_copy(update={"start_time": mk.T0 + timedelta(seconds=seconds)})


def test_a_step_before_the_answer_holding_the_clause_leaves_in_context_open(mk: ModuleType) -> None:
    # A compression step read v2 and wrote a summary without the cap; the answering call read the summary
    # and v1. Counted as reaching the model, the step's input gave ignored_by_model: whether the step's reply
    # carried the clause on or the context lost it, the trace does not show.
    step = _at(mk.model("m1", context=mk.V2_TEXT, output=SUMMARY), 1, mk)
    answer = _at(mk.model("m2", context=f"{SUMMARY}\n{mk.V1_TEXT}", output=mk.BAD), 2, mk)
    loc = mk.localize(mk.task(model_calls=(step, answer), answer=mk.BAD), mk.ticket(), None)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
    stage = loc.stages[2]
    assert stage.detail.startswith(
        "the clause of C-17/attachment@v2 reached the model input of model call m1 but not that of the call"
        " that wrote the answer (m2) nor of a call it continues"
    )
    assert stage.missing == (
        "the model input of the call that wrote the answer (m2) holding the clause or not",
    )


def test_a_call_after_the_answer_holding_the_clause_does_not_count(mk: ModuleType) -> None:
    answer = _at(mk.model("m1", context=mk.V1_TEXT, output=mk.BAD), 1, mk)
    title = _at(mk.model("m2", context=mk.V2_TEXT, output="Prepayment on order 7"), 2, mk)
    task = mk.task(model_calls=(answer, title), answer=mk.BAD).model_copy(
        update={"final_answer_span_id": "m1"}
    )
    loc = mk.localize(task, mk.ticket(), None)
    assert (loc.verdict, mk.statuses(loc)) == ("dropped_in_context", ["pass", "pass", "fail", "skipped"])
    # Start times not recorded: the call may have been made before the answer and fed it.
    bare = task.model_copy(
        update={"model_calls": tuple(c.model_copy(update={"start_time": None}) for c in task.model_calls)}
    )
    loc = mk.localize(bare, mk.ticket(), None)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])


def test_the_root_answer_names_the_call_whose_reply_it_is(mk: ModuleType) -> None:
    # The answer is the root's; the one call whose reply is that text answered, and the call after it (its
    # input not continuing the first) does not count: the clause it was sent did not reach the answer.
    answer = _at(mk.model("m1", context=mk.V1_TEXT, output=mk.BAD), 1, mk)
    title = _at(mk.model("m2", context=mk.V2_TEXT, output="Prepayment on order 7"), 2, mk)
    task = mk.task(model_calls=(answer, title), answer=mk.BAD).model_copy(
        update={"final_answer_span_id": "root"}
    )
    loc = mk.localize(task, mk.ticket(), None)
    assert (loc.verdict, mk.statuses(loc)) == ("dropped_in_context", ["pass", "pass", "fail", "skipped"])
    # No reply is the root's answer (the app rewrote it): either call may have written it, and one that
    # may have was not sent the clause.
    other = task.model_copy(update={"final_answer": f"{mk.BAD} (checked)"})
    loc = mk.localize(other, mk.ticket(), None)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
    assert "that of model call m1 (which no later call continues) may be the answer" in loc.stages[2].detail
    assert loc.stages[2].missing == (RECORD_ANSWER,)
    # The other call's reply not recorded: it may be the answer too, and the root's text names neither.
    unrecorded = task.model_copy(
        update={
            "model_calls": (answer, title.model_copy(update={"output_recorded": False, "output_text": None}))
        }
    )
    loc = mk.localize(unrecorded, mk.ticket(), None)
    assert loc.verdict == "unconfirmed"


def test_an_agent_loop_whose_answer_continues_the_call_holding_the_clause_passes(mk: ModuleType) -> None:
    # The answer is the root's and no reply is it (the app added a footer), so the call that wrote it is the
    # one no later call continues: the second, which re-sent the first's messages with a tool step. The
    # clause in the first call's input counts (it went on into the second's).
    sent = (Message(role="user", content=f"Context:\n{mk.V2_TEXT}\nQuestion: {mk.QUESTION}"),)
    asked = Message(role="assistant", content=None, tool_calls=({"id": "c1", "name": "check"},))
    first = ModelCall(
        span_id="m1",
        input_messages=sent,
        input_recorded=True,
        input_text=sent[0].content or "",
        output_recorded=True,
        output_messages=(asked,),
    )
    second = ModelCall(
        span_id="m2",
        input_messages=(*sent, asked, Message(role="tool", content="ok")),
        input_recorded=True,
        input_text="Question only",  # what is searched: the clause is in the first call's input alone
        output_recorded=True,
        output_text=mk.GOOD,
    )
    task = mk.task(
        model_calls=(_at(first, 1, mk), _at(second, 2, mk)), answer=f"{mk.GOOD}\n-- procurement bot"
    )
    task = task.model_copy(update={"final_answer_span_id": "root"})
    loc = mk.localize(task, mk.ticket(), None)
    assert (loc.verdict, mk.statuses(loc)[:3]) == ("no_fault", ["pass", "pass", "pass"])


def test_the_calls_normalize_found_may_have_answered_are_read_from_the_record(mk: ModuleType) -> None:
    # The clause only in the tool result the second call read. Normalize found the second call alone may
    # have answered (it continues the first): in_context passes. A record that does not say (built by hand,
    # answering_calls empty) leaves the first call's reply open as the answer too, and its input lacks it.
    sent = (Message(role="user", content=f"Question: {mk.QUESTION}"),)
    asked = Message(role="assistant", content=None, tool_calls=({"id": "c1", "name": "search"},))
    result = Message(role="tool", content=mk.V2_TEXT)
    first = ModelCall(
        span_id="m1",
        input_messages=sent,
        input_recorded=True,
        input_text=sent[0].content or "",
        output_recorded=True,
        output_messages=(asked,),
    )
    second = ModelCall(
        span_id="m2",
        input_messages=(*sent, asked, result),
        input_recorded=True,
        input_text=f"{sent[0].content}\n{mk.V2_TEXT}",
        output_recorded=True,
        output_text=mk.GOOD,
    )
    task = mk.task(
        model_calls=(_at(first, 1, mk), _at(second, 2, mk)), answer=f"{mk.GOOD}\n-- procurement bot"
    ).model_copy(update={"final_answer_span_id": "root", "answering_calls": ("m2",)})
    loc = mk.localize(task, mk.ticket(), None)
    assert (loc.verdict, mk.statuses(loc)[:3]) == ("no_fault", ["pass", "pass", "pass"])
    loc = mk.localize(task.model_copy(update={"answering_calls": ()}), mk.ticket(), None)
    assert (loc.verdict, mk.statuses(loc)[:3]) == ("unconfirmed", ["pass", "pass", "unconfirmed"])
    assert "that of model call m1 (which no later call continues) may be the answer" in loc.stages[2].detail
