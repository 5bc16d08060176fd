"""Triage over a Langroid ``ChatAgent`` (OpenAI tool calls) whose model calls are traced by
openinference-instrumentation-openai: Langroid has no tracing of its own, so the app records the run as a
CHAIN root and the search, inside its ``ToolMessage`` handler, as an OpenInference RETRIEVER span (the
index's chunk ids, the text, ``doc_id``/``version`` in the metadata, the filter as
``tracejudge.retrieval.filter``). Fixtures from tests/fixtures/traces/record_langroid.py (recorded offline
with tiktoken's ``cl100k_base`` from LiteLLM's wheel; the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

FILE = "langroid_{run}.pb"


def test_the_retriever_span_identifies_documents_by_their_metadata(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans(FILE.format(run="rag")))
    assert record.input == "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
    [retrieval] = record.retrievals
    assert [(d.doc_id, d.version) for d in retrieval.documents] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]
    first, last = record.model_calls
    assert [c["name"] for m in first.output_messages for c in m.tool_calls] == ["search_documents"]
    assert record.final_answer == last.output_text
    # the tool result reached the answering call
    assert "Prepayment shall not exceed 30,000 RMB per order." in last.input_text
    # ids, versions and text are all in the trace: no manifest needed to see v2 returned and used
    assert mk.triage_framework(FILE.format(run="rag"), None).verdict == "no_fault"
