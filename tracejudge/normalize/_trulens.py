"""TruLens' OTel tracing (``trulens.otel.semconv``: ``ai.observability.*``).

TruLens marks what a span is with ``ai.observability.span_type``: ``record_root`` (the app's call:
``record_root.input`` / ``.output`` are the user's request and the answer), ``retrieval``
(``retrieval.query_text``, and ``retrieval.retrieved_contexts``: the returned texts, a string list with
no ids — identified by the manifest's ``content``) and ``generation`` (a model call). A generation span
records only the instrumented function's arguments and return value (``call.kwargs.<name>``,
``call.return``, each ``str()`` of the value when it is not JSON): the model input read is a ``prompt``,
``input`` or ``messages`` argument that is a plain string, or LangChain's prompt value, which TruLens
writes as its ``str()`` (``messages=[HumanMessage(content='…'), …]``, ``text='…'``) and which is read here as
a Python expression, so the contexts keep their line breaks; any other value is not read as the input
(the model input is then not recorded, never guessed from a repr's escaped text). A chat model's answer
is an ``AIMessage``, written as ``content='…' additional_kwargs=…``: its content is the output; an
object's default repr (``<generator object …>``: a stream) is no output. A retrieval inside a retrieval
(LlamaIndex's query engine, retriever, ``_retrieve``) is one retrieval call.

TruLens' LlamaIndex app (and its older LangChain app) marks no LLM call ``generation``: a span it leaves
``unknown`` whose ``call.function`` is an LLM class's method — a LlamaIndex or LangChain module under
``llms``, ``chat_models`` or ``language_models``, the method ``complete``, ``chat``, ``invoke``, … — is the
model call too (the innermost one, when they nest); ``complete``'s prompt is its first positional argument
(``call.kwargs.args``).
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Sequence
from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import messages_from_value
from tracejudge.normalize._values import as_str, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, StepKind

_BASE = "ai.observability"
SPAN_TYPE = f"{_BASE}.span_type"
ROOT_INPUT = f"{_BASE}.record_root.input"
ROOT_OUTPUT = f"{_BASE}.record_root.output"
QUERY = f"{_BASE}.retrieval.query_text"
CONTEXTS = f"{_BASE}.retrieval.retrieved_contexts"
RETURN = f"{_BASE}.call.return"
FUNCTION = f"{_BASE}.call.function"
_KWARGS = f"{_BASE}.call.kwargs."
# The generation arguments read as the model input: a prompt string, or a LangChain prompt value.
_PROMPT_ARGUMENTS = ("prompt", "input", "messages")
_STEPS: dict[str, StepKind] = {"retrieval": "retrieval", "generation": "model"}
# An LLM class's methods (LlamaIndex's LLM, LangChain's language models) and the packages that define them.
_LLM_METHODS = frozenset(
    {
        "complete",
        "acomplete",
        "stream_complete",
        "astream_complete",
        "chat",
        "achat",
        "stream_chat",
        "astream_chat",
        "invoke",
        "ainvoke",
    }
)
_COMPLETE_METHODS = frozenset({"complete", "acomplete", "stream_complete", "astream_complete"})
_LLM_PACKAGES = ("llama_index", "langchain")
_LLM_MODULES = frozenset({"llms", "chat_models", "language_models"})
# How str() of a LangChain prompt value or message begins: not a prompt's plain text.
_REPR_HEADS = ("messages=", "text=", "content=")
# Reprs inside a value: a message object (LangChain's, LlamaIndex's ChatMessage), an object's default repr.
_REPRS = re.compile(r"\b\w*Message\(|<[\w.]+ object at 0x[0-9a-fA-F]+>")
_NEXT_FIELD = re.compile(r" [a-z_]+=")
# LangChain message classes -> the ``type`` their serialized form carries.
_MESSAGE_TYPES = {
    "HumanMessage": "human",
    "SystemMessage": "system",
    "AIMessage": "ai",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
}


def _span_type(view: SpanView) -> str | None:
    return as_str(view.attrs.get(SPAN_TYPE))


def _llm_method(view: SpanView) -> str | None:
    """The LLM method an ``unknown`` span records a call of (``…llms.mock.MockLLM.complete``); else None."""
    function = as_str(view.attrs.get(FUNCTION))
    if _span_type(view) != "unknown" or function is None:
        return None
    path, _, method = function.rpartition(".")
    modules = path.split(".")[:-1]  # the last part is the class
    if method not in _LLM_METHODS or not modules or not modules[0].startswith(_LLM_PACKAGES):
        return None
    return method if _LLM_MODULES.intersection(modules[1:]) else None


def _model_span(view: SpanView) -> bool:
    return _span_type(view) == "generation" or _llm_method(view) is not None


def _string_field(text: str, name: str) -> str | None:
    """The string literal a pydantic model's ``str()`` gives its first field ``name``
    (``content='…' additional_kwargs={}``, ``text='…'``); None when it is not a string literal."""
    if not text.startswith(name + "="):
        return None
    rest = text[len(name) + 1 :]
    try:
        tokens = tokenize.generate_tokens(io.StringIO(rest).readline)
        token = next(tokens)
    except (tokenize.TokenError, SyntaxError, StopIteration):
        return None
    if token.type != tokenize.STRING or token.start != (1, 0):
        return None
    row, col = token.end
    end = sum(len(line) for line in rest.splitlines(keepends=True)[: row - 1]) + col
    if rest[end:] and not _NEXT_FIELD.match(rest, end):  # the literal is the whole value, not its start
        return None
    try:
        value = ast.literal_eval(token.string)
    except (SyntaxError, ValueError):
        return None
    return value if isinstance(value, str) else None


def _message(node: ast.expr) -> dict[str, Any] | None:
    """``HumanMessage(content='…', …)`` as ``{"type": "human", "content": "…"}``; None for anything else."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
    content = keywords.get("content")
    if not (isinstance(content, ast.Constant) and isinstance(content.value, str)):
        return None
    kind = _MESSAGE_TYPES.get(node.func.id)
    role = keywords.get("role")
    if kind is None and node.func.id == "ChatMessage" and isinstance(role, ast.Constant):
        kind = as_str(role.value)
    return {"type": kind, "content": content.value} if kind else None


def _prompt(value: str) -> ModelIO | None:
    """A model input argument as TruLens wrote it: a prompt value's messages or text, or a plain prompt
    string; None for anything else — a repr not read here is no prompt text: its escapes would hide a
    clause spanning a line break, and "not in the model input" would be concluded."""
    dicts = prompt_value_messages(value)
    messages = messages_from_value(dicts) if dicts is not None else None
    if messages:
        return ModelIO(messages=tuple(messages))
    text = _string_field(value, "text")  # a StringPromptValue
    if text:
        return ModelIO(texts=(text,))
    if value.startswith(_REPR_HEADS) or _REPRS.search(value) or _python_literal(value):
        return None
    return ModelIO(texts=(value,))


def _python_literal(value: str) -> bool:
    """Whether ``value`` is the repr of a Python dict, list or tuple (``{'question': 'cap?'}``) rather than a
    prompt — a prompt may well begin with ``[`` (``[INST]``) or be JSON text."""
    if not value.startswith(("{", "[", "(")):
        return False
    try:
        json.loads(value)
    except ValueError:
        pass
    else:
        return False  # JSON text passed as the prompt
    try:
        return isinstance(ast.literal_eval(value), dict | list | tuple)
    except (SyntaxError, ValueError, MemoryError, RecursionError, TypeError):
        return False


def prompt_value_messages(text: str) -> list[dict[str, Any]] | None:
    """The messages of a LangChain prompt value's repr (``messages=[HumanMessage(content='…')]``)."""
    if not text.startswith("messages=["):
        return None
    try:
        tree = ast.parse(f"_({text})", mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    call = tree.body
    if not isinstance(call, ast.Call) or len(call.keywords) != 1 or call.args:
        return None
    items = call.keywords[0].value
    if not isinstance(items, ast.List):
        return None
    found = [_message(item) for item in items.elts]
    return None if not found or None in found else [m for m in found if m is not None]


class TruLens(NoRecords):
    """TruLens: ``ai.observability.span_type`` and the records of each span type."""

    name = "trulens"

    def classify(self, view: SpanView) -> StepKind | None:
        kind = _span_type(view)
        if _llm_method(view) is not None:
            return "model"
        return _STEPS.get(kind) if kind is not None else None

    def input_messages(self, view: SpanView) -> ModelIO | None:
        if not _model_span(view):
            return None
        arguments = [(_KWARGS + name, as_str(view.attrs.get(_KWARGS + name))) for name in _PROMPT_ARGUMENTS]
        if _llm_method(view) in _COMPLETE_METHODS:
            positional = view.attrs.get(_KWARGS + "args")
            first = positional[0] if isinstance(positional, list | tuple) and positional else None
            arguments.append((_KWARGS + "args", as_str(first) if isinstance(first, str) else None))
        for key, value in arguments:
            if not value:
                continue
            read = _prompt(value)
            if read is not None:
                return read
            view.gap("attribute_unparseable", f"{key}: not a prompt string or a LangChain prompt value")
        return None

    def output_messages(self, view: SpanView) -> ModelIO | None:
        if not _model_span(view):
            return None
        value = as_str(view.attrs.get(RETURN))
        if not value:
            return None
        if value.startswith("content="):
            # A chat model's AIMessage: its content is the answer (content blocks are not read).
            content = _string_field(value, "content")
            if content is None:
                view.gap("attribute_unparseable", f"{RETURN}: an AIMessage whose content is not a text")
            return ModelIO(texts=(content,)) if content else None
        if value.startswith("<") and value.endswith(">"):
            view.gap("attribute_unparseable", f"{RETURN}: an object's repr, not the model's output")
            return None
        return ModelIO(texts=(value,))

    def documents(self, view: SpanView) -> list[Document] | None:
        if _span_type(view) != "retrieval" or CONTEXTS not in view.attrs:
            return None
        texts = maybe_json(view.attrs.get(CONTEXTS))
        if not isinstance(texts, list | tuple):
            # One string is not split at its commas: it may be one context or a list's text.
            view.gap("attribute_unparseable", f"{CONTEXTS}: not a list of texts")
            return None
        return [Document(doc_id=None, content=as_str(text), position=i) for i, text in enumerate(texts)]

    def query(self, view: SpanView) -> str | None:
        return as_str(view.attrs.get(QUERY)) if _span_type(view) == "retrieval" else None

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:  # noqa: ARG002
        return as_str(root.attrs.get(ROOT_INPUT)) if _span_type(root) == "record_root" else None

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:  # noqa: ARG002
        if _span_type(root) != "record_root":
            return None
        text = as_str(root.attrs.get(ROOT_OUTPUT))
        return (text, root.span_id) if text else None


CONVENTION = TruLens()
