"""Triage over an agent that calls the model again after answering (a memory summary, a title), traced by
the real opentelemetry-instrumentation-openai-v2: the post-answer reply is never read as the answer. With no
span recording the answer, which reply the user got is open and ``used_by_model`` stays unconfirmed, no
judge asked; with the answer on the agent span, triage reads it, and a clause only the post-answer call was
sent did not reach it (dropped_in_context). Fixtures from tests/fixtures/traces/record_post_answer.py."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.fixtures.traces._recording import ANSWER_RIGHT, ANSWER_STALE, CLAUSE_V2
from tests.localize.test_empty_answer import _Judge  # fails any answer not stating v2's cap, as on a title
from tracejudge.schema import RawSpan, TaskRecord

SUMMARY = "Hengda asked to prepay 45,000 RMB under C-17; attachment v1 had allowed up to 50,000 RMB."
REGIONS = [None, "CN", "EU"]


def _spans(mk: ModuleType, name: str) -> list[RawSpan]:
    return list(mk.read_otlp_file(mk.RECORDED / name))


def _triage(mk: ModuleType, spans: list[RawSpan], region: str | None, judge: _Judge | None = None) -> object:
    manifest = None if region is None else mk.recorded_manifest(region)
    return mk.localize(mk.normalize(spans), mk.ticket(), manifest, judge=judge)


def _answering(task: TaskRecord, text: str) -> str:
    (call,) = [c for c in task.model_calls if c.output_text == text]
    return call.span_id


@pytest.mark.parametrize(
    ("name", "answer"), [("post_answer_rag.pb", ANSWER_RIGHT), ("post_answer_ignored.pb", ANSWER_STALE)]
)
@pytest.mark.parametrize("region", REGIONS)
def test_a_reply_after_the_answer_is_not_read_as_the_answer(
    mk: ModuleType, name: str, answer: str, region: str | None
) -> None:
    spans = _spans(mk, name)
    task = mk.normalize(spans)
    tool_request, answered, after = task.model_calls
    assert (tool_request.output_text, answered.output_text) == (None, answer)
    assert [t["name"] for m in tool_request.output_messages for t in m.tool_calls] == ["check_prepayment"]
    assert after.model == "gpt-4.1-nano"
    assert task.final_answer is None
    (gap,) = [g for g in task.gaps if g.kind == "answer_uncertain"]
    assert gap.span_id == after.span_id
    # The call that asked for the tool was continued by the one that answered: only the answer is named.
    assert f"may be that of model call {_answering(task, answer)}, which" in gap.note
    judge = _Judge()
    loc = _triage(mk, spans, region, judge)
    assert loc.verdict == "unconfirmed"  # type: ignore[attr-defined]
    # The clause reached the call that answered but not the one after it, whose reply the user may have got:
    # whether it reached the answer's input is as open as which reply is the answer.
    assert mk.statuses(loc) == ["pass", "pass", "unconfirmed", "skipped"]
    in_context = loc.stages[2]  # type: ignore[attr-defined]
    assert in_context.detail.startswith(
        f"the clause of C-17/attachment@v2 reached the model input of model calls {tool_request.span_id},"
        f" {answered.span_id}, and the trace does not say which call's reply the user got: that of model call"
        f" {after.span_id} (which no later call continues) may be the answer"
    )
    assert in_context.missing == (gap.switch,)
    assert "gen_ai.output.messages on the agent span" in gap.switch
    # No judge is asked to read a summary or a title as the answer.
    assert judge.questions == []


@pytest.mark.parametrize("region", REGIONS)
def test_the_answer_the_agent_span_records_is_read(mk: ModuleType, region: str | None) -> None:
    spans = _spans(mk, "post_answer_recorded.pb")
    task = mk.normalize(spans)
    assert task.final_answer == ANSWER_RIGHT
    assert task.model_calls[-1].output_text == SUMMARY
    loc = _triage(mk, spans, region)
    assert (loc.verdict, mk.statuses(loc)) == ("no_fault", ["pass", "pass", "pass", "pass"])  # type: ignore[attr-defined]
    # Without the agent span's record the summary (which states v1's cap) is not read in its place: the
    # answer is open, where the last call's reply read as the answer gave ignored_by_model (DESIGN 5.5).
    loc = _triage(mk, _without_answer(spans), region)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])  # type: ignore[attr-defined]


def _without_answer(spans: list[RawSpan]) -> list[RawSpan]:
    """The spans without the agent span's record of the answer."""
    agent = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "invoke_agent")
    bare = agent.model_copy(
        update={"attributes": {k: v for k, v in agent.attributes.items() if k != "gen_ai.output.messages"}}
    )
    return [bare if s is agent else s for s in spans]


@pytest.mark.parametrize("region", REGIONS)
def test_the_clause_only_a_call_after_the_answer_was_sent_did_not_reach_the_answer(
    mk: ModuleType, region: str | None
) -> None:
    # The answering calls were sent v1's excerpt only; the memory summary, made after the answer (recorded on
    # the agent span), was sent both. Counted as reaching the model, the summary's input passed in_context
    # and the stale answer read ignored_by_model: the context that answered had dropped v2's clause.
    spans = _spans(mk, "post_answer_dropped.pb")
    task = mk.normalize(spans)
    _, answered, after = task.model_calls
    assert task.final_answer == answered.output_text == ANSWER_STALE
    assert CLAUSE_V2 in after.input_text
    assert CLAUSE_V2 not in answered.input_text
    loc = _triage(mk, spans, region)
    assert (loc.verdict, mk.statuses(loc)) == ("dropped_in_context", ["pass", "pass", "fail", "skipped"])  # type: ignore[attr-defined]
    in_context = loc.stages[2]  # type: ignore[attr-defined]
    assert "none of the 2 recorded model inputs up to the call that wrote the answer" in in_context.detail
    (note,) = [e.note for e in in_context.evidence if e.span_id == after.span_id]
    assert note.endswith(f"made after the call that wrote the answer ({answered.span_id}): not its input")
    # Without the agent span's record, which reply the user got is open, and with it whether the clause
    # reached the answer: unconfirmed, naming the call that may have answered without it.
    loc = _triage(mk, _without_answer(spans), region)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])  # type: ignore[attr-defined]
    assert f"that of model call {answered.span_id} (which no later call continues)" in loc.stages[2].detail  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "verdict", "last"),
    [("post_answer_rag.pb", "no_fault", "pass"), ("post_answer_ignored.pb", "ignored_by_model", "fail")],
)
def test_without_the_post_answer_call_the_agent_loops_last_reply_is_the_answer(
    mk: ModuleType, name: str, verdict: str, last: str
) -> None:
    # The same traces without the call made after the answer: the tool request was continued by the call
    # that answered, whose reply is the answer (the rule keeps an agent's loop definite).
    spans = [s for s in _spans(mk, name) if s.name != "chat gpt-4.1-nano"]
    assert len(spans) == 5
    task = mk.normalize(spans)
    assert not [g for g in task.gaps if g.kind == "answer_uncertain"]
    loc = _triage(mk, spans, "EU")
    assert (loc.verdict, mk.statuses(loc)) == (verdict, ["pass", "pass", "pass", last])  # type: ignore[attr-defined]
