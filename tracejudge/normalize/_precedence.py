"""Which convention's record wins, field by field.

Each line lists the conventions asked for one field, in order; the first that holds the record
(answers other than ``None``) wins. A new convention is one module implementing ``Convention``
(``_convention.py``) and its place on each line where it records that field.

Why this order:

- ``classify``: tiers. tracejudge's own ``tracejudge.step`` overrides everything; a typed Langfuse
  observation comes next (Langfuse keeps other conventions' attributes beside its type). In the
  third tier the first specific step wins and "other" yields to a later specific one (OpenLLMetry
  writes ``gen_ai.operation.name`` values the GenAI table does not know — ``execute_task``,
  ``vector_db_retrieve`` — beside ``traceloop.*``). A span no tier classifies is a model call when
  it names a model, else "other"; an "other" span with ``tracejudge.retrieval.*`` is a retrieval.
  LlamaIndex's ``*._prepare_chat_with_tools`` LLM spans (they build a request, send nothing) are chain steps,
  decided before OpenInference calls them LLM.
- model input/output: structured message lists before completion prompts before free-form I/O,
  which often holds a framework's whole argument object rather than what the model was sent.
- Bedrock (``_bedrock.py``) comes first in the third tier of ``classify`` and first on ``documents``: an
  OpenInference ``retrieve_and_generate`` span is a RETRIEVER that also wrote the answer (a model call), a
  Cohere rerank under OpenLLMetry records its documents as prompts (a rerank, not a model call), and a
  knowledge base's chunks nest their own metadata in the instrumentation's; its filter comes after
  tracejudge's own ``tracejudge.retrieval.filter``.
- ``documents``: indexed OpenInference documents, GenAI documents, OpenLLMetry result events,
  then the free-form output read by shape.
- ``query``: GenAI's ``gen_ai.retrieval.query.text``, a LanceDB search's text (OpenLLMetry), then the
  frameworks' and the free-form input.
- ``usage``: merged; per count the first convention that recorded it wins.
- Framework conventions whose records look like another convention's (Strands' and Semantic
  Kernel's GenAI-named events hold content blocks or JSON-text bodies) come before GenAI on the lines
  they record, and answer ``None`` for any span not theirs; ADK's own request/response attributes and
  LiteLLM's ``raw_gen_ai_request`` Python reprs come after every standard convention; so do MLflow's
  ``mlflow.spanInputs`` / ``mlflow.spanOutputs`` (a function's JSON-encoded arguments and return value, read
  by the span's ``mlflow.spanType``), which come before the free-form I/O on every line they record; AgentOps'
  ``agentops.<kind>.input`` / ``.output`` of a decorated function likewise.
- smolagents' model output comes before OpenInference's: a ``final_answer`` tool call is the answer
  text of the call that wrote it.
- ``tool_arguments`` / ``tool_result``: OpenLIT's agents instrumentation's Python reprs read as literals
  (it writes ``gen_ai.tool.call.*`` as ``str()`` of the value, so GenAI's reader would keep the text), the
  ``content`` of the ``ToolMessage`` that OpenLLMetry's LangChain tool span wraps in
  ``gen_ai.tool.call.result`` (so before GenAI, which would keep the wrapper), GenAI's
  ``gen_ai.tool.call.*``, a framework's own attributes or events (ADK, Strands), AG2's
  ``[success, {"content"}]`` tool output, the ``content`` of a LangChain tool's ``ToolMessage`` (serialized,
  or dumped by Langfuse's LangChain handler), the ``raw_output`` of a LlamaIndex tool's ``ToolOutput``,
  the ``result`` of Agno's ``FunctionExecutionResult`` text (OpenLLMetry's Agno tool span), a Mirascope
  ``@ops.trace`` function's ``mirascope.trace.*`` (below the root it is read as a tool call), the text inside
  an MCP ``tools/call`` span's ``{"result": ...}`` (OpenLLMetry), then the free-form input/output.
- ``task_input`` / ``final_answer``: the trace's own Langfuse input/output; a Haystack pipeline
  root (its free-form I/O is per-component, so it owns the root); a CrewAI crew root (its output is
  the whole ``CrewOutput``: the answer is its ``raw``); a LlamaIndex agent root (its ``StopEvent`` repr's
  response text); a Mirascope ``@ops.trace`` root (its arguments and
  return value); Instructor's structured output (the root's free-form answer, but written by the model
  call whose one tool call is the object Instructor returned, so it comes before the free-form read that
  would name the root); the root's free-form I/O; a
  GenAI agent root's messages. The model calls of the trace come after every convention
  (normalize reads them from the assembled record).
- TruLens (``ai.observability.*``) comes after every convention it could share a span with, before the
  free-form I/O: its generation input is a function argument, its record root the app's request and answer.
- Logfire's OpenAI Agents SDK integration records a Responses API call's messages as one ``events`` list
  (input and output together, split by ``raw_input``), and a function tool's run as a ``Function: {name}``
  span (``input``, ``output``): after every convention that records messages or tool I/O, before the
  free-form I/O.
- The Vercel AI SDK (``ai.*``) likewise: its provider requests also carry ``gen_ai.*`` attributes (model,
  usage), which GenAI reads; their messages and response are its own ``ai.prompt.messages`` /
  ``ai.response.*``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracejudge.normalize._adk import CONVENTION as ADK
from tracejudge.normalize._ag2 import CONVENTION as AG2
from tracejudge.normalize._agentops import CONVENTION as AGENTOPS
from tracejudge.normalize._agno import CONVENTION as AGNO
from tracejudge.normalize._bedrock import CONVENTION as BEDROCK
from tracejudge.normalize._convention import Convention
from tracejudge.normalize._crewai import CONVENTION as CREWAI
from tracejudge.normalize._freeform import CONVENTION as FREEFORM
from tracejudge.normalize._genai import CONVENTION as GENAI
from tracejudge.normalize._haystack import CONVENTION as HAYSTACK
from tracejudge.normalize._instructor import CONVENTION as INSTRUCTOR
from tracejudge.normalize._langchain import CONVENTION as LANGCHAIN
from tracejudge.normalize._langfuse import CONVENTION as LANGFUSE
from tracejudge.normalize._litellm import CONVENTION as LITELLM
from tracejudge.normalize._llamaindex import CONVENTION as LLAMAINDEX
from tracejudge.normalize._logfire import CONVENTION as LOGFIRE
from tracejudge.normalize._mirascope import CONVENTION as MIRASCOPE
from tracejudge.normalize._mlflow import CONVENTION as MLFLOW
from tracejudge.normalize._openinference import CONVENTION as OPENINFERENCE
from tracejudge.normalize._openlit import CONVENTION as OPENLIT
from tracejudge.normalize._openllmetry import CONVENTION as OPENLLMETRY
from tracejudge.normalize._semantic_kernel import CONVENTION as SEMANTIC_KERNEL
from tracejudge.normalize._smolagents import CONVENTION as SMOLAGENTS
from tracejudge.normalize._strands import CONVENTION as STRANDS
from tracejudge.normalize._tracejudge import CONVENTION as TRACEJUDGE
from tracejudge.normalize._trulens import CONVENTION as TRULENS
from tracejudge.normalize._vercel import CONVENTION as VERCEL

Line = tuple[Convention, ...]


@dataclass(frozen=True)
class Precedence:
    """One line per field: the conventions asked, first first."""

    classify: tuple[Line, ...]
    input_messages: Line
    output_messages: Line
    documents: Line
    query: Line
    usage: Line
    retrieval_filter: Line
    tool_arguments: Line
    tool_result: Line
    task_input: Line
    final_answer: Line


PRECEDENCE = Precedence(
    classify=(
        (TRACEJUDGE,),
        (LANGFUSE,),
        (
            BEDROCK,
            LLAMAINDEX,
            OPENINFERENCE,
            GENAI,
            OPENLLMETRY,
            LITELLM,
            MIRASCOPE,
            TRULENS,
            VERCEL,
            MLFLOW,
            AGENTOPS,
            LOGFIRE,
        ),
    ),
    input_messages=(
        OPENINFERENCE,
        STRANDS,
        SEMANTIC_KERNEL,
        GENAI,
        OPENLLMETRY,
        ADK,
        LITELLM,
        VERCEL,
        TRULENS,
        MLFLOW,
        LOGFIRE,
        FREEFORM,
    ),
    output_messages=(
        SMOLAGENTS,
        OPENINFERENCE,
        STRANDS,
        SEMANTIC_KERNEL,
        GENAI,
        OPENLLMETRY,
        ADK,
        LITELLM,
        VERCEL,
        TRULENS,
        MLFLOW,
        LOGFIRE,
        FREEFORM,
    ),
    documents=(
        BEDROCK,
        OPENINFERENCE,
        LANGCHAIN,
        GENAI,
        OPENLLMETRY,
        ADK,
        STRANDS,
        AG2,
        LLAMAINDEX,
        AGNO,
        MIRASCOPE,
        TRULENS,
        MLFLOW,
        AGENTOPS,
        FREEFORM,
    ),
    query=(GENAI, OPENLLMETRY, MIRASCOPE, TRULENS, MLFLOW, FREEFORM),
    usage=(LANGFUSE, OPENINFERENCE, GENAI, MLFLOW),
    retrieval_filter=(TRACEJUDGE, OPENLLMETRY, HAYSTACK, BEDROCK),
    tool_arguments=(OPENLIT, GENAI, ADK, STRANDS, MIRASCOPE, MLFLOW, AGENTOPS, LOGFIRE, VERCEL, FREEFORM),
    tool_result=(
        OPENLIT,
        LANGCHAIN,
        GENAI,
        ADK,
        STRANDS,
        AG2,
        LLAMAINDEX,
        AGNO,
        MIRASCOPE,
        MLFLOW,
        AGENTOPS,
        LOGFIRE,
        VERCEL,
        OPENLLMETRY,
        FREEFORM,
    ),
    task_input=(LANGFUSE, HAYSTACK, CREWAI, MIRASCOPE, TRULENS, VERCEL, MLFLOW, AGENTOPS, FREEFORM, GENAI),
    final_answer=(
        LANGFUSE,
        HAYSTACK,
        CREWAI,
        LLAMAINDEX,
        MIRASCOPE,
        INSTRUCTOR,
        TRULENS,
        VERCEL,
        MLFLOW,
        AGENTOPS,
        FREEFORM,
        GENAI,
    ),
)
