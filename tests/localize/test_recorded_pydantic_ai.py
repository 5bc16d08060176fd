"""Triage over a pydantic-ai agent traced by its built-in OpenTelemetry instrumentation: the documents are
only in the search tool span's ``gen_ai.tool.call.result``. The four faults, the unmarked tool and the
filter replay are in test_recorded_frameworks.py. Fixtures from
tests/fixtures/traces/record_pydantic_ai.py (the app and its runs: _policy.py); the manifest is the
recordings' index with each version's ``content`` (conftest ``policy_manifest``).
"""

from __future__ import annotations

from types import ModuleType

FILE = "pydantic_ai_{run}.pb"


def test_without_content_capture_no_verdict_and_the_gap_names_include_content(mk: ModuleType) -> None:
    # include_content=False records neither messages nor tool results: nothing to read a retrieval from.
    spans = mk.recorded_spans(FILE.format(run="dropped"))
    for key in ("gen_ai.tool.call.result", "gen_ai.tool.call.arguments", "gen_ai.input.messages"):
        spans = mk.drop_attribute(spans, key)
    record = mk.normalize(spans)
    loc = mk.localize(record, mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    assert any(
        "include_content=True" in g.detail for g in record.gaps if g.kind == "model_input_not_recorded"
    )
