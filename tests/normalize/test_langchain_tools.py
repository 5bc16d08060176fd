"""A LangChain tool's serialized ``ToolMessage`` (openinference-instrumentation-langchain's TOOL span output)
is read as the tool's result: its ``content`` (tests/fixtures/traces/record_langchain_agent.py)."""

from __future__ import annotations

import json

import pytest

from tests.localize.conftest import recorded_spans
from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan


def _tool_output(value: str) -> list[RawSpan]:
    return [
        s.model_copy(update={"attributes": {**s.attributes, "output.value": value}})
        if s.name == "search_documents"
        else s
        for s in recorded_spans("langchain_agent_rag.pb")
    ]


def test_the_content_of_the_tool_message_is_the_result() -> None:
    [tool] = normalize(recorded_spans("langchain_agent_rag.pb")).tool_calls
    assert isinstance(tool.result, list)
    assert [(d["doc_id"], d["version"]) for d in tool.result] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]


@pytest.mark.parametrize(
    "output",
    [
        json.dumps({"type": "ai", "data": {"content": json.dumps([{"doc_id": "C-17/attachment"}])}}),
        json.dumps({"type": "tool", "data": "not a message"}),
        "plain text",
    ],
)
def test_another_shape_is_not_read_as_a_tool_message(output: str) -> None:
    [tool] = normalize(_tool_output(output)).tool_calls
    assert tool.documents is None
