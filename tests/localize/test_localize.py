"""The four checks and the verdicts of DESIGN 5.5, on task records built by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from types import ModuleType

import pytest

from tracejudge import TracejudgeError
from tracejudge.localize import STAGES, localize, task_time
from tracejudge.schema import (
    Candidate,
    ContextAssembly,
    Document,
    Evidence,
    Gap,
    Localization,
    Material,
    StageResult,
    UsageQuestion,
)


def statuses(loc: Localization) -> list[str]:
    return [s.status for s in loc.stages]


def stage(loc: Localization, name: str) -> StageResult:
    return next(s for s in loc.stages if s.name == name)


# ---------------------------------------------------------------- verdicts


def test_no_fault_when_every_stage_passes(mk: ModuleType) -> None:
    loc = localize(mk.task(), mk.ticket(), [mk.entry()])
    assert loc.verdict == "no_fault"
    assert statuses(loc) == ["pass", "pass", "pass", "pass"]
    assert [s.name for s in loc.stages] == ["indexed", "retrieved", "in_context", "used_by_model"]
    assert stage(loc, "retrieved").evidence[0].span_id == "r1"
    assert stage(loc, "used_by_model").evidence[0].span_id == "m1"
    assert loc.task_time == mk.T0
    assert loc.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_not_indexed_when_manifest_shows_it_effective_but_indexed_later(mk: ModuleType) -> None:
    task = mk.task(
        retrievals=(mk.retrieval(docs=(mk.doc(version="v1", content=mk.V1_TEXT),)),), answer=mk.BAD
    )
    late = mk.entry(indexed_at=datetime(2026, 12, 1, tzinfo=UTC))
    loc = localize(task, mk.ticket(), [late, mk.v1_entry()])
    assert loc.verdict == "not_indexed"
    assert statuses(loc) == ["fail", "skipped", "skipped", "skipped"]
    notes = " ".join(e.note for e in loc.stages[0].evidence)
    assert "indexed only at 2026-12-01" in notes
    assert "returned a different version" in notes
    assert "C-17/attachment@v1" in notes


def test_not_indexed_when_never_indexed_or_removed(mk: ModuleType) -> None:
    task = mk.task(retrievals=(mk.retrieval(docs=()),))
    never = localize(task, mk.ticket(), [mk.entry(indexed_at=None)])
    assert never.verdict == "not_indexed"
    assert "never indexed" in never.stages[0].evidence[0].note
    removed = localize(task, mk.ticket(), [mk.entry(removed_at=datetime(2026, 6, 1, tzinfo=UTC))])
    assert removed.verdict == "not_indexed"
    assert "removed from the index" in removed.stages[0].evidence[0].note


def test_basis_not_in_effect_yet_and_no_longer(mk: ModuleType) -> None:
    task = mk.task()
    future = localize(task, mk.ticket(), [mk.entry(effective_from=datetime(2027, 1, 1, tzinfo=UTC))])
    assert future.verdict == "basis_not_in_effect"
    assert "not yet in effect" in future.stages[0].detail
    assert statuses(future)[1:] == ["skipped"] * 3
    past = localize(task, mk.ticket(), [mk.entry(effective_to=datetime(2026, 6, 1, tzinfo=UTC))])
    assert past.verdict == "basis_not_in_effect"
    assert "no longer in effect" in past.stages[0].detail


def test_filtered_by_recorded_filter_replayed_on_manifest_metadata(mk: ModuleType) -> None:
    r = mk.retrieval(docs=(mk.doc(doc_id="other"),), filter={"region": "EU"}, principal="procurement")
    loc = localize(mk.task(retrievals=(r,)), mk.ticket(), [mk.entry()])
    assert loc.verdict == "filtered"
    assert loc.cause == "filter"
    st = stage(loc, "retrieved")
    assert st.status == "fail"
    assert st.cause == "filter"
    assert any(e.span_id == "r1" and '"region": "EU"' in e.note and "excludes" in e.note for e in st.evidence)
    assert statuses(loc) == ["pass", "fail", "skipped", "skipped"]


def test_filter_pinning_a_version_is_replayed_on_the_manifest_version(mk: ModuleType) -> None:
    """A retriever pinned to the stale version: the entry's own version is what the filter compares."""
    r = mk.retrieval(docs=(mk.doc(version="v1"),), filter={"version": "v1"}, principal="procurement")
    loc = localize(mk.task(retrievals=(r,)), mk.ticket(), [mk.entry()])
    assert (loc.verdict, loc.cause) == ("filtered", "filter")
    assert any('"version": "v2"' in e.note for e in stage(loc, "retrieved").evidence)
    # The manifest's metadata, when it records the key, is what the store filtered on.
    meta = mk.entry(metadata={"region": "CN", "version": "v1"})
    assert localize(mk.task(retrievals=(r,)), mk.ticket(), [meta]).verdict == "not_retrieved"


def test_filtered_with_operators_and_dates(mk: ModuleType) -> None:
    flt = {"$and": [{"region": {"$in": ["CN", "HK"]}}, {"valid_from": {"$lte": "2026-01-01"}}]}
    r = mk.retrieval(docs=(), filter=flt, principal="procurement")
    e = mk.entry(metadata={"region": "CN", "valid_from": "2026-03-01T00:00:00Z"})
    loc = localize(mk.task(retrievals=(r,)), mk.ticket(), [e])
    assert loc.verdict == "filtered"
    assert loc.cause == "filter"


def test_filtered_by_permission_when_principal_not_in_acl(mk: ModuleType) -> None:
    r = mk.retrieval(docs=(), filter={"region": "CN"}, principal="sales")
    loc = localize(mk.task(retrievals=(r,)), mk.ticket(), [mk.entry()])
    assert loc.verdict == "filtered"
    assert loc.cause == "permission"
    assert any("'sales' is not in the manifest acl" in e.note for e in stage(loc, "retrieved").evidence)


def test_cause_from_recorded_candidates(mk: ModuleType) -> None:
    for excluded_by, verdict in (
        ("filter", "filtered"),
        ("permission", "filtered"),
        ("rank", "not_retrieved"),
    ):
        cands = [Candidate(doc_id=mk.DOC, version="v2", score=0.4, excluded_by=excluded_by)]
        r = mk.retrieval(docs=(mk.doc(version="v1", content=mk.V1_TEXT),), candidates=cands)
        loc = localize(mk.task(retrievals=(r,), answer=mk.BAD), mk.ticket())  # no manifest needed
        assert (loc.verdict, loc.cause) == (verdict, excluded_by)
        assert stage(loc, "indexed").status == "pass"  # a candidate was in the index
        notes = " ".join(e.note for e in stage(loc, "retrieved").evidence)
        assert f"excluded_by={excluded_by}" in notes
        assert "different version" in notes
        assert "@v1" in notes


def test_not_retrieved_rank_when_filter_and_acl_pass(mk: ModuleType) -> None:
    r = mk.retrieval(
        docs=(mk.doc(version="v1", content=mk.V1_TEXT),), filter={"region": "CN"}, principal="procurement"
    )
    loc = localize(mk.task(retrievals=(r,), answer=mk.BAD), mk.ticket(), [mk.entry(), mk.v1_entry()])
    assert loc.verdict == "not_retrieved"
    assert loc.cause == "rank"
    st = stage(loc, "retrieved")
    assert "ranking cut it" in st.detail
    notes = " ".join(e.note for e in st.evidence)
    assert "admits" in notes
    assert "'procurement' is in the manifest acl" in notes
    assert "different version instead of C-17/attachment@v2" in notes


def test_dropped_in_context_reports_best_partial_match(mk: ModuleType) -> None:
    cut = "Attachment v2. Payment terms.\nPrepayment shall not"
    loc = localize(mk.task(model_calls=(mk.model(context=cut, output=mk.BAD),), answer=mk.BAD), mk.ticket())
    assert loc.verdict == "dropped_in_context"
    st = stage(loc, "in_context")
    assert st.status == "fail"
    assert "best partial match 3/6" in st.detail
    assert (
        "the clause's first 3 tokens are there, then the input has 'Question' where the clause has 'exceed'"
        in (st.evidence[0].note)
    )
    assert "Prepayment shall not" in st.evidence[0].note
    assert statuses(loc) == ["pass", "pass", "fail", "skipped"]


def test_dropped_in_context_names_the_stale_value_standing_in_for_the_clause(mk: ModuleType) -> None:
    t = mk.task(model_calls=(mk.model(context=mk.V1_TEXT, output=mk.BAD),), answer=mk.BAD)
    st = stage(localize(t, mk.ticket()), "in_context")
    assert st.status == "fail"
    stale = "where the input has '50,000 RMB' for the clause's '30,000 RMB'"
    assert f"best partial match 4/6 tokens in span m1, {stale}" in st.detail
    cut = mk.model(context="Payment terms.\nPrepayment shall not exceed", output=mk.BAD)
    note = (
        stage(localize(mk.task(model_calls=(cut,), answer=mk.BAD), mk.ticket()), "in_context")
        .evidence[0]
        .note
    )
    assert "where the clause has '30,000 RMB'" in note


def test_dropped_in_context_cites_context_assembly_drop(mk: ModuleType) -> None:
    ca = ContextAssembly(
        span_id="c1", dropped=("C-17/attachment@v2",), dropped_reasons={"C-17/attachment@v2": "token budget"}
    )
    t = mk.task(
        model_calls=(mk.model(context="nothing relevant", output=mk.BAD),),
        answer=mk.BAD,
        context_assemblies=(ca,),
    )
    loc = localize(t, mk.ticket())
    assert loc.verdict == "dropped_in_context"
    assert any(e.span_id == "c1" and "token budget" in e.note for e in stage(loc, "in_context").evidence)


def test_ignored_by_model_when_answer_states_superseded_value(mk: ModuleType) -> None:
    loc = localize(mk.task(answer=mk.BAD), mk.ticket())
    assert loc.verdict == "ignored_by_model"
    st = stage(loc, "used_by_model")
    notes = " ".join(e.note for e in st.evidence)
    assert "50000" in notes
    assert "50,000 RMB" in notes
    assert "cites the superseded C-17/attachment@v1" in notes


def test_ignored_by_model_on_citation_of_superseded_version_alone(mk: ModuleType) -> None:
    t = mk.ticket(superseded=[Material(doc_id=mk.DOC, version="v1")])
    loc = localize(mk.task(answer="Per C-17/attachment@v1 the prepayment is acceptable."), t)
    assert loc.verdict == "ignored_by_model"


def test_superseded_value_echoed_from_request_is_not_evidence(mk: ModuleType) -> None:
    # The request itself says 50,000; the answer repeating it shows nothing about v1.
    t = mk.task(answer="No, 50,000 RMB is too much.", question="Can I prepay 50,000 RMB?")
    loc = localize(t, mk.ticket(superseded=[Material(doc_id=mk.DOC, version="v1", facts={"cap": 50000})]))
    assert loc.verdict == "unconfirmed"
    st = stage(loc, "used_by_model")
    assert st.status == "unconfirmed"
    assert any("request states it too" in e.note for e in st.evidence)


def test_both_values_in_answer_is_unconfirmed_without_judge(mk: ModuleType) -> None:
    answer = "The cap was 50,000 RMB under v1 and is 30,000 RMB now."
    loc = localize(mk.task(answer=answer), mk.ticket())
    assert loc.verdict == "unconfirmed"
    assert "both" in stage(loc, "used_by_model").detail
    assert stage(loc, "used_by_model").missing


# ---------------------------------------------------------------- number and format tolerance


@pytest.mark.parametrize(
    "written",
    ["30,000 RMB", "30000 RMB", "30 000 RMB", "30.000 RMB", "30k RMB", "30\u202f000 RMB", "30,000.00 RMB"],
)
def test_clause_found_whatever_the_number_format(mk: ModuleType, written: str) -> None:
    context = f"PAYMENT TERMS\n  prepayment   SHALL not\n exceed {written} , per order."
    loc = localize(mk.task(model_calls=(mk.model(context=context),)), mk.ticket())
    assert stage(loc, "in_context").status == "pass", written


@pytest.mark.parametrize(
    "answer",
    ["capped at ¥30,000.", "capped at 30k RMB.", "max 30 000 元", "cap: RMB30000", "3万元 is the cap"],
)
def test_answer_fact_found_whatever_the_format(mk: ModuleType, answer: str) -> None:
    loc = localize(mk.task(answer=answer), mk.ticket())
    assert stage(loc, "used_by_model").status == "pass", answer


def test_answer_fact_dates(mk: ModuleType) -> None:
    req = mk.material(facts={"effective": "2026-03-01"})
    old = Material(doc_id=mk.DOC, version="v1", facts={"effective": "2025-01-01"})
    good = localize(mk.task(answer="It applies since March 1, 2026."), mk.ticket([req], [old]))
    assert good.verdict == "no_fault"
    bad = localize(mk.task(answer="It applies since 1 January 2025."), mk.ticket([req], [old]))
    assert bad.verdict == "ignored_by_model"


def test_wrong_currency_does_not_agree(mk: ModuleType) -> None:
    loc = localize(mk.task(answer="The cap is 30,000 USD."), mk.ticket())
    assert stage(loc, "used_by_model").status == "unconfirmed"


# ---------------------------------------------------------------- multi-step and several materials


def test_the_first_returned_document_is_shown_at_rank_1(mk: ModuleType) -> None:
    """People count ranks from 1: the first document returned was shown "at rank 0". The record's
    ``position`` (the JSON field) stays zero-based."""
    task = mk.task(retrievals=(mk.retrieval("r1", docs=(mk.doc(), mk.doc(doc_id="faq", position=1))),))
    assert [d.position for d in task.retrievals[0].documents] == [0, 1]
    loc = localize(task, mk.ticket())
    notes = [e.note for s in loc.stages for e in s.evidence if "rank" in e.note]
    assert notes
    assert all(f"{mk.DOC}@v2 at rank 1," in n for n in notes), notes
    assert not any("rank 0" in e.note for s in loc.stages for e in s.evidence)
    assert task.model_dump(mode="json")["retrievals"][0]["documents"][0]["position"] == 0


def test_multi_step_any_retrieval_call_counts(mk: ModuleType) -> None:
    r1 = mk.retrieval("r1", docs=(mk.doc(doc_id="faq"),))
    r2 = mk.retrieval("r2", docs=(mk.doc(doc_id="faq"), mk.doc(position=1)))
    m1 = mk.model("m1", context="plan: look up the contract", output="search contract")
    m2 = mk.model("m2", context=mk.V2_TEXT, output=mk.GOOD)
    loc = localize(mk.task(retrievals=(r1, r2), model_calls=(m1, m2)), mk.ticket())
    assert loc.verdict == "no_fault"
    ret = stage(loc, "retrieved")
    assert [e.span_id for e in ret.evidence] == ["r2"]
    assert "rank 2" in ret.evidence[0].note
    ctx = stage(loc, "in_context")
    assert "1 of 2 model calls" in ctx.detail
    assert {e.span_id for e in ctx.evidence} == {"m1", "m2"}
    assert next(e for e in ctx.evidence if e.span_id == "m2").note.startswith(
        "the clause is in the model input"
    )


def test_multi_step_filter_in_one_call_rank_in_other(mk: ModuleType) -> None:
    r1 = mk.retrieval("r1", docs=(), filter={"region": "CN"}, principal="procurement")
    r2 = mk.retrieval("r2", docs=(), filter={"region": "EU"}, principal="procurement")
    loc = localize(mk.task(retrievals=(r1, r2), answer=mk.BAD), mk.ticket(), [mk.entry()])
    assert loc.verdict == "filtered"
    assert loc.cause == "filter"
    assert "r2" in stage(loc, "retrieved").detail
    assert "one of 2" in stage(loc, "retrieved").detail


def _unidentified(position: int = 0) -> Document:
    return Document(
        doc_id=None,
        content="Deliveries go to the Shanghai warehouse within ten working days.",
        position=position,
    )


def test_an_exclusion_stands_beside_unidentified_documents_of_the_call_that_excluded(mk: ModuleType) -> None:
    # The call's filter {"region": "EU"} excludes v2 (manifest region CN), so whatever that call
    # returned passed a filter v2 does not pass: its unidentified document cannot be v2, and the
    # exclusion is what the records show (DESIGN 5.5's unidentified rule is about "not returned" when
    # nothing excluded the material from the call that returned the unknown document).
    r = mk.retrieval(docs=(_unidentified(),), filter={"region": "EU"}, principal="procurement")
    loc = localize(mk.task(retrievals=(r,), answer=mk.BAD), mk.ticket(), [mk.entry()])
    assert (loc.verdict, loc.cause) == ("filtered", "filter")
    # Without the filter record nothing excludes v2, and the unidentified document may be it.
    bare = mk.retrieval(docs=(_unidentified(),), principal="procurement")
    assert (
        localize(mk.task(retrievals=(bare,), answer=mk.BAD), mk.ticket(), [mk.entry()]).verdict
        == "unconfirmed"
    )


def test_an_exclusion_in_one_call_beside_another_calls_unidentified_document_is_unconfirmed(
    mk: ModuleType,
) -> None:
    # r1's filter excluded v2; r2 (no filter recorded) returned a document nothing identifies. r2 may
    # have returned v2, so "not returned" — which filtered says — is not what the trace shows.
    r1 = mk.retrieval("r1", docs=(), filter={"region": "EU"}, principal="procurement")
    r2 = mk.retrieval("r2", docs=(_unidentified(),))
    loc = localize(mk.task(retrievals=(r1, r2), answer=mk.BAD), mk.ticket(), [mk.entry()])
    assert loc.verdict == "unconfirmed"
    st = stage(loc, "retrieved")
    assert (st.status, st.cause) == ("unconfirmed", None)
    assert "excluded C-17/attachment@v2 from retrieval span r1" in st.detail
    assert "r2 may have returned it" in st.detail
    (wanted,) = st.missing
    assert wanted.startswith("the identity of the document at rank 1 returned by retrieval span r2")
    assert any("excludes" in e.note and e.span_id == "r1" for e in st.evidence)
    # Identified as another document, r2 did not return v2: the exclusion then decides.
    known = mk.retrieval("r2", docs=(mk.doc(doc_id="C-17/contract", version="v1", content=None),))
    settled = localize(mk.task(retrievals=(r1, known), answer=mk.BAD), mk.ticket(), [mk.entry()])
    assert (settled.verdict, settled.cause) == ("filtered", "filter")


def test_an_exclusion_in_one_call_beside_a_call_without_recorded_documents_is_unconfirmed(
    mk: ModuleType,
) -> None:
    r1 = mk.retrieval("r1", docs=(), filter={"region": "CN"}, principal="sales")  # the ACL excludes
    r2 = mk.retrieval("r2", docs=(), documents_recorded=False)
    loc = localize(mk.task(retrievals=(r1, r2), answer=mk.BAD), mk.ticket(), [mk.entry()])
    assert loc.verdict == "unconfirmed"
    st = stage(loc, "retrieved")
    assert "a permission rule (ACL) excluded" in st.detail
    assert st.missing == ("the documents returned by retrieval span r2",)


def test_multi_step_rank_needs_every_call_settled(mk: ModuleType) -> None:
    r1 = mk.retrieval("r1", docs=(), filter={"region": "CN"}, principal="procurement")
    r2 = mk.retrieval("r2", docs=())  # no filter recorded: cannot tell why it was not returned
    loc = localize(mk.task(retrievals=(r1, r2), answer=mk.BAD), mk.ticket(), [mk.entry()])
    assert loc.verdict == "unconfirmed"
    st = stage(loc, "retrieved")
    assert st.missing == (
        "the metadata filter of retrieval span r2 (tracejudge.retrieval.filter) or its candidates"
        " (tracejudge.retrieval.candidates)",
        "the principal of retrieval span r2 (tracejudge.retrieval.principal)",
    )


def test_several_materials_earliest_fault_in_pipeline_order_decides(mk: ModuleType) -> None:
    sla = Material(doc_id="SLA-4", version="3", clause="Response within 4 business hours", facts={"hours": 4})
    # attachment: dropped in context; SLA: not indexed -> not_indexed decides (earlier stage).
    t = mk.task(model_calls=(mk.model(context="unrelated", output=mk.BAD),), answer=mk.BAD)
    manifest = [mk.entry(), mk.entry(doc_id="SLA-4", version="3", indexed_at=None)]
    loc = localize(t, mk.ticket([mk.material(), sla]), manifest)
    assert loc.verdict == "not_indexed"
    assert [(m.doc_id, m.verdict) for m in loc.materials] == [
        ("C-17/attachment", "dropped_in_context"),
        ("SLA-4", "not_indexed"),
    ]
    assert loc.stages == loc.materials[1].stages
    assert "decided by SLA-4@3" in loc.summary


def test_several_materials_fault_beats_unconfirmed_and_no_fault(mk: ModuleType) -> None:
    unknown = Material(doc_id="SLA-4", version="3", clause="Response within 4 hours")
    t = mk.task(answer=mk.BAD)
    loc = localize(t, mk.ticket([unknown, mk.material()]))
    assert [m.verdict for m in loc.materials] == ["unconfirmed", "ignored_by_model"]
    assert loc.verdict == "ignored_by_model"
    ok = localize(mk.task(), mk.ticket([mk.material(), mk.material(clause="Net 30", facts={})]))
    assert [m.verdict for m in ok.materials] == ["no_fault", "unconfirmed"]
    assert ok.verdict == "unconfirmed"


# ---------------------------------------------------------------- each way records can be missing


def test_missing_manifest_and_retrieval_unconfirmed(mk: ModuleType) -> None:
    r = mk.retrieval(docs=(mk.doc(doc_id="faq"),))
    loc = localize(mk.task(retrievals=(r,)), mk.ticket())
    assert loc.verdict == "unconfirmed"
    assert stage(loc, "indexed").missing == ("index manifest entry for C-17/attachment@v2",)
    assert statuses(loc) == ["unconfirmed", "skipped", "skipped", "skipped"]


def test_no_retrieval_span_unconfirmed(mk: ModuleType) -> None:
    loc = localize(mk.task(retrievals=()), mk.ticket(), [mk.entry()])
    assert loc.verdict == "unconfirmed"
    assert stage(loc, "indexed").status == "pass"
    assert stage(loc, "retrieved").missing == ("a retrieval span (the trace records no retriever call)",)


def test_filter_recorded_but_no_manifest_metadata(mk: ModuleType) -> None:
    r = mk.retrieval(docs=(), filter={"region": "CN"}, principal="procurement")
    loc = localize(mk.task(retrievals=(r,)), mk.ticket(), [mk.entry(metadata={})])
    st = stage(loc, "retrieved")
    assert st.status == "unconfirmed"
    assert st.missing == ("manifest metadata region of C-17/attachment@v2 (to replay the filter of span r1)",)


def test_acl_without_principal_unconfirmed(mk: ModuleType) -> None:
    r = mk.retrieval(docs=(), filter={"region": "CN"})
    loc = localize(mk.task(retrievals=(r,)), mk.ticket(), [mk.entry()])
    assert stage(loc, "retrieved").missing == (
        "the principal of retrieval span r1 (tracejudge.retrieval.principal)",
    )


def test_version_not_recorded_on_returned_doc(mk: ModuleType) -> None:
    r = mk.retrieval(docs=(mk.doc(version=None, content="Prepayment terms are in v2."),))
    loc = localize(mk.task(retrievals=(r,)), mk.ticket(), [mk.entry()])
    st = stage(loc, "retrieved")
    assert st.status == "unconfirmed"
    assert st.missing == ("the version of C-17/attachment returned by retrieval span r1",)
    # ...but a returned document carrying the required clause is the required material.
    r2 = mk.retrieval(docs=(mk.doc(version=None),))
    assert localize(mk.task(retrievals=(r2,)), mk.ticket()).verdict == "no_fault"


def test_model_input_not_recorded(mk: ModuleType) -> None:
    m = mk.model(input_recorded=False)
    loc = localize(mk.task(model_calls=(m,)), mk.ticket())
    assert loc.verdict == "unconfirmed"
    st = stage(loc, "in_context")
    assert st.missing == ("model input of span m1 (content capture was off)",)
    assert stage(loc, "used_by_model").status == "skipped"


def test_model_input_redacted(mk: ModuleType) -> None:
    m = mk.model(context="__REDACTED__", redacted=True)
    loc = localize(mk.task(model_calls=(m,)), mk.ticket())
    assert loc.verdict == "unconfirmed"
    assert stage(loc, "in_context").missing == ("model input of span m1 (redacted)",)


def test_partly_redacted_input_containing_clause_passes(mk: ModuleType) -> None:
    m = mk.model(redacted=True)
    assert stage(localize(mk.task(model_calls=(m,)), mk.ticket()), "in_context").status == "pass"


def test_no_model_span(mk: ModuleType) -> None:
    loc = localize(mk.task(model_calls=(), answer=None), mk.ticket())
    assert loc.verdict == "unconfirmed"
    assert stage(loc, "in_context").missing == ("a model (LLM) span in the trace",)


def test_no_output_recorded(mk: ModuleType) -> None:
    m = mk.model(output=None)
    loc = localize(mk.task(model_calls=(m,), answer=None), mk.ticket())
    assert loc.verdict == "unconfirmed"
    st = stage(loc, "used_by_model")
    assert st.status == "unconfirmed"
    assert st.missing == ("output of model span m1 (content capture was off)",)


def test_output_redacted(mk: ModuleType) -> None:
    m = mk.model(output=None)
    gap = Gap(kind="model_output_redacted", span_id="m1")
    loc = localize(mk.task(model_calls=(m,), answer=None, gaps=(gap,)), mk.ticket())
    assert stage(loc, "used_by_model").missing == ("output of span m1 (redacted)",)


def test_no_clause_falls_back_to_retrieved_content(mk: ModuleType) -> None:
    req = mk.material(clause=None)
    assert stage(localize(mk.task(), mk.ticket([req])), "in_context").status == "pass"
    dropped = mk.task(model_calls=(mk.model(context="other text entirely"),))
    assert localize(dropped, mk.ticket([req])).verdict == "dropped_in_context"


def test_no_clause_and_no_content_unconfirmed(mk: ModuleType) -> None:
    r = mk.retrieval(docs=(mk.doc(content=None),))
    loc = localize(mk.task(retrievals=(r,)), mk.ticket([mk.material(clause=None)]))
    assert stage(loc, "in_context").missing == (
        "a clause for C-17/attachment@v2 in the ticket (or the retrieved document's content in the trace)",
    )


def test_no_facts_unconfirmed_with_missing(mk: ModuleType) -> None:
    loc = localize(mk.task(), mk.ticket([mk.material(facts={})], superseded=[]))
    st = stage(loc, "used_by_model")
    assert st.status == "unconfirmed"
    assert st.missing == (
        "facts for C-17/attachment@v2 in the ticket that the answer states,"
        " or a usage judge to read the answer",
    )


def test_task_time_unknown_with_manifest(mk: ModuleType) -> None:
    loc = localize(mk.task(retrievals=(), start=None), mk.ticket(), [mk.entry()])
    assert loc.task_time is None
    assert stage(loc, "indexed").missing == ("task time (task_time in the ticket, or a trace start time)",)


def test_task_time_from_ticket_else_trace_start(mk: ModuleType) -> None:
    t = datetime(2026, 1, 5, 12)  # naive: read as UTC
    assert task_time(mk.task(), mk.ticket(task_time=t)) == t.replace(tzinfo=UTC)
    assert task_time(mk.task(), mk.ticket()) == mk.T0
    # Before v2 took effect, the ticket's basis did not apply.
    assert localize(mk.task(), mk.ticket(task_time=t), [mk.entry()]).verdict == "basis_not_in_effect"


# ---------------------------------------------------------------- the usage judge


class FakeJudge:
    def __init__(self, result: StageResult | None = None, error: Exception | None = None) -> None:
        self.result, self.error = result, error
        self.questions: list[UsageQuestion] = []

    def judge_usage(self, question: UsageQuestion) -> StageResult:
        self.questions.append(question)
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def test_judge_decides_when_facts_do_not(mk: ModuleType) -> None:
    verdict = StageResult(
        name="used_by_model",
        status="fail",
        detail="the answer applies the old cap",
        evidence=(Evidence(span_id="m1", note="'fine' implies a cap above 40,000"),),
    )
    judge = FakeJudge(verdict)
    answer = "Yes, the prepayment is fine."
    loc = localize(mk.task(answer=answer), mk.ticket(), judge=judge)
    assert loc.verdict == "ignored_by_model"
    assert stage(loc, "used_by_model").detail == "judge: the answer applies the old cap"
    q = judge.questions[0]
    assert q.answer == answer
    assert q.material.clause == mk.CLAUSE
    assert q.superseded[0].version == "v1"
    assert q.context_excerpt is not None
    assert "30,000" in q.context_excerpt


def test_judge_not_asked_when_facts_settle_it(mk: ModuleType) -> None:
    judge = FakeJudge(error=AssertionError("must not be called"))
    assert localize(mk.task(), mk.ticket(), judge=judge).verdict == "no_fault"
    assert judge.questions == []


def test_judge_without_evidence_or_failing_is_unconfirmed(mk: ModuleType) -> None:
    bare = StageResult(name="used_by_model", status="pass", detail="looks right")
    loc = localize(mk.task(answer="Yes."), mk.ticket(), judge=FakeJudge(bare))
    assert loc.verdict == "unconfirmed"
    assert "without citing evidence" in stage(loc, "used_by_model").detail
    broken = FakeJudge(error=TracejudgeError("judge timed out"))
    loc = localize(mk.task(answer="Yes."), mk.ticket(), judge=broken)
    assert loc.verdict == "unconfirmed"
    assert stage(loc, "used_by_model").missing == ("a usable judge reply",)


# ---------------------------------------------------------------- the JSON contract


def test_json_shape_of_design_5_5(mk: ModuleType) -> None:
    loc = localize(mk.task(model_calls=(mk.model(context="x", output=mk.BAD),), answer=mk.BAD), mk.ticket())
    data = loc.model_dump(mode="json")
    assert {"trace_id", "task_time", "verdict", "stages"} <= set(data)
    assert data["verdict"] == "dropped_in_context"
    assert data["task_time"].startswith("2026-11-18T09:30:00")
    for s in data["stages"]:
        assert {"name", "status", "detail", "evidence", "missing"} <= set(s)
        for e in s["evidence"]:
            assert set(e) == {"span_id", "note"}


def test_verdict_status_and_cause_names_are_design_5_5() -> None:
    from typing import get_args

    from tracejudge.schema import Cause, StageStatus, Verdict

    assert set(get_args(Verdict)) == {
        "not_indexed",
        "filtered",
        "not_retrieved",
        "dropped_in_context",
        "ignored_by_model",
        "no_fault",
        "unconfirmed",
        "basis_not_in_effect",
    }
    assert set(get_args(StageStatus)) == {"pass", "fail", "unconfirmed", "skipped"}
    assert set(get_args(Cause)) == {"filter", "permission", "rank"}
    assert STAGES == ("indexed", "retrieved", "in_context", "used_by_model")


# ---------------------------------------------------------------- ambiguous dates


def _dated(mk: ModuleType, context: str) -> Localization:
    req = mk.material(clause="Prepayment shall not exceed 30,000 RMB effective from 1 March 2026")
    calls = (mk.model(context=f"Prepayment shall not exceed 30,000 RMB effective from {context}."),)
    return localize(mk.task(model_calls=calls), mk.ticket([req]))


def test_ambiguous_date_in_the_input_leaves_in_context_unconfirmed(mk: ModuleType) -> None:
    loc = _dated(mk, "01/03/2026")
    assert loc.verdict == "unconfirmed"
    st = stage(loc, "in_context")
    assert st.status == "unconfirmed"
    assert "'01/03/2026' is read day first" in st.detail
    assert st.evidence[0].span_id == "m1"
    assert "'01/03/2026' is '1 March 2026' (2026-03-01) only if read day first" in st.evidence[0].note
    assert st.missing == (
        "the date format (locale) of the model input of span m1:"
        " whether '01/03/2026' is written day first or month first",
    )
    assert "month first" in stage(_dated(mk, "03/01/2026"), "in_context").detail


def test_unambiguous_dates_still_decide_in_context(mk: ModuleType) -> None:
    assert stage(_dated(mk, "1.3.2026"), "in_context").status == "pass"
    wrong = _dated(mk, "01/04/2026")  # neither reading is 1 March
    assert wrong.verdict == "dropped_in_context"
    assert stage(wrong, "in_context").missing == ()
