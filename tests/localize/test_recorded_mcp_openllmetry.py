"""Triage on record_mcp_openllmetry.py's agent, whose search is an MCP server's tool, under OpenLLMetry
(opentelemetry-instrumentation-mcp and -openai 0.62.4). The MCP instrumentation records the client's
``tools/call`` request as a tool span whose ``traceloop.entity.output`` is ``{"result": <text>}`` — the text
of the result's FIRST content item only. What it holds was returned; what it lacks may have been too (a tool
returning a list sends an item per element). So the documents in it read as returned (under a manifest
naming them, the tool is a retrieval), and a material absent from it is never read as not returned: the
``filtered`` run (no span records the filter: the tool ran in the session's context, not the tool span's) and
the ``items_dropped`` run (attachment v2 in the second item) stay ``unconfirmed``.
"""

from __future__ import annotations

from types import ModuleType

import pytest

# run -> (verdict, stage statuses) under the recordings' index (v2 indexed, in the EU)
RUNS = {
    "rag": ("no_fault", ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", ["pass", "pass", "pass", "fail"]),
    "dropped": ("dropped_in_context", ["pass", "pass", "fail", "skipped"]),
    "filtered": ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"]),
    "items_dropped": ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"]),
}
FIRST_ITEM = "opentelemetry-instrumentation-mcp records the first item of a tools/call result only"


@pytest.mark.parametrize("run", list(RUNS))
def test_each_run_gets_what_its_tool_span_can_tell(mk: ModuleType, run: str) -> None:
    # Before the MCP result was read, every run was unconfirmed: {"result": "<json>"} named no document.
    verdict, statuses = RUNS[run]
    loc = mk.triage_framework(f"mcp_openllmetry_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == (verdict, statuses)
    if verdict == "unconfirmed":
        # Read as all it returned, the tool's first item would make v2 not returned: not_retrieved (rank).
        assert any(FIRST_ITEM in item for item in loc.stages[1].missing)


def test_the_tool_span_holds_the_first_item_and_reads_as_partial(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("mcp_openllmetry_items_dropped.pb"))
    (tool,) = record.tool_calls
    assert (tool.name, tool.result_partial) == ("search_documents", True)
    # FastMCP sent the two documents as two items; the span kept the first (v1), its text a JSON object.
    assert [(d.doc_id, d.version) for d in tool.documents or ()] == [("C-17/attachment", "v1")]
    (gap,) = [g for g in record.gaps if g.kind == "retrieval_documents_not_recorded"]
    assert gap.span_id == tool.span_id
    assert FIRST_ITEM in gap.switch
    # The model was sent both (the app joined the items): the tool span is what fell short.
    (last, *_) = reversed(record.model_calls)
    assert "Attachment v2" in last.input_text


def test_a_result_sent_whole_is_still_read_as_possibly_cut(mk: ModuleType) -> None:
    # One item (a JSON text) holds everything, but the span cannot say there was one item only.
    record = mk.normalize(mk.recorded_spans("mcp_openllmetry_rag.pb"))
    (tool,) = record.tool_calls
    assert tool.result_partial
    assert [(d.doc_id, d.version) for d in tool.documents or ()] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]


def test_never_indexed_is_told_by_the_manifest(mk: ModuleType) -> None:
    loc = mk.triage_framework("mcp_openllmetry_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])
