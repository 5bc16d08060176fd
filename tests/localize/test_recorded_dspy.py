"""Triage over a DSPy RAG module traced by openinference-instrumentation-dspy: ``dspy.Retrieve`` (RETRIEVER,
the passages' text only) around a ``ColBERTv2`` client (RETRIEVER, the passages' pids, text and scores).
Fixtures from tests/fixtures/traces/record_dspy.py (the app and its runs: _policy.py; pid 41 is attachment
v1, 42 attachment v2). This is the trace of issue 11's confident wrong verdict: with the filter and the
principal recorded, triage answered ``not_retrieved (rank)`` for the passage ranked first.
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "dspy_{run}.pb"
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_when_the_manifest_lists_the_pids(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(FILE.format(run=run), mk.policy_manifest("EU", ids="pid"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_the_two_retriever_levels_are_one_call_with_the_pid_joined_to_the_text(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans(FILE.format(run="rag")))
    [call] = record.retrievals
    assert len(call.span_ids) == 2
    assert [(d.raw_id, (d.content or "")[:13]) for d in call.documents] == [
        ("42", "Attachment v2"),
        ("41", "Contract C-17"),
    ]
    loc = mk.triage_framework(FILE.format(run="rag"), mk.policy_manifest("EU", ids="pid"))
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)


def test_the_passage_text_identifies_the_version_when_the_manifest_has_no_pids(mk: ModuleType) -> None:
    # pid 42 names no manifest entry, but its text is attachment v2's content and no other's.
    loc = mk.triage_framework(FILE.format(run="rag"), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("no_fault", ["pass", "pass", "pass", "pass"])


@pytest.mark.parametrize("run", ["rag", "ignored", "dropped"])
def test_unidentified_passages_never_give_not_returned(mk: ModuleType, run: str) -> None:
    # Neither pids nor content in the manifest: nothing says which version a passage is. Before,
    # this answered not_retrieved (rank) for the passage ranked first; now the identity is asked for.
    entries = [e.model_copy(update={"content": None}) for e in mk.policy_manifest("EU")]
    loc = mk.triage_framework(FILE.format(run=run), entries)
    assert loc.verdict == "unconfirmed"
    assert mk.statuses(loc) == ["pass", "unconfirmed", "skipped", "skipped"]
    # What would identify the passages comes first, before any filter or principal.
    missing = loc.stages[1].missing
    identities = [i for i, item in enumerate(missing) if "identity of the document" in item]
    assert identities == [0, 1]


def test_a_replayed_filter_exclusion_stands_beside_unidentified_passages(mk: ModuleType) -> None:
    # region == CN excludes the EU attachment whatever the unidentified passages are: it could not have
    # been returned, so the filter is the cause.
    entries = [e.model_copy(update={"content": None}) for e in mk.policy_manifest("EU")]
    loc = mk.triage_framework(FILE.format(run="filtered"), entries)
    assert (loc.verdict, loc.cause) == ("filtered", "filter")
