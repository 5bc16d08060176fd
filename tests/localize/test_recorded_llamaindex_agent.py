"""Triage on a LlamaIndex ``FunctionAgent`` traced by openinference-instrumentation-llama-index
(record_llamaindex_agent.py). The five runs' verdicts are in test_recorded_five_runs.py's table; here what is
particular to it: the tool's ``ToolOutput``, the LLM spans that only prepare a request, and the answer in the
root's ``StopEvent`` repr, which the instrumentation cuts at 200 characters.
"""

from __future__ import annotations

import json
from types import ModuleType

from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan

ROOT = "FunctionAgent.run"


def _replaced(spans: list[RawSpan], name: str, key: str, value: str) -> list[RawSpan]:
    def replace(span: RawSpan) -> RawSpan:
        return span.model_copy(update={"attributes": {**span.attributes, key: value}})

    return [replace(s) if s.name == name else s for s in spans]


def test_the_tool_result_is_the_tool_outputs_raw_output(mk: ModuleType) -> None:
    spans = mk.recorded_spans("llamaindex_agent_rag.pb")
    [tool] = [s for s in spans if s.name == "FunctionTool.acall"]
    output = json.loads(tool.attributes["output.value"])
    assert set(output) >= {"blocks", "tool_name", "raw_output"}
    loc = mk.triage_framework("llamaindex_agent_rag.pb", mk.policy_manifest("EU"))
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)


def test_only_the_calls_that_send_are_model_calls(mk: ModuleType) -> None:
    # Each model call is an LLM span that prepares the request beside the one that sends it: two calls.
    spans = mk.recorded_spans("llamaindex_agent_rag.pb")
    assert sum(s.name == "OpenAI._prepare_chat_with_tools" for s in spans) == 2
    calls = normalize(spans).model_calls
    assert [c.span_id for c in calls] == [s.span_id for s in spans if s.name == "OpenAI.astream_chat"]


def test_the_cut_answer_is_completed_by_the_call_that_wrote_it(mk: ModuleType) -> None:
    spans = mk.recorded_spans("llamaindex_agent_ignored.pb")
    [root] = [s for s in spans if s.name == ROOT]
    assert root.attributes["output.value"].endswith("...")
    [last] = [s for s in spans if s.name == "OpenAI.astream_chat"][-1:]
    task = normalize(spans)
    assert (task.final_answer, task.final_answer_span_id) == (
        last.attributes["llm.output_messages.0.message.content"],
        last.span_id,
    )
    # Without that call nothing completes the cut text: the answer is not read as the whole reply.
    task = normalize([s for s in spans if s.span_id != last.span_id])
    assert task.final_answer != last.attributes["llm.output_messages.0.message.content"]
    loc = mk.localize(task, mk.ticket(), mk.policy_manifest("EU"))
    assert loc.verdict == "unconfirmed"


def test_a_short_answer_is_read_whole_from_the_repr(mk: ModuleType) -> None:
    spans = mk.recorded_spans("llamaindex_agent_rag.pb")
    short = (
        "StopEvent(result=AgentOutput(response=ChatMessage(role=<MessageRole.ASSISTANT: 'assistant'>, "
        "additional_kwargs={}, blocks=[TextBlock(block_type='text', text='No: 30,000 RMB cap.')]), ...))"
    )
    task = normalize(_replaced(spans, ROOT, "output.value", short))
    [root] = [s for s in spans if s.name == ROOT]
    assert (task.final_answer, task.final_answer_span_id) == ("No: 30,000 RMB cap.", root.span_id)
    # A part shown too short to single out a reply completes nothing: the answer is that part, cut.
    cut = short.split("text=")[0] + "text='No: 30,..."
    task = normalize(_replaced(spans, ROOT, "output.value", cut))
    assert (task.final_answer, task.final_answer_span_id) == ("No: 30,", root.span_id)
    assert [g.kind for g in task.gaps if g.span_id == root.span_id] == ["model_output_truncated"]


CONTENT = "llm.output_messages.0.message.content"
# An answer and a draft of it that begin alike (the cut repr shows 39 characters) and state other caps.
ANSWER = "Under attachment v2 of contract C-17 the cap is 30,000 RMB per order, so 45,000 RMB is over it."
DRAFT = "Under attachment v2 of contract C-17 the terms may differ; I recall 50,000 RMB: 45,000 RMB is fine."


def _answered(mk: ModuleType, answer: str, draft: str | None = None) -> tuple[list[RawSpan], list[RawSpan]]:
    """The rag run answering ``answer`` (the last model call's reply; the root's repr of it cut at 200
    characters as the instrumentation cuts it), the first model call replying ``draft`` beside its tool
    call; and the two model calls."""
    spans = mk.recorded_spans("llamaindex_agent_rag.pb")
    [root] = [s for s in spans if s.name == ROOT]
    head = root.attributes["output.value"].split("text=")[0] + "text='"
    first, last = [s for s in spans if s.name == "OpenAI.astream_chat"]
    spans = _replaced(spans, ROOT, "output.value", (head + answer)[:197] + "...")
    spans = _set(spans, last.span_id, CONTENT, answer)
    if draft is not None:
        spans = _set(spans, first.span_id, CONTENT, draft)
    return spans, [first, last]


def _set(spans: list[RawSpan], span_id: str, key: str, value: str | None) -> list[RawSpan]:
    """The spans with one span's attribute ``key`` set to ``value`` (removed for None)."""

    def update(span: RawSpan) -> RawSpan:
        attributes = {k: v for k, v in span.attributes.items() if k != key}
        return span.model_copy(update={"attributes": attributes | ({} if value is None else {key: value})})

    return [update(s) if s.span_id == span_id else s for s in spans]


def test_a_cut_answer_no_reply_completes_is_read_as_cut(mk: ModuleType) -> None:
    # The part shown states v2's cap; past the cut the answer goes on to v1's. Without the reply that
    # completes it, the part is not read as the whole answer (it read no_fault).
    answer = (
        "No: the cap is 30,000 RMB per order, so 45,000 RMB exceeds it. Attachment v1 allowed 50,000 RMB "
        "and still governs Hengda, so 45,000 RMB is fine."
    )
    spans, [_, last] = _answered(mk, answer)
    loc = mk.localize(normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
    task = normalize(_set(spans, last.span_id, CONTENT, None))
    loc = mk.localize(task, mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
    assert task.final_answer == "No: the cap is 30,000 RMB per order, so"
    assert loc.stages[3].missing == (
        "the whole answer (the reply of the model call that wrote it: its llm.output_messages)",
    )


def test_a_reply_that_called_tools_does_not_complete_the_answer(mk: ModuleType) -> None:
    # The first call's reply begins as the answer does and states v1's cap beside its tool call: a step of
    # the run, not its response. Without the last call's reply it is not read as the answer (it read
    # ignored_by_model where the answer is v2's).
    answer, draft = ANSWER, DRAFT
    spans, [_, last] = _answered(mk, answer, draft)
    task = normalize(spans)
    assert (task.final_answer, task.final_answer_span_id) == (answer, last.span_id)
    assert mk.localize(task, mk.ticket(), mk.policy_manifest("EU")).verdict == "no_fault"
    task = normalize(_set(spans, last.span_id, CONTENT, None))
    loc = mk.localize(task, mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
    assert task.final_answer == "Under attachment v2 of contract C-17 th"


def test_no_earlier_reply_completes_the_answer_of_a_call_not_received(mk: ModuleType) -> None:
    # A first reply that called no tool (none ran) and begins as the answer: the last call's span did not
    # arrive (its request's _prepare_chat_with_tools span did), so its reply, the answer, is unknown.
    answer, draft = ANSWER, DRAFT
    spans, [_, last] = _answered(mk, answer, draft)
    spans = [
        s.model_copy(
            update={"attributes": {k: v for k, v in s.attributes.items() if ".tool_calls." not in k}}
        )
        for s in spans
        if s.span_id != last.span_id and s.name != "FunctionTool.acall"
    ]
    task = normalize(spans)
    assert task.final_answer != draft
    assert task.final_answer == "Under attachment v2 of contract C-17 th"
    assert any(g.kind == "model_output_truncated" for g in task.gaps)
