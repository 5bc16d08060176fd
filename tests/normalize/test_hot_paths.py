"""The per-span shortcuts normalize takes read what the walks they replace read.

group_indexed finds a key's index by one regex search, a span's key prefixes are ruled out by a search of its
joined keys, trace-level fields are looked for only when some span has their key, and gaps' switches are
worked out only for the spans gaps name, a retrieval span's document-metadata keys are picked out once per
key set (Bedrock), and output messages are decoded for their finish reasons only when their text may name
one. Each pins an edge the shortcut could get wrong.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tracejudge.normalize import normalize
from tracejudge.normalize._values import group_indexed
from tracejudge.normalize._view import Gaps, SpanView
from tracejudge.schema import RawSpan

TRACE = "ab" * 16


def _walked(attrs: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """group_indexed as it was written before the regex: a split and a walk over the parts."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attrs.items():
        parts = key.split(".")
        for i in range(1, len(parts)):
            part = parts[i]
            if part.isdigit() and part.isascii():
                out.setdefault(".".join(parts[:i]), {}).setdefault(int(part), {})[
                    ".".join(parts[i + 1 :])
                ] = value
                break
    return out


def test_group_indexed_edges() -> None:
    attrs = {
        "llm.input_messages.10.message.contents.1.message_content.text": "a",
        "x.1": "b",  # index last: the suffix is ""
        "x.2\n": "c",  # "2\n" is no number ($ would match before the newline)
        ".3": "d",  # the first segment is "" : the prefix too
        "4.y": "e",  # the first segment is never the index
        "z.٣.w": "f",  # a digit that is not ASCII
        "z.²": "g",  # str.isdigit but not a decimal
        "z.007.q.8": "h",  # the first number wins; 007 is 7
        "z.1x.5": "i",  # "1x" is no number: 5 is the index
    }
    assert group_indexed(attrs) == {
        "llm.input_messages": {10: {"message.contents.1.message_content.text": "a"}},
        "x": {1: {"": "b"}},
        "": {3: {"": "d"}},
        "z": {7: {"q.8": "h"}},
        "z.1x": {5: {"": "i"}},
    }
    assert group_indexed(attrs) == _walked(attrs)


@given(
    st.dictionaries(
        st.lists(
            st.sampled_from(["a", "0", "12", "007", "", "x1", "1\n", "\n2", "²", "٣", " 1", "_"]), max_size=6
        ).map(".".join),
        st.integers(),
        max_size=8,
    )
)
def test_group_indexed_reads_as_the_walk(attrs: dict[str, Any]) -> None:
    assert group_indexed(attrs) == _walked(attrs)


def _view(attrs: dict[str, Any]) -> SpanView:
    return SpanView(RawSpan(trace_id=TRACE, span_id="1" * 16, name="s", attributes=attrs), Gaps())


def test_key_prefix_found_only_at_a_key_start() -> None:
    assert _view({"tracejudge.context.budget": 1}).has_key_prefix("tracejudge.context.")
    # The joined keys hold the prefix, but no key starts with it.
    assert not _view({"a\ntracejudge.context.budget": 1}).has_key_prefix("tracejudge.context.")
    assert not _view({"x.tracejudge.context.budget": 1}).has_key_prefix("tracejudge.context.")
    # A key Langfuse's metadata carried is a key of the merged attributes.
    merged = _view({"langfuse.observation.metadata": '{"tracejudge.context.budget": 5}'})
    assert merged.has_key_prefix("tracejudge.context.")


def _trace(*attrs: dict[str, Any]) -> list[RawSpan]:
    return [
        RawSpan(
            trace_id=TRACE,
            span_id=f"{i + 1:016x}",
            parent_span_id=None if i == 0 else f"{1:016x}",
            name=f"s{i}",
            start_time_unix_nano=i + 1,
            attributes=a,
        )
        for i, a in enumerate(attrs)
    ]


def test_steps_read_from_key_prefixes_and_copied_keys() -> None:
    task = normalize(
        _trace(
            {"openinference.span.kind": "CHAIN"},
            {"tracejudge.context.included": '["C-17@v2"]'},
            {"a\ntracejudge.context.included": '["C-17@v2"]'},  # no key starts with the prefix
            {"tracejudge.retrieval.principal": "buyer"},
            {"traceloop.association.properties.tracejudge.step": "retrieval"},
            {"langfuse.observation.metadata.tracejudge.step": '"context"'},
        )
    )
    assert [s.step for s in task.spans] == ["chain", "context", "other", "retrieval", "retrieval", "context"]


def test_trace_fields_read_from_the_spans_that_carry_them() -> None:
    task = normalize(
        _trace(
            {"openinference.span.kind": "CHAIN", "session.id": ""},
            {"tag.tags": '["a", "b"]', "user.id": "u1"},
            {"langfuse.trace.tags": ["c", "a"], "session.id": "s1", "langfuse.trace.name": "named"},
        )
    )
    assert task.name == "named"
    assert task.metadata == {"session_id": "s1", "user_id": "u1", "tags": ["a", "b", "c"]}
    resource = RawSpan(
        trace_id=TRACE, span_id="2" * 16, name="r", resource={"deployment.environment": "prod"}, attributes={}
    )
    assert normalize([resource]).metadata["environment"] == "prod"


def _view(attrs: dict[str, Any], name: str = "span") -> SpanView:
    return SpanView(RawSpan(trace_id=TRACE, span_id="1" * 16, name=name, attributes=attrs), Gaps())


def test_finish_reasons_read_when_spelled_with_escapes() -> None:
    from tracejudge.normalize._genai import output_finish_reasons

    part = {"role": "assistant", "parts": [{"type": "text", "content": "a"}]}
    escaped = '[{"role": "assistant", "finish\\u005freason": "length", "parts": []}]'
    assert output_finish_reasons(_view({"gen_ai.output.messages": json.dumps([part])})) == []
    assert output_finish_reasons(_view({"gen_ai.output.messages": escaped})) == ["length"]
    # One JSON text per message (an array attribute): each decoded.
    per_message = [json.dumps({**part, "finish_reason": "stop"})]
    assert output_finish_reasons(_view({"gen_ai.output.messages": per_message})) == ["stop"]


@given(st.booleans(), st.sampled_from(["\n", ""]))
def test_knowledge_base_chunks_found_after_the_keys_were_seen(bedrock_first: bool, newline: str) -> None:
    """_may_hold_chunks keeps each key set's metadata keys: a span with the same keys reads its own values
    (a key holding a line break is never looked up by the joined keys)."""
    from tracejudge.normalize._bedrock import _may_hold_chunks

    def attrs(inner: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", f"input{newline}.value": "q"}
        for d in range(2):
            out[f"retrieval.documents.{d}.document.content"] = "text"
            out[f"retrieval.documents.{d}.document.metadata"] = json.dumps({"metadata": inner})
        return out

    plain, bedrock = attrs({"doc_id": "D1"}), attrs({"x-amz-bedrock-kb-source-uri": "s3://b/D1.txt"})
    for first, second in ((bedrock, plain), (plain, bedrock)) if bedrock_first else ((plain, bedrock),):
        assert _may_hold_chunks(_view(first)) is (first is bedrock)
        assert _may_hold_chunks(_view(second)) is (second is bedrock)
    assert not _may_hold_chunks(_view({"input.value": "q"}))
