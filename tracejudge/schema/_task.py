"""The normalized task record: what the agent had and did, whatever convention traced it."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from tracejudge.schema._spans import SCHEMA_VERSION, _Frozen

StepKind = Literal[
    "agent", "chain", "retrieval", "rerank", "context", "model", "tool", "embedding", "guardrail", "other"
]


class Document(_Frozen):
    """A document a retriever returned (or a reranker received or kept)."""

    doc_id: str | None
    """Document identity: metadata ``doc_id``/``document_id``/``source``, else the document id."""
    version: str | None = None
    """Document version from metadata ``version``, if recorded."""
    raw_id: str | None = None
    """The document id field as recorded, before metadata overrode it."""
    content: str | None = None
    """Document text, or None when it was not recorded or was redacted."""
    score: float | None = None
    """Retriever or reranker score."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Document metadata, parsed from JSON when it arrived as a string."""
    position: int = 0
    """Zero-based rank in the returned list."""


class Candidate(_Frozen):
    """A document the retriever considered before filtering (``tracejudge.retrieval.candidates``)."""

    doc_id: str
    """Document identity."""
    version: str | None = None
    """Document version, if recorded."""
    score: float | None = None
    """Score before filtering, if recorded."""
    excluded_by: Literal["filter", "permission", "rank"] | None = None
    """Why it was not returned; None when it was returned."""


class RetrievalCall(_Frozen):
    """One retrieval call: a retriever span, or a retriever with its vector-store children."""

    span_id: str
    """The retriever span the call is anchored on."""
    span_ids: tuple[str, ...] = ()
    """Every span that contributed (the retriever and its vector-store/embedding children)."""
    name: str = ""
    """Span name."""
    query: str | None = None
    """Query text, if recorded."""
    documents: tuple[Document, ...] = ()
    """Documents returned, in rank order."""
    documents_recorded: bool = True
    """False when the span did not record what it returned."""
    filter: Any = None
    """The metadata filter, parsed to JSON values (equality map or ``$``-operators); None if not recorded."""
    filter_raw: str | None = None
    """The filter as recorded, when it had to be parsed from a string."""
    principal: str | None = None
    """Who the retrieval ran as (``tracejudge.retrieval.principal``)."""
    candidates: tuple[Candidate, ...] | None = None
    """Candidates before filtering, when recorded; None when not recorded."""
    top_k: int | None = None
    """Requested number of results, if recorded."""
    data_source: str | None = None
    """Index or data source id, if recorded."""
    namespace: str | None = None
    """The namespace of the index the query searched (Pinecone's ``pinecone.query.namespace``): ``""`` for a
    query that records none (the default namespace, which the instrumentation leaves out, or a lost
    attribute); None for a store without namespaces. Replayed against the manifest metadata's
    ``namespace`` when the manifest names one."""
    start_time: datetime | None = None
    """When the call started."""


class Reranking(_Frozen):
    """A reranker step."""

    span_id: str
    """The reranker span."""
    query: str | None = None
    """Query text, if recorded."""
    input_documents: tuple[Document, ...] = ()
    """Documents given to the reranker."""
    output_documents: tuple[Document, ...] = ()
    """Documents the reranker kept, in order."""
    top_k: int | None = None
    """How many it was asked to keep."""


class ContextAssembly(_Frozen):
    """A context-assembly step (``tracejudge.context.*`` attributes or ``tracejudge.step = "context"``)."""

    span_id: str
    """The span."""
    name: str = ""
    """Span name."""
    included: tuple[str, ...] = ()
    """Document identities (``doc_id`` or ``doc_id@version``) put into the context."""
    dropped: tuple[str, ...] = ()
    """Document identities left out (budget, compression, dedup)."""
    dropped_reasons: dict[str, str] = Field(default_factory=dict)
    """Why each dropped identity was left out, when recorded (identity -> reason)."""
    budget: int | None = None
    """Token or character budget, if recorded."""
    output: str | None = None
    """The assembled context text, if recorded."""


class Message(_Frozen):
    """One chat message, whatever dialect recorded it."""

    role: str
    """system, user, assistant, tool, ..."""
    content: str | None
    """Text content (text parts joined); None when not recorded."""
    tool_calls: tuple[dict[str, Any], ...] = ()
    """Tool calls requested in this message: ``{"id", "name", "arguments"}``."""
    redacted: bool = False
    """True when the content was redacted (for example OpenInference ``__REDACTED__``)."""
    unread: tuple[str, ...] = ()
    """Kinds of the parts the message carried whose content the trace holds no text of (``image_url``,
    ``file``, ``input_audio``, ...): what they gave the model is unknown."""
    refusal: str | None = None
    """The model's refusal, when the message is one: OpenAI's message ``refusal`` (the response body
    OpenInference keeps in ``output.value``, any recorded OpenAI message dict) or a GenAI ``refusal`` part
    (OpenLLMetry's OpenAI instrumentation). Also the message's ``content`` when it holds no other text."""
    cited: tuple[str, ...] = ()
    """The passages of the model's input the message cites, as the API returned them: Anthropic
    citations' ``cited_text`` (into ``document`` and ``search_result`` blocks), which
    openinference-instrumentation-anthropic keeps in the response body (``output.value``) and in
    ``metadata``. The model's own word of which text it took what it says from."""


class ModelCall(_Frozen):
    """One LLM call."""

    span_id: str
    """The LLM span."""
    name: str = ""
    """Span name."""
    model: str | None = None
    """Model name (response model, else request model)."""
    system_instructions: str | None = None
    """System instructions recorded apart from the messages (``gen_ai.system_instructions``)."""
    input_messages: tuple[Message, ...] = ()
    """Input messages in send order."""
    output_messages: tuple[Message, ...] = ()
    """Output messages (one per choice)."""
    input_recorded: bool = False
    """True when any input content was recorded."""
    input_redacted: bool = False
    """True when the input was recorded but (partly) redacted."""
    input_partial: bool = False
    """True when a message of the input was recorded without its content (its text may be missing)."""
    output_recorded: bool = False
    """True when any output content was recorded."""
    input_text: str = ""
    """Every recorded input text (system instructions, messages, prompt) joined: what the checks search."""
    output_text: str | None = None
    """The output text (first choice), None when not recorded."""
    choices: int = 1
    """How many replies (choices) the call returned or was asked for (OpenAI ``n``): its output messages with
    text, or the ``n`` its request records. Several: the application got them all and chose, and a choice
    that asks for a tool is one it may have followed. (A Responses API reply is one choice, whatever output
    items — a hosted tool's call beside the text — it holds.)"""
    usage: dict[str, int] = Field(default_factory=dict)
    """Token usage: input, output, total."""
    prompt: str | None = None
    """Managed prompt the call used (``name@version``, e.g. Langfuse prompt management), if recorded."""
    start_time: datetime | None = None
    """When the call started."""


class ToolCall(_Frozen):
    """One tool execution."""

    span_id: str
    """The tool span."""
    name: str
    """Tool name."""
    call_id: str | None = None
    """Tool call id linking it to the model's request."""
    arguments: Any = None
    """Arguments, parsed from JSON when possible."""
    result: Any = None
    """Result, parsed from JSON when possible."""
    documents: tuple[Document, ...] | None = None
    """The result read as documents, when it has that shape (a retrieval when they name manifest
    documents, DESIGN 5.4); None when it has not."""
    result_partial: bool = False
    """Whether the result recorded may be only part of what the tool returned (an MCP ``tools/call`` span
    of opentelemetry-instrumentation-mcp keeps the first content item): a document it holds was returned,
    one it lacks may have been too."""
    start_time: datetime | None = None
    """When the call started."""


# How a gap's detail goes on to name its switch (``Gap.switched``).
TO_RECORD = "; to record it: "


class Gap(_Frozen):
    """Something the trace did not record, or recorded redacted: what a check may need and not have."""

    kind: Literal[
        "no_retrieval_span",
        "retrieval_documents_not_recorded",
        "retrieval_content_not_recorded",
        "no_model_span",
        "model_input_not_recorded",
        "model_input_empty",
        "model_input_redacted",
        "model_input_truncated",
        "model_output_not_recorded",
        "model_output_empty",
        "model_output_redacted",
        "model_output_truncated",
        "no_final_answer",
        "answer_uncertain",
        "several_runs",
        "missing_parent",
        "attribute_unparseable",
    ]
    """What is missing (``model_input_empty`` / ``model_output_empty``: nothing is, the model input or output
    was recorded and holds no text — a request whose messages were sent with content null or none, a reply
    with no text; no switch records more. ``answer_uncertain``: no span records the answer and the last
    model call may have been made after it — a title, a summary, a grader — so no answer is read; the
    detail names the earlier calls whose reply the user may have got. ``several_runs``: several spans of the
    trace name no parent — roots of runs that share the trace id (an application that sets it, per session
    or conversation, or reuses a propagated header; ids from a generator seeded alike), or in a Langfuse
    API trace several top-level observations each hold a whole run (their own input and output, a model call
    under them), or a Langfuse v2 decorator trace's model calls were asked several questions — and nothing
    ties the spans to one run; the detail names the roots, ``TaskRecord.runs`` holds each run's record)."""
    span_id: str | None = None
    """The span concerned, if any."""
    detail: str = ""
    """Human-readable detail (ending with ``"; to record it: "`` and ``switch`` when it names one)."""
    switch: str = ""
    """What would record what is missing (a limit to raise, a setting to turn on, a span to mark), as
    ``detail`` names it; "" when it names none. Readers take it from here, never out of ``detail``'s text."""

    def switched(self, switch: str) -> Gap:
        """This gap naming ``switch``: its detail ends with ``"; to record it: <switch>"``."""
        detail = f"{self.detail}{TO_RECORD}{switch}" if self.detail else switch
        return self.model_copy(update={"detail": detail, "switch": switch})

    @property
    def note(self) -> str:
        """The detail without the switch it ends with (all of it when it ends with none)."""
        if self.detail == self.switch:
            return ""
        return self.detail.removesuffix(f"{TO_RECORD}{self.switch}") if self.switch else self.detail


class SpanNode(_Frozen):
    """A span in the task tree, as shown by ``traces show``."""

    span_id: str
    """Span id."""
    parent_span_id: str | None
    """Parent span id (None for roots, or when the parent never arrived)."""
    name: str
    """Span name."""
    step: StepKind
    """What the span does, across conventions."""
    start_time: datetime | None
    """Start."""
    end_time: datetime | None
    """End."""
    status: Literal["unset", "ok", "error"] = "unset"
    """Span status."""
    convention: str = ""
    """Which convention the span was read with (openinference, gen_ai, openllmetry, langfuse, ...)."""


# How normalize's missing_parent gap names the parent a span names and the trace lacks.
_LOST = re.compile(r"\bparent span (\S+) not received")

# A run's lists whose entries the record of the trace holding it holds too (``TaskRecord.shown``).
_RUN_SHOWN_ELSEWHERE = frozenset(
    {"spans", "retrievals", "rerankings", "context_assemblies", "model_calls", "tool_calls", "runs"}
)


class TaskRecord(_Frozen):
    """What the agent had at task time and what it did, rebuilt from one trace's spans."""

    schema_version: int = SCHEMA_VERSION
    """Version of this record's layout."""
    trace_id: str
    """Trace id."""
    name: str | None = None
    """Trace name (root span name, or Langfuse trace name)."""
    start_time: datetime | None = None
    """Start of the earliest span."""
    end_time: datetime | None = None
    """End of the latest span."""
    duration_ms: float | None = None
    """End minus start, in milliseconds."""
    input: str | None = None
    """The user's request (root span input, else the last user message of the first model call)."""
    final_answer: str | None = None
    """The final answer (root span output, else the last model call's output when no earlier call may have
    given the answer: an ``answer_uncertain`` gap says when one may, and then no answer is read)."""
    final_answer_span_id: str | None = None
    """The span the final answer was read from."""
    retrievals: tuple[RetrievalCall, ...] = ()
    """Retrieval calls in start order."""
    rerankings: tuple[Reranking, ...] = ()
    """Reranker steps in start order."""
    context_assemblies: tuple[ContextAssembly, ...] = ()
    """Context-assembly steps in start order."""
    model_calls: tuple[ModelCall, ...] = ()
    """LLM calls in start order."""
    answering_calls: tuple[str, ...] = ()
    """The model calls (span ids, in start order) that may have written the answer when no span says which
    call's reply it is: the last model call and each earlier one no later call continues (re-sends its
    messages, adding only tool steps), or whose order against the last the trace's skewed times leave open —
    just the last when its reply is the answer (normalize works them out from the spans' times,
    ``normalize._answer``). Empty without model calls; a record built otherwise may leave it empty, and then
    any of its model calls may have written the answer."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool executions in start order."""
    spans: tuple[SpanNode, ...] = ()
    """Every span, in start order, for the tree view."""
    gaps: tuple[Gap, ...] = ()
    """What was not recorded or was redacted."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Trace-level facts: service name, session, user, tags, environment."""
    cut_lengths: tuple[int, ...] = ()
    """Lengths the trace shows its exporter cut values at (the length its longest values share, in one
    process's spans): a text exactly this long that stops mid-sentence may have been longer. Empty when
    nothing shows a limit (a limit set to a round figure is read from the length alone)."""
    runs: tuple[TaskRecord, ...] = ()
    """When several spans name no parent, or several top-level observations of a Langfuse API trace each hold
    a whole run, or spans name a parent not received beside a root (a ``several_runs`` gap: the trace id may
    hold more than one run), the record of each root and the spans under it, in start order, then that of
    the spans whose parent was not received (together: another run whose root was lost, or this run's);
    a top-level observation of the legacy ingestion API that is no whole run is in no run. A trace of the
    Langfuse v2 decorator (its record a run's root) whose model calls were asked several questions: the
    top-level steps of each question under the trace's root (named by the first step), the trace read whole
    as well. Empty for a trace with one root (or none)."""

    def run_label(self) -> str:
        """How a run of a trace that holds several is named: ``run`` and its root span (id and name); a run
        whose root was not received (the spans naming a parent the trace lacks: a lost span of another run,
        or its root) by the parent its spans name, ``run under missing span <id>``, so that it is told from
        the trace's other runs."""
        # A span whose parent was not received is a top of the tree too (``parent_span_id`` None), with a
        # missing_parent gap naming the parent: the run's root is a top without one.
        lost = {
            g.span_id: m[1] for g in self.gaps if g.kind == "missing_parent" and (m := _LOST.search(g.detail))
        }
        tops = [n for n in self.spans if n.parent_span_id is None]
        root = next((n for n in tops if n.span_id not in lost), None)
        if root is not None or not tops:
            return f"run {root.span_id} ({root.name})" if root else "run"
        parents = sorted({lost[n.span_id] for n in tops})
        return f"run under missing span{'s' if len(parents) > 1 else ''} {', '.join(parents)}"

    def shown(self) -> dict[str, Any]:
        """The record as ``traces show --json`` prints it: each of its ``runs`` without the records the
        trace's own lists already hold (its spans, retrievals, rerankings, context assemblies, model and tool
        calls), naming its spans in ``span_ids`` instead: those entries of the trace's lists are its; and its
        ``label`` (:meth:`run_label`), as the judge's parts, the sweep's evidence and triage name it."""
        data = self.model_dump(mode="json")
        data["runs"] = [
            {
                **{k: v for k, v in run.model_dump(mode="json").items() if k not in _RUN_SHOWN_ELSEWHERE},
                "label": run.run_label(),
                "span_ids": [s.span_id for s in run.spans],
            }
            for run in self.runs
        ]
        return data

    def each_run(self) -> list[tuple[str, TaskRecord]]:
        """The record's runs with their labels (:meth:`run_label`); the record itself, labelled ``""``, when
        it holds one."""
        return [(run.run_label(), run) for run in self.runs] or [("", self)]
