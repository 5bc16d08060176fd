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
    # A part shown too short to single out a reply completes nothing.
    cut = short.split("text=")[0] + "text='No: 30,...'"[:-4] + "..."
    task = normalize(_replaced(spans, ROOT, "output.value", cut))
    assert task.final_answer == cut
