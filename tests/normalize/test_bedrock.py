"""What normalize reads from AWS Bedrock knowledge-base calls under openinference-instrumentation-bedrock and
a Cohere rerank under OpenLLMetry (tests/fixtures/traces/record_bedrock.py): the nested chunk metadata, the
filter in Bedrock's syntax, and the source URI read as a retriever's id when the sidecar names no document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracejudge.localize._filter import evaluate_filter
from tracejudge.normalize import normalize
from tracejudge.normalize._bedrock import bedrock_filter
from tracejudge.schema import RawSpan
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
EU = {"region": "EU", "version": "v2", "year": 2026}


def _spans(name: str) -> list[RawSpan]:
    return list(read_otlp_file(TRACES / name))


@pytest.mark.parametrize(
    ("bedrock", "passes"),
    [
        ({"equals": {"key": "region", "value": "EU"}}, True),
        ({"equals": {"key": "region", "value": "CN"}}, False),
        ({"notEquals": {"key": "region", "value": "CN"}}, True),
        ({"in": {"key": "region", "value": ["CN", "US"]}}, False),
        ({"notIn": {"key": "region", "value": ["CN"]}}, True),
        ({"greaterThanOrEquals": {"key": "year", "value": 2026}}, True),
        ({"lessThan": {"key": "year", "value": 2026}}, False),
        (
            {
                "andAll": [
                    {"equals": {"key": "region", "value": "EU"}},
                    {"equals": {"key": "version", "value": "v1"}},
                ]
            },
            False,
        ),
        (
            {
                "orAll": [
                    {"equals": {"key": "region", "value": "CN"}},
                    {"equals": {"key": "version", "value": "v2"}},
                ]
            },
            True,
        ),
        # operators the replay has no equivalent of settle nothing
        ({"startsWith": {"key": "region", "value": "E"}}, None),
        ({"stringContains": {"key": "region", "value": "U"}}, None),
        (
            {
                "andAll": [
                    {"equals": {"key": "region", "value": "EU"}},
                    {"listContains": {"key": "tags", "value": "x"}},
                ]
            },
            None,
        ),
        ({"equals": "region"}, None),
    ],
)
def test_a_bedrock_filter_replays_as_bedrock_would_apply_it(
    bedrock: dict[str, Any], passes: bool | None
) -> None:
    assert evaluate_filter(bedrock_filter(bedrock), EU) is passes


def _with_metadata(spans: list[RawSpan], change: Any) -> list[RawSpan]:
    """The spans with every retrieval document's metadata JSON changed by ``change``."""
    out = []
    for span in spans:
        attributes = dict(span.attributes)
        for key, value in span.attributes.items():
            if key.endswith(".document.metadata"):
                attributes[key] = json.dumps(change(json.loads(value)))
        out.append(span.model_copy(update={"attributes": attributes}))
    return out


def test_without_a_sidecar_doc_id_the_source_uri_is_read_as_a_retrievers_id() -> None:
    # Not the document's own id (which the manifest may not use: "not returned" would rest on it): a
    # retriever's, which names a document when the manifest does, else the text may (localize's identify).
    def strip(md: dict[str, Any]) -> dict[str, Any]:
        inner = {k: v for k, v in md["metadata"].items() if k not in ("doc_id", "version")}
        return {**md, "metadata": inner}

    [call] = normalize(_with_metadata(_spans("bedrock_kb_rag.pb"), strip)).retrievals
    assert [(d.doc_id, d.version, d.raw_id) for d in call.documents] == [
        ("s3://acme-contracts/C-17/attachment/v2.txt", None, "s3://acme-contracts/C-17/attachment/v2.txt"),
        ("s3://acme-contracts/C-17/attachment/v1.txt", None, "s3://acme-contracts/C-17/attachment/v1.txt"),
    ]
    assert [d.metadata["x-amz-bedrock-kb-chunk-id"] for d in call.documents] == ["chunk-042", "chunk-041"]
    assert not any("source" in d.metadata for d in call.documents)


def test_metadata_not_bedrocks_is_read_as_openinference_reads_it() -> None:
    # A document whose nested metadata carries no x-amz-bedrock-kb-* key is not a knowledge base's chunk.
    def plain(md: dict[str, Any]) -> dict[str, Any]:
        return {
            "doc_id": md["metadata"]["doc_id"],
            "version": md["metadata"]["version"],
            "metadata": {"a": 1},
        }

    [call] = normalize(_with_metadata(_spans("bedrock_kb_rag.pb"), plain)).retrievals
    assert [(d.doc_id, d.version) for d in call.documents] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]


def test_a_score_of_zero_is_not_recorded() -> None:
    [call] = normalize(_spans("bedrock_rerank_rag.pb")).retrievals
    assert [d.score for d in call.documents] == [0.378, 0.3693, 0.1667, None]


def test_implicit_filtering_leaves_the_filter_unknown() -> None:
    spans = []
    for span in _spans("bedrock_kb_rag.pb"):
        attributes = dict(span.attributes)
        if span.name == "bedrock.retrieve":
            params = json.loads(attributes["llm.invocation_parameters"])
            vector = params["retrieval_configuration"]["vectorSearchConfiguration"]
            vector["implicitFilterConfiguration"] = {"metadataAttributes": [], "modelArn": "m"}
            attributes["llm.invocation_parameters"] = json.dumps(params)
        spans.append(span.model_copy(update={"attributes": attributes}))
    [call] = normalize(spans).retrievals
    assert call.filter is None


OUTSIDE = Path(__file__).resolve().parents[1] / "fixtures" / "outside" / "bedrock"
TELOS_PDF = "s3://bedrock-az-kb/knowledge_bases/VLDBJ96.pdf"


def _no_id_of_their_own(spans: list[RawSpan]) -> list[RawSpan]:
    """The chunks as a source with no metadata returns them: no chunk id, no metadata of their own (only
    their S3 location)."""
    spans = _with_metadata(spans, lambda md: {**md, "metadata": {}})
    kept = [{k: v for k, v in s.attributes.items() if not k.endswith(".document.id")} for s in spans]
    return [s.model_copy(update={"attributes": kept_one}) for s, kept_one in zip(spans, kept, strict=True)]


def test_a_chunk_with_no_id_of_its_own_is_named_by_its_s3_location() -> None:
    # retrieve_and_generate over an external S3 source (a real response, replayed): the chunks carry no
    # metadata and no chunk id, only their location — the PDF's S3 uri is the document they come from.
    spans = list(read_otlp_file(OUTSIDE / "test_retrieve_and_generate_with_external_s3_source-replayed.json"))
    [call] = normalize(spans).retrievals
    assert len(call.documents) == 9
    assert {(d.doc_id, d.raw_id) for d in call.documents} == {(TELOS_PDF, TELOS_PDF)}
    assert all(d.content for d in call.documents)


def test_a_knowledge_base_chunk_with_no_id_of_its_own_is_named_by_its_location() -> None:
    [call] = normalize(_no_id_of_their_own(_spans("bedrock_kb_rag.pb"))).retrievals
    assert [(d.doc_id, d.version, d.raw_id) for d in call.documents] == [
        ("s3://acme-contracts/C-17/attachment/v2.txt", None, "s3://acme-contracts/C-17/attachment/v2.txt"),
        ("s3://acme-contracts/C-17/attachment/v1.txt", None, "s3://acme-contracts/C-17/attachment/v1.txt"),
    ]
