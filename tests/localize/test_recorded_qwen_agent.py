"""Triage over a Qwen-Agent ``Assistant`` (the API's own tool calls, ``use_raw_api``) whose model calls are
traced by openinference-instrumentation-openai: Qwen-Agent has no tracing of its own, so the tool records
itself as an OTel GenAI tool span marked ``gen_ai.tool.type = datastore`` (its result the documents with
``doc_id``/``version``) and the app records the run as a CHAIN root. Fixtures from
tests/fixtures/traces/record_qwen_agent.py (the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

FILE = "qwen_agent_{run}.pb"


def test_the_datastore_tool_is_the_retrieval(mk: ModuleType) -> None:
    spans = mk.recorded_spans(FILE.format(run="rag"))
    record = mk.normalize(spans)
    [retrieval] = record.retrievals
    assert [(d.doc_id, d.version) for d in retrieval.documents] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]
    first, last = record.model_calls
    assert [c["name"] for m in first.output_messages for c in m.tool_calls] == ["search_documents"]
    assert record.final_answer == last.output_text
    assert mk.triage_framework(FILE.format(run="rag"), None).verdict == "no_fault"
    # unmarked (no gen_ai.tool.type), the tool's documents are no retrieval without a manifest
    unmarked = mk.normalize(mk.drop_attribute(spans, "gen_ai.tool.type"))
    assert unmarked.retrievals == ()
    assert any(g.kind == "no_retrieval_span" and "search_documents" in g.detail for g in unmarked.gaps)
