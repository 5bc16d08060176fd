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
_STOP_EVENT = "StopEvent(result=AgentOutput("
# The LLM span that builds a model call's request beside the call that sends it.
_PREPARE = "._prepare_chat_with_tools"
# Fewer characters of a cut answer than this do not single out the model call that wrote it.
_MIN_PREFIX = 20


class LlamaIndex(NoRecords):
    """LlamaIndex: a tool span's ``ToolOutput`` is the tool's result ``raw_output``."""

    name = "llamaindex"

    def classify(self, view: SpanView) -> StepKind | None:
        """An LLM's ``_prepare_chat_with_tools`` span is a chain step: it builds a request, sends nothing."""
        if view.raw.scope_name == SCOPE and view.raw.name.endswith(_PREPARE):
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
        """The text of the agent's response in its root's ``StopEvent`` repr. Cut there and completed by no
        model call's reply: the part shown, the root marked ``model_output_truncated`` (past the cut the
        answer may take back what the part states, DESIGN 5.5)."""
        if root.raw.scope_name != SCOPE:
            return None
        value = root.attrs.get("output.value")
        if not isinstance(value, str) or not value.startswith(_STOP_EVENT):
            return None
        found = _RESPONSE_TEXT.match(value)
        rest = value[found.end() :] if found is not None else ""
        literal = _string_literal(rest)
        if literal is not None and literal[1].startswith(")]"):  # the whole text of the only block
            return (literal[0], root.span_id) if literal[0] else None
        if not value.endswith(_CUT):
            return None  # whole, of another shape (a second block): the free-form reader reads the repr
        shown = literal[0] if literal is not None else _shown(rest)
        completed = _completed(shown, views) if shown is not None else None
        if completed is not None:
            return completed
        root.gap(
            "model_output_truncated",
            f"the agent's answer is cut short in its root's StopEvent repr ({len(value)} characters recorded)"
            " and no model call's reply completes it",
            "the reply of the model call that wrote it: its llm.output_messages",
        )
        return shown or value, root.span_id


def _shown(rest: str) -> str | None:
    """The part of a cut response text the repr shows (its literal opened, ``...`` after it), when it holds
    no escape or quote (then its characters are the answer's as written); None otherwise."""
    quote, shown = rest[:1], rest[1 : -len(_CUT)]
    if quote not in ("'", '"') or "\\" in shown or quote in shown:
        return None
    return shown


def _completed(shown: str, views: Sequence[SpanView]) -> tuple[str, str] | None:
    """The whole answer of a cut repr: the reply of the agent's last model call that called no tool, when it
    begins with the part shown. A reply that called tools, or after which a tool ran, was a step of the run,
    not its response, though its text may begin the same way; nor is an earlier reply read when a model
    call's span is missing."""
    if len(shown) < _MIN_PREFIX:
        return None
    ours = [v for v in views if v.raw.scope_name == SCOPE]
    calls = sorted((v for v in ours if v.step == "model"), key=lambda v: v.raw.end_time_unix_nano)
    if any(_unsent(view, calls) for view in ours if view.raw.name.endswith(_PREPARE)):
        return None
    answering = [v for v in calls if not _called_tools(v)]
    if not answering:
        return None
    last = answering[-1]
    if any(v.step == "tool" and v.raw.start_time_unix_nano >= last.raw.end_time_unix_nano for v in views):
        return None
    reply = last.attrs.get("llm.output_messages.0.message.content")
    return (reply, last.span_id) if isinstance(reply, str) and reply.startswith(shown) else None


def _unsent(prepared: SpanView, calls: Sequence[SpanView]) -> bool:
    """Whether no model call beside a ``_prepare_chat_with_tools`` span (the same parent, started after it)
    sent the request it built: that call's span did not arrive."""
    parent, start = prepared.raw.parent_span_id, prepared.raw.start_time_unix_nano
    return not any(c.raw.parent_span_id == parent and c.raw.start_time_unix_nano >= start for c in calls)


def _called_tools(view: SpanView) -> bool:
    """Whether a model call's output records a tool call."""
    return any(k.startswith("llm.output_messages.") and ".message.tool_calls." in k for k in view.attrs)


def _string_literal(source: str) -> tuple[str, str] | None:
    """The Python string literal ``source`` starts with and what follows it; None if it does not start with a
    whole one (a value cut short ends inside it)."""
    try:
        token = next(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, StopIteration):
        return None
    if token.type != tokenize.STRING:
        return None
    value = ast.literal_eval(token.string)
    return (value, source[len(token.string) :]) if isinstance(value, str) else None


CONVENTION = LlamaIndex()
