"""Phoenix REST spans -> RawSpans: flattened JSON values folded back, span kind restored, and the
normalizer reading document identity from the result."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan, SpanEvent
from tracejudge_collectors.phoenix import fold_attributes, span_to_raw

ROOT = {
    "id": "U3Bhbjox",
    "name": "rag-answer",
    "context": {"trace_id": "AB" * 16, "span_id": "01" * 8},
    "span_kind": "AGENT",
    "parent_id": None,
    "start_time": "2026-03-01T00:00:00.000001+00:00",
    "end_time": "2026-03-01T00:00:01Z",
    "status_code": "OK",
    "status_message": "",
    "attributes": {"input.value": "cap?", "output.value": "30,000 RMB", "metadata.tenant.region": "CN"},
    "events": [],
}
RETRIEVER = {
    **ROOT,
    "id": "U3Bhbjoy",
    "name": "vector-search",
    "context": {"trace_id": "ab" * 16, "span_id": "02" * 8},
    "span_kind": "RETRIEVER",
    "parent_id": "01" * 8,
    "status_code": "ERROR",
    "status_message": "partial",
    "attributes": {
        "input.value": "cap?",
        "retrieval.documents.0.document.id": "chunk-9",
        "retrieval.documents.0.document.content": "Prepayment shall not exceed 30,000 RMB",
        "retrieval.documents.0.document.score": 0.9,
        "retrieval.documents.0.document.metadata.source": "C-17/attachment",
        "retrieval.documents.0.document.metadata.version": "v2",
        "retrieval.documents.0.document.metadata.acl": ["procurement"],
        "retrieval.documents.1.document.id": "chunk-3",
        "retrieval.documents.1.document.content": "Prepayment shall not exceed 50,000 RMB",
        "retrieval.documents.1.document.metadata.doc_id": "C-17/attachment",
        "retrieval.documents.1.document.metadata.version": "v1",
    },
    "events": [
        {"name": "exception", "timestamp": "2026-03-01T00:00:00.5Z", "attributes": {"exception.message": "x"}}
    ],
}


def test_fold_restores_the_json_valued_attributes_only():
    folded = fold_attributes(
        {
            "metadata.tenant.region": "CN",
            "metadata.items.0.sku": "a",
            "metadata.items.1.sku": "b",
            "tool.parameters.contract": "C-17",
            "llm.prompt_template.variables.question": "cap?",
            "reranker.output_documents.0.document.metadata.version": "v2",
            "llm.input_messages.0.message.role": "user",
            "tag.tags": ["prod"],
        }
    )
    assert folded["metadata"] == {"tenant": {"region": "CN"}, "items": [{"sku": "a"}, {"sku": "b"}]}
    assert folded["tool.parameters"] == {"contract": "C-17"}
    assert folded["llm.prompt_template.variables"] == {"question": "cap?"}
    assert folded["reranker.output_documents.0.document.metadata"] == {"version": "v2"}
    # Indexed convention keys stay flat: the normalizer reads them that way.
    assert folded["llm.input_messages.0.message.role"] == "user"
    assert folded["tag.tags"] == ["prod"]


def test_fold_keeps_an_unparsed_value_and_its_subkeys():
    folded = fold_attributes({"metadata": "not json", "metadata.a": 1})
    assert folded == {"metadata": "not json", "metadata.a": 1}


def test_span_to_raw_fields():
    raw = span_to_raw(RETRIEVER, project="rag")
    assert (raw.trace_id, raw.span_id, raw.parent_span_id) == ("ab" * 16, "02" * 8, "01" * 8)
    assert raw.source == "phoenix"
    assert raw.attributes["openinference.span.kind"] == "RETRIEVER"
    assert raw.attributes["retrieval.documents.0.document.metadata"]["acl"] == ["procurement"]
    assert (raw.status_code, raw.status_message) == (2, "partial")
    assert raw.start_time_unix_nano == 1772323200000001000
    assert raw.events[0].name == "exception"
    assert raw.events[0].time_unix_nano == 1772323200500000000
    assert raw.resource == {"openinference.project.name": "rag"}
    assert span_to_raw(ROOT).trace_id == "ab" * 16
    unknown = span_to_raw({**ROOT, "span_kind": "UNKNOWN"})
    assert "openinference.span.kind" not in unknown.attributes


def test_the_normalizer_finds_document_identity_in_pulled_spans():
    record = normalize([span_to_raw(ROOT), span_to_raw(RETRIEVER)])
    (call,) = record.retrievals
    docs = [(d.doc_id, d.version, d.raw_id) for d in call.documents]
    assert docs == [("C-17/attachment", "v2", "chunk-9"), ("C-17/attachment", "v1", "chunk-3")]
    assert call.documents[0].metadata["acl"] == ["procurement"]
    assert record.final_answer == "30,000 RMB"


_PARTS = ["metadata", "document", "tool", "parameters", "llm", "prompt_template", "variables", "retrieval"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*_PARTS, "documents", "0", "x", ""]), min_size=1, max_size=6))
def test_a_key_is_folded_under_the_base_the_rule_names(parts: list[str]) -> None:
    from tracejudge_collectors.phoenix._convert import _fold_base

    key = ".".join(parts)
    expected = None
    for base in ("llm.prompt_template.variables", "tool.parameters", "metadata"):
        if key.startswith(base + "."):
            expected = base
            break
    else:
        if (at := key.find(".document.metadata.")) >= 0:
            expected = key[: at + len(".document.metadata")]
        elif key.startswith("document.metadata."):
            expected = "document.metadata"
    assert _fold_base(key) == expected


def test_a_level_with_digit_keys_that_are_not_the_indexes_stays_an_object():
    # "00" and "1" read as 0 and 1, but there is no "0" to take: was a KeyError.
    folded = fold_attributes({"metadata.x.00.a": 1, "metadata.x.1.b": 2, "metadata.y.1.c": 3})
    assert folded["metadata"] == {"x": {"00": {"a": 1}, "1": {"b": 2}}, "y": {"1": {"c": 3}}}
    listed = fold_attributes({"metadata.x.1.b": 2, "metadata.x.0.a": 1})
    assert listed["metadata"] == {"x": [{"a": 1}, {"b": 2}]}


_JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_KEYS = st.lists(st.sampled_from([*_PARTS, "documents", "0", "1", "x"]), min_size=1, max_size=5).map(".".join)
_TIMES = st.sampled_from([None, "", "2026-03-01T00:00:00Z", "2026-03-01T00:00:00.25+02:00", "not a time"])


@settings(max_examples=150, deadline=None)
@given(
    attributes=st.dictionaries(_KEYS, _JSON, max_size=8),
    events=st.lists(
        st.fixed_dictionaries(
            {
                "name": st.text(max_size=5),
                "timestamp": _TIMES,
                "attributes": st.dictionaries(_KEYS, _JSON, max_size=3),
            }
        ),
        max_size=2,
    ),
    kind=st.sampled_from(["LLM", "unknown", "", None, "retriever"]),
    status=st.sampled_from(["OK", "ERROR", "UNSET", "", None, "weird"]),
    parent=st.sampled_from([None, "", "0A" * 8]),
    start=_TIMES,
    project=st.sampled_from([None, "rag"]),
)
def test_a_converted_span_is_the_record_validation_gives(
    attributes: dict[str, Any],
    events: list[dict[str, Any]],
    kind: str | None,
    status: str | None,
    parent: str | None,
    start: str | None,
    project: str | None,
) -> None:
    """span_to_raw builds its records without validating them: they must equal validated ones, field
    for field and in their stored JSON."""
    row = {
        **ROOT,
        "span_kind": kind,
        "status_code": status,
        "parent_id": parent,
        "start_time": start,
        "attributes": attributes,
        "events": events,
    }
    raw = span_to_raw(row, project=project)
    validated = RawSpan.model_validate(raw.model_dump())
    assert raw == validated
    assert raw.model_dump_json() == validated.model_dump_json()
    assert all(type(e) is SpanEvent and e == SpanEvent.model_validate(e.model_dump()) for e in raw.events)
    assert RawSpan.model_validate_json(raw.model_dump_json()) == raw


def _fold_by_the_rule(attributes: dict[str, Any]) -> dict[str, Any]:
    """The folding rule key by key, as the module docstring states it (the conversion's fast paths
    must give the same values in the same key order)."""
    from tracejudge_collectors.phoenix._convert import _fold_base

    def nest(flat: dict[str, Any]) -> Any:
        # A value is a leaf whatever it is (an object, null): only levels made here take keys.
        root: dict[str, Any] = {}
        levels = [root]
        for path, value in flat.items():
            parts = path.split(".")
            node = root
            for i, part in enumerate(parts[:-1]):
                if part not in node:
                    node[part] = {}
                    levels.append(node[part])
                elif not any(node[part] is level for level in levels):
                    node[".".join(parts[i:])] = value  # a leaf shares the prefix: the rest kept whole
                    break
                node = node[part]
            else:
                made = parts[-1] in node and any(node[parts[-1]] is level for level in levels)
                node[path if made else parts[-1]] = value
        return lists(root)

    def lists(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        level = {k: lists(v) for k, v in value.items()}
        indexed = set(level) == {str(i) for i in range(len(level))} and all(
            isinstance(v, dict) for v in level.values()
        )
        return [level[str(i)] for i in range(len(level))] if level and indexed else level

    out: dict[str, Any] = {}
    folded: dict[str, dict[str, Any]] = {}
    for key, value in attributes.items():
        base = _fold_base(key)
        if base is None:
            out[key] = value
        else:
            folded.setdefault(base, {})[key[len(base) + 1 :]] = value
    for base, flat in folded.items():
        if base in out:
            out.update({f"{base}.{k}": v for k, v in flat.items()})
        else:
            out[base] = nest(flat)
    return out


_FLAT_KEYS = st.lists(
    st.sampled_from([*_PARTS, "documents", "0", "1", "x", "region", "tenant"]), min_size=1, max_size=6
).map(".".join)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_FLAT_KEYS, _JSON, max_size=12))
# One level whose values are objects: an indexed level is a list, and so is an object value's own.
@example({"metadata.0": {"a": 1}, "metadata.1": {"b": 2}, "x": 1})
@example({"tool.parameters.x": {"0": {"k": 1}}, "tool.parameters.y": 2})
# A value that is an object or null is a leaf: keys under it are kept whole beside it, the value
# itself unchanged (found by this property).
@example({"metadata.document": {}, "metadata.document.metadata": {}, "metadata.a": None, "metadata.a.b": 1})
def test_folding_gives_what_the_rule_gives_in_the_same_order(attributes: dict[str, Any]) -> None:
    before = copy.deepcopy(attributes)
    folded = fold_attributes(attributes)
    assert attributes == before  # the span's values are not changed
    expected = _fold_by_the_rule(attributes)
    assert folded == expected
    assert list(folded) == list(expected)
    # The same keys again (the plan made for them is reused), with other values.
    other = {k: {"0": {"v": v}} if i % 2 else [v] for i, (k, v) in enumerate(attributes.items())}
    assert fold_attributes(other) == _fold_by_the_rule(other)
    assert list(fold_attributes(other)) == list(_fold_by_the_rule(other))
