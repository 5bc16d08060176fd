"""Triage over a Semantic Kernel ChatCompletionAgent traced by its own diagnostics: the messages are OTLP
log records (JSON-text bodies) of the chat spans, the function's result ``gen_ai.tool.call.result``;
each file holds the trace request and the log request. The four faults, the unmarked tool and the filter
replay are in test_recorded_frameworks.py. Fixtures from tests/fixtures/traces/record_semantic_kernel.py
(the app and its runs: _policy.py); the manifest is the recordings' index with each version's
``content`` (conftest ``policy_manifest``).
"""

from __future__ import annotations

from types import ModuleType

FILE = "semantic_kernel_{run}.json"


def test_without_its_log_records_the_model_input_is_missing_and_the_switch_named(mk: ModuleType) -> None:
    # The spans alone (the log request not collected): the clause cannot be looked for.
    [spans, _] = mk.iter_otlp_file(mk.RECORDED / FILE.format(run="dropped"))
    record = mk.normalize(spans.spans)
    loc = mk.localize(record, mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
    details = [g.detail for g in record.gaps if g.kind == "model_input_not_recorded"]
    assert details
    assert all("SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE" in d for d in details)
