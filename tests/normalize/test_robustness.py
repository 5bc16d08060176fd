"""Random attribute garbage never raises and never trips the internal-error net."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan, SpanEvent

KEYS = [
    "openinference.span.kind",
    "input.value",
    "output.value",
    "retrieval.documents.0.document.id",
    "retrieval.documents.0.document.content",
    "retrieval.documents.0.document.metadata",
    "retrieval.documents.1.document.score",
    "reranker.input_documents.0.document.metadata",
    "reranker.query",
    "reranker.top_k",
    "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content",
    "llm.input_messages.0.message.contents.0.message_content.text",
    "llm.input_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.output_messages.0.message.content",
    "llm.prompts",
    "llm.token_count.prompt",
    "gen_ai.operation.name",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.retrieval.documents",
    "gen_ai.retrieval.query.text",
    "gen_ai.request.top_k",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.tool_calls.0.arguments",
    "gen_ai.tool.call.arguments",
    "traceloop.span.kind",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "db.system",
    "db.operation",
    "db.chroma.query.where",
    "langfuse.observation.type",
    "langfuse.observation.input",
    "langfuse.observation.output",
    "langfuse.observation.metadata",
    "langfuse.observation.usage_details",
    "langfuse.trace.output",
    "langfuse.trace.tags",
    "tracejudge.step",
    "tracejudge.retrieval.filter",
    "tracejudge.retrieval.candidates",
    "tracejudge.context.included",
    "tracejudge.context.dropped",
    "tracejudge.context.budget",
]

KIND_VALUES = [
    "LLM",
    "RETRIEVER",
    "RERANKER",
    "TOOL",
    "chat",
    "retrieval",
    "execute_tool",
    "GENERATION",
    "task",
    "context",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        ["__REDACTED__", "{", "[", "{'a': (1, 2)}", '"x"', "[{}]", "null", "1e999", "{'$in': {1}}"]
    ),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "parts",
                    "id",
                    "metadata",
                    "doc_id",
                    "type",
                    "text",
                    "messages",
                    "documents",
                    "attributes",
                    "version",
                ]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)


def as_attribute(value: Any, encode: bool) -> Any:
    if encode and isinstance(value, list | dict):
        return json.dumps(value, default=str)
    return value


@st.composite
def spans(draw: st.DrawFn) -> list[RawSpan]:
    count = draw(st.integers(min_value=1, max_value=5))
    ids = [f"{i + 1:016x}" for i in range(count)]
    out = []
    for span_id in ids:
        attrs: dict[str, Any] = {}
        for key in draw(st.lists(st.sampled_from(KEYS), max_size=10, unique=True)):
            if key.endswith(("span.kind", "operation.name", "observation.type", "tracejudge.step")) and draw(
                st.booleans()
            ):
                attrs[key] = draw(st.sampled_from(KIND_VALUES))
            else:
                attrs[key] = as_attribute(draw(json_values), draw(st.booleans()))
        events = tuple(
            SpanEvent(name="db.query.result", attributes={"db.query.result.metadata": draw(json_values)})
            for _ in range(draw(st.integers(min_value=0, max_value=2)))
        )
        # Any span may name any other (or itself): parent links that form loops included.
        parent = draw(st.sampled_from([None, "ffffffffffffffff", *ids]))
        out.append(
            RawSpan(
                trace_id="1" * 32,
                span_id=span_id,
                parent_span_id=parent,
                start_time_unix_nano=draw(st.integers(min_value=0, max_value=2**63 - 1)),
                end_time_unix_nano=draw(st.integers(min_value=0, max_value=2**63 - 1)),
                status_code=draw(st.integers(min_value=0, max_value=5)),
                attributes=attrs,
                events=events,
            )
        )
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans())
def test_garbage_never_raises(trace: list[RawSpan]) -> None:
    record = normalize(trace)
    assert record.trace_id == "1" * 32
    assert len(record.spans) == len(trace)
    internal = [g for g in record.gaps if g.detail.startswith("internal error")]
    assert internal == []
    record.model_dump_json()  # the record is serializable whatever came in


def _span(span_id: str, parent: str | None, **attrs: Any) -> RawSpan:
    return RawSpan(
        trace_id="2" * 32,
        span_id=span_id,
        parent_span_id=parent,
        start_time_unix_nano=1_000 + int(span_id, 16),
        end_time_unix_nano=2_000,
        attributes=attrs,
    )


def test_parent_links_that_form_a_loop_are_cut_into_a_root_with_a_gap() -> None:
    a, b, c = "a" * 16, "b" * 16, "c" * 16
    # A model span in a loop with a chain span, beside a proper root: walking up from the model
    # span (to find an LLM span wrapping it) must end.
    record = normalize(
        [
            _span(a, None, **{"openinference.span.kind": "AGENT"}),
            _span(b, c, **{"openinference.span.kind": "LLM", "llm.output_messages.0.message.content": "hi"}),
            _span(c, b, **{"openinference.span.kind": "CHAIN"}),
        ]
    )
    assert len(record.spans) == 3
    assert len(record.model_calls) == 1
    loops = [g for g in record.gaps if g.kind == "missing_parent" and "loop" in g.detail]
    assert [g.span_id for g in loops] == [c]
    assert {n.span_id: n.parent_span_id for n in record.spans} == {a: None, b: c, c: None}
    # Every span in a loop, none without a parent: still one record, with a root.
    pure = normalize([_span(a, b), _span(b, a)])
    assert len(pure.spans) == 2
    assert any("loop" in g.detail for g in pure.gaps)
    assert sum(n.parent_span_id is None for n in pure.spans) == 1
