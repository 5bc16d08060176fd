"""Triage over an agent that calls the model again after answering (a memory summary, a title), traced by
the real opentelemetry-instrumentation-openai-v2: the post-answer reply is never read as the answer. With no
span recording the answer, which reply the user got is open and ``used_by_model`` stays unconfirmed, no
judge asked; with the answer on the agent span, triage reads it. Fixtures from
tests/fixtures/traces/record_post_answer.py."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.fixtures.traces._recording import ANSWER_RIGHT, ANSWER_STALE
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
    assert mk.statuses(loc) == ["pass", "pass", "pass", "unconfirmed"]
    used = loc.stages[3]  # type: ignore[attr-defined]
    assert used.detail.startswith("which reply is the answer is not recorded: ")
    assert answered.span_id in used.detail
    assert used.missing == (gap.switch,)
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
    agent = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "invoke_agent")
    bare = agent.model_copy(
        update={"attributes": {k: v for k, v in agent.attributes.items() if k != "gen_ai.output.messages"}}
    )
    loc = _triage(mk, [bare if s is agent else s for s in spans], region)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])  # type: ignore[attr-defined]


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
