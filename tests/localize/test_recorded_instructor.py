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


def test_without_instructors_span_the_answering_call_is_not_known(mk: ModuleType) -> None:
    # Then the only model call asked for a tool and nothing answered after it: the call that wrote the
    # answer is not known, so the clause's absence from its input proves nothing.
    # (Read whole: the spans under the lost span this run's. They name a parent not received, which may be
    # another run's lost root: read as a run of their own too, the readings already differ on retrieval.)
    spans = [s for s in mk.recorded_spans(FILE.format(run="dropped")) if s.name != "instructor.create"]
    record = mk.normalize(spans)
    loc = mk.localize(record.model_copy(update={"runs": ()}), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
    assert any("asked for a tool" in item for item in loc.stages[2].missing)
    loc = mk.localize(record, mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])


@pytest.mark.parametrize(
    ("run", "verdict"),
    [
        ("rag", "no_fault"),
        ("ignored", "ignored_by_model"),
        ("filtered", "filtered"),
        ("dropped", "dropped_in_context"),
    ],
)
def test_the_returned_text_alone_identifies_the_documents(mk: ModuleType, run: str, verdict: str) -> None:
    # No chunk ids in the manifest: its content identifies the text the retriever span recorded.
    loc = mk.triage_framework(FILE.format(run=run), mk.policy_manifest("EU"))
    assert loc.verdict == verdict
