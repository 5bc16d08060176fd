"""LlamaIndex agents' tools under openinference-instrumentation-llama-index (4.6).

A ``FunctionTool`` an agent calls (``FunctionAgent``, ``ReActAgent``: the TOOL span ``FunctionTool.acall`` /
``.call``) records LlamaIndex's ``ToolOutput`` as ``output.value``: ``{"blocks": [{"text": ...}],
"tool_name", "raw_input", "raw_output", "is_error"}``. The tool's result is ``raw_output``, what the function
returned (JSON text when it returned documents); the blocks hold its text as the model is shown it.

Each model call of such an agent is two LLM spans side by side: ``OpenAI._prepare_chat_with_tools`` (its
arguments and the message list it builds, as Python reprs) and the call itself (``OpenAI.astream_chat``,
``.chat``, ...: ``llm.input_messages`` / ``llm.output_messages``). Only the second sends anything: the first
is a chain step. The agent's root (``FunctionAgent.run``, ``AgentWorkflow.run``) records the workflow's
``StopEvent`` repr as ``output.value``, ``StopEvent(result=AgentOutput(response=ChatMessage(role=...,
blocks=[TextBlock(block_type='text', text='...')], ...)))``, cut at 200 characters (``...`` appended): the
answer is that response's text — whole when short, else the output of the last model call whose text starts
with what the repr shows of it (the agent's response is that call's reply). Retrievers and query engines are
plain OpenInference.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Sequence
from typing import Any

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._shapes import documents_from_value
from tracejudge.normalize._values import REDACTED, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, StepKind

SCOPE = "openinference.instrumentation.llama_index"
# An agent's answer in its root's StopEvent repr: the first text block of the response message.
_RESPONSE_TEXT = re.compile(
    r"^StopEvent\(result=AgentOutput\(response=ChatMessage\(role=<MessageRole\.ASSISTANT: 'assistant'>, "
    r"additional_kwargs=\{[^{}]*\}, blocks=\[TextBlock\(block_type='text', text="
)
# The instrumentation's cut: the repr's first 197 characters and "...".
_CUT = "..."
# Fewer characters of a cut answer than this do not single out the model call that wrote it.
_MIN_PREFIX = 20


class LlamaIndex(NoRecords):
    """LlamaIndex: a tool span's ``ToolOutput`` is the tool's result ``raw_output``."""

    name = "llamaindex"

    def classify(self, view: SpanView) -> StepKind | None:
        """An LLM's ``_prepare_chat_with_tools`` span is a chain step: it builds a request, sends nothing."""
        if view.raw.scope_name == SCOPE and view.raw.name.endswith("._prepare_chat_with_tools"):
            return "chain"
        return None

    def documents(self, view: SpanView) -> list[Document] | None:
        """A retrieval tool's documents: its ``ToolOutput``'s ``raw_output``."""
        result = self.tool_result(view)
        return None if result is None else documents_from_value(view, maybe_json(result))

    def tool_result(self, view: SpanView) -> Any | None:
        if view.raw.scope_name != SCOPE or view.attrs.get("openinference.span.kind") != "TOOL":
            return None
        value = view.attrs.get("output.value")
        parsed = None if value is None or value == REDACTED else maybe_json(value)
        if isinstance(parsed, dict) and "tool_name" in parsed and "raw_output" in parsed:
            return parsed["raw_output"]
        return None

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:
        """The text of the agent's response in its root's ``StopEvent`` repr."""
        if root.raw.scope_name != SCOPE:
            return None
        value = root.attrs.get("output.value")
        found = _RESPONSE_TEXT.match(value) if isinstance(value, str) else None
        if found is None or not isinstance(value, str):
            return None
        rest = value[found.end() :]
        text = _string_literal(rest)
        if text:
            return text, root.span_id
        return _completed(rest, views)


def _completed(rest: str, views: Sequence[SpanView]) -> tuple[str, str] | None:
    """The whole answer of a cut repr: the reply of the last model call that begins with the part shown."""
    if not rest.endswith(_CUT) or rest[:1] not in ("'", '"'):
        return None
    shown = rest[1 : -len(_CUT)]
    # An escape or a quote in the part shown: its characters are not the answer's as written.
    if len(shown) < _MIN_PREFIX or "\\" in shown or rest[0] in shown:
        return None
    calls = sorted(
        (v for v in views if v.step == "model" and v.raw.scope_name == SCOPE),
        key=lambda v: v.raw.end_time_unix_nano,
    )
    for view in reversed(calls):
        reply = view.attrs.get("llm.output_messages.0.message.content")
        if isinstance(reply, str) and reply.startswith(shown):
            return reply, view.span_id
    return None


def _string_literal(source: str) -> str | None:
    """The Python string literal ``source`` starts with; None if it does not start with a whole one (a
    value cut short at an exporter's limit ends inside it)."""
    try:
        token = next(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, StopIteration):
        return None
    if token.type != tokenize.STRING:
        return None
    value = ast.literal_eval(token.string)
    return value if isinstance(value, str) else None


CONVENTION = LlamaIndex()
