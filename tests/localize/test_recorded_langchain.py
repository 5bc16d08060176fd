"""Triage over one LangChain RAG chain recorded under two instrumentations (OpenInference's and
OpenLLMetry's): OTLP file -> decoder -> normalizer -> the four checks, with and without a manifest.

Runs (tests/fixtures/traces/record_langchain.py): ``rag`` returned v2 and stuffed it into the
prompt; ``dropped`` returned v2 but the context builder kept only v1; ``filtered`` ran with
``region = CN`` (recorded as run metadata ``tracejudge.retrieval.filter``) and never saw v2.
"""

from __future__ import annotations

from types import ModuleType

import pytest

INSTRUMENTATIONS = ["openinference", "openllmetry"]


@pytest.mark.parametrize("region", [None, "CN", "EU"])
@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_v2_retrieved_stuffed_and_used_is_no_fault(
    mk: ModuleType, instrumentation: str, region: str | None
) -> None:
    loc = mk.triage_recorded(
        f"langchain_{instrumentation}_rag.pb", None if region is None else mk.recorded_manifest(region)
    )
    assert loc.verdict == "no_fault"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "pass"]
    assert all(stage.evidence for stage in loc.stages)
    assert all(ev.span_id for ev in loc.stages[1].evidence)


@pytest.mark.parametrize("region", [None, "CN", "EU"])
@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_v2_retrieved_but_left_out_of_the_prompt_is_dropped_in_context(
    mk: ModuleType, instrumentation: str, region: str | None
) -> None:
    loc = mk.triage_recorded(
        f"langchain_{instrumentation}_dropped.pb", None if region is None else mk.recorded_manifest(region)
    )
    assert loc.verdict == "dropped_in_context"
    assert mk.statuses(loc) == ["pass", "pass", "fail", "skipped"]
    [retrieved] = [ev for ev in loc.stages[1].evidence if "C-17/attachment@v2" in ev.note]
    assert "rank 1" in retrieved.note
    assert any("not in this model input" in ev.note for ev in loc.stages[2].evidence)


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_filtered_run_without_manifest_is_unconfirmed_and_asks_for_it(
    mk: ModuleType, instrumentation: str
) -> None:
    loc = mk.triage_recorded(f"langchain_{instrumentation}_filtered.pb", None)
    assert loc.verdict == "unconfirmed"
    assert loc.stages[0].status == "unconfirmed"
    assert any("manifest" in m and "C-17/attachment@v2" in m for m in loc.stages[0].missing)


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_filter_from_run_metadata_tells_filter_from_rank(mk: ModuleType, instrumentation: str) -> None:
    # v2 is EU in the manifest and the run's metadata filter was region = CN: the filter excluded it.
    filtered = mk.triage_recorded(f"langchain_{instrumentation}_filtered.pb", mk.recorded_manifest("EU"))
    assert (filtered.verdict, filtered.cause) == ("filtered", "filter")
    assert mk.statuses(filtered)[:2] == ["pass", "fail"]
    assert any('{"region": "CN"}' in ev.note and "excludes" in ev.note for ev in filtered.stages[1].evidence)
    # Were v2 CN, the filter would have let it through: it lost on rank.
    ranked = mk.triage_recorded(f"langchain_{instrumentation}_filtered.pb", mk.recorded_manifest("CN"))
    assert (ranked.verdict, ranked.cause) == ("not_retrieved", "rank")


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("langchain_openllmetry_rag.pb", "no_fault"),
        ("langchain_chroma_rag.pb", "no_fault"),
        ("langchain_chroma_ignored.pb", "ignored_by_model"),
    ],
)
def test_a_chat_whose_system_message_was_not_recorded_was_still_sent_the_prompt(
    mk: ModuleType, name: str, verdict: str
) -> None:
    # OpenLLMetry's LangChain instrumentation records the stuffed system message (the context) as the chat's
    # gen_ai.system_instructions. Lost (a processor, a limit), the chat read as sent the question alone:
    # dropped_in_context. The ChatPromptTemplate's run just before it records the prompt it rendered, a
    # SystemMessage first, and that prompt is what the chat was sent: its input is partial, unconfirmed.
    spans = mk.recorded_spans(name)
    manifest = mk.policy_manifest("EU")
    assert mk.localize(mk.normalize(spans), mk.ticket(), manifest).verdict == verdict
    lost = mk.drop_attribute(spans, "gen_ai.system_instructions")
    record = mk.normalize(lost)
    loc = mk.localize(record, mk.ticket(), manifest)
    assert loc.verdict == "unconfirmed"
    assert loc.stages[2].status == "unconfirmed"
    [gap] = [g for g in record.gaps if g.kind == "model_input_truncated"]
    assert "ChatPromptTemplate" in gap.detail
    assert "system" in gap.detail
    # Without the template's run nothing shows a system message was sent: a chat sent the question alone
    # is a real drop of the context, read as such.
    alone = [s for s in lost if s.name != "execute_task ChatPromptTemplate"]
    assert mk.localize(mk.normalize(alone), mk.ticket(), manifest).verdict == "dropped_in_context"
