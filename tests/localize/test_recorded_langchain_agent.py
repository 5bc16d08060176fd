"""Triage over LangChain 1.x's ``create_agent`` traced by openinference-instrumentation-langchain: the search
tool's TOOL span records the ``ToolMessage`` it returned, serialized (``{"type": "tool", "data": {"content":
...}}``), whose content holds the documents (``_langchain.py``); the graph root's output is the agent state,
not the answer. The tool records its filter on its own span through the instrumentor's ``get_span``.
Fixtures from tests/fixtures/traces/record_langchain_agent.py (the app and its runs: _policy.py); the same
agent under OpenLLMetry's opentelemetry-instrumentation-langchain from record_langchain_agent_openllmetry.py
(its five runs' verdicts are in test_recorded_five_runs.py's table).
"""

from __future__ import annotations

import json
from types import ModuleType

FILE = "langchain_agent_{run}.pb"
ANSWER = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."


def test_the_tool_messages_content_is_the_result_and_the_state_is_not_the_answer(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans(FILE.format(run="rag")))
    [tool] = record.tool_calls
    assert tool.name == "search_documents"
    assert [(d.doc_id, d.version) for d in tool.documents or ()] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]
    assert record.final_answer == ANSWER == record.model_calls[-1].output_text
    # an unmarked tool: without the manifest nothing says its records are documents
    assert record.retrievals == ()
    assert mk.triage_framework(FILE.format(run="rag"), None).verdict == "unconfirmed"


def test_under_openllmetry_the_tool_messages_constructor_form_is_read(mk: ModuleType) -> None:
    # OpenLLMetry's execute_tool span holds {"output": <ToolMessage in LangChain's constructor form>}: its
    # kwargs.content is the result, the documents v2 then v1.
    spans = mk.recorded_spans("langchain_agent_openllmetry_rag.pb")
    [span] = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    result = json.loads(span.attributes["gen_ai.tool.call.result"])
    assert result["output"]["id"][-1] == "ToolMessage"
    record = mk.normalize(spans)
    [tool] = record.tool_calls
    assert [(d.doc_id, d.version) for d in tool.documents or ()] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]
    # the answer is the last model call's output (the graph's root records no output)
    assert record.final_answer == ANSWER == record.model_calls[-1].output_text
    assert mk.triage_framework("langchain_agent_openllmetry_rag.pb", None).verdict == "unconfirmed"


def test_without_the_last_calls_text_an_earlier_reply_is_not_the_answer(mk: ModuleType) -> None:
    # The first call's reply states v1's cap beside its tool call (a draft); the last call answers with v2's.
    # Its output lost, the draft was read as the answer: ignored_by_model where the run is no_fault.
    spans = mk.recorded_spans("langchain_agent_openllmetry_rag.pb")
    first, last = [s for s in spans if s.name == "ChatOpenAI.chat"]
    draft = "I recall the cap is 50,000 RMB, so 45,000 RMB is fine; checking the documents."
    # The request the last call re-sends (its id and arguments): the draft's reply asked for it.
    (request,) = [t for m in mk.normalize(spans).model_calls[-1].input_messages for t in m.tool_calls]
    reply = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": draft}, {"type": "tool_call", **request}],
            "finish_reason": "tool_calls",
        }
    ]
    attributes = {**first.attributes, "gen_ai.output.messages": json.dumps(reply)}
    spans = [s.model_copy(update={"attributes": attributes}) if s is first else s for s in spans]
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert loc.verdict == "no_fault"
    lost = {k: v for k, v in last.attributes.items() if k != "gen_ai.output.messages"}
    record = mk.normalize([s.model_copy(update={"attributes": lost}) if s is last else s for s in spans])
    loc = mk.localize(record, mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
    assert record.final_answer is None
    # The gap names the output missing (an earlier call did record text).
    [gap] = [g for g in record.gaps if g.kind == "no_final_answer"]
    assert (
        gap.note
        == f"the root span recorded no answer, nor did the last model call ({last.span_id}) record text"
    )
    assert loc.stages[3].missing == (f"output of model span {last.span_id} (content capture was off)",)
