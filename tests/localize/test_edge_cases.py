"""Edge cases through the real normalizer: OpenInference spans as an instrumented agent sends them.

Redacted content, absent spans, a clause split across two chunks, amounts and dates written in
other formats, and a ticket naming a version the manifest does not list.
"""

from __future__ import annotations

import json
from datetime import date

import pytest

from tracejudge.localize import localize, trace_not_stored
from tracejudge.normalize import normalize
from tracejudge.schema import Localization, ManifestEntry, Material, RawSpan, StageResult, Ticket

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
BASE = 1_800_000_000_000_000_000  # 2027-01-15: after every manifest date below
DOC = "C-17/attachment"
V2 = "Prepayment shall not exceed 30,000 RMB per order."
GOOD = "No: the cap is 30,000 RMB."
TICKET = Ticket(
    ticket="EXP-311",
    trace_id=TRACE,
    required=(
        Material(
            doc_id=DOC,
            version="v2",
            clause="Prepayment shall not exceed 30,000 RMB",
            facts={"prepayment_cap_rmb": 30000},
        ),
    ),
    superseded=(Material(doc_id=DOC, version="v1", facts={"prepayment_cap_rmb": 50000}),),
)
MANIFEST = [
    ManifestEntry.model_validate(
        {
            "doc_id": DOC,
            "version": "v2",
            "effective_from": "2026-03-01T00:00:00Z",
            "indexed_at": "2026-03-02T03:00:00Z",
            "metadata": {"region": "CN"},
            "acl": ["procurement"],
        }
    )
]
Chunk = tuple[str, str, str]  # id, content, version


def spans(
    prompt: str | None,
    answer: str = GOOD,
    chunks: list[Chunk] | None = None,
    *,
    retrieval: bool = True,
) -> list[RawSpan]:
    """An agent span, a retriever span returning ``chunks``, and an LLM span whose user message is
    ``prompt`` (no LLM span when None)."""
    chunks = [("chunk-1", V2, "v2")] if chunks is None else chunks
    docs: dict[str, str] = {}
    for i, (ident, content, version) in enumerate(chunks):
        docs[f"retrieval.documents.{i}.document.id"] = ident
        docs[f"retrieval.documents.{i}.document.content"] = content
        docs[f"retrieval.documents.{i}.document.metadata"] = json.dumps({"doc_id": DOC, "version": version})
    out = [
        RawSpan(
            trace_id=TRACE,
            span_id="1" * 16,
            name="agent",
            start_time_unix_nano=BASE,
            end_time_unix_nano=BASE + 3000,
            attributes={
                "openinference.span.kind": "AGENT",
                "input.value": "Can I prepay 40,000 RMB?",
                "output.value": answer,
            },
        )
    ]
    if retrieval:
        out.append(
            RawSpan(
                trace_id=TRACE,
                span_id="2" * 16,
                parent_span_id="1" * 16,
                name="retrieve",
                start_time_unix_nano=BASE + 1,
                end_time_unix_nano=BASE + 2,
                attributes={"openinference.span.kind": "RETRIEVER", "input.value": "prepayment cap", **docs},
            )
        )
    if prompt is not None:
        out.append(
            RawSpan(
                trace_id=TRACE,
                span_id="3" * 16,
                parent_span_id="1" * 16,
                name="llm",
                start_time_unix_nano=BASE + 3,
                end_time_unix_nano=BASE + 4,
                attributes={
                    "openinference.span.kind": "LLM",
                    "llm.input_messages.0.message.role": "user",
                    "llm.input_messages.0.message.content": prompt,
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": answer,
                },
            )
        )
    return out


def triage(
    raw: list[RawSpan], ticket: Ticket = TICKET, manifest: list[ManifestEntry] | None = None
) -> Localization:
    return localize(normalize(raw), ticket, MANIFEST if manifest is None else manifest)


def stage(loc: Localization, name: str) -> StageResult:
    return next(s for s in loc.stages if s.name == name)


# ---------------------------------------------------------------- records missing


def test_redacted_model_input_is_unconfirmed_and_says_redacted() -> None:
    loc = triage(spans("__REDACTED__"))
    st = stage(loc, "in_context")
    assert loc.verdict == "unconfirmed"
    assert st.status == "unconfirmed"
    assert st.missing == ("model input of span 3333333333333333 (redacted)",)
    assert st.detail == "the model input was not recorded (1 model call)"
    assert stage(loc, "used_by_model").status == "skipped"


def test_redacted_answer_is_unconfirmed_and_says_redacted() -> None:
    loc = triage(spans(f"Context: {V2}", answer="__REDACTED__"))
    assert loc.verdict == "unconfirmed"
    assert [s.status for s in loc.stages] == ["pass", "pass", "pass", "unconfirmed"]
    assert stage(loc, "used_by_model").missing == ("output of span 3333333333333333 (redacted)",)


def test_no_retrieval_span_is_unconfirmed_at_retrieved() -> None:
    loc = triage(spans(f"Context: {V2}", retrieval=False))
    assert [s.status for s in loc.stages] == ["pass", "unconfirmed", "skipped", "skipped"]
    # It also says how to get one (the switch the trace's no_retrieval_span gap names).
    assert stage(loc, "retrieved").missing == (
        "a retrieval span (the trace records no retriever call; to record it: mark the retrieval:"
        " gen_ai.tool.type = datastore on its tool span, tracejudge.step = retrieval, an OpenInference"
        " RETRIEVER span, or give a manifest whose entries name the documents it returns)",
    )


def test_no_model_span_is_unconfirmed_at_in_context() -> None:
    loc = triage(spans(None))
    assert [s.status for s in loc.stages] == ["pass", "pass", "unconfirmed", "skipped"]
    assert stage(loc, "in_context").missing == ("a model (LLM) span in the trace",)


def test_a_version_the_manifest_does_not_list_is_unconfirmed_naming_what_it_lists() -> None:
    v1_only = [MANIFEST[0].model_copy(update={"version": "v1"})]
    loc = triage(spans("Context: none", chunks=[("c", "Prepayment is capped.", "v1")]), manifest=v1_only)
    st = stage(loc, "indexed")
    assert loc.verdict == "unconfirmed"
    assert st.missing == ("index manifest entry for C-17/attachment@v2",)
    assert st.evidence[0].note == "manifest lists C-17/attachment only as v1"
    assert any("returned a different version" in e.note for e in st.evidence)


def test_trace_not_stored_is_unconfirmed_asking_for_the_trace() -> None:
    loc = trace_not_stored(TICKET, "f" * 32)
    assert loc.verdict == "unconfirmed"
    assert [s.status for s in loc.stages] == ["unconfirmed", "skipped", "skipped", "skipped"]
    assert loc.stages[0].missing == (f"the spans of trace {'f' * 32} in the store (collect the trace first)",)


# ---------------------------------------------------------------- a clause split across chunks

HEAD = ("chunk-1", "Attachment v2, payment terms. Prepayment shall not", "v2")
TAIL = ("chunk-2", "exceed 30,000 RMB per order. The balance is due in sixty days.", "v2")


def test_clause_split_across_two_chunks_both_in_the_prompt_is_in_context() -> None:
    prompt = f"Context:\n[1] {HEAD[1]}\n\n[2] {TAIL[1]}\n\nQuestion: can I prepay 40,000 RMB?"
    loc = triage(spans(prompt, chunks=[HEAD, TAIL]))
    st = stage(loc, "in_context")
    assert loc.verdict == "no_fault"
    assert st.status == "pass"
    assert "split across two retrieved chunks" in st.detail
    assert "split between retrieved chunks at rank 1 and 2" in st.evidence[0].note


def test_clause_split_across_chunks_in_reverse_rank_order() -> None:
    prompt = f"Context:\n[1] {TAIL[1]}\n---\n[2] {HEAD[1]}"
    assert stage(triage(spans(prompt, chunks=[TAIL, HEAD])), "in_context").status == "pass"


def test_clause_split_across_chunks_with_one_part_left_out_is_dropped() -> None:
    prompt = f"Context:\n[1] {HEAD[1]}\n\nQuestion: can I prepay 40,000 RMB?"
    loc = triage(spans(prompt, answer="Yes, up to 50,000 RMB.", chunks=[HEAD, TAIL]))
    assert loc.verdict == "dropped_in_context"


# ---------------------------------------------------------------- amounts and dates in other formats


@pytest.mark.parametrize(
    ("written", "answer"),
    [
        ("Prepayment shall not exceed RMB 30,000 per order.", "No: the cap is RMB 30,000."),
        ("Prepayment shall not exceed 30 000,00 RMB per order.", "No: the cap is 30 000,00 RMB."),
        ("PREPAYMENT SHALL NOT EXCEED 30.000 RMB per order.", "No: the cap is 30.000,00 RMB."),
        ("Prepayment shall not\nexceed 30k RMB per order.", "No: the cap is ¥30k."),
        ("Prepayment shall not exceed 30000 yuan per order.", "No: the cap is 3万元."),
    ],
)
def test_amounts_written_otherwise_reach_the_model_and_agree(written: str, answer: str) -> None:
    loc = triage(spans(f"Context: {written}", answer=answer))
    assert loc.verdict == "no_fault", loc.summary


@pytest.mark.parametrize("answer", ["It applies from 01.03.2026.", "It applies from 1-Mar-2026."])
def test_date_facts_written_otherwise(answer: str) -> None:
    required = TICKET.required[0].model_copy(
        update={"clause": "effective 1 March 2026", "facts": {"effective": date(2026, 3, 1)}}
    )
    ticket = TICKET.model_copy(update={"required": (required,), "superseded": ()})
    loc = triage(spans("Revised schedule, effective 1 March 2026.", answer=answer), ticket)
    assert stage(loc, "used_by_model").status == "pass", loc.summary


def test_ambiguous_date_that_may_be_the_superseded_one_is_unconfirmed() -> None:
    required = TICKET.required[0].model_copy(
        update={"clause": "effective 1 March 2026", "facts": {"effective": date(2026, 3, 1)}}
    )
    old = Material(doc_id=DOC, version="v1", facts={"effective": date(2026, 1, 3)})
    ticket = TICKET.model_copy(update={"required": (required,), "superseded": (old,)})
    loc = triage(spans("Revised schedule, effective 1 March 2026.", answer="From 01/03/2026."), ticket)
    st = stage(loc, "used_by_model")
    assert st.status == "unconfirmed"
    assert "both" in st.detail
