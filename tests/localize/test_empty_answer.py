"""A model output recorded empty is read as empty, not as missing: its gap says the model returned no text
(no content-capture switch is named — capture was on), and ``used_by_model`` stays unconfirmed, no judge
asked and no earlier call's text read as the answer (DESIGN 5.5: an empty answer states nothing a verdict
can rest on). Through the real openinference-instrumentation-openai and openai client against the local
OpenAI stand-in, the real SDK's OTLP encoder and tracejudge's decoder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from openinference.instrumentation import TraceConfig
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.localize import conftest as mk
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import Evidence, Localization, RawSpan, StageResult, TaskRecord, UsageQuestion
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge_collectors.otel import decode_protobuf

# What the first of two calls says before the last answers: it states v1's cap, as an agent's draft may.
DRAFT = "Checking: attachment v1 allowed prepayment up to 50,000 RMB; let me confirm the current terms."


def _trace(
    replies: list[Rule],
    config: TraceConfig | None = None,
    instrumentor: Any = None,
    ask: Callable[[openai.OpenAI], None] | None = None,
) -> list[RawSpan]:
    """A RAG trace (root CHAIN, the retriever returning v2, then one chat call per reply, each sent v2's
    clause — or the calls ``ask`` makes) whose chat calls the OpenInference OpenAI instrumentation records
    (or ``instrumentor``, another instrumentation of the openai client); the root records no output, so the
    answer is the last call's."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag-app")
    if instrumentor is None:
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider, config=config or TraceConfig())
    else:
        instrumentor.instrument(tracer_provider=provider)
    try:
        with ScriptedOpenAIServer(replies) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-not-a-secret", max_retries=0)
            with tracer.start_as_current_span("agent") as root:
                root.set_attribute("openinference.span.kind", "CHAIN")
                root.set_attribute("input.value", mk.QUESTION)
                with tracer.start_as_current_span("retrieve") as span:
                    span.set_attribute("openinference.span.kind", "RETRIEVER")
                    span.set_attribute("retrieval.documents.0.document.id", f"{mk.DOC}@v2")
                    span.set_attribute("retrieval.documents.0.document.content", mk.V2_TEXT)
                if ask is None:
                    mk.ask_each(client, len(replies))
                else:
                    ask(client)
    finally:
        instrumentor.uninstrument()
    return decode_protobuf(encode_spans(exporter.get_finished_spans()).SerializeToString()).spans


def drafted(draft: str, answer: str) -> list[RawSpan]:
    """``_trace``'s app with an agent's two calls: the first replies ``draft`` and asks for a tool, the second
    is sent the first's messages, that reply and the tool's result, and replies ``answer`` — it continues
    the first (the order its messages show, whatever the clocks say), so ``answer`` is the answer."""

    def ask(client: openai.OpenAI) -> None:
        first = client.chat.completions.create(model="scripted-model", messages=mk.RAG_MESSAGES)
        message = first.choices[0].message
        (request,) = message.tool_calls or ()
        turn = {"role": "assistant", "content": message.content, "tool_calls": [request.model_dump()]}
        result = {"role": "tool", "tool_call_id": request.id, "content": "the terms in the context apply"}
        client.chat.completions.create(model="scripted-model", messages=[*mk.RAG_MESSAGES, turn, result])

    check = {"name": "check_terms", "arguments": {"order": 7}}
    return _trace([Rule(reply=draft, tool_calls=[check], times=1), Rule(reply=answer)], ask=ask)


def retried(answer: str) -> list[RawSpan]:
    """``_trace``'s app asking once, the stand-in failing that call (HTTP 500), and asking again the same:
    the retry's reply ``answer`` is the answer."""

    def ask(client: openai.OpenAI) -> None:
        try:
            mk.ask_each(client, 1)
        except openai.InternalServerError:
            mk.ask_each(client, 1)

    return _trace([Rule(status=500, times=1), Rule(reply=answer)], ask=ask)


class _Judge:
    """A usage judge that reads any answer not stating v2's cap as not resting on v2."""

    def __init__(self) -> None:
        self.questions: list[UsageQuestion] = []

    def judge_usage(self, question: UsageQuestion) -> StageResult:
        self.questions.append(question)
        status = "pass" if "30,000" in question.answer else "fail"
        evidence = Evidence(span_id=question.answer_span_id or "", note="read the answer")
        return StageResult(name="used_by_model", status=status, detail="judged", evidence=(evidence,))


def _triage(task: TaskRecord, judge: _Judge) -> Localization:
    return localize(task, mk.ticket(), [mk.entry(acl=None), mk.v1_entry()], judge=judge)


def _used(loc: Localization) -> StageResult:
    return next(s for s in loc.stages if s.name == "used_by_model")


def test_an_empty_model_output_reads_empty_not_missing() -> None:
    task = normalize(_trace([Rule(reply="", finish_reason="length")]))
    (call,) = task.model_calls
    assert task.final_answer is None
    gaps = {g.kind: g for g in task.gaps}
    assert "model_output_not_recorded" not in gaps
    assert "no_final_answer" not in gaps
    empty = gaps["model_output_empty"]
    assert empty.span_id == call.span_id
    assert (
        empty.detail
        == "the model output was recorded empty: the response's message has no text (finish_reason length)"
    )
    assert empty.switch == ""
    # Content capture was on: no gap asks to turn it on.
    assert not [g for g in task.gaps if "OPENINFERENCE_HIDE" in g.detail]

    judge = _Judge()
    loc = _triage(task, judge)
    assert loc.verdict == "unconfirmed"
    used = _used(loc)
    assert used.status == "unconfirmed"
    assert used.detail.startswith(f"the answer was recorded empty (span {call.span_id}: the model output was")
    assert used.missing == (f"an answer with text (model span {call.span_id} returned none)",)
    assert "content capture" not in " ".join(used.missing)
    assert judge.questions == []


# OpenInference's instrumentation, and OTel GenAI's (openai-v2) defined below: each the real one.
_RECORDERS = [pytest.param("openinference", id="openinference"), pytest.param("genai", id="genai")]


def _recorded(recorder: str, replies: list[Rule]) -> list[RawSpan]:
    return _trace(replies) if recorder == "openinference" else mk.genai_rag_trace(replies)


@pytest.mark.parametrize("recorder", _RECORDERS)
def test_an_empty_last_output_is_the_answer_not_an_earlier_calls_text(recorder: str) -> None:
    # The draft states v1's cap: read as the answer, used_by_model would fail it (ignored_by_model).
    task = normalize(_recorded(recorder, [Rule(reply=DRAFT, times=1), Rule(reply="")]))
    first, last = task.model_calls
    assert first.output_text == DRAFT
    assert task.final_answer is None
    assert [g.span_id for g in task.gaps if g.kind == "model_output_empty"] == [last.span_id]
    judge = _Judge()
    loc = _triage(task, judge)
    assert loc.verdict == "unconfirmed"
    assert _used(loc).status == "unconfirmed"
    assert judge.questions == []


@pytest.mark.parametrize("recorder", _RECORDERS)
def test_an_answer_with_text_is_read_as_before(recorder: str) -> None:
    task = normalize(_recorded(recorder, [Rule(reply=mk.GOOD)]))
    assert task.final_answer == mk.GOOD
    assert not [g for g in task.gaps if g.kind in ("model_output_empty", "model_output_not_recorded")]
    assert _triage(task, _Judge()).verdict == "no_fault"


def test_a_hidden_output_still_asks_for_the_switch() -> None:
    # Hidden, the response body is gone too: nothing shows the output was empty, so it reads as not recorded.
    task = normalize(_trace([Rule(reply="")], TraceConfig(hide_outputs=True)))
    kinds = {g.kind for g in task.gaps}
    assert "model_output_empty" not in kinds
    assert kinds & {"model_output_not_recorded", "model_output_redacted"}
    assert any("OPENINFERENCE_HIDE_OUTPUTS" in g.detail for g in task.gaps)
    assert _used(_triage(task, _Judge())).status == "unconfirmed"


def test_a_last_output_not_recorded_is_not_replaced_by_an_earlier_calls_text() -> None:
    # The last call answered with v2's cap, and its output was lost (an exporter dropped those attributes):
    # the draft before it, stating v1's cap, is not the answer and read as one it fails used_by_model.
    spans = drafted(DRAFT, mk.GOOD)
    last = max((s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"), key=_started)
    lost = last.model_copy(
        update={
            "attributes": {
                k: v
                for k, v in last.attributes.items()
                if not (k.startswith(("llm.output_messages", "output.")))
            }
        }
    )
    task = normalize([lost if s is last else s for s in spans])
    first, second = task.model_calls
    assert first.output_text == DRAFT
    assert second.span_id == last.span_id
    assert not second.output_text
    assert task.final_answer is None
    assert [g.span_id for g in task.gaps if g.kind == "no_final_answer"] == [None]
    judge = _Judge()
    loc = _triage(task, judge)
    assert loc.verdict == "unconfirmed"
    assert _used(loc).status == "unconfirmed"
    assert judge.questions == []
    # Whole, the same trace is no fault: the loss moved the verdict toward unconfirmed only.
    assert _triage(normalize(spans), _Judge()).verdict == "no_fault"


def _started(span: RawSpan) -> int:
    return span.start_time_unix_nano


def test_an_empty_genai_output_reads_empty_not_missing() -> None:
    # The GenAI instrumentation records the reply as one text part whose content is "": the model said
    # nothing, with content capture on. It read as not recorded, naming the capture switch to turn on.
    task = normalize(mk.genai_rag_trace([Rule(reply="", finish_reason="length")]))
    (call,) = task.model_calls
    assert call.output_messages[0].content == ""
    assert task.final_answer is None
    gaps = {g.kind: g for g in task.gaps}
    assert "model_output_not_recorded" not in gaps
    assert "no_final_answer" not in gaps
    empty = gaps["model_output_empty"]
    assert (empty.span_id, empty.switch) == (call.span_id, "")
    assert empty.detail == (
        "the model output was recorded empty: its message's content is the empty text (finish_reason length)"
    )
    assert "CAPTURE_MESSAGE_CONTENT" not in " ".join(g.detail for g in task.gaps)
    judge = _Judge()
    loc = _triage(task, judge)
    assert loc.verdict == "unconfirmed"
    assert _used(loc).detail.startswith(f"the answer was recorded empty (span {call.span_id}")
    assert judge.questions == []


def test_a_genai_reply_recorded_with_no_part_reads_empty_not_hidden() -> None:
    # openai-v2 records a chat refusal (OpenAI's message refusal, content null) as a message with no part and
    # its finish reason: capture was on, nothing was hidden, and no switch records the refusal.
    from tests.localize.test_refusal import refusal_body

    task = normalize(mk.genai_rag_trace([Rule(raw_body=refusal_body())]))
    (call,) = task.model_calls
    gaps = {g.kind: g for g in task.gaps}
    assert "model_output_not_recorded" not in gaps
    assert (gaps["model_output_empty"].span_id, gaps["model_output_empty"].switch) == (call.span_id, "")
    assert gaps["model_output_empty"].detail == (
        "the model output was recorded empty: its message holds no part: no text, tool call or refusal"
        " (finish_reason stop)"
    )
    assert "CAPTURE_MESSAGE_CONTENT" not in " ".join(g.detail for g in task.gaps)
    assert _triage(task, _Judge()).verdict == "unconfirmed"


def test_a_reply_withheld_by_a_content_filter_reads_empty_not_hidden() -> None:
    # OpenLLMetry's recorded Azure OpenAI reply withheld by the content filter (tests/fixtures/outside): its
    # gaps asked to set TRACELOOP_TRACE_CONTENT=true, which was set.
    import json

    from tests.fixtures.outside import _formats as fmt
    from tracejudge_collectors.otel import decode_json

    request = fmt.openllmetry_azure_chat("test_chat_content_filtering", "0000000000000000000000000000d001")
    task = normalize(decode_json(json.dumps(request)).spans)
    gaps = {g.kind: g for g in task.gaps}
    assert not {"model_output_not_recorded", "no_final_answer"} & set(gaps)
    assert gaps["model_output_empty"].detail.endswith("(finish_reason content_filter)")
    assert "TRACELOOP_TRACE_CONTENT" not in " ".join(g.detail for g in task.gaps)
