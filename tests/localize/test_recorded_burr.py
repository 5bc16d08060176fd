"""Triage over a two-action Burr application (``retrieve`` -> ``generate``) traced by Burr's
``OpenTelemetryBridge``: Burr's spans carry only what an action logs (``__tracer.log_attributes``), so the
``retrieve`` action logs its search as the OTel GenAI retrieval (ids ``doc_id@version``, no text) on a
``__tracer`` sub-span; openinference-instrumentation-openai records the model call. Fixtures from
tests/fixtures/traces/record_burr.py (the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

FILE = "burr_{run}.pb"


def test_burrs_own_spans_hold_only_what_the_actions_logged(mk: ModuleType) -> None:
    spans = mk.recorded_spans(FILE.format(run="rag"))
    burr = {s.name: s for s in spans if s.scope_name == "burr.integrations.opentelemetry"}
    assert set(burr) == {"run", "retrieve", "search", "generate"}
    assert all(not burr[name].attributes for name in ("run", "retrieve", "generate"))
    record = mk.normalize(spans)
    [retrieval] = record.retrievals
    assert retrieval.span_id == burr["search"].span_id
    # the ids as recorded; triage reads doc_id@version against the manifest
    assert [d.doc_id for d in retrieval.documents] == ["C-17/attachment@v2", "C-17/attachment@v1"]
    [call] = record.model_calls
    assert record.input == "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
    assert record.final_answer == call.output_text
    # ids carry the version: the trace alone shows v2 returned and its clause in the model input
    assert mk.triage_framework(FILE.format(run="rag"), None).verdict == "no_fault"
