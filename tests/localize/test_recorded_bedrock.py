"""Triage over AWS Bedrock apps recorded offline with the real ``boto3`` clients against a loopback stand-in
(tests/fixtures/traces/record_bedrock.py; the app and its runs: _policy.py).

- ``bedrock_kb``: openinference-instrumentation-bedrock over a knowledge base's ``Retrieve``, then
  ``Converse``:
  the search's chunks (score, source URI, the sidecar metadata), its configuration (the filter) and the prompt
  are all recorded, so every fault gets its verdict; with no filter in the recorded configuration, a search of
  an index without v2 under a manifest that says v2 was indexed is ranking.
- ``bedrock_rag``: one ``RetrieveAndGenerate``: the span holds the cited references and the answer, never the
  prompt the service built. A cited v2 is retrieved; whether it reached the model cannot be known
  (``unconfirmed``, never ``ignored_by_model``); an uncited v2 may have been retrieved all the same.
- ``bedrock_rerank``: ``Retrieve`` of all four chunks, a Cohere rerank (OpenLLMetry's instrumentation) keeping
  ``top_n``, then ``Converse``: the rerank is a rerank step (its prompts hold every document given, no model
  read them); a rerank that keeps v1 and not v2 is named in the ``dropped_in_context`` verdict.
- ``bedrock_agent``: ``InvokeAgent`` with its trace: the instrumentation makes a ``knowledge_base`` RETRIEVER
  span of the lookup and an LLM span whose input is the prompt the agent built, so the faults the references
  and the prompt settle get their verdicts; the filter the app put in ``sessionState`` is recorded nowhere.
- ``bedrock_openllmetry``: OpenLLMetry's Bedrock instrumentation records the converse call only; the knowledge
  base search makes no span, so every verdict past *indexed* is ``unconfirmed``, naming the retrieval span.
- ``bedrock_kb_stream``, ``bedrock_openllmetry_stream``: the same apps with the answer streamed
  (``converse_stream``, an AWS event stream); each instrumentation joins the text deltas into its span, so
  they read as the plain ones. ``bedrock_kb_invoke``, ``bedrock_openllmetry_invoke``: the model called with
  ``invoke_model`` and an Anthropic Messages body; read as the plain ones too.
"""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from tracejudge.normalize._bedrock import RAG_NOTE
from tracejudge.schema import Localization

UNCONFIRMED_RETRIEVED = ("unconfirmed", None, ["pass", "unconfirmed", "skipped", "skipped"])
UNCONFIRMED_IN_CONTEXT = ("unconfirmed", None, ["pass", "pass", "unconfirmed", "skipped"])
FILTERED = ("filtered", "filter", ["pass", "fail", "skipped", "skipped"])
# recording -> run -> (verdict, cause, stage statuses) under the recordings' index (v2 indexed, in the EU)
VERDICTS: dict[str, dict[str, tuple[str, str | None, list[str]]]] = {
    "bedrock_kb": {
        "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
        "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
        "filtered": FILTERED,
        "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
        # the recorded configuration has no filter: v2, said to be indexed, was ranked out
        "never_indexed": ("not_retrieved", "rank", ["pass", "fail", "skipped", "skipped"]),
    },
    "bedrock_rag": {
        # v2 cited (retrieved); the prompt the service built is recorded nowhere
        "rag": UNCONFIRMED_IN_CONTEXT,
        "ignored": UNCONFIRMED_IN_CONTEXT,
        # only the cited references are recorded: an uncited v2 may have been retrieved
        "uncited": UNCONFIRMED_RETRIEVED,
        "filtered": FILTERED,
        "never_indexed": UNCONFIRMED_RETRIEVED,
    },
    "bedrock_rerank": {
        "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
        "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
    },
    "bedrock_agent": {
        "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
        "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
        # the filter the app gave in sessionState is recorded nowhere
        "filtered": UNCONFIRMED_RETRIEVED,
        "never_indexed": UNCONFIRMED_RETRIEVED,
    },
    "bedrock_openllmetry": dict.fromkeys(
        ("rag", "ignored", "filtered", "dropped", "never_indexed"), UNCONFIRMED_RETRIEVED
    ),
}
VERDICTS["bedrock_kb_stream"] = VERDICTS["bedrock_kb"]
VERDICTS["bedrock_openllmetry_stream"] = VERDICTS["bedrock_openllmetry"]
VERDICTS["bedrock_kb_invoke"] = VERDICTS["bedrock_kb"]
VERDICTS["bedrock_openllmetry_invoke"] = VERDICTS["bedrock_openllmetry"]
VERDICTS["bedrock_kb_invoke_stream"] = VERDICTS["bedrock_kb"]
VERDICTS["bedrock_openllmetry_invoke_stream"] = VERDICTS["bedrock_openllmetry"]
VERDICTS["bedrock_rag_stream"] = VERDICTS["bedrock_rag"]
CASES = [(recording, run) for recording, table in VERDICTS.items() for run in table]
NEVER_INDEXED = (
    "bedrock_kb",
    "bedrock_rag",
    "bedrock_agent",
    "bedrock_openllmetry",
    "bedrock_kb_stream",
    "bedrock_openllmetry_stream",
    "bedrock_kb_invoke",
    "bedrock_openllmetry_invoke",
    "bedrock_kb_invoke_stream",
    "bedrock_openllmetry_invoke_stream",
    "bedrock_rag_stream",
)


def _triage(mk: ModuleType, name: str, spans: list | None = None) -> Localization:
    spans = mk.recorded_spans(name) if spans is None else spans
    return mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))


@pytest.mark.parametrize(("recording", "run"), CASES)
def test_each_run_gets_its_verdict(mk: ModuleType, recording: str, run: str) -> None:
    loc = mk.triage_framework(f"{recording}_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == VERDICTS[recording][run]


@pytest.mark.parametrize("recording", NEVER_INDEXED)
def test_never_indexed_is_told_by_the_manifest(mk: ModuleType, recording: str) -> None:
    loc = mk.triage_framework(f"{recording}_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])


def test_the_knowledge_base_chunks_are_identified_by_their_own_metadata(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("bedrock_kb_rag.pb"))
    [call] = record.retrievals
    assert [(d.doc_id, d.version, d.raw_id, d.score) for d in call.documents] == [
        ("C-17/attachment", "v2", "chunk-042", 0.378),
        ("C-17/attachment", "v1", "chunk-041", 0.3693),
    ]
    assert (
        call.documents[0].metadata["x-amz-bedrock-kb-source-uri"]
        == "s3://acme-contracts/C-17/attachment/v2.txt"
    )
    assert (call.query, call.top_k, call.data_source) == ("prepayment per order", 2, "KB-CONTRACTS")
    assert call.filter == {}
    assert call.documents_recorded


# the runs whose search records its chunks (each with the sidecar's ids): every recording's but OpenLLMetry's,
# whose knowledge-base search makes no span
SOURCED = [
    (recording, run)
    for recording, table in VERDICTS.items()
    if not recording.startswith("bedrock_openllmetry")
    for run in table
]


@pytest.mark.parametrize(("recording", "run"), SOURCED)
def test_chunks_named_by_their_location_alone_are_identified_against_the_manifest(
    mk: ModuleType, recording: str, run: str
) -> None:
    # The manifest names the documents otherwise (C-17/attachment@v2): the S3 uri names none, the text does,
    # and each run reads as with the sidecar.
    spans = mk.located_only(mk.recorded_spans(f"{recording}_{run}.pb"))
    [call] = mk.normalize(spans).retrievals
    assert all((d.doc_id or "").startswith("s3://acme-contracts/") for d in call.documents)
    loc = _triage(mk, "", spans)
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == VERDICTS[recording][run]


def test_a_location_the_manifest_does_not_name_is_no_other_document(mk: ModuleType) -> None:
    # Neither the S3 uri nor the text names a manifest document: a chunk may still be the material, so
    # "not returned" (ranking) is never concluded from it.
    spans = mk.located_only(mk.recorded_spans("bedrock_kb_rag.pb"), content="(scanned page, no text layer)")
    loc = _triage(mk, "", spans)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    assert any("identity of the document" in item for item in loc.stages[1].missing)


@pytest.mark.parametrize(("recording", "run"), SOURCED)
def test_a_source_uri_the_manifest_does_not_name_is_read_as_a_retrievers_id(
    mk: ModuleType, recording: str, run: str
) -> None:
    # Without the sidecar's ids the chunks name only their source URI, which the manifest does not use (it
    # names C-17/attachment@v2): the text names the version, and each run reads as with the sidecar. The URI
    # was read as the document's own id — another document than the manifest's, so bedrock_kb_rag's v2,
    # returned at rank 1, read as not_retrieved (rank).
    spans = mk.sourced_only(mk.recorded_spans(f"{recording}_{run}.pb"))
    loc = _triage(mk, "", spans)
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == VERDICTS[recording][run]
    for call in mk.normalize(spans).retrievals:
        assert all((d.raw_id or "").startswith("s3://acme-contracts/") for d in call.documents)


def test_a_source_uri_naming_no_manifest_document_is_no_other_document(mk: ModuleType) -> None:
    # Neither the source URI nor the text names a manifest document: a chunk may still be the material, so
    # "not returned" (ranking) is never concluded from it (it was: not_retrieved).
    spans = mk.sourced_only(mk.recorded_spans("bedrock_kb_rag.pb"), content="(scanned page, no text layer)")
    loc = _triage(mk, "", spans)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    assert any("identity of the document" in item for item in loc.stages[1].missing)


def test_a_source_uri_the_manifest_lists_names_its_document(mk: ModuleType) -> None:
    # The manifest lists each version's S3 file among its ids: the chunks are identified without their text.
    manifest = mk.source_uri_ids(mk.policy_manifest())
    spans = mk.sourced_only(mk.recorded_spans("bedrock_kb_rag.pb"), content="(scanned page, no text layer)")
    record = mk.normalize(spans)
    [call] = record.retrievals
    assert [d.raw_id for d in call.documents] == [
        "s3://acme-contracts/C-17/attachment/v2.txt",
        "s3://acme-contracts/C-17/attachment/v1.txt",
    ]
    loc = mk.localize(record, mk.ticket(), manifest)
    assert mk.statuses(loc)[:2] == ["pass", "pass"]


def test_the_filter_is_read_from_the_recorded_configuration_and_needed(mk: ModuleType) -> None:
    spans = mk.recorded_spans("bedrock_kb_filtered.pb")
    [call] = mk.normalize(spans).retrievals
    assert call.filter == {"region": {"$eq": "CN"}}
    assert json.loads(call.filter_raw or "") == {"equals": {"key": "region", "value": "CN"}}
    loc = _triage(mk, "", mk.drop_attribute(spans, "llm.invocation_parameters"))
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)


def test_without_the_configuration_a_search_without_v2_is_unconfirmed(mk: ModuleType) -> None:
    spans = mk.drop_attribute(mk.recorded_spans("bedrock_kb_never_indexed.pb"), "llm.invocation_parameters")
    assert mk.statuses(_triage(mk, "", spans)) == ["pass", "unconfirmed", "skipped", "skipped"]


def test_retrieve_and_generate_is_a_model_call_whose_prompt_is_not_recorded(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("bedrock_rag_ignored.pb"))
    [model] = record.model_calls
    assert model.name == "bedrock.retrieve_and_generate"
    assert model.input_partial
    assert model.output_text == record.final_answer
    [call] = record.retrievals
    assert call.span_id == model.span_id
    assert not call.documents_recorded
    assert [(d.doc_id, d.version) for d in call.documents] == [
        ("C-17/attachment", "v1"),
        ("C-17/attachment", "v2"),
    ]
    loc = _triage(mk, "bedrock_rag_ignored.pb")
    # v2 was cited and the answer holds v1's cap, yet the prompt is unknown: never ignored_by_model
    assert loc.verdict == "unconfirmed"
    assert any(RAG_NOTE in item for item in loc.stages[2].missing)


@pytest.mark.parametrize("recording", ["bedrock_rag", "bedrock_rag_stream"])
def test_retrieve_and_generate_is_told_by_its_span_name_too(mk: ModuleType, recording: str) -> None:
    # Without its recorded configuration the span's name still says the service built the prompt and that
    # its documents are the cited references only (retrieve_and_generate_stream's span is named
    # bedrock_agent.retrieve_and_generate_stream).
    spans = mk.drop_attribute(mk.recorded_spans(f"{recording}_ignored.pb"), "llm.invocation_parameters")
    record = mk.normalize(spans)
    [model] = record.model_calls
    [call] = record.retrievals
    assert model.input_partial
    assert not call.documents_recorded
    loc = _triage(mk, "", spans)
    assert any(RAG_NOTE in item for item in loc.stages[2].missing)


def test_an_uncited_chunk_may_have_been_retrieved(mk: ModuleType) -> None:
    loc = _triage(mk, "bedrock_rag_uncited.pb")
    assert loc.verdict == "unconfirmed"
    assert loc.cause is None
    assert any(
        "the documents returned by retrieval span" in item and "Retrieve" in item
        for item in loc.stages[1].missing
    )


def test_the_cohere_rerank_is_a_rerank_step_not_a_model_call(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("bedrock_rerank_dropped.pb"))
    assert [m.name for m in record.model_calls] == ["bedrock.converse"]
    [rerank] = record.rerankings
    assert rerank.query == "prepayment per order"
    assert [(d.doc_id, d.version) for d in rerank.input_documents] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
        ("C-09/framework", "v1"),
        ("C-17/main", "v3"),
    ]
    assert [(d.doc_id, d.version, d.score) for d in rerank.output_documents] == [
        ("C-17/attachment", "v1", 0.88)
    ]
    loc = _triage(mk, "bedrock_rerank_dropped.pb")
    assert any(
        ev.span_id == rerank.span_id and "reranker received" in ev.note for ev in loc.stages[2].evidence
    )


def test_the_rerank_span_without_its_request_type_is_still_no_model_call(mk: ModuleType) -> None:
    spans = mk.drop_attribute(mk.recorded_spans("bedrock_rerank_rag.pb"), "llm.request.type")
    record = mk.normalize(spans)
    assert [m.name for m in record.model_calls] == ["bedrock.converse"]
    assert len(record.rerankings) == 1


def test_openllmetry_records_the_converse_call_and_no_search(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("bedrock_openllmetry_ignored.pb"))
    assert record.retrievals == ()
    [model] = record.model_calls
    assert "Prepayment shall not exceed 30,000 RMB per order." in model.input_text
    loc = _triage(mk, "bedrock_openllmetry_ignored.pb")
    assert any("retrieval span" in item for item in loc.stages[1].missing)


@pytest.mark.parametrize(
    "recording",
    [
        "bedrock_kb_stream",
        "bedrock_openllmetry_stream",
        "bedrock_kb_invoke",
        "bedrock_openllmetry_invoke",
        "bedrock_kb_invoke_stream",
        "bedrock_openllmetry_invoke_stream",
    ],
)
def test_a_streamed_or_invoked_model_call_is_read_whole(mk: ModuleType, recording: str) -> None:
    # converse_stream's span holds the prompt and the joined deltas; invoke_model's the body's system prompt
    # and messages and the reply's text: the model call is read whole.
    record = mk.normalize(mk.recorded_spans(f"{recording}_ignored.pb"))
    [model] = record.model_calls
    assert "Prepayment shall not exceed 30,000 RMB per order." in model.input_text
    assert (model.output_text or "").startswith("Yes: contract C-17 allows prepayment up to 50,000 RMB")
    assert not model.input_partial


def test_the_agents_lookup_is_a_retrieval_and_its_prompt_a_model_input(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("bedrock_agent_filtered.pb"))
    [call] = record.retrievals
    assert (call.name, call.query, call.data_source, call.filter) == (
        "knowledge_base",
        "prepayment per order",
        "KB-CONTRACTS",
        None,
    )
    assert [(d.doc_id, d.version) for d in call.documents] == [
        ("C-17/attachment", "v1"),
        ("C-09/framework", "v1"),
    ]
    [model] = record.model_calls
    assert "Prepayment shall not exceed 50,000 RMB per order." in model.input_text
    loc = _triage(mk, "bedrock_agent_filtered.pb")
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)


@pytest.mark.parametrize("run", ["rag", "ignored"])
def test_the_agents_prompt_cut_where_a_sentence_ends_is_no_drop(mk: ModuleType, run: str) -> None:
    # Its first 128 characters end a sentence; the LLM span's input.value still holds the whole prompt.
    key = "llm.input_messages.0.message.content"
    spans = [
        s.model_copy(update={"attributes": {**s.attributes, key: s.attributes[key][:128]}})
        if key in s.attributes
        else s
        for s in mk.recorded_spans(f"bedrock_agent_{run}.pb")
    ]
    assert any(str(s.attributes.get(key, "")).endswith("question. ") for s in spans)
    loc = _triage(mk, "", spans)
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
