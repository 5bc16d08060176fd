"""Triage over a RAG app whose answer is an Instructor structured output (``ContractAnswer``), traced by
openinference-instrumentation-instructor and -openai: the model call answers with one tool call whose
arguments are the object Instructor returns, so that call wrote the answer (``_instructor.py``). The app
records its search as an OpenInference RETRIEVER span (chunk ids and text, no metadata: the manifest's
``ids`` or ``content`` identify them) and its answer on its CHAIN root. Fixtures from
tests/fixtures/traces/record_instructor.py (the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "instructor_{run}.pb"
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("ids", [None, "chunk"])
@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, run: str, ids: str | None) -> None:
    # identified by the manifest's content (the returned text) or by its ids (the chunk ids)
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(FILE.format(run=run), mk.policy_manifest("EU", ids=ids))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_never_indexed_is_told_by_the_manifest_not_the_trace(mk: ModuleType) -> None:
    never = FILE.format(run="never_indexed")
    loc = mk.triage_framework(never, mk.never_indexed_manifest(ids="chunk"))
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])
    loc = mk.triage_framework(never, mk.policy_manifest("EU", ids="chunk"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])


def test_without_instructors_span_the_answering_call_is_not_known(mk: ModuleType) -> None:
    # Then the only model call asked for a tool and nothing answered after it: the call that wrote the
    # answer is not known, so the clause's absence from its input proves nothing.
    spans = [s for s in mk.recorded_spans(FILE.format(run="dropped")) if s.name != "instructor.create"]
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
    assert any("asked for a tool" in item for item in loc.stages[2].missing)
