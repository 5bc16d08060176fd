"""Hand-written spans per convention: each reader and each gap, in table form."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tracejudge._errors import InputError
from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan, SpanEvent, TaskRecord

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT = "00000000000000a0"


def span(
    span_id: str, attrs: dict[str, Any], *, parent: str | None = ROOT, start: int = 0, **kw: Any
) -> RawSpan:
    return RawSpan(
        trace_id=TRACE,
        span_id=span_id.rjust(16, "0"),
        parent_span_id=parent,
        name=kw.pop("name", f"span-{span_id}"),
        start_time_unix_nano=start or 1_780_000_000_000_000_000 + int(span_id, 16),
        end_time_unix_nano=1_780_000_000_100_000_000,
        attributes=attrs,
        **kw,
    )


def root(attrs: dict[str, Any] | None = None) -> RawSpan:
    return span("a0", attrs or {}, parent=None, name="root")


def kinds(record: TaskRecord) -> set[str]:
    return {g.kind for g in record.gaps}


# --- retrieval documents: one row per dialect ---------------------------------------------------

DOC_CASES = [
    pytest.param(
        {
            "openinference.span.kind": "RETRIEVER",
            "input.value": "cap?",
            "retrieval.documents.0.document.id": "n1",
            "retrieval.documents.0.document.content": "text one",
            "retrieval.documents.0.document.metadata": '{"doc_id": "D", "version": "v2"}',
            "retrieval.documents.1.document.id": 7,
            "retrieval.documents.1.document.content": "text two",
            "retrieval.documents.1.document.metadata": {"source": "S"},
        },
        [],
        id="openinference-json-and-structured-metadata",
    ),
    pytest.param(
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": "cap?",
            "gen_ai.retrieval.documents": json.dumps(
                [
                    {"id": "n1", "content": "text one", "metadata": {"doc_id": "D", "version": "v2"}},
                    {"id": 7, "content": "text two", "metadata": {"source": "S"}},
                ]
            ),
        },
        [],
        id="genai-json-string",
    ),
    pytest.param(
        {
            "langfuse.observation.type": "RETRIEVER",
            "langfuse.observation.input": '{"query": "cap?"}',
            "langfuse.observation.output": json.dumps(
                {
                    "documents": [
                        {
                            "id": "n1",
                            "page_content": "text one",
                            "metadata": {"doc_id": "D", "version": "v2"},
                        },
                        {"id": 7, "text": "text two", "metadata": '{"source": "S"}'},
                    ]
                }
            ),
        },
        [],
        id="langfuse-documents-wrapper",
    ),
    pytest.param(
        {"db.system": "chroma", "db.operation": "query", "traceloop.entity.input": '{"args": ["cap?"]}'},
        [
            SpanEvent(
                name="db.query.result",
                attributes={
                    "db.query.result.id": "n1",
                    "db.query.result.document": "text one",
                    "db.query.result.metadata": '{"doc_id": "D", "version": "v2"}',
                },
            ),
            SpanEvent(
                name="db.query.result",
                attributes={
                    "db.query.result.id": "7",
                    "db.query.result.document": "text two",
                    "db.query.result.metadata": "{'source': 'S'}",
                },
            ),
        ],
        id="openllmetry-events-python-literal-metadata",
    ),
]


@pytest.mark.parametrize(("attrs", "events"), DOC_CASES)
def test_retrieval_documents_every_dialect(attrs: dict[str, Any], events: list[SpanEvent]) -> None:
    record = normalize([root(), span("b1", attrs, events=tuple(events))])
    [call] = record.retrievals
    assert call.query == "cap?"
    assert [(d.doc_id, d.version, d.content) for d in call.documents] == [
        ("D", "v2", "text one"),
        ("S", None, "text two"),
    ]
    assert call.documents[1].raw_id == "7"
    assert call.documents_recorded
    assert "retrieval_documents_not_recorded" not in kinds(record)


# --- model input: one row per message dialect ---------------------------------------------------

MESSAGE_CASES = [
    pytest.param(
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "SYS",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.contents.0.message_content.type": "text",
            "llm.input_messages.1.message.contents.0.message_content.text": "CLAUSE",
            "llm.input_messages.1.message.contents.1.message_content.text": "ASK",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "ANSWER",
        },
        id="openinference-flattened-with-contents",
    ),
    pytest.param(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "SYS"}]),
            "gen_ai.input.messages": [
                {
                    "role": "user",
                    "parts": [{"type": "text", "content": "CLAUSE"}, {"type": "text", "content": "ASK"}],
                }
            ],
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": "ANSWER"}],
                        "finish_reason": "stop",
                    }
                ]
            ),
        },
        id="genai-structured-input-json-output",
    ),
    pytest.param(
        {
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "SYS",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": json.dumps(
                [{"type": "text", "text": "CLAUSE"}, {"type": "text", "text": "ASK"}]
            ),
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "ANSWER",
        },
        id="openllmetry-prompt-completion",
    ),
    pytest.param(
        {
            "gen_ai.operation.name": "chat",
            # A string array, one JSON message per element (attribute arrays must be homogeneous).
            "gen_ai.input.messages": [
                json.dumps({"role": "system", "parts": [{"type": "text", "content": "SYS"}]}),
                json.dumps({"role": "user", "parts": [{"type": "text", "content": "CLAUSE ASK"}]}),
            ],
            "gen_ai.output.messages": [
                json.dumps({"role": "assistant", "parts": [{"type": "text", "content": "ANSWER"}]})
            ],
        },
        id="genai-array-of-json-strings",
    ),
    pytest.param(
        {
            "langfuse.observation.type": "GENERATION",
            "langfuse.observation.input": json.dumps(
                {
                    "messages": [
                        {"role": "system", "content": "SYS"},
                        {"role": "user", "content": "CLAUSE\nASK"},
                    ]
                }
            ),
            "langfuse.observation.output": json.dumps({"role": "assistant", "content": "ANSWER"}),
        },
        id="langfuse-messages-wrapper",
    ),
    pytest.param(
        {
            "openinference.span.kind": "LLM",
            "input.value": json.dumps(
                {
                    "model": "m",
                    "messages": [
                        {"role": "system", "content": "SYS"},
                        {"role": "user", "content": "CLAUSE\nASK"},
                    ],
                }
            ),
            "output.value": json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": "ANSWER"}}]}
            ),
        },
        id="openinference-input-value-only",
    ),
]


@pytest.mark.parametrize("attrs", MESSAGE_CASES)
def test_model_messages_every_dialect(attrs: dict[str, Any]) -> None:
    record = normalize([root(), span("c1", attrs)])
    [call] = record.model_calls
    assert "SYS" in call.input_text
    assert "CLAUSE" in call.input_text
    assert "ASK" in call.input_text
    assert call.input_text.index("SYS") < call.input_text.index("CLAUSE") < call.input_text.index("ASK")
    assert call.input_recorded
    assert not call.input_redacted
    assert call.output_text == "ANSWER"
    assert record.final_answer == "ANSWER"
    assert record.input is not None
    assert "ASK" in record.input
    assert not kinds(record) & {
        "model_input_not_recorded",
        "model_output_not_recorded",
        "attribute_unparseable",
    }


# --- gaps ----------------------------------------------------------------------------------------

GAP_CASES = [
    pytest.param([root()], {"no_retrieval_span", "no_model_span", "no_final_answer"}, id="empty-trace"),
    pytest.param(
        [root(), span("b1", {"openinference.span.kind": "RETRIEVER", "input.value": "q"})],
        {"retrieval_documents_not_recorded"},
        id="retriever-without-documents",
    ),
    pytest.param(
        [
            root(),
            span("b1", {"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "x"}),
        ],
        {"retrieval_content_not_recorded"},
        id="documents-without-content",
    ),
    pytest.param(
        [root(), span("c1", {"openinference.span.kind": "LLM", "llm.model_name": "m"})],
        {"model_input_not_recorded", "model_output_not_recorded"},
        id="llm-hide-inputs-absent",
    ),
    pytest.param(
        [
            root(),
            span(
                "c1",
                {
                    "openinference.span.kind": "LLM",
                    "input.value": "__REDACTED__",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": "__REDACTED__",
                },
            ),
        ],
        {"model_input_redacted", "model_output_redacted"},
        id="llm-redacted",
    ),
    pytest.param([span("b1", {}, parent="00000000000000ff")], {"missing_parent"}, id="missing-parent"),
    pytest.param(
        [
            root(),
            span("b1", {"openinference.span.kind": "RETRIEVER", "tracejudge.retrieval.filter": "{nope"}),
        ],
        {"attribute_unparseable"},
        id="bad-filter",
    ),
    pytest.param(
        [
            root(),
            span("b1", {"openinference.span.kind": "RETRIEVER", "tracejudge.retrieval.candidates": "[1, 2]"}),
        ],
        {"attribute_unparseable"},
        id="bad-candidates",
    ),
    pytest.param(
        [root(), span("c1", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[{oops"})],
        {"attribute_unparseable"},
        id="bad-genai-messages",
    ),
    pytest.param(
        [root(), span("d1", {"tracejudge.context.included": 5, "tracejudge.context.budget": "lots"})],
        {"attribute_unparseable"},
        id="bad-context",
    ),
]


@pytest.mark.parametrize(("spans", "expected"), GAP_CASES)
def test_gaps(spans: list[RawSpan], expected: set[str]) -> None:
    record = normalize(spans)
    assert expected <= kinds(record)
    assert not any(g.detail.startswith("internal error") for g in record.gaps)


def test_missing_parent_becomes_root_in_tree() -> None:
    record = normalize(
        [span("b1", {"openinference.span.kind": "CHAIN", "output.value": "A"}, parent="0" * 15 + "f")]
    )
    assert record.spans[0].parent_span_id is None
    assert record.final_answer == "A"


def test_unparseable_genai_messages_keep_raw_text_searchable() -> None:
    record = normalize(
        [root(), span("c1", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[{oops CLAUSE"})]
    )
    [call] = record.model_calls
    assert "CLAUSE" in call.input_text


# --- retrieval grouping, filters, candidates ------------------------------------------------------


def test_retriever_grouped_with_vector_store_child() -> None:
    record = normalize(
        [
            root(),
            span(
                "b1",
                {
                    "openinference.span.kind": "RETRIEVER",
                    "input.value": "cap?",
                    "tracejudge.retrieval.principal": "procurement",
                },
            ),
            span("b2", {"openinference.span.kind": "EMBEDDING"}, parent="00000000000000b1"),
            span(
                "b3",
                {
                    "db.system": "chroma",
                    "db.operation": "query",
                    "db.chroma.query.where": "{'$and': [{'region': 'EU'}]}",
                },
                parent="00000000000000b1",
                events=(SpanEvent(name="db.query.result", attributes={"db.query.result.id": "x"}),),
            ),
        ]
    )
    [call] = record.retrievals
    assert call.span_id == "00000000000000b1"
    assert call.span_ids == ("00000000000000b1", "00000000000000b2", "00000000000000b3")
    assert call.query == "cap?"
    assert call.principal == "procurement"
    assert call.filter == {"$and": [{"region": "EU"}]}
    assert [d.doc_id for d in call.documents] == ["x"]


def test_candidates_forms() -> None:
    candidates = [
        "A@v1",
        {"doc_id": "B", "version": "v2", "score": "0.5", "excluded_by": "permission"},
        {"id": "C", "excluded_by": "weird"},
    ]
    record = normalize(
        [
            root(),
            span(
                "b1", {"tracejudge.retrieval.candidates": candidates, "tracejudge.retrieval.filter": {"a": 1}}
            ),
        ]
    )
    [call] = record.retrievals  # tracejudge.retrieval.* alone makes a retrieval step
    assert call.candidates is not None
    assert [(c.doc_id, c.version, c.score, c.excluded_by) for c in call.candidates] == [
        ("A", "v1", None, None),
        ("B", "v2", 0.5, "permission"),
        ("C", None, None, None),
    ]
    assert call.filter == {"a": 1}
    assert call.filter_raw is None
    assert "attribute_unparseable" in kinds(record)  # the unknown excluded_by


# --- Langfuse API shape: other conventions inside metadata.attributes -----------------------------


def test_langfuse_metadata_attributes_read_as_span_attributes() -> None:
    metadata = {
        "attributes": {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.id": "n1",
            "retrieval.documents.0.document.content": "body",
            "retrieval.documents.0.document.metadata": '{"doc_id": "D", "version": "v9"}',
            "retrieval.documents.0.document.score": "0.8",
            "tracejudge.retrieval.filter": '{"region": "EU"}',
        },
        "resourceAttributes": {"service.name": "svc"},
    }
    record = normalize(
        [
            RawSpan(
                trace_id=TRACE,
                span_id="1" * 16,
                name="retrieve",
                source="langfuse",
                attributes={
                    "langfuse.observation.type": "SPAN",
                    "langfuse.observation.metadata": json.dumps(metadata),
                    "langfuse.trace.name": "lf-trace",
                    "langfuse.trace.output": '{"output": "final words"}',
                    "langfuse.trace.tags": '["a", "b"]',
                    "langfuse.environment": "production",
                },
            )
        ]
    )
    [call] = record.retrievals
    assert record.spans[0].step == "retrieval"
    assert [(d.doc_id, d.version, d.score) for d in call.documents] == [("D", "v9", 0.8)]
    assert call.filter == {"region": "EU"}
    assert record.name == "lf-trace"
    assert record.final_answer == "final words"
    assert record.metadata == {"service_name": "svc", "environment": "production", "tags": ["a", "b"]}


def test_langfuse_generation_prompt_and_usage() -> None:
    record = normalize(
        [
            root(),
            span(
                "c1",
                {
                    "langfuse.observation.type": "generation",
                    "langfuse.observation.input": "plain prompt CLAUSE",
                    "langfuse.observation.output": "done",
                    "langfuse.observation.model.name": "m1",
                    "langfuse.observation.usage_details": {"input": 3, "output": 4, "total": 7},
                    "langfuse.observation.prompt.name": "agent",
                    "langfuse.observation.prompt.version": 12,
                },
            ),
        ]
    )
    [call] = record.model_calls
    assert call.input_text == "plain prompt CLAUSE"
    assert call.model == "m1"
    assert call.prompt == "agent@12"
    assert call.usage == {"input": 3, "output": 4, "total": 7}


# --- tools, context, ordering ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "attrs",
    [
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "pay",
            "input.value": '{"x": 1}',
            "output.value": "ok",
        },
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "pay",
            "gen_ai.tool.call.arguments": {"x": 1},
            "gen_ai.tool.call.result": "ok",
        },
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "pay",
            "traceloop.entity.input": '{"x": 1}',
            "traceloop.entity.output": "ok",
        },
        {
            "langfuse.observation.type": "TOOL",
            "langfuse.observation.input": '{"x": 1}',
            "langfuse.observation.output": "ok",
        },
    ],
)
def test_tool_calls(attrs: dict[str, Any]) -> None:
    record = normalize([root(), span("e1", attrs, name="pay")])
    [tool] = record.tool_calls
    assert (tool.name, tool.arguments, tool.result) == ("pay", {"x": 1}, "ok")


def test_context_step_forced_by_tracejudge_step() -> None:
    record = normalize([root(), span("d1", {"tracejudge.step": "context", "output.value": "ctx text"})])
    [ctx] = record.context_assemblies
    assert ctx.output == "ctx text"
    assert ctx.included == ()


def test_span_order_does_not_matter() -> None:
    spans = [
        root({"openinference.span.kind": "CHAIN", "input.value": "Q", "output.value": "A"}),
        span("b1", {"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": "c"}),
        span("c1", {"openinference.span.kind": "LLM", "input.value": "P", "output.value": "A"}),
    ]
    expected = normalize(spans)
    shuffled = list(spans)
    random.Random(3).shuffle(shuffled)
    assert normalize(shuffled) == expected
    assert normalize(list(reversed(spans))) == expected


def test_final_answer_falls_back_to_last_model_call() -> None:
    # The second call sent the first's prompt again after it failed (a retry): its reply is the answer.
    first = span("c1", {"openinference.span.kind": "LLM", "input.value": "P", "output.value": "first"})
    first = first.model_copy(update={"end_time_unix_nano": first.start_time_unix_nano + 1, "status_code": 2})
    record = normalize(
        [
            root(),
            first,
            span("c2", {"openinference.span.kind": "LLM", "input.value": "P", "output.value": "second"}),
        ]
    )
    assert record.final_answer == "second"
    assert record.final_answer_span_id == "00000000000000c2"
    assert "answer_uncertain" not in kinds(record)


def test_an_earlier_reply_whose_input_was_not_recorded_leaves_the_answer_open() -> None:
    # Nothing shows the last call continued the first: the first's reply may be the one the user got.
    record = normalize(
        [
            root(),
            span("c1", {"openinference.span.kind": "LLM", "output.value": "first"}),
            span("c2", {"openinference.span.kind": "LLM", "output.value": "second"}),
        ]
    )
    assert (record.final_answer, record.final_answer_span_id) == (None, None)
    (gap,) = [g for g in record.gaps if g.kind == "answer_uncertain"]
    assert gap.span_id == "00000000000000c2"
    assert "model call 00000000000000c1" in gap.note
    assert "no_final_answer" not in kinds(record)


def test_no_spans_is_an_input_error() -> None:
    with pytest.raises(InputError):
        normalize([])


def test_usage_total_from_either_total_tokens_attribute() -> None:
    for key in ("llm.usage.total_tokens", "gen_ai.usage.total_tokens"):
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "ASK",
            "gen_ai.usage.prompt_tokens": 10,
            "gen_ai.usage.completion_tokens": 5,
            key: 15,
        }
        [call] = normalize([root(), span("c1", attrs)]).model_calls
        assert call.usage == {"input": 10, "output": 5, "total": 15}
