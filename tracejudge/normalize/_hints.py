"""Hints that work: every gap names the switch that records the missing thing, for the framework or
instrumentation that produced the trace.

A span's producer is read from its instrumentation scope (``openinference.instrumentation.*``,
``opentelemetry.util.genai.handler``, ``litellm``, ``pydantic-ai`` …). Every switch named here is
checked by tests/normalize/test_hints.py: an attribute tracejudge reads, or a name that exists in the
instrumentation's installed source, or one a re-record script of tests/fixtures/traces sets to
record its fixtures.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from tracejudge.schema import Gap, RawSpan

Producer = Literal[
    "openinference",
    "openai-v2",
    "openllmetry",
    "litellm",
    "pydantic-ai",
    "semantic-kernel",
    "langfuse",
    "adk",
    "autogen",
    "griptape",
    "agent-framework",
    "mlflow",
    "qdrant",
    "lancedb",
]


@dataclass(frozen=True)
class Switch:
    """What to turn on (or off) so the trace records what a gap says is missing."""

    text: str
    """The instruction, as the gap's detail ends with it."""
    names: tuple[str, ...]
    """The switches it names (environment variables, settings, attributes), each checked to exist."""
    source: str
    """Where the names are checked: ``tracejudge`` (attributes it reads), ``package:<module>`` (the
    installed instrumentation's source), ``recorded:<script>`` (a re-record script that sets it)."""


_OI_CONTENT = Switch(
    "OpenInference hides content when OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS /"
    " OPENINFERENCE_HIDE_INPUT_MESSAGES / OPENINFERENCE_HIDE_OUTPUT_MESSAGES are set (or"
    " TraceConfig(hide_inputs=True, ...) is passed to the instrumentor): unset them",
    (
        "OPENINFERENCE_HIDE_INPUTS",
        "OPENINFERENCE_HIDE_OUTPUTS",
        "OPENINFERENCE_HIDE_INPUT_MESSAGES",
        "OPENINFERENCE_HIDE_OUTPUT_MESSAGES",
        "hide_inputs",
    ),
    "package:openinference.instrumentation",
)
_GENAI_CONTENT = Switch(
    "set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only (opentelemetry-util-genai >= 1.0,"
    " with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental; event_only sends the messages as"
    " log records: collect the logs too)",
    ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only", "gen_ai_latest_experimental"),
    "package:opentelemetry",
)
_OLL_CONTENT = Switch(
    "set TRACELOOP_TRACE_CONTENT=true (OpenLLMetry records no prompts, completions or entity"
    " inputs/outputs without it)",
    ("TRACELOOP_TRACE_CONTENT",),
    "recorded:record_openllmetry.py",
)
# OpenLLMetry's mistralai instrumentation with its content switch on (it writes gen_ai.prompt.* /
# gen_ai.completion.* only then): what it leaves out, no switch records.
_MISTRAL_DICTS = Switch(
    "opentelemetry-instrumentation-mistralai records content (TRACELOOP_TRACE_CONTENT is on) but reads each"
    " message as the SDK's model: messages passed as dicts leave gen_ai.prompt.0.role alone — pass"
    " mistralai.models' SystemMessage / UserMessage / AssistantMessage / ToolMessage, or trace the client"
    " with openinference-instrumentation-mistralai (MistralAIInstrumentor), which records both",
    ("SystemMessage", "UserMessage", "MistralAIInstrumentor"),
    "recorded:record_mistral.py",
)
_MISTRAL_TOOL_CALLS = Switch(
    "opentelemetry-instrumentation-mistralai records content (TRACELOOP_TRACE_CONTENT is on) but never a tool"
    " call: a reply that asked for a tool is its role and finish reason alone, and so is the assistant turn"
    " re-sent before the tool's result. No setting records them: trace the client with"
    " openinference-instrumentation-mistralai (MistralAIInstrumentor), which does, or record the answer on"
    " your root span",
    ("MistralAIInstrumentor",),
    "recorded:record_mistral.py",
)
# OpenLLMetry's Ollama instrumentation with its content switch on: a reply's content is written only when it
# is not empty, and its tool calls never.
_OLLAMA_TOOL_CALLS = Switch(
    "opentelemetry-instrumentation-ollama records content (TRACELOOP_TRACE_CONTENT is on) but never a reply's"
    " tool calls, nor its content when empty: a reply that asked for a tool is its role alone. No setting"
    " records them: trace the client with openinference-instrumentation-ollama (OllamaInstrumentor), which"
    " does, or record the answer on your root span",
    ("OllamaInstrumentor",),
    "recorded:record_ollama.py",
)
_LITELLM_SPAN = Switch(
    "set USE_OTEL_LITELLM_REQUEST_SPAN=true: LiteLLM's otel callback then records a litellm_request"
    " span with the messages (without it only raw_gen_ai_request is exported, often lost)",
    ("USE_OTEL_LITELLM_REQUEST_SPAN",),
    "recorded:record_litellm.py",
)
_PYDANTIC_CONTENT = Switch(
    "pass InstrumentationSettings(include_content=True) (pydantic-ai's default; False drops messages"
    " and tool arguments and results)",
    ("InstrumentationSettings", "include_content"),
    "recorded:record_pydantic_ai.py",
)
_SK_CONTENT = Switch(
    "set SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true and collect Semantic"
    " Kernel's log records (it sends the messages as logs)",
    ("SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE",),
    "recorded:record_semantic_kernel.py",
)
_LANGFUSE_CONTENT = Switch(
    "the Langfuse SDK records input and output unless @observe(capture_input=False,"
    " capture_output=False) or a mask removes them",
    ("capture_input", "capture_output"),
    "package:langfuse",
)
_ADK_CONTENT = Switch(
    "set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (Google ADK 2 records no message, tool"
    " argument or tool result without it)",
    ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY"),
    "recorded:record_adk.py",
)
_AUTOGEN_TOOLS = Switch(
    "AutoGen's own tracing records no tool result: trace the agents with"
    " openinference-instrumentation-autogen-agentchat, whose tool spans hold what a search tool returned",
    ("openinference-instrumentation-autogen-agentchat",),
    "recorded:record_autogen.py",
)
_AGENT_FRAMEWORK_CONTENT = Switch(
    "call agent_framework.observability.enable_instrumentation(enable_sensitive_data=True) or set"
    " ENABLE_SENSITIVE_DATA=true (Microsoft Agent Framework records no message, tool argument or tool result"
    " without it)",
    ("enable_sensitive_data", "ENABLE_SENSITIVE_DATA"),
    "recorded:record_agent_framework.py",
)
_GRIPTAPE = Switch(
    "Griptape's OpenTelemetryObservabilityDriver records span names only: trace the model calls with"
    " openinference-instrumentation-openai (OpenAIInstrumentor().instrument()) and record what the search"
    " returned on its tool span (current while the activity runs): gen_ai.retrieval.documents",
    ("OpenTelemetryObservabilityDriver", "OpenAIInstrumentor", "gen_ai.retrieval.documents"),
    "recorded:record_griptape.py",
)
_OI_CLIENT = Switch(
    "instrument the LLM client too (openinference-instrumentation-openai: OpenAIInstrumentor().instrument());"
    " some frameworks' instrumentations (CrewAI, AutoGen) record no LLM call of their own",
    ("OpenAIInstrumentor",),
    "package:openinference.instrumentation.openai",
)
_MARK_RETRIEVAL = Switch(
    "mark the retrieval: gen_ai.tool.type = datastore on its tool span, tracejudge.step = retrieval,"
    " an OpenInference RETRIEVER span, or give a manifest whose entries name the documents it returns",
    ("gen_ai.tool.type", "datastore", "tracejudge.step"),
    "tracejudge",
)
_RECORD_DOCUMENTS = Switch(
    "record what the retrieval returned on its span: gen_ai.retrieval.documents (a JSON list of"
    " {id, content}) or OpenInference's retrieval.documents.N.document.id / .content",
    ("gen_ai.retrieval.documents", "retrieval.documents"),
    "tracejudge",
)

_RETURN_FROM_TASK = (
    ": return what it found from a function traced as a traceloop task (traceloop-sdk's @task; with content"
    " tracing on, its traceloop.entity.output is read as what the search returned), or record it on a span of"
    " your own (retrieval.documents.N.document.id / .content), with the filter as tracejudge.retrieval.filter"
)
_QDRANT_RESULTS = Switch(
    "opentelemetry-instrumentation-qdrant records a search's collection and limit only — no point it"
    " returned, no filter, no query" + _RETURN_FROM_TASK,
    ("traceloop.entity.output", "retrieval.documents", "tracejudge.retrieval.filter"),
    "tracejudge",
)
_LANCEDB_RESULTS = Switch(
    "opentelemetry-instrumentation-lancedb traces LanceTable.search, which only builds the query (where,"
    " limit and to_list run after its span ends): no row it returned, no filter, no limit"
    + _RETURN_FROM_TASK,
    ("traceloop.entity.output", "retrieval.documents", "tracejudge.retrieval.filter"),
    "tracejudge",
)

HOSTED_FILE_SEARCH = Switch(
    'request include=["file_search_call.results"] from the Responses API (it returns what a hosted'
    " file_search found only when asked)",
    ("file_search_call.results",),
    "package:openai",
)
"""Named by the gap of a model call that ran OpenAI's hosted file search without its results (Logfire)."""
HOSTED_WEB_SEARCH = Switch(
    "search with a tool of your own whose span records what it returned (gen_ai.retrieval.documents, or"
    " OpenInference retrieval.documents): a model's hosted web search returns its answer and citations only",
    ("gen_ai.retrieval.documents", "retrieval.documents"),
    "tracejudge",
)
"""Named by the gap of a trace whose only search is a model's hosted web search (``web_search_options``)."""

_MLFLOW_GENAI = Switch(
    "unset MLFLOW_ENABLE_OTEL_GENAI_SEMCONV: MLflow's translation to the GenAI conventions exports a"
    " retriever span without its inputs and outputs (MLflow's own mlflow.spanOutputs holds the documents)",
    ("MLFLOW_ENABLE_OTEL_GENAI_SEMCONV",),
    "recorded:record_mlflow.py",
)

_CONTENT: dict[Producer | None, Switch] = {
    "openinference": _OI_CONTENT,
    "openai-v2": _GENAI_CONTENT,
    "openllmetry": _OLL_CONTENT,
    "litellm": _LITELLM_SPAN,
    "pydantic-ai": _PYDANTIC_CONTENT,
    "semantic-kernel": _SK_CONTENT,
    "langfuse": _LANGFUSE_CONTENT,
    "adk": _ADK_CONTENT,
    "agent-framework": _AGENT_FRAMEWORK_CONTENT,
}
# gap kind -> producer (None: whatever produced the trace) -> switch
SWITCHES: dict[str, dict[Producer | None, Switch]] = {
    "model_input_not_recorded": dict(_CONTENT),
    "model_output_not_recorded": dict(_CONTENT),
    "model_input_redacted": {
        "openinference": _OI_CONTENT,
        "langfuse": _LANGFUSE_CONTENT,
    },
    "model_output_redacted": {
        "openinference": _OI_CONTENT,
        "langfuse": _LANGFUSE_CONTENT,
    },
    # A retrieval tool's result is content to every instrumentation that has a content switch.
    "retrieval_documents_not_recorded": {
        "openinference": _OI_CONTENT,
        "openllmetry": _OLL_CONTENT,
        "openai-v2": _GENAI_CONTENT,
        "pydantic-ai": _PYDANTIC_CONTENT,
        "langfuse": _LANGFUSE_CONTENT,
        "adk": _ADK_CONTENT,
        "autogen": _AUTOGEN_TOOLS,
        "agent-framework": _AGENT_FRAMEWORK_CONTENT,
        "griptape": _GRIPTAPE,
        "mlflow": _MLFLOW_GENAI,
        "qdrant": _QDRANT_RESULTS,
        "lancedb": _LANCEDB_RESULTS,
        None: _RECORD_DOCUMENTS,
    },
    "no_final_answer": {**_CONTENT, "griptape": _GRIPTAPE},
    "no_model_span": {"litellm": _LITELLM_SPAN, "openinference": _OI_CLIENT, "griptape": _GRIPTAPE},
    "no_retrieval_span": {"autogen": _AUTOGEN_TOOLS, "griptape": _GRIPTAPE, None: _MARK_RETRIEVAL},
}


class _Mark(NamedTuple):
    """How one instrumentation's spans are told: its scope names, scope-name prefixes, or the span."""

    producer: Producer
    scopes: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    span: Callable[[RawSpan], bool] | None = None


def _litellm_span(span: RawSpan) -> bool:
    return span.name in ("litellm_request", "raw_gen_ai_request")


def _langfuse_span(span: RawSpan) -> bool:
    return "langfuse.observation.type" in span.attributes


def _griptape_span(span: RawSpan) -> bool:
    # Griptape's driver names its tracer after the service (any name): its @observable spans are told by
    # the tags it sets on the prompt driver's and the tools' runs.
    tags = span.attributes.get("tags")
    return isinstance(tags, (list, tuple)) and any(t in ("PromptDriver.run()", "Tool.run()") for t in tags)


def _traceloop_span(span: RawSpan) -> bool:
    return any(key.startswith("traceloop.") for key in span.attributes)


# First match wins: "opentelemetry.instrumentation." is OpenLLMetry's only after openai-v2's scope.
_MARKS = (
    _Mark("adk", scopes=("gcp.vertex.agent",)),
    _Mark("agent-framework", scopes=("agent_framework",)),
    _Mark("autogen", scopes=("autogen-core",)),
    _Mark("openinference", prefixes=("openinference.instrumentation",)),
    _Mark("openai-v2", prefixes=("opentelemetry.util.genai", "opentelemetry.instrumentation.openai_v2")),
    _Mark("litellm", scopes=("litellm",), span=_litellm_span),
    _Mark("pydantic-ai", scopes=("pydantic-ai", "pydantic_ai")),
    _Mark("semantic-kernel", prefixes=("semantic_kernel",)),
    _Mark("langfuse", prefixes=("langfuse",), span=_langfuse_span),
    # OpenLLMetry's vector-store instrumentations that record no result whatever its content switch says.
    _Mark("qdrant", scopes=("opentelemetry.instrumentation.qdrant",)),
    _Mark("lancedb", scopes=("opentelemetry.instrumentation.lancedb",)),
    _Mark("openllmetry", prefixes=("traceloop", "opentelemetry.instrumentation."), span=_traceloop_span),
    _Mark("griptape", span=_griptape_span),
    _Mark("mlflow", scopes=("mlflow.tracing.provider",)),
)


def producer(span: RawSpan) -> Producer | None:
    """The instrumentation that wrote a span, as far as its switches go."""
    for name, test in _candidates(span.scope_name.lower()):
        if test is None or test(span):
            return name
    return None


@functools.lru_cache(maxsize=256)
def _candidates(scope: str) -> tuple[tuple[Producer, Callable[[RawSpan], bool] | None], ...]:
    """The marks a span of this scope may match, in table order: those with a span test (the test
    still to run) up to the first the scope matches (no test: it matches). Read for every span of
    every trace, so worked out once per scope name."""
    rows: list[tuple[Producer, Callable[[RawSpan], bool] | None]] = []
    for mark in _MARKS:
        if scope in mark.scopes or scope.startswith(mark.prefixes):
            rows.append((mark.producer, None))
            break
        if mark.span is not None:
            rows.append((mark.producer, mark.span))
    return tuple(rows)


_MISTRAL_SCOPE = "opentelemetry.instrumentation.mistralai"
_OLLAMA_SCOPE = "opentelemetry.instrumentation.ollama"


def _ollama_switch(kind: str, span: RawSpan) -> Switch | None:
    """What OpenLLMetry's Ollama span lacks when its content switch is on (it wrote the prompt's content): a
    reply recorded by its role alone asked for a tool (or said nothing), which no setting records. None for
    another span, or one recorded with the switch off (then the switch is the hint)."""
    if span.scope_name != _OLLAMA_SCOPE or kind != "model_output_not_recorded":
        return None
    prompted = any(k.startswith("gen_ai.prompt.") and k.endswith(".content") for k in span.attributes)
    return _OLLAMA_TOOL_CALLS if prompted and "gen_ai.completion.0.role" in span.attributes else None


def _mistral_switch(kind: str, span: RawSpan) -> Switch | None:
    """What OpenLLMetry's mistralai span lacks when its content switch is on (it wrote a prompt or a
    completion attribute): a prompt holding no content is the dicts it could not read (a role alone), anything
    else missing is a tool call (it records none). None for another span, or one recorded with the switch
    off (then the switch is the hint)."""
    if span.scope_name != _MISTRAL_SCOPE or kind not in (
        "model_input_not_recorded",
        "model_output_not_recorded",
    ):
        return None
    keys = [key for key in span.attributes if key.startswith(("gen_ai.prompt.", "gen_ai.completion."))]
    if not keys:
        return None
    if kind == "model_input_not_recorded" and not any(
        key.startswith("gen_ai.prompt.") and key.endswith(".content") for key in keys
    ):
        return _MISTRAL_DICTS
    return _MISTRAL_TOOL_CALLS


def _switch(kind: str, producers: Iterable[Producer | None]) -> Switch | None:
    table = SWITCHES.get(kind)
    if not table:
        return None
    for found in producers:
        if found in table:
            return table[found]
    return table.get(None)


def with_switches(gaps: Sequence[Gap], spans: Sequence[RawSpan]) -> tuple[Gap, ...]:
    """The gaps, each ending with the switch that would record what it says is missing."""
    if not gaps:
        return ()
    by_id = {span.span_id: span for span in spans}
    producers = _Producers(by_id)
    out = []
    for gap in gaps:
        span = by_id.get(gap.span_id) if gap.span_id is not None else None
        # A model call that failed, or whose span never ended, returned no output: no setting would have
        # recorded one.
        if (
            span is not None
            and (span.status_code == 2 or not span.end_time_unix_nano)
            and gap.kind in ("model_output_not_recorded", "no_final_answer")
        ):
            out.append(gap)
            continue
        own = producers.of(span) if span is not None else None
        known = None if span is None else _mistral_switch(gap.kind, span) or _ollama_switch(gap.kind, span)
        switch = known or _switch(gap.kind, [own] if own is not None else producers.everyone())
        out.append(gap if switch is None else _with_switch(gap, switch))
    return tuple(out)


class _Producers:
    """The producer of each span a gap names, and the trace's (``_ranked``), each worked out once and only
    when a gap asks (a trace without gaps needs none)."""

    def __init__(self, by_id: dict[str, RawSpan]) -> None:
        self._spans = by_id.values()
        self._own: dict[str, Producer | None] = {}
        self._everyone: list[Producer | None] | None = None

    def of(self, span: RawSpan) -> Producer | None:
        if span.span_id not in self._own:
            self._own[span.span_id] = producer(span)
        return self._own[span.span_id]

    def everyone(self) -> list[Producer | None]:
        if self._everyone is None:
            self._everyone = _ranked(self.of(span) for span in self._spans)
        return self._everyone


def _ranked(producers: Iterable[Producer | None]) -> list[Producer | None]:
    """The trace's producers, most spans first: whom a trace-level gap asks."""
    counts = Counter(found for found in producers if found is not None)
    ranked: list[Producer] = sorted(counts, key=lambda p: -counts[p])
    return [*ranked]


def _with_switch(gap: Gap, switch: Switch) -> Gap:
    """The gap ending with the switch, unless its detail already names it or ends with its own (a reader
    that knows what its instrumentation needs: a model's hosted search asks the API for its results). A
    switch the detail only names on the way (tools to mark as retrievers) gives way to the producer's."""
    if all(name in gap.detail for name in switch.names) or (gap.switch and gap.note != gap.detail):
        return gap
    return gap.switched(switch.text)
