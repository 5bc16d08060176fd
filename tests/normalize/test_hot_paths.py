"""The per-span shortcuts normalize takes read what the walks they replace read.

group_indexed finds a key's index by one regex search, a span's key prefixes are ruled out by a search of its
joined keys, trace-level fields are looked for only when some span has their key, and gaps' switches are
worked out only for the spans gaps name. Each pins an edge the shortcut could get wrong.
"""

from __future__ import annotations

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
