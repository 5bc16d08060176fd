"""The stored JSON of a span: orjson's fast path must write what pydantic would, or step aside."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracejudge.schema import RawSpan, SpanEvent, SpanLink
from tracejudge.store._sql import span_payload

T = "4bf92f3577b34da6a3ce929d0e0e4736"

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.text(max_size=30)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
attributes = st.dictionaries(st.text(max_size=12), values, max_size=6)


def _span(attrs: dict[str, Any], **extra: Any) -> RawSpan:
    return RawSpan(
        trace_id=T,
        span_id="00f067aa0ba902b7",
        parent_span_id=None,
        name='retrieve\n"docs"',
        attributes=attrs,
        events=(SpanEvent(name="e", time_unix_nano=5, attributes={"n": 1}),),
        links=(SpanLink(trace_id=T, span_id="a" * 16, attributes={"why": "follows"}),),
        resource={"service.name": "agent"},
        **extra,
    )


@settings(max_examples=200, deadline=None)
@given(attributes, attributes)
def test_payload_is_pydantics_json_and_reads_back(attrs: dict[str, Any], resource: dict[str, Any]) -> None:
    span = _span(attrs).model_copy(update={"resource": resource})
    payload = span_payload(span)
    assert json.loads(payload) == json.loads(span.model_dump_json())
    assert RawSpan.model_validate_json(payload) == RawSpan.model_validate_json(span.model_dump_json())


@pytest.mark.parametrize(
    "value",
    [
        2**70,  # beyond orjson's 64-bit integers
        {"nested": {1: "non-string key"}},
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        {"a", "set"},
        b"raw bytes",
    ],
    ids=["bigint", "int-key", "datetime", "set", "bytes"],
)
def test_values_orjson_does_not_write_like_pydantic_fall_back_to_pydantic(value: Any) -> None:
    span = _span({"x": value})
    assert span_payload(span) == span.model_dump_json()


def test_a_subclass_serializes_itself() -> None:
    class Custom(RawSpan):
        def model_dump_json(self, **_: object) -> str:  # type: ignore[override]
            return '{"custom": true}'

    assert span_payload(Custom(trace_id=T, span_id="b" * 16)) == '{"custom": true}'
