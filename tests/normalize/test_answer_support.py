"""Over every recorded fixture: each model call the answer rule reads as continued (not a rival for the
answer, ``_answer.earlier_answers``) must have a recorded reply that supports it — a tool request (which
``_follows`` compares with the turn the later call re-sends) or the reply a retry repeated.

Some instrumentations record such a reply beside the call's output, and the answer rule reads it there
(``_replied.replied_requests``): AgentOps' ``tool_call.<name>`` child span of the call (the request's name,
arguments and id), OpenLLMetry's LangChain the ``execute_task model`` parent's ``gen_ai.task.output`` (the
``AIMessage`` with its tool calls, told the call's by its response id), OpenLLMetry's mistralai its finish
reason ``tool_calls`` (no request recorded), OpenLLMetry's Ollama a reply recorded by its role alone beside a
recorded input (its content, recorded whenever there is any, was empty: no text, so no answer). Their
families are listed (``ELSEWHERE``), each with what supports it; this census finds the support on the raw
spans, apart from the reader. No call of a fixture is read as continued with nothing recorded of its reply
(``_follows``' last "nothing to compare", still taken as continued: see its docstring). A family that
joins either list, or leaves it, fails this test.

The answer rule reads those records, not only this census: a request recorded there that the later call's
re-sent turn contradicts makes the call a rival, and without the record the call is read as before. A reply
no record holds is taken as continued only while no other call sent the same input recorded the re-sent
request as its reply.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tracejudge.normalize import earlier_answers, normalize
from tracejudge.schema import Message, ModelCall, RawSpan, TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
RUNS = ("rag", "ignored", "filtered", "dropped", "never_indexed")

# fixture -> the record beside the continued call's output that supports reading it so.
ELSEWHERE = {
    **{f"agentops_{run}.pb": "request span" for run in RUNS},
    **{f"langchain_agent_openllmetry_{run}.pb": "task output" for run in RUNS},
    **{f"mistral_openllmetry_objects_{run}.pb": "finish reason" for run in RUNS},
    **{f"ollama_openllmetry_{app}_{run}.pb": "no text" for app in ("tool", "stream") for run in RUNS},
}
# fixture -> calls read as continued with nothing recorded of their reply.
UNSUPPORTED: dict[str, list[str]] = {}


def _supported(call: ModelCall, record: TaskRecord) -> bool:
    """Whether the call's output supports reading it as continued: it asked for a tool, or a later call
    repeated it (a retry)."""
    if any(message.tool_calls for message in call.output_messages):
        return True
    return call.output_text is not None and call.output_text == record.model_calls[-1].output_text


def _continued(record: TaskRecord) -> list[ModelCall]:
    """The calls read as continued (not among the calls that may have written the answer) whose output does
    not support it."""
    if record.final_answer_span_id is None or not record.model_calls:
        return []
    return [
        call
        for call in record.model_calls[:-1]
        if call.span_id not in record.answering_calls and not _supported(call, record)
    ]


def _elsewhere(span: RawSpan, spans: Sequence[RawSpan]) -> str | None:
    """What record beside the call's output says its reply asked for a tool or wrote no text."""
    attrs = span.attributes
    if any(s.parent_span_id == span.span_id and s.name.startswith("tool_call.") for s in spans):
        return "request span"
    parent = next((s for s in spans if s.span_id == span.parent_span_id), None)
    output = parent.attributes.get("gen_ai.task.output") if parent is not None else None
    if isinstance(output, str) and any(
        m.get("response_metadata", {}).get("id") == attrs.get("gen_ai.response.id") and m.get("tool_calls")
        for m in _messages(json.loads(output))
    ):
        return "task output"
    if attrs.get("gen_ai.completion.0.finish_reason") == "tool_calls":
        return "finish reason"
    prompts = [k for k in attrs if k.startswith("gen_ai.prompt.") and k.endswith(".content")]
    completion = {k for k in attrs if k.startswith("gen_ai.completion.")}
    if attrs.get("gen_ai.system") == "Ollama" and prompts and completion == {"gen_ai.completion.0.role"}:
        return "no text"
    return None


def _messages(value: Any) -> Iterator[dict[str, Any]]:
    """The kwargs of every LangChain message in constructor form within the value."""
    if isinstance(value, list):
        for item in value:
            yield from _messages(item)
    elif isinstance(value, dict):
        if value.get("type") == "constructor" and isinstance(value.get("kwargs"), dict):
            yield value["kwargs"]
        else:
            for item in value.values():
                yield from _messages(item)


def test_every_call_read_as_continued_has_a_recorded_reply_that_supports_it() -> None:
    elsewhere: dict[str, list[str]] = {}
    unsupported: dict[str, list[str]] = {}
    for path in sorted(TRACES.glob("*.pb")):
        spans = list(read_otlp_file(path))
        by_id = {span.span_id: span for span in spans}
        for call in _continued(normalize(spans)):
            found = _elsewhere(by_id[call.span_id], spans)
            if found is None:
                unsupported.setdefault(path.name, []).append(call.span_id)
            else:
                elsewhere.setdefault(path.name, []).append(found)
    assert unsupported == UNSUPPORTED
    # One call each: the first, whose tool request the second call re-sends.
    assert elsewhere == {name: [what] for name, what in ELSEWHERE.items()}


def _edited(name: str, span_name: str, **attributes: Any) -> list[RawSpan]:
    """The fixture's spans, the first span named ``span_name`` with ``attributes`` set (None: removed)."""
    spans = list(read_otlp_file(TRACES / name))
    at = next(i for i, span in enumerate(spans) if span.name == span_name)
    attrs = {**spans[at].attributes, **attributes}
    spans[at] = spans[at].model_copy(update={"attributes": {k: v for k, v in attrs.items() if v is not None}})
    return spans


def test_a_request_span_the_re_sent_turn_contradicts_makes_the_call_a_rival() -> None:
    # AgentOps: the root records the answer; the first call's request searched other words than the turn
    # the second call re-sends, so that turn is another reply's and the first may have given the answer.
    spans = _edited("agentops_rag.pb", "tool_call.search_documents", **{"tool.parameters": '{"query": "x"}'})
    record = normalize(spans)
    assert record.answering_calls == tuple(call.span_id for call in record.model_calls)
    # As recorded, the request is the re-sent turn: only the last call may have answered.
    record = normalize(list(read_otlp_file(TRACES / "agentops_rag.pb")))
    assert record.answering_calls == (record.model_calls[-1].span_id,)


def test_a_task_output_the_re_sent_turn_contradicts_leaves_the_answer_open() -> None:
    name = "langchain_agent_openllmetry_rag.pb"
    spans = list(read_otlp_file(TRACES / name))
    first = next(span for span in spans if span.name == "ChatOpenAI.chat")
    node = next(span for span in spans if span.span_id == first.parent_span_id)
    output = node.attributes["gen_ai.task.output"].replace("prepayment per order", "prepayment cap")
    record = normalize(
        _edited(name, node.name, **{"gen_ai.task.output": output, "traceloop.entity.output": None})
    )
    assert record.final_answer is None
    assert any(gap.kind == "answer_uncertain" for gap in record.gaps)
    assert normalize(spans).final_answer is not None


def test_without_the_record_the_call_is_read_as_before() -> None:
    # The request span lost: nothing recorded of the first reply, the re-sent turn is taken for it.
    spans = [s for s in read_otlp_file(TRACES / "agentops_rag.pb") if not s.name.startswith("tool_call.")]
    record = normalize(spans)
    assert record.answering_calls == (record.model_calls[-1].span_id,)
    # mistralai's finish reason lost: likewise, the answer is read from the last call.
    record = normalize(
        _edited(
            "mistral_openllmetry_objects_rag.pb",
            "mistralai.chat",
            **{"gen_ai.completion.0.finish_reason": None},
        )
    )
    assert record.final_answer is not None


def _call(span: str, sent: list[Message], reply: Message) -> ModelCall:
    return ModelCall(
        span_id=span,
        input_messages=tuple(sent),
        output_messages=(reply,),
        input_recorded=True,
        input_text="\n".join(m.content or "" for m in sent),
        output_recorded=bool(reply.content or reply.tool_calls),
        output_text=reply.content,
    )


def test_a_reply_not_recorded_whose_turn_another_call_gave_is_a_rival() -> None:
    # Two calls were sent the question; the second's recorded reply asked for the search the last call
    # re-sends. The first call's reply, not recorded, is not that turn: it may have been the answer.
    question = [Message(role="system", content="Cite the contract."), Message(role="user", content="Prepay?")]
    search = {"id": "call_1", "name": "search", "arguments": {"query": "prepayment"}}
    asked = Message(role="assistant", content=None, tool_calls=(search,))
    first = _call("a", question, Message(role="assistant", content=None))
    second = _call("b", question, asked)
    last = _call(
        "c",
        [*question, asked, Message(role="tool", content="cap 30,000")],
        Message(role="assistant", content="No."),
    )
    times = {"a": (1, 2), "b": (3, 4), "c": (5, 6)}
    assert earlier_answers([first, second, last], times) == [first]
    # With no call claiming it, the turn is taken for the first call's reply (as before).
    assert earlier_answers([first, last], times) == []
    assert earlier_answers([second, last], times) == []
    # A record beside the first call's output saying it asked for a tool (its finish reason): continued.
    assert earlier_answers([first, second, last], times, replied={"a": ({},)}) == []
