"""Raw spans -> TaskRecord, reading every convention through the ``Convention`` protocol.

Each span is classified once, then read by its step. What a convention records is read by that
convention's module (``_openinference``, ``_genai``, ``_openllmetry``, ``_langfuse``, ``_haystack``,
``_tracejudge`` for tracejudge's own attributes, ``_freeform`` for raw I/O), each implementing
``Convention`` (``_convention.py``); which convention wins for a field is one line of the
precedence table (``_precedence.py``). Readers try every convention on the line, because one span
often carries several (Langfuse metadata holding OpenInference attributes, OpenLLMetry writing
``gen_ai.*``).

Retrieval attributes are read from any span of a retrieval call: a retriever span and the
retrieval/vector-store spans below it form one call, anchored on the outermost.

Nothing here raises on bad attribute data: what cannot be read becomes a ``Gap``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple, TypeVar

from tracejudge._errors import InputError
from tracejudge.normalize import _bedrock as bedrock
from tracejudge.normalize import _freeform as freeform
from tracejudge.normalize import _genai as genai
from tracejudge.normalize import _langchain as langchain
from tracejudge.normalize import _langfuse as langfuse
from tracejudge.normalize import _logfire as logfire
from tracejudge.normalize import _openinference as oi
from tracejudge.normalize import _openllmetry as oll
from tracejudge.normalize import _tracejudge as tj
from tracejudge.normalize import _vercel as vercel
from tracejudge.normalize._answer import (
    RECORD_ANSWER,
    choices,
    earlier_answers,
    out_of_order,
    tool_requests,
    unrecorded_requests,
)
from tracejudge.normalize._convention import Convention, Filter, ModelIO
from tracejudge.normalize._cut import Dropped, cut_values, dropped_note, shown_limits
from tracejudge.normalize._genai import system_instructions
from tracejudge.normalize._hints import HOSTED_FILE_SEARCH, HOSTED_WEB_SEARCH, with_switches
from tracejudge.normalize._join import join_levels
from tracejudge.normalize._precedence import PRECEDENCE, Line
from tracejudge.normalize._replied import replied_requests
from tracejudge.normalize._shapes import answer_text, documents_from_value, messages_from_value
from tracejudge.normalize._values import REDACTED, as_int, as_str, as_str_list, maybe_json, nanos_to_datetime
from tracejudge.normalize._view import Gaps, SpanView
from tracejudge.schema import (
    ContextAssembly,
    Document,
    Gap,
    Message,
    ModelCall,
    RawSpan,
    Reranking,
    RetrievalCall,
    SpanNode,
    StepKind,
    TaskRecord,
    ToolCall,
)

_MODEL_KEYS = (
    "langfuse.observation.model.name",
    "gen_ai.response.model",
    "gen_ai.request.model",
    "llm.response.model",
    "llm.model_name",
    "llm.request.model",
)
_STATUS: dict[int, Literal["unset", "ok", "error"]] = {1: "ok", 2: "error"}
_T = TypeVar("_T")


def normalize(spans: Sequence[RawSpan]) -> TaskRecord:
    """Rebuild the task record of one trace from its spans (any order, any convention).

    Pure and linear in the size of the spans: every attribute is decoded at most once.
    """
    if not spans:
        raise InputError("no spans to normalize", hint="collect the trace first (tracejudge collect ...)")
    gaps = Gaps()
    views = _classified_views(spans, gaps)
    tree = _Tree(views)
    shown = shown_limits(v.raw for v in views)
    steps = _Steps(views, tree, shown)

    _trace_gaps(gaps, views, steps)
    runs = _runs(tree, gaps, steps.models)
    tools = _with_call_ids(steps.tools, steps.models)
    root = tree.root
    last = steps.models[-1].span_id if steps.models else None
    empty = any(g.kind == "model_output_empty" and g.span_id == last for g in gaps.items())
    rivals = _Rivals.of(views, tree, steps.models)
    answer, answer_span = _final_answer(views, tree, [] if empty else steps.models, rivals, gaps)
    # The last model call's output recorded empty is the answer the user got: its gap says so. An earlier
    # call's text is not read in its place (it was not the answer, and would read as one).
    uncertain = any(g.kind == "answer_uncertain" for g in gaps.items())
    if answer is None and not empty and not uncertain:
        detail = "neither the root span nor a model call recorded an output"
        if any(m.output_text for m in steps.models):
            # An earlier call's text is no answer (_final_answer): say which output is missing.
            detail = f"the root span recorded no answer, nor did the last model call ({last}) record text"
        failed = next((v for v in reversed(views) if v.step == "model" and failure(v.raw)), None)
        if failed is not None:
            # Nothing to record: no switch is named (_hints.with_switches), the failure is said.
            detail += f"; model call {failed.span_id} failed and returned none: {failure(failed.raw)}"
        gaps.add("no_final_answer", failed.span_id if failed else None, detail)

    question = _task_input(views, root, steps.models)
    if runs:
        # Which run's question and answer the trace's are is not known: read only what every run reads alike.
        question = _alike([run.input for run in runs])
        answer = _alike([run.final_answer for run in runs])
        answer_span = runs[0].final_answer_span_id if answer is not None else None
    start, end, duration = _bounds(views)
    keys = _Keys.of(views)
    name = _first(views, "langfuse.trace.name", keys) or root.raw.name or None
    return TaskRecord(
        trace_id=root.raw.trace_id,
        name=as_str(name),
        start_time=start,
        end_time=end,
        duration_ms=duration,
        input=question,
        final_answer=answer,
        final_answer_span_id=answer_span,
        retrievals=tuple(steps.retrievals),
        rerankings=tuple(steps.rerankings),
        context_assemblies=tuple(steps.contexts),
        model_calls=tuple(steps.models),
        answering_calls=rivals.answering(steps.models),
        tool_calls=tuple(tools),
        spans=tuple(_node(v, tree.parent[v.span_id]) for v in views),
        gaps=with_switches(gaps.items(), [v.raw for v in views]),
        metadata=_metadata(views, root, keys),
        cut_lengths=tuple(sorted(shown)),
        runs=runs,
    )


# What would tie a trace's spans to one run: a trace id of each run's own.
OWN_TRACE_ID = (
    "a trace id of its own for each run (let the SDK make one per request; record a session or"
    " conversation as session.id / gen_ai.conversation.id / Langfuse sessionId, not as the trace id)"
)


def _alike(texts: list[str | None]) -> str | None:
    """The text every run reads alike; None when they differ (or none reads one)."""
    return texts[0] if len(set(texts)) == 1 else None


def _runs(tree: _Tree, gaps: Gaps, models: Sequence[ModelCall]) -> tuple[TaskRecord, ...]:
    """Each run's record when the trace holds several (a ``several_runs`` gap names their roots); else none.

    A trace id is all that ties a trace's spans together, and an application may give one to more than one
    run: Langfuse's ``trace_id`` set per session or request, a conversation id hashed into the trace id, a
    propagated header reused across requests, id generators seeded alike. The other run's spans then sit in
    the trace beside the run the ticket is about, under a root of their own, and every trace-wide reading —
    the root's answer or question, the last model call's reply, what any retrieval returned, what any call
    was given — may read the other run's. A span that names no parent at all is a run's root (one whose
    parent was not received names it: it is part of a run whose root is missing, ``missing_parent``); each
    root and the spans under it are read as a trace of their own, and localize concludes only what every run
    concludes alike. A Langfuse API trace comes with one root (:func:`_langfuse_runs`)."""
    roots = list(tree.unparented)
    langfuse_api = len(roots) == 1 and _is_synthetic_root(roots[0])
    if langfuse_api and _decorator_root(roots[0], tree):
        return _decorator_runs(roots[0], tree, gaps, models)
    if langfuse_api:
        top = roots[0]
        roots, orphans = _langfuse_runs(top, tree)
        if len(roots) < 2 and not orphans and _legacy(top, tree):
            # No observation holds a whole run: the trace may still be a decorator's whose record lost its
            # input or output (a root that captures none) — the question its model calls were asked tells.
            return _decorator_runs(top, tree, gaps, models)
    else:
        orphans = list(tree.orphans)
    # Spans naming a parent not received, beside a root: the lost parent may be this run's, or the root of
    # another run under the trace id (lost: the root ends last, in the last batch). Read as a run of their own
    # too, and localize checks the trace read whole as well.
    if not roots:
        orphans = []
    if len(roots) + bool(orphans) < 2:
        return ()
    records = [normalize(_subtree([root], tree, None)) for root in roots]
    if orphans:
        records.append(normalize(_subtree(orphans, tree, PARENT_NOT_RECEIVED)))
    named = ", ".join(f"{v.span_id} ({v.raw.name})" for v in roots)
    if langfuse_api:
        detail = (
            f"the trace holds {len(roots)} runs: top-level observations {named} each hold a whole run (their"
            " own input and output, a model call under them) — the Langfuse trace id may have been given to"
            " more than one run (set by the application per session or conversation, a reused trace id), and"
            " nothing ties the question, the answer, the retrievals or the model calls to one run; the"
            " trace's own input and output are one run's at most"
        )
    elif len(roots) > 1:
        detail = (
            f"the trace holds {len(roots)} runs: spans {named} name no parent — the trace id may have been"
            " given to more than one run (set by the application per session or conversation, a reused"
            " propagated header), and nothing ties the question, the answer, the retrievals or the model"
            " calls to one run"
        )
    else:
        detail = f"the trace's root is span {named}"
    if orphans:
        lost = ", ".join(f"{v.span_id} ({v.raw.name})" for v in orphans)
        detail += (
            f"; spans {lost} name a parent not received — the lost parent may be a span of this run or the"
            " root of another run under the trace id, so they are read as this run's and as a run of their"
            " own, and a verdict stands only if every reading gives it"
        )
    gaps.add("several_runs", None, detail, OWN_TRACE_ID)
    return tuple(records)


def _subtree(tops: list[SpanView], tree: _Tree, parent_key: str | None) -> list[RawSpan]:
    """The spans of ``tops`` and every span under them, each top naming the parent it was sent with: none (a
    run's root), or the one ``parent_key`` holds (a Langfuse trace's synthetic root adopted both)."""
    members = []
    for top in tops:
        if top.raw.parent_span_id in tree.by_id:  # adopted by a Langfuse trace's synthetic root
            parent = as_str(top.attrs.get(parent_key)) if parent_key else None
            members.append(top.raw.model_copy(update={"parent_span_id": parent}))
        else:
            members.append(top.raw)
    stack = list(tops)
    while stack:
        for child in tree.children.get(stack.pop().span_id, []):
            members.append(child.raw)
            stack.append(child)
    return members


# The collector's marks on the span it makes for a Langfuse trace with no single top-level observation, and
# on an observation it adopted whose parent is not in the trace.
SYNTHETIC_ROOT = "langfuse.synthetic_root"
PARENT_NOT_RECEIVED = "langfuse.observation.parent_observation_id"


def _synthetic_root_id(trace_id: str) -> str:
    """The span id the collector gives a Langfuse trace's synthetic root (``tracejudge_collectors.langfuse``'s
    ``synthetic_root_id``; tests/normalize/test_synthetic_root.py pins them alike)."""
    return hashlib.sha256(f"langfuse-trace:{trace_id}".encode()).hexdigest()[:16]


def _is_synthetic_root(view: SpanView) -> bool:
    """Whether ``view`` is the span the collector made for a Langfuse trace: its mark, or (the mark lost) its
    id, which only the trace's id gives. Read without the mark, the trace record's span was a run's own
    root and two decorator runs under it one run, whose answer the last run's (a definite verdict neither
    run gives)."""
    if view.attrs.get(SYNTHETIC_ROOT) in (True, "true"):
        return True
    return view.raw.span_id == _synthetic_root_id(view.raw.trace_id)


def _langfuse_runs(root: SpanView, tree: _Tree) -> tuple[list[SpanView], list[SpanView]]:
    """The runs' roots of a Langfuse API trace, and the top-level observations whose parent was not received.

    The collector gives a Langfuse trace one root: the single top-level observation, or a synthetic one
    adopting several — those that name no parent and those whose parent is not in the trace (it keeps the id
    they name, ``langfuse.observation.parent_observation_id``: a ``missing_parent`` gap each). An observation
    Langfuse made of an OpenTelemetry span (its metadata holds the span's ``scope`` / ``resourceAttributes``)
    that names no parent was sent as a root: a run's, as in a trace sent over OTLP. Observations written
    through the legacy ingestion API (the v2 SDK's ``trace.span()`` / ``trace.generation()``, its decorator's
    nested functions under a trace that is no observation) sit at the top level in any run, so they alone say
    nothing; one that is a run's whole record — its own input and output, steps under it, a model call at
    or under it — is one a run has once. A trace whose record is itself a run's root (the v2 decorator's
    outermost function) is read by :func:`_decorator_runs` instead."""
    top = tree.children.get(root.span_id, [])
    orphans = [v for v in top if v.attrs.get(PARENT_NOT_RECEIVED)]
    for view in orphans:
        pid = as_str(view.attrs.get(PARENT_NOT_RECEIVED))
        view.gap("missing_parent", f"the trace may be incomplete: parent span {pid} not received")
    runs = [v for v in top if v not in orphans and (_sent_as_root(v) or _whole_run(v, tree))]
    return runs, orphans


def _decorator_root(root: SpanView, tree: _Tree) -> bool:
    """Whether a Langfuse API trace's synthetic root is a run's own root: the trace record holds an input and
    an output of its own — no top-level observation's — and no top-level observation was sent as an
    OpenTelemetry span. The v2 SDK's ``@observe`` makes its outermost function the trace itself (its
    arguments and return value the trace's input and output) and each function it calls a top-level
    observation: steps of the trace's run, however whole a run each looks (its own input and output, a
    model call under it), not runs. (A run's root that is an observation writes its input and output on
    the trace record too: that record repeats one top-level observation's.)"""
    own = tuple(root.attrs.get(key) for key in (_TRACE_INPUT, _TRACE_OUTPUT))
    if any(value in (None, "") for value in own) or not _legacy(root, tree):
        return False
    top = tree.children.get(root.span_id, [])
    return all((v.attrs.get(langfuse.INPUT), v.attrs.get(langfuse.OUTPUT)) != own for v in top)


def _legacy(root: SpanView, tree: _Tree) -> bool:
    """Whether no top-level observation of a Langfuse API trace was sent over OpenTelemetry (the legacy
    ingestion API's: the v2 SDK's), nor names a parent not in the trace."""
    top = tree.children.get(root.span_id, [])
    return not any(_sent_as_root(v) or v.attrs.get(PARENT_NOT_RECEIVED) for v in top)


_TRACE_INPUT = "langfuse.trace.input"
_TRACE_OUTPUT = "langfuse.trace.output"

# What the several_runs gap of a decorator trace says: localize reads such a trace whole as well.
DECORATOR_RUNS = "told apart by the question their model calls were asked"


def _decorator_runs(
    root: SpanView, tree: _Tree, gaps: Gaps, models: Sequence[ModelCall]
) -> tuple[TaskRecord, ...]:
    """The runs of a v2 ``@observe`` trace (:func:`_decorator_root`; or a legacy trace none of whose
    observations holds a whole run, its record maybe without its input or output) when its model calls were
    asked more than one question: several calls of the outermost function under one trace id (an
    application that passes ``langfuse_observation_id`` per session, say), each writing the trace record in
    turn — the record holds the last one's input and output, and every run's steps sit at its top level.

    One run asks one question: every model call it makes — a tool loop's turns, a planning call and an
    answering one — carries the user's question. The top-level observations are cut, in start order, where
    the question changes: from the first one after the last that asked the previous question (a run's
    search comes before its first model call). Which step is whose is a guess: localize reads the trace
    whole too, and concludes only what every reading gives. Runs asking the same question are not told
    apart."""
    asked = {m.span_id: _question(m) for m in models}
    top = tree.children.get(root.span_id, [])
    segments: list[list[SpanView]] = [[]]
    questions: list[str | None] = [None]
    pending: list[SpanView] = []  # after the last top that asked the current question
    for view in top:
        question = _asked_under(view, tree, asked)
        if question is None:
            pending.append(view)
        elif questions[-1] in (None, question):
            segments[-1] += [*pending, view]
            questions[-1], pending = question, []
        else:
            # A step asking no model (a search) goes with the run whose question its input holds; else with
            # the next run (a run searches before it asks the model; the API's times are milliseconds).
            earlier = [v for v in pending if _holds(v, questions[-1])]
            segments[-1] += earlier
            segments.append([*(v for v in pending if v not in earlier), view])
            questions.append(question)
            pending = []
    segments[-1] += pending
    if len(segments) < 2:
        return ()
    records = tuple(normalize(_under_root(root, seg, tree)) for seg in segments)
    named = ", ".join(f"{seg[0].span_id} ({seg[0].raw.name})" for seg in segments)
    gaps.add(
        "several_runs",
        None,
        f"the trace holds {len(segments)} runs, {DECORATOR_RUNS}: from top-level observations {named} —"
        " the trace's steps sit at its top level (Langfuse's v2 @observe makes the trace itself a run's"
        " root), and its trace id may have been given to more than one run (its record holds the last one's"
        " input and output); which step is whose is a guess, so the trace is read whole as well, and a"
        " verdict stands only if every reading gives it",
        OWN_TRACE_ID,
    )
    return records


def _under_root(root: SpanView, tops: list[SpanView], tree: _Tree) -> list[RawSpan]:
    """``tops`` and every span under them, under the trace's root without the trace record's input and
    output (the last run's) and named by the first of them: one run's steps read as one run."""
    attrs = {k: v for k, v in root.raw.attributes.items() if k not in (_TRACE_INPUT, _TRACE_OUTPUT)}
    # Named by its first step: every run's root is the trace's, and the run's label must tell them apart.
    name = f"{root.raw.name} from {tops[0].span_id} ({tops[0].raw.name})"
    members, stack = [root.raw.model_copy(update={"attributes": attrs, "name": name})], list(tops)
    while stack:
        view = stack.pop()
        members.append(view.raw)
        stack.extend(tree.children.get(view.span_id, []))
    return members


def _holds(view: SpanView, question: str | None) -> bool:
    text = as_str(view.attrs.get(langfuse.INPUT))
    return bool(question and text and (question in text or json.dumps(question)[1:-1] in text))


def _question(call: ModelCall) -> str | None:
    """The user's question a model call was asked: the first user message it was sent."""
    return next((m.content for m in call.input_messages if m.role == "user" and m.content), None)


def _asked_under(view: SpanView, tree: _Tree, asked: Mapping[str, str | None]) -> str | None:
    """The question the first model call at or under ``view`` was asked (None: none asked one)."""
    stack = [view]
    found: list[tuple[int, str]] = []
    while stack:
        node = stack.pop()
        if (question := asked.get(node.span_id)) is not None:
            found.append((node.raw.start_time_unix_nano, question))
        stack.extend(tree.children.get(node.span_id, []))
    return min(found)[1] if found else None


def _sent_as_root(view: SpanView) -> bool:
    """Whether Langfuse made the observation of an OpenTelemetry span (the metadata it gives every one)."""
    metadata = maybe_json(view.attrs.get(langfuse.METADATA))
    return isinstance(metadata, dict) and ("scope" in metadata or "resourceAttributes" in metadata)


def _whole_run(view: SpanView, tree: _Tree) -> bool:
    return bool(tree.children.get(view.span_id)) and _records_io(view) and _calls_model(view, tree)


def _records_io(view: SpanView) -> bool:
    return all(view.attrs.get(key) not in (None, "") for key in (langfuse.INPUT, langfuse.OUTPUT))


def _calls_model(view: SpanView, tree: _Tree) -> bool:
    stack = [view]
    while stack:
        node = stack.pop()
        if node.step == "model":
            return True
        stack.extend(tree.children.get(node.span_id, []))
    return False


def _classified_views(spans: Sequence[RawSpan], gaps: Gaps) -> list[SpanView]:
    """One view per span id (a span delivered twice, by retries, counts once), in start order, each
    classified (a span that cannot be is a gap, never an abort)."""
    unique = {span.span_id: span for span in spans}
    views = [SpanView(span, gaps) for span in unique.values()]
    views.sort(key=lambda v: (v.raw.start_time_unix_nano, v.span_id))
    for view in views:
        try:
            view.step, view.convention = _classify(view)
        except Exception as exc:  # bad data must never abort a trace; the gap says which span
            _internal(view, exc)
    return views


def _bounds(views: list[SpanView]) -> tuple[datetime | None, datetime | None, float | None]:
    """The trace's start, end and duration in milliseconds (spans without a time do not count)."""
    starts = [v.raw.start_time_unix_nano for v in views if v.raw.start_time_unix_nano > 0]
    ends = [v.raw.end_time_unix_nano for v in views if v.raw.end_time_unix_nano > 0]
    first = min(starts) if starts else 0  # 0 reads as no time
    last = max(ends) if ends else 0
    duration = (last - first) / 1e6 if first and last and last >= first else None
    return nanos_to_datetime(first), nanos_to_datetime(last), duration


def incompleteness(task: TaskRecord) -> list[str]:
    """What may still be missing from a trace (spans whose parent was not received, no root), as
    ``traces show`` and triage say it beside their output; empty when the trace is whole."""
    return list(dict.fromkeys(g.detail for g in task.gaps if g.kind == "missing_parent"))


def _trace_gaps(gaps: Gaps, views: list[SpanView], steps: _Steps) -> None:
    if not steps.retrievals:
        unmarked, mark = _unmarked(steps.tools)
        hosted, record = _hosted(views)
        gap = Gap(
            kind="no_retrieval_span", detail=f"no span of the trace is a retrieval step{unmarked}{hosted}"
        )
        # A hosted search's results are in no span whatever is marked: its switch is the one to name.
        gaps.add_gap(gap.switched(record) if record else gap.model_copy(update={"switch": mark}))
    if not steps.models:
        detail = "no span of the trace is an LLM call"
        if any(oll.KIND in v.attrs for v in views):
            # OpenLLMetry's framework instrumentations (llama-index) leave LLM calls to the client's.
            detail += (
                "; OpenLLMetry records LLM calls with the LLM client's instrumentation"
                " (e.g. opentelemetry-instrumentation-openai): enable it beside the framework's"
            )
        gaps.add("no_model_span", None, detail)


def _internal(view: SpanView, exc: Exception) -> None:
    view.gap("attribute_unparseable", f"internal error reading span: {type(exc).__name__}")


class _Tree:
    """Parent and children of every span (a parent not collected is a gap, its child a root)."""

    def __init__(self, views: list[SpanView]) -> None:
        self.by_id = {v.span_id: v for v in views}
        self.parent: dict[str, str | None] = {}
        self.children: dict[str, list[SpanView]] = {}
        self.unparented: list[SpanView] = []
        """The spans sent naming no parent, in start order."""
        self.orphans: list[SpanView] = []
        """The spans naming a parent not received, in start order."""
        for view in views:
            pid = view.raw.parent_span_id or None
            if pid is None:
                self.unparented.append(view)
            elif pid not in self.by_id:
                view.gap("missing_parent", f"the trace may be incomplete: parent span {pid} not received")
                self.orphans.append(view)
                pid = None
            self.parent[view.span_id] = pid
        self._cut_loops(views)
        for view in views:
            pid = self.parent[view.span_id]
            if pid is not None:
                self.children.setdefault(pid, []).append(view)
        self.root = self._root(views)

    def _cut_loops(self, views: list[SpanView]) -> None:
        """Parent links that lead back to where they started (corrupt or hostile data) are cut where
        the walk closes the loop: that span reads as a root with a gap, so no walk up the tree runs
        forever and the trace still has a root."""
        rooted: set[str] = set()
        parent = self.parent
        for view in views:
            if view.span_id in rooted:
                continue
            if parent[view.span_id] is None or parent[view.span_id] in rooted:
                # The walk would stop at the next step (spans come in start order: parents first, mostly).
                rooted.add(view.span_id)
                continue
            path: list[str] = []
            on_path: set[str] = set()
            sid: str | None = view.span_id
            while sid is not None and sid not in rooted:
                if sid in on_path:
                    last = path[-1]
                    self.parent[last] = None
                    self.by_id[last].gap(
                        "missing_parent",
                        f"the trace's parent links form a loop (span {last}'s parent {sid} descends from"
                        f" it): {last} is read as a root; the trace may be incomplete or corrupt",
                    )
                    break
                on_path.add(sid)
                path.append(sid)
                sid = self.parent[sid]
            rooted.update(path)

    def _root(self, views: list[SpanView]) -> SpanView:
        roots = [v for v in views if not v.raw.parent_span_id]
        if roots:
            return roots[0]
        # Every span names a parent: the root (a late flush, another service) has not arrived.
        views[0].gaps.add(
            "missing_parent", None, "the trace may be incomplete: its root span has not been received"
        )
        roots = [v for v in views if self.parent[v.span_id] is None]
        return roots[0]

    def parent_view(self, view: SpanView) -> SpanView | None:
        pid = self.parent[view.span_id]
        return None if pid is None else self.by_id[pid]


class _Steps:
    """Every span read by its step: retrieval calls, rerankings, context assemblies, model and tool calls."""

    def __init__(self, views: list[SpanView], tree: _Tree, shown: frozenset[int]) -> None:
        self.retrievals: list[RetrievalCall] = []
        self.rerankings: list[Reranking] = []
        self.contexts: list[ContextAssembly] = []
        self.models: list[ModelCall] = []
        self.tools: list[ToolCall] = []
        self._tree = tree
        self._shown = shown
        self._wrappers = _wrappers(views, tree)
        rerank_views: list[SpanView] = []
        readers: dict[StepKind, Callable[[SpanView], None]] = {
            "retrieval": self._retrieval,
            "rerank": rerank_views.append,  # read once every retrieval is known (node ids below)
            "context": self._context,
            "model": self._model,
            "tool": self._tool,
        }
        for view in views:
            read = readers.get(view.step)
            if read is not None:
                _guarded(read, view)
        returned = {d.raw_id: d for call in self.retrievals for d in call.documents if d.raw_id is not None}
        for view in rerank_views:
            _guarded(self._rerank, view, returned)

    def _context(self, view: SpanView) -> None:
        self.contexts.append(_context(view))

    def _model(self, view: SpanView) -> None:
        if view.span_id not in self._wrappers:
            self.models.append(_prompted(view, _model_call(view, self._shown), self._tree))
        if bedrock.is_retrieve_and_generate(view):
            self.retrievals.append(_cited_retrieval(view))
        for search in oi.file_searches(view):
            if search.results is not None:
                self.retrievals.append(_hosted_retrieval(view, search))
            else:
                view.gap(
                    "retrieval_documents_not_recorded",
                    f"the model ran OpenAI's hosted file_search (queries {list(search.queries)!r}) and the"
                    f" trace does not hold what it returned; to record it: {HOSTED_FILE_SEARCH.text}",
                )

    def _tool(self, view: SpanView) -> None:
        call = _tool_call(view)
        self.tools.append(call)
        if call.documents and tj.has_retrieval_attributes(view) and not self._wraps_store_search(view):
            # tracejudge.retrieval.* on a tool returning documents marks it a retrieval.
            self.retrievals.append(_retrieval(view, [view]))

    def _wraps_store_search(self, view: SpanView) -> bool:
        """Whether a vector store's query span is the tool's child: that call reads the tool as its member."""
        return any(_store_search_in_tool(child, view) for child in self._tree.children.get(view.span_id, []))

    def _rerank(self, view: SpanView, returned: dict[str, Document]) -> None:
        self.rerankings.append(_reranking(view, returned))

    def _retrieval(self, view: SpanView) -> None:
        tree = self._tree
        anchor_parent = tree.parent_view(view)
        if anchor_parent is not None and anchor_parent.step == "retrieval":
            return  # read as part of the enclosing retrieval call
        members = _members(view, tree.children)
        if anchor_parent is not None and (
            # a traceloop task records its own query
            (oll.KIND not in view.attrs and _is_retriever_task(anchor_parent))
            or _store_search_in_tool(view, anchor_parent)
        ):
            members.append(anchor_parent)
        self.retrievals.append(_retrieval(view, members))
        if view.get("tool.name", "gen_ai.tool.name") is not None:
            # A function tool marked as a retriever (openai-agents' ``tool_span_kinds``) was
            # still called by the model: its arguments and result are a tool call too.
            self.tools.append(_tool_call(view))


def _guarded(read: Callable[..., None], view: SpanView, *args: Any) -> None:
    """Read one span; bad data must never abort a trace: an error is a gap saying which span."""
    try:
        read(view, *args)
    except Exception as exc:
        _internal(view, exc)


def _wrappers(views: list[SpanView], tree: _Tree) -> set[str]:
    """LLM spans with another LLM span below them (LlamaIndex's ``LLM.predict`` around ``LLM.chat``):
    the innermost span holds the messages actually sent, so only it is a model call."""
    wrappers: set[str] = set()
    for view in views:
        if view.step == "model":
            pid = tree.parent[view.span_id]
            while pid is not None and pid not in wrappers:
                if tree.by_id[pid].step == "model":
                    wrappers.add(pid)
                pid = tree.parent[pid]
    return wrappers


# --- classification -----------------------------------------------------------------------------


def _classify(view: SpanView) -> tuple[StepKind, str]:
    """The step of a span and the convention that decided it (see ``PRECEDENCE.classify``)."""
    step, convention = _convention_step(view) or _unclassified(view)
    if convention == "tracejudge":
        return step, convention
    if step == "other" and tj.has_retrieval_attributes(view):
        return "retrieval", convention or "tracejudge"
    return step, convention


def _convention_step(view: SpanView) -> tuple[StepKind, str] | None:
    """The step the first tier that classifies the span gives it, and the convention that did.

    Within a tier the first specific step wins; "other" only when no convention of the tier is more
    specific."""
    other: tuple[StepKind, str] | None = None
    for tier in PRECEDENCE.classify:
        for candidate in tier:
            found = candidate.classify(view)
            if found is not None:
                if found != "other":
                    return found, candidate.name
                other = other or (found, candidate.name)
        if other is not None:
            return other
    return None


def _unclassified(view: SpanView) -> tuple[StepKind, str]:
    """A span no tier classifies: a model call when it names a model, else "other"."""
    in_langfuse = langfuse.is_langfuse(view)
    if any(view.attrs.get(key) is not None for key in _MODEL_KEYS):
        return "model", "langfuse" if in_langfuse else "gen_ai"
    return "other", "langfuse" if in_langfuse else ""


# --- retrieval ----------------------------------------------------------------------------------


def _members(anchor: SpanView, children: dict[str, list[SpanView]]) -> list[SpanView]:
    """The anchor, then retrieval and embedding spans below it (through retrieval spans), in start order."""
    out = [anchor]
    stack = list(reversed(children.get(anchor.span_id, [])))
    while stack:
        view = stack.pop()
        if view.step in ("retrieval", "embedding"):
            out.append(view)
            if view.step == "retrieval":
                stack.extend(reversed(children.get(view.span_id, [])))
    return out


def _is_retriever_task(view: SpanView) -> bool:
    """An OpenLLMetry task/tool span around a vector-store query: it holds the query text the store lacks."""
    return view.step in ("chain", "tool") and view.attrs.get(oll.KIND) in ("task", "tool")


def _store_search_in_tool(view: SpanView, parent: SpanView) -> bool:
    """A vector store's query span (``db.system``: OpenLLMetry's store instrumentations) right under a tool
    span of any instrumentation: one search, whose result (and the filter a tool records) is the tool's — one
    retrieval call, as nested retriever spans are, not a second call that recorded nothing."""
    return view.step == "retrieval" and parent.step == "tool" and isinstance(view.attrs.get("db.system"), str)


def _first_read(line: Line, read: Callable[[Convention], _T | None]) -> _T | None:
    """The first record of a precedence line (conventions that hold none answer None)."""
    for convention in line:
        found = read(convention)
        if found is not None:
            return found
    return None


def _documents(view: SpanView) -> list[Document] | None:
    return _first_read(PRECEDENCE.documents, lambda c: c.documents(view))


def _query(view: SpanView) -> str | None:
    text = _first_read(PRECEDENCE.query, lambda c: c.query(view))
    return text if text != REDACTED else None


def _retrieval_filter(view: SpanView) -> Filter | None:
    return _first_read(PRECEDENCE.retrieval_filter, lambda c: c.retrieval_filter(view))


def _principal(view: SpanView) -> str | None:
    return as_str(view.attrs.get(tj.PRINCIPAL))


def _top_k(view: SpanView) -> int | None:
    return as_int(
        view.get(
            "gen_ai.retrieval.top_k",
            "gen_ai.request.top_k",
            "db.vector.query.top_k",
            "db.chroma.query.n_results",
            "pinecone.query.top_k",  # OpenLLMetry's Pinecone instrumentation (0.60)
            "db.milvus.search.limit",  # OpenLLMetry's Milvus instrumentation (0.60)
        )
    ) or bedrock.top_k(view)


def _data_source(view: SpanView) -> str | None:
    return as_str(view.get("gen_ai.data_source.id", "db.collection.name")) or bedrock.data_source(view)


# ``RetrievalCall`` fields read from the call's members, in order, until one records it ("" is none);
# the filter fills two fields (parsed and raw).
_RETRIEVAL_FIELDS: dict[str, Callable[[SpanView], Any]] = {
    "query": _query,
    "filter": _retrieval_filter,
    "principal": _principal,
    "candidates": tj.candidates,
    "top_k": _top_k,
    "data_source": _data_source,
    "namespace": oll.pinecone_namespace,
}


def _retrieval(anchor: SpanView, members: list[SpanView]) -> RetrievalCall:
    levels, fields = _member_records(members)
    docs = join_levels(levels) if levels else None
    _document_gaps(anchor, docs, members)
    dropped = _dropped_documents(anchor, members)
    filt: Filter | None = fields.pop("filter")
    return RetrievalCall(
        span_id=anchor.span_id,
        span_ids=tuple(v.span_id for v in members),
        name=anchor.raw.name,
        documents=tuple(docs or ()),
        documents_recorded=docs is not None and not _cut_list(anchor, docs, members) and not dropped,
        filter=filt[0] if filt else None,
        filter_raw=filt[1] if filt else None,
        start_time=anchor.start,
        **fields,
    )


def _hosted_retrieval(view: SpanView, search: oi.FileSearch) -> RetrievalCall:
    """A hosted file search the model ran inside its call, its results recorded with the response: a
    retrieval call anchored on the model call's span. What the model was then given is not recorded (the
    model call's input reads as partial: ``_hosted_note``)."""
    return RetrievalCall(
        span_id=view.span_id,
        span_ids=(view.span_id,),
        name=f"{view.raw.name} (file_search)",
        query="\n".join(search.queries) or None,
        documents=tuple(oi.file_search_documents(view, search)),
        documents_recorded=not _dropped_documents(view, [view]),
        start_time=view.start,
    )


def _cited_retrieval(view: SpanView) -> RetrievalCall:
    """The search of a Bedrock ``retrieve_and_generate`` call: its documents are the references the answer
    cites, not all it retrieved, so one it lacks may have been returned too."""
    call = _retrieval(view, [view])
    view.gap(
        "retrieval_documents_not_recorded",
        f"{view.raw.name} records the references its answer cites, not every chunk it retrieved",
        bedrock.RAG_SWITCH,
    )
    return call.model_copy(update={"documents_recorded": False})


def _member_records(members: list[SpanView]) -> tuple[list[list[Document]], dict[str, Any]]:
    """The documents each member of a retrieval call returned (one level per member that recorded
    them) and the call's fields, read member by member (embedding spans hold none)."""
    fields: dict[str, Any] = dict.fromkeys(_RETRIEVAL_FIELDS)
    levels: list[list[Document]] = []
    for view in members:
        if view.step == "embedding":
            continue
        found = _documents(view)
        if found is not None:
            levels.append(found)
        for field, read in _RETRIEVAL_FIELDS.items():
            if fields[field] is None or fields[field] == "":
                fields[field] = read(view)
    return levels, fields


_DOCUMENT_COUNT = "gen_ai.retrieval.document_count"


def _cut_list(anchor: SpanView, docs: list[Document], members: list[SpanView]) -> bool:
    """Whether the call says it returned more documents than it lists (OpenLIT's LangChain retriever span
    lists the first 3 beside ``gen_ai.retrieval.document_count``): a material missing from the list may be
    among the rest, so the list does not settle what was returned."""
    counts = [as_int(v.attrs.get(_DOCUMENT_COUNT)) for v in members]
    returned = max((c for c in counts if c is not None), default=None)
    if returned is None or returned <= len(docs):
        return False
    anchor.gap(
        "retrieval_documents_not_recorded",
        f"the retrieval call lists {len(docs)} of the {returned} documents it returned ({_DOCUMENT_COUNT})",
    )
    return True


def _dropped_documents(anchor: SpanView, members: list[SpanView]) -> bool:
    """Whether the SDK dropped attributes or events of the call's spans at its limits: the documents it
    returned (``retrieval.documents.N.*`` attributes, ``db.query.result`` events) may be among them, so
    the ones recorded do not settle what was returned (a gap says how many and what to raise)."""
    note = dropped_note(v.raw for v in members if v.step != "embedding")
    if note is None:
        return False
    anchor.gap(
        "retrieval_documents_not_recorded", f"documents it returned may be missing: {note.note}", note.switch
    )
    return True


def _document_gaps(anchor: SpanView, docs: list[Document] | None, members: list[SpanView]) -> None:
    if docs is None:
        failed = failure(anchor.raw)
        detail = (
            "the retrieval call did not record what it returned"
            if failed is None
            else f"the retrieval call failed ({failed}): it recorded no documents"
        )
        anchor.gap("retrieval_documents_not_recorded", detail)
        return
    missing = sum(1 for d in docs if d.content is None)
    if missing:
        anchor.gap("retrieval_content_not_recorded", _content_gap(missing, docs, members))


def _content_gap(missing: int, docs: list[Document], members: list[SpanView]) -> str:
    detail = f"{missing} of {len(docs)} documents have no content"
    if missing == len(docs) and any("gen_ai.retrieval.documents" in v.attrs for v in members):
        # Not an error: the GenAI convention's document model is {id, score}.
        detail = (
            f"{detail}: gen_ai.retrieval.documents records ids and scores only, by design of the"
            " OTel GenAI convention. Nothing is wrong; triage identifies the documents by id and checks"
            " the model input for the clause. To record the text as well, set it where tracejudge reads"
            " it: OpenInference retrieval.documents.N.document.content on the retriever span, or the"
            " documents (with their text) as the retrieval tool's gen_ai.tool.call.result"
        )
    return detail


def _reranking(view: SpanView, returned: dict[str, Document]) -> Reranking:
    query = as_str(view.attrs.get("reranker.query"))
    inputs = oi.documents(view, "reranker.input_documents")
    outputs = oi.documents(view, "reranker.output_documents")
    if inputs is None and outputs is None:
        inputs = _node_documents(view, "input.value", returned)
        outputs = _node_documents(view, "output.value", returned)
    cohere = (
        bedrock.rerank_documents(view, list(returned.values()))
        if inputs is None and outputs is None
        else None
    )
    if cohere is not None:
        query, inputs, outputs = cohere
    if inputs is None and outputs is None and oll.KIND in view.attrs:
        inputs = _resolved(oll.node_documents(view, "traceloop.entity.input"), returned)
        outputs = _resolved(oll.node_documents(view, "traceloop.entity.output"), returned)
        query = query or oll.node_query(view)
    return Reranking(
        span_id=view.span_id,
        query=None if query == REDACTED else query,
        input_documents=tuple(inputs or ()),
        output_documents=tuple(outputs or ()),
        top_k=as_int(view.attrs.get("reranker.top_k")),
    )


def _resolved(docs: list[Document] | None, returned: dict[str, Document]) -> list[Document] | None:
    """Documents a step passed on, as the retrieval returned them when their node id is known there
    (same identity and content), with this step's score and position."""
    if docs is None:
        return None
    out = []
    for doc in docs:
        known = returned.get(doc.raw_id) if doc.raw_id is not None else None
        out.append(
            doc if known is None else known.model_copy(update={"score": doc.score, "position": doc.position})
        )
    return out


def _node_documents(view: SpanView, key: str, returned: dict[str, Document]) -> list[Document] | None:
    """A LlamaIndex postprocessor's nodes (ids only) as the documents a retrieval returned under those ids."""
    value = view.attrs.get(key)
    refs = oi.node_refs(value) if value != REDACTED else None
    if refs is None:
        return None
    out = []
    for position, (node_id, score) in enumerate(refs):
        known = returned.get(node_id)
        if known is None:
            out.append(Document(doc_id=node_id, raw_id=node_id, score=score, position=position))
        else:
            out.append(known.model_copy(update={"score": score, "position": position}))
    return out


# --- context assembly ---------------------------------------------------------------------------


def _context(view: SpanView) -> ContextAssembly:
    included, _ = tj.identities(view, "tracejudge.context.included")
    dropped, reasons = tj.identities(view, "tracejudge.context.dropped")
    budget_value = view.attrs.get("tracejudge.context.budget")
    budget = as_int(budget_value)
    if budget_value is not None and budget is None:
        view.gap("attribute_unparseable", "tracejudge.context.budget: not an integer")
    output = view.get(*freeform.OUTPUT_KEYS)
    text: str | None = None
    if output is not None and output != REDACTED:
        # A rendered chat prompt (OpenInference PROMPT spans) is a message list: all of it is context.
        messages = messages_from_value(maybe_json(output))
        if messages:
            text = "\n\n".join(m.content for m in messages if m.content) or None
        else:
            text = answer_text(output)
    return ContextAssembly(
        span_id=view.span_id,
        name=view.raw.name,
        included=tuple(included),
        dropped=tuple(dropped),
        dropped_reasons=reasons,
        budget=budget,
        output=text,
    )


# --- model calls --------------------------------------------------------------------------------


def _model_io(line: Line, read: Callable[[Convention], ModelIO | None]) -> ModelIO:
    """The first convention's record of a model call's input or output, redaction noted on the way."""
    redacted = False
    for convention in line:
        found = read(convention)
        if found is None:
            continue
        redacted = redacted or found.redacted
        if found.found:
            return ModelIO(messages=found.messages, texts=found.texts, redacted=redacted)
    return ModelIO(redacted=redacted)


def _model_call(view: SpanView, shown: frozenset[int]) -> ModelCall:
    """The model call a span records; ``shown``: the lengths the trace shows its values were cut at."""
    system, system_redacted = system_instructions(view)
    given = _model_io(PRECEDENCE.input_messages, lambda c: c.input_messages(view))
    got = _model_io(PRECEDENCE.output_messages, lambda c: c.output_messages(view))
    inputs, outputs = given.messages or (), got.messages or ()
    dropped = dropped_note([view.raw])
    hosted = _hosted_note(view, got.messages or ())
    input_text, redacted, partial = _input_record(
        view, system, system_redacted, given, dropped, hosted, shown
    )
    output_text, output_recorded = _output_record(view, got, dropped)
    return ModelCall(
        span_id=view.span_id,
        name=view.raw.name,
        model=as_str(view.get(*_MODEL_KEYS)),
        system_instructions=system,
        input_messages=tuple(inputs),
        output_messages=tuple(outputs),
        input_recorded=bool(input_text),
        input_redacted=redacted,
        input_partial=partial,
        output_recorded=output_recorded,
        input_text=input_text,
        output_text=output_text,
        choices=max(sum(1 for m in outputs if m.content), _asked_choices(view)),
        usage=_usage(view),
        prompt=langfuse.prompt(view),
        start_time=view.start,
    )


_SYSTEM_ROLES = frozenset({"system", "developer"})


def _prompted(view: SpanView, call: ModelCall, tree: _Tree) -> ModelCall:
    """The call, its input partial when the prompt that fed it shows a system message its span does not
    record. In a LangChain ``prompt | model`` sequence the template's run, the step just before the call,
    records the prompt it rendered (``langchain.rendered_roles``), and that prompt is what the model was
    sent: a chat whose span records no system message (OpenLLMetry's ``gen_ai.system_instructions`` lost,
    hidden by a processor, dropped at a limit) was still sent the one the prompt holds — the context, often.
    Read as the whole input, the clause in it was "not in the model input" (``dropped_in_context``)."""
    if not call.input_text or call.input_partial or call.input_redacted or call.system_instructions:
        return call
    if any(m.role in _SYSTEM_ROLES for m in call.input_messages):
        return call
    prompt = _step_before(view, tree)
    roles = langchain.rendered_roles(prompt) if prompt is not None else None
    if prompt is None or roles is None or "system" not in roles:
        return call
    view.gap(
        "model_input_truncated",
        f"the prompt the call was sent (span {prompt.span_id}, {prompt.raw.name}: {roles}) holds a system"
        " message the call's span does not record: what it gave the model is not in the input read",
    )
    return call.model_copy(update={"input_partial": True})


def _step_before(view: SpanView, tree: _Tree) -> SpanView | None:
    """The span's sibling (same parent) that ended last before it started: the step whose output it took
    in a sequence. None for a root, or when no sibling ended before it."""
    parent = tree.parent[view.span_id]
    if parent is None:
        return None
    start = view.raw.start_time_unix_nano
    before = [v for v in tree.children.get(parent, []) if v is not view and v.raw.end_time_unix_nano <= start]
    return max(before, key=lambda v: v.raw.end_time_unix_nano, default=None)


def _output_record(view: SpanView, got: ModelIO, dropped: Dropped | None) -> tuple[str | None, bool]:
    """The model output's text and whether any output was recorded (a gap says when not); ``dropped``:
    what the SDK dropped from the span (:func:`dropped_note`)."""
    outputs = got.messages or ()
    output_text = next((m.content for m in outputs if m.content), None) or next(iter(got.texts), None)
    output_recorded = output_text is not None or any(m.tool_calls for m in outputs)
    empty = None if output_recorded or _redacted(got) else _empty_output(view, outputs)
    if _redacted(got):
        view.gap("model_output_redacted", "the model output was recorded redacted")
    elif empty is not None:
        # Content capture was on and the model said nothing: no switch records more (nor is there an
        # answer to read; localize leaves used_by_model unconfirmed).
        view.gap("model_output_empty", f"the model output was recorded empty: {empty}")
    elif not output_recorded and failure(view.raw):
        view.gap(
            "model_output_not_recorded", f"the model call failed and returned no output: {failure(view.raw)}"
        )
    elif not output_recorded and not view.raw.end_time_unix_nano:
        # A span exported before it ended (a backend showing spans still open): the response was never
        # recorded on it, whatever the content switches (OpenLLMetry never ends the span of a
        # ``messages.stream`` read through ``get_final_text()`` alone).
        view.gap("model_output_not_recorded", "the LLM span never ended (no end time): no response recorded")
    elif not output_recorded:
        view.gap(
            "model_output_not_recorded", "the LLM span carries no output content" + _no_output_note(view)
        )
    elif dropped is not None:
        # An output message, a content part or a choice event may be among the records dropped: the
        # output read is not all the model said (localize reads an answer from this span as incomplete).
        view.gap("model_output_truncated", f"the output may be incomplete: {dropped.note}", dropped.switch)
    elif not any(m.refusal for m in outputs) and (stopped := _stopped_early(view)) is not None:
        view.gap("model_output_truncated", f"the output may be incomplete: {stopped}")
    return output_text, output_recorded


def _no_output_note(view: SpanView) -> str:
    """What the finish reasons of a span with no output say of it: Anthropic's refusal with no content block,
    for which OpenLLMetry records no output message (the span alone does not tell it from content capture
    off); a streamed reply recorded as the stream object's repr; "" for any other."""
    if (repr_ := freeform.object_repr(view)) is not None:
        return (
            f", only the repr of what the call returned ({repr_}: a stream the instrumentation did not read)"
        )
    if not _REFUSED.intersection(_finish_reasons(view)):
        return ""
    return ", and the reply ended with finish_reason refusal (a refusal without text records no output)"


def _stopped_early(view: SpanView) -> str | None:
    """How a reply with text ended before the model finished, by its finish reasons; None when it did not."""
    # Lowercased: openinference-instrumentation-google-genai records Gemini's own ``MAX_TOKENS``.
    reasons = [r.lower() for r in _finish_reasons(view) + genai.output_finish_reasons(view)]
    ended = (_AT_LIMIT | _REFUSED).intersection(reasons)
    if ended:
        # The reply stopped at the request's max_tokens (Anthropic's stop_reason ``max_tokens``, OpenAI's and
        # the GenAI conventions' ``length``) or the API's refusal classifier stopped it mid-reply: what the
        # model would have said past it — a taken back value, the required one beside a superseded one — is
        # not in the record.
        listed = ", ".join(sorted(ended))
        return (
            f"the reply stopped before the model finished (finish_reason {listed}: the token limit, or the"
            " API's refusal classifier)"
        )
    if _BROKEN_OFF.intersection(reasons):
        # A stream that ended before the model finished (opentelemetry-instrumentation-openai-v2 records the
        # finish reason "error" for a reply whose stream broke off or that the app closed early): what the
        # model said past the break is not in the record, nor is it known what it would have stated.
        return (
            "the reply ended with finish_reason error (its stream broke off, or the app closed it, before the"
            " model finished)"
        )
    return None


def _empty_output(view: SpanView, outputs: Sequence[Message]) -> str | None:
    """How a model output recorded with no text and no tool call came to be empty, when the span shows it
    was recorded (a message whose content is the empty text, OpenInference's response body whose choices
    hold none, GenAI messages with no part); None when nothing shows that: then it was not recorded."""
    if any(m.content == "" for m in outputs):
        listed = ", ".join(_finish_reasons(view))
        return "its message's content is the empty text" + (f" (finish_reason {listed})" if listed else "")
    ended = oi.empty_response(view)
    if ended is not None:
        return f"the response's message has no text (finish_reason {ended})"
    ended = genai.empty_output(view)
    if ended is not None:
        return f"its message holds no part: no text, tool call or refusal (finish_reason {ended})"
    return None


def failure(span: RawSpan) -> str | None:
    """How a span says it failed (status error): its status message, else its exception event's type and
    message; None for a span that did not fail."""
    if span.status_code != 2:
        return None
    text = span.status_message
    if not text:
        event = next((e for e in span.events if e.name == "exception"), None)
        if event is not None:
            kind, message = event.attributes.get("exception.type"), event.attributes.get("exception.message")
            text = ": ".join(str(v) for v in (kind, message) if v)
    text = text or "status error, no message"
    return text if len(text) <= 300 else text[:299] + "…"


def _redacted(record: ModelIO) -> bool:
    """Whether a model input or output was recorded redacted, as a whole or in any message."""
    return record.redacted or any(m.redacted for m in record.messages or ())


# A response that ended on a tool call (OpenAI's "tool_calls", the GenAI conventions' "tool_call").
_TOOL_CALL_ENDS = frozenset({"tool_call", "tool_calls"})


def _hosted_note(view: SpanView, outputs: Sequence[Message]) -> str | None:
    """Why a model call's recorded input is not all the model was given: it ran a hosted file search
    inside the call, whose results the API handed the model there (never a message of the request); or its
    response ended on a tool call its recorded output does not hold — a tool the API ran inside the call
    (OpenLLMetry's OpenAI instrumentation records a Responses API call's hosted file_search so: the
    answer, ``finish_reason`` tool_call, and neither the tools asked for nor the search's item)."""
    if bedrock.is_retrieve_and_generate(view):
        return bedrock.RAG_NOTE
    searches = oi.file_searches(view)
    if not searches:
        return _unheld_tool_call(view, outputs)
    queries = [q for search in searches for q in search.queries]
    return (
        f"the model ran OpenAI's hosted file_search inside the call (queries {queries!r}) and was given what"
        " it found there: the request's messages are not all its input, and the trace does not hold the"
        " input the search's results were placed in"
    )


# The finish reason an instrumentation records for a reply whose stream ended before the model finished.
_BROKEN_OFF = frozenset({"error"})
# The finish reasons of a reply that stopped at the request's token limit: OpenAI's and the GenAI
# conventions' ``length``, Anthropic's ``stop_reason`` ``max_tokens`` (openinference-instrumentation-anthropic
# records it as is in ``llm.finish_reason``; OpenLLMetry's maps it to ``length``).
_AT_LIMIT = frozenset({"length", "max_tokens"})
# A reply the API's classifier stopped (Anthropic's ``stop_reason`` ``refusal``): text before it is a reply
# cut short; none at all is the refusal (OpenInference's response body shows it, ``anthropic_refusal``).
_REFUSED = frozenset({"refusal"})


def _finish_reasons(view: SpanView) -> list[str]:
    """``gen_ai.response.finish_reasons``: an array, a JSON list, or OpenLLMetry's Python list repr
    (``"['length']"``); OpenInference's ``llm.finish_reason`` (one value: Anthropic's ``stop_reason``),
    which the Anthropic (or Gemini) response body in ``output.value`` holds too; and the anthropic SDK's own
    ``anthropic.message.stop_reason`` (its spans record no GenAI finish reason)."""
    value = view.attrs.get("gen_ai.response.finish_reasons")
    one = (view.attrs.get("llm.finish_reason"), view.attrs.get("anthropic.message.stop_reason"))
    if value is None and one == (None, None) and view.attrs.get("output.mime_type") != "application/json":
        return []  # none recorded (most spans; asked twice of each model call)
    listed = as_str_list(list(value) if isinstance(value, tuple) else value) or []
    single = [r for r in map(as_str, one) if r] + oi.stop_reasons(view)
    return [r for r in (r.strip("[]'\" ") for r in [*listed, *single]) if r]


def _unheld_tool_call(view: SpanView, outputs: Sequence[Message]) -> str | None:
    """The note for a recorded output that holds no tool call although the response ended on one."""
    if not outputs or any(m.tool_calls for m in outputs):
        return None
    if not _TOOL_CALL_ENDS.intersection(_finish_reasons(view)):
        return None
    return (
        "the response ended with finish_reason tool_call, and its recorded output holds no tool call: a"
        " tool the API hosts (file_search, web_search, …) ran inside the call, and what it gave the model is"
        " not in the trace — the request's messages are not all its input"
    )


def _input_record(
    view: SpanView,
    system: str | None,
    system_redacted: bool,
    given: ModelIO,
    dropped: Dropped | None,
    hosted: str | None,
    shown: frozenset[int],
) -> tuple[str, bool, bool]:
    """The model input as text, whether it was redacted, and whether part of it was lost (a gap
    says which; ``dropped``: what the SDK dropped from the span, :func:`dropped_note`; ``hosted``: a search
    the model ran inside the call, :func:`_hosted_note`; ``shown``: the lengths the trace shows its values
    were cut at, :func:`shown_limits`)."""
    cut = cut_values(view.raw, view.parsed, shown)
    if dropped is not None:  # last: its switch ends the gap's detail
        cut.append(f"messages may be among what was dropped: {dropped.note}")
    recorded = _Input.read(system, system_redacted, given, cut, hosted)
    gap = recorded.gap()
    sent = oi.empty_request(view) if gap is not None and not recorded.text and not recorded.redacted else None
    if sent is not None:
        # The request body shows what was sent held no text (a null content, no message): nothing was
        # hidden, and no switch records more. The input still reads as not recorded (in_context unconfirmed).
        gap = "model_input_empty", f"the model input was recorded empty: {sent}"
    if gap is not None:
        kind, detail = gap
        # The limits to raise belong to the truncated gap, whose detail ends with what was dropped.
        switch = dropped.switch if dropped is not None and kind == "model_input_truncated" else ""
        view.gap(kind, detail, switch)
    return recorded.text, recorded.redacted, recorded.partial


class _Input(NamedTuple):
    """A model call's input as the trace recorded it."""

    text: str
    redacted: bool
    lost: list[int]
    """Positions of input messages that lost their content or their tool result on the way."""
    only_system: bool
    """Only the system instructions were recorded (a chat call always sends messages)."""
    cut: list[str]
    """The span's values an exporter may have cut short (``cut_values``)."""
    hosted: str | None
    """What the model was given inside the call besides the request (``_hosted_note``), if anything."""
    unread: dict[int, tuple[str, ...]]
    """Input messages (by position) carrying parts the trace holds no text of, and those parts' kinds."""

    @classmethod
    def read(
        cls, system: str | None, system_redacted: bool, given: ModelIO, cut: list[str], hosted: str | None
    ) -> _Input:
        inputs = given.messages or ()
        pieces = [system] if system else []
        pieces.extend(m.content for m in inputs if m.content)
        pieces.extend(given.texts)
        return cls(
            text="\n".join(pieces),
            redacted=system_redacted or _redacted(given),
            lost=_lost_inputs(inputs),
            only_system=bool(system) and not inputs and not given.texts,
            cut=cut,
            hosted=hosted,
            unread={i: m.unread for i, m in enumerate(inputs) if m.unread},
        )

    def gap(self) -> tuple[str, str] | None:
        """The gap this input is (kind, detail), the first that holds; None when it is whole."""
        if self.redacted:
            return "model_input_redacted", "the model input was recorded redacted"
        if not self.text:
            return "model_input_not_recorded", "the LLM span carries no input content"
        if self.lost:
            detail = f"input messages {self.lost} were recorded without their content or tool result"
            return "model_input_not_recorded", detail
        if self.only_system:
            return "model_input_not_recorded", "only the system instructions were recorded, no input message"
        if self.cut or self.hosted or self.unread:
            cut = [f"the input may have been cut short: {'; '.join(self.cut)}"] if self.cut else []
            unread = (
                [
                    f"input messages {list(self.unread)} carried parts the trace holds no text of"
                    f" ({', '.join(sorted({k for kinds in self.unread.values() for k in kinds}))}):"
                    " what they gave the model is unknown"
                ]
                if self.unread
                else []
            )
            pieces = [*([self.hosted] if self.hosted else []), *unread, *cut]
            return "model_input_truncated", "; ".join(pieces)
        return None

    @property
    def partial(self) -> bool:
        """Some of the input reached the trace, and some was lost (or may have been: a value cut short)."""
        lost = (
            bool(self.lost)
            or (self.only_system and not self.redacted)
            or bool(self.cut)
            or bool(self.hosted)
            or bool(self.unread)
        )
        return bool(self.text) and lost


def _lost_inputs(inputs: Sequence[Message]) -> list[int]:
    """Positions of input messages that lost part of themselves: a message with a role but neither
    text nor tool calls lost its content — but an assistant turn right before a tool result, a tool request
    whose details the instrumentation does not record (``unrecorded_requests``: it wrote no text); a tool
    call the model asked for with no tool message after it lost its result (a chat API rejects that)."""
    requests = unrecorded_requests(inputs)
    empty = [
        i
        for i, m in enumerate(inputs)
        if m.content is None and not m.tool_calls and not m.redacted and i not in requests
    ]
    return empty + [i for i, m in enumerate(inputs) if m.tool_calls and not _answered(inputs[i + 1 :])]


def _answered(later: Sequence[Message]) -> bool:
    """Whether a message that can carry the tool's result follows (``tool``, ``function``, or a user
    message: pydantic-ai and smolagents return tool results in one)."""
    return any(m.role != "assistant" for m in later)


def _usage(view: SpanView) -> dict[str, int]:
    usage: dict[str, int] = {}
    for convention in PRECEDENCE.usage:  # merged: per count, the first convention that recorded it
        for key, value in (convention.usage(view) or {}).items():
            if value is not None and key not in usage:
                number = as_int(value)
                if number is not None:
                    usage[key] = number
    return usage


def _tool_call(view: SpanView) -> ToolCall:
    a = view.attrs
    name = as_str(view.get("tool.name", "gen_ai.tool.name")) or logfire.tool_name(view)
    name = name or vercel.tool_name(view)
    if name is None and a.get(oll.KIND) == "tool":
        name = as_str(a.get("traceloop.entity.name"))
    arguments = _first_read(PRECEDENCE.tool_arguments, lambda c: c.tool_arguments(view))
    result = _first_read(PRECEDENCE.tool_result, lambda c: c.tool_result(view))
    parsed = maybe_json(result)
    docs = documents_from_value(view, parsed) if isinstance(parsed, list | dict) else None
    partial = oll.mcp_result(view) is not None
    if partial and docs is None and isinstance(parsed, dict):
        docs = documents_from_value(view, [parsed])  # the first item: a document of a list sent item by item
    if partial and docs:
        view.gap(
            "retrieval_documents_not_recorded",
            "the tool's result may hold only the first of the items it returned (an MCP tools/call span):"
            " a document it lacks may have been returned",
            oll.MCP_WHOLE,
        )
    return ToolCall(
        span_id=view.span_id,
        name=name or view.raw.name,
        call_id=as_str(view.get("gen_ai.tool.call.id", "tool.id", "tool_call.id"))
        or vercel.tool_call_id(view),
        arguments=maybe_json(arguments),
        result=parsed,
        documents=tuple(docs) if docs else None,
        result_partial=partial,
        start_time=view.start,
    )


def _hosted(views: list[SpanView]) -> tuple[str, str]:
    """Model calls that searched inside themselves (OpenAI's hosted file or web search), when nothing is a
    retrieval: no span can be marked, and what they found is in no span — say so, and what would record it
    (the hint and the switch; both "" when none did)."""
    hosted = dict.fromkeys(logfire.hosted_search_spans(views), "file_search")
    for view in views:
        if view.step == "model" and oi.file_searches(view):  # its results not requested: none is a retrieval
            hosted.setdefault(view.span_id, "file_search")
        kind = oi.hosted_search(view) if view.step == "model" else None
        if kind is not None:
            hosted.setdefault(view.span_id, kind)
    if not hosted:
        return "", ""
    listed = ", ".join(f"{span_id} ({kind})" for span_id, kind in hosted.items())
    switch = HOSTED_FILE_SEARCH if "file_search" in hosted.values() else HOSTED_WEB_SEARCH
    return f"; model calls ran a hosted search whose results the trace does not hold: {listed}", switch.text


def _unmarked(tools: list[ToolCall]) -> tuple[str, str]:
    """A hint naming tools whose result reads as documents with ids, when nothing is a retrieval, and the
    marks it names (both "" when none does).

    Such a tool is not read as a retrieval: a list of records with ids may be orders or tickets as
    well as documents, and a wrong retrieval would give a confident wrong verdict. Marking it is cheap.
    """
    names: dict[str, int] = {}
    for call in tools:
        docs = call.documents
        if docs and all(d.doc_id is not None for d in docs):
            names.setdefault(call.name, len(docs))
    if not names:
        return "", ""
    listed = ", ".join(f"{name} ({count} documents)" for name, count in names.items())
    mark = (
        "OpenInference span kind RETRIEVER (openai-agents instrumentation:"
        " tool_span_kinds={name: 'RETRIEVER'}), gen_ai.tool.type = datastore, or tracejudge.step = retrieval"
    )
    return (
        f"; tools returned documents with ids but are not marked as retrievers: {listed}. Mark them: {mark}",
        mark,
    )


def _with_call_ids(tools: list[ToolCall], models: list[ModelCall]) -> list[ToolCall]:
    """Tool calls whose span records no call id, given the id of the model's request they answer.

    Some instrumentations (openai-agents) put the id only on the model output's tool call; the
    request is the latest earlier one with the same name and arguments, each request used once.
    """
    if all(call.call_id is not None for call in tools):
        return tools
    requests = _Requests(models, used={call.call_id for call in tools if call.call_id is not None})
    return [call if call.call_id is not None else requests.answer(call) for call in tools]


class _Requests:
    """The tool calls the models asked for, each answered by one tool call at most."""

    def __init__(self, models: list[ModelCall], used: set[str]) -> None:
        self._requests = list(_tool_requests(models))
        self._used = used

    def answer(self, call: ToolCall) -> ToolCall:
        """The call with the id of the latest unused request it answers (unchanged when none)."""
        match = next(
            (
                r.call_id
                for r in reversed(self._requests)
                if r.call_id not in self._used and r.answered_by(call)
            ),
            None,
        )
        if match is None:
            return call
        self._used.add(match)
        return call.model_copy(update={"call_id": match})


class _Request(NamedTuple):
    """A tool call a model asked for, with the id it gave it."""

    start: datetime | None
    call_id: str
    name: str
    arguments: Any

    def answered_by(self, call: ToolCall) -> bool:
        """Same name and arguments, and the call did not start before the request (unknown times pass)."""
        return (
            self.name == call.name
            and self.arguments == call.arguments
            and (self.start is None or call.start_time is None or self.start <= call.start_time)
        )


def _tool_requests(models: list[ModelCall]) -> Iterator[_Request]:
    """Every tool call the models asked for with an id and a name, in order."""
    for model in models:
        for request in (r for message in model.output_messages for r in message.tool_calls):
            call_id, name = as_str(request.get("id")), as_str(request.get("name"))
            if call_id and name:
                yield _Request(model.start_time, call_id, name, maybe_json(request.get("arguments")))


# --- trace level --------------------------------------------------------------------------------


class _Keys(NamedTuple):
    """The attribute and resource keys any span of the trace carries: a trace-level field is looked for
    span by span only when some span has its key (a trace carries few of the keys read so)."""

    attrs: frozenset[str]
    resource: frozenset[str]

    @classmethod
    def of(cls, views: list[SpanView]) -> _Keys:
        attrs: set[str] = set()
        resource: set[str] = set()
        for view in views:
            attrs.update(view.attrs)
            resource.update(view.resource)
        return cls(frozenset(attrs), frozenset(resource))


def _first(views: list[SpanView], key: str, keys: _Keys) -> Any:
    if key not in keys.attrs:
        return None
    for view in views:
        value = view.attrs.get(key)
        if value is not None and value != "":
            return value
    return None


class _Rivals(NamedTuple):
    """The model calls before the last that may have given the answer instead of it (``earlier_answers``),
    worked out once from the spans' start and end times, and those whose order against the last rests on
    skewed times (``out_of_order``: span id -> the skewed span)."""

    calls: list[ModelCall]
    unordered: Mapping[str, str]

    @classmethod
    def of(cls, views: list[SpanView], tree: _Tree, models: list[ModelCall]) -> _Rivals:
        if len(models) < 2:
            return cls([], {})
        times = {m.span_id: _times(tree.by_id[m.span_id]) for m in models}
        unordered = _Unordered(views, tree, models)
        failed = {call.span_id for call in models if failure(tree.by_id[call.span_id].raw)}
        replied = _Replied(tree, models)
        return cls(earlier_answers(models, times, unordered, failed, replied), unordered)

    def answering(self, models: list[ModelCall]) -> tuple[str, ...]:
        """``TaskRecord.answering_calls``: these calls and the last."""
        return (*(call.span_id for call in self.calls), models[-1].span_id) if models else ()


class _Replied(Mapping[str, tuple[dict[str, Any], ...]]):
    """``replied_requests`` of each model call (span id), read when first asked: ``earlier_answers`` asks only
    of a call whose output records no tool request that a later call may continue."""

    def __init__(self, tree: _Tree, models: list[ModelCall]) -> None:
        self._tree = tree
        self._calls = {call.span_id: call for call in models}
        self._found: dict[str, tuple[dict[str, Any], ...]] = {}

    def __getitem__(self, span: str) -> tuple[dict[str, Any], ...]:
        if span not in self._found:
            view, tree = self._tree.by_id[span], self._tree
            found = replied_requests(
                view, self._calls[span], tree.children.get(span, []), tree.parent_view(view)
            )
            self._found[span] = found
        return self._found[span]

    def __iter__(self) -> Iterator[str]:
        return iter(self._calls)

    def __len__(self) -> int:
        return len(self._calls)


def _times(view: SpanView) -> tuple[int, int]:
    return view.raw.start_time_unix_nano, view.raw.end_time_unix_nano


class _Unordered(Mapping[str, str]):
    """``out_of_order`` of the trace's model calls, worked out when first asked: ``earlier_answers`` asks
    only of a call a later one continues, the ``answer_uncertain`` gap only when no span records the answer
    (the walk over every span's times is then saved where the root records it and no call continues another,
    as with calls sent one input each)."""

    def __init__(self, views: list[SpanView], tree: _Tree, models: list[ModelCall]) -> None:
        self._views, self._tree, self._models = views, tree, models
        self._found: dict[str, str] | None = None

    def _out_of_order(self) -> dict[str, str]:
        if self._found is None:
            times = {v.span_id: _times(v) for v in self._views}
            self._found = out_of_order(self._models, self._tree.parent, times)
        return self._found

    def __getitem__(self, span: str) -> str:
        return self._out_of_order()[span]

    def __iter__(self) -> Iterator[str]:
        return iter(self._out_of_order())

    def __len__(self) -> int:
        return len(self._out_of_order())


def _final_answer(
    views: list[SpanView], tree: _Tree, models: list[ModelCall], rivals: _Rivals, gaps: Gaps
) -> tuple[str | None, str | None]:
    """What the user got: the first convention's record (``PRECEDENCE.final_answer``), else the
    output text of the trace's last model call when no earlier call may have given the answer and it
    returned one reply and asked for no tool (``_answer``; else the ``answer_uncertain`` gap names the calls
    and no answer is read)."""
    root = tree.root
    found = _first_read(PRECEDENCE.final_answer, lambda c: c.final_answer(root, views))
    if found is not None and found[0]:  # "" is owned and empty: later conventions are not asked
        return found
    # Only the last call: when its text was not recorded (hidden, dropped, or it ended in tool calls),
    # an earlier call's text is a draft or a step, not the answer, and read as one it could state a
    # superseded value the answer never did (DESIGN 5.5).
    if not models or not models[-1].output_text:
        return None, None
    last = models[-1]
    if rivals.calls:
        named = ", ".join(call.span_id for call in rivals.calls)
        detail = (
            f"no span records the answer, and the last model call ({last.span_id}) may have been made after"
            f" it (a title, suggestions, a summary, a grader): the reply the user got may be that of model"
            f" call {named}, which no later call continues (re-sends its messages adding only tool steps, or"
            " unchanged after it failed or replied the same)"
        )
        unordered = rivals.unordered
        skew = [f"{unordered[c.span_id]} (for {c.span_id})" for c in rivals.calls if c.span_id in unordered]
        if skew:
            detail += (
                "; which call came last is not known: the trace's times are skewed, span "
                + ", ".join(skew)
                + " lying outside its parent's time range"
            )
        gaps.add("answer_uncertain", last.span_id, detail, RECORD_ANSWER)
        return None, None
    got, asked = choices(last), _asked_choices(tree.by_id[last.span_id])
    if max(got, asked) > 1:
        # Asked for several choices (OpenAI n), the application got several replies and showed the user one
        # of them, or another it made of them: reading the first as the answer would judge text the user
        # may never have seen. The request says so too when a choice's record was lost.
        what = (
            f"returned {got} choices (several output messages)"
            if got > 1
            else f"was asked for {asked} choices (OpenAI n), {got} of them recorded"
        )
        detail = (
            f"no span records the answer, and the last model call ({last.span_id}) {what}: which one the user"
            " got is not recorded"
        )
        gaps.add("answer_uncertain", last.span_id, detail, RECORD_ANSWER)
        return None, None
    requested = tool_requests(last)
    if requested:
        # Text beside a tool request is often a preamble: the app ran the tool, and the call that read its
        # result gave the answer — not in the trace (``_answer``).
        detail = (
            f"no span records the answer, and the last model call ({last.span_id}) asked for a tool"
            f" ({', '.join(repr(name) for name in requested)}) beside its text: the text may be what it said"
            " before the tool ran, and the call that read the tool's result and answered is not in the trace"
        )
        gaps.add("answer_uncertain", last.span_id, detail, RECORD_ANSWER)
        return None, None
    return last.output_text, last.span_id


def _asked_choices(view: SpanView) -> int:
    """How many choices the call asked for: GenAI ``gen_ai.request.choice.count`` (openai-v2 records it),
    or OpenAI's ``n`` in OpenInference's ``llm.invocation_parameters``; 1 when neither is recorded."""
    if "llm.invocation_parameters" not in view.attrs and "gen_ai.request.choice.count" not in view.attrs:
        return 1
    params = maybe_json(view.attrs.get("llm.invocation_parameters"))
    asked = (
        as_int(view.attrs.get("gen_ai.request.choice.count")),
        as_int(params.get("n")) if isinstance(params, dict) else None,
    )
    return max((n for n in asked if n is not None), default=1)


def _task_input(views: list[SpanView], root: SpanView, models: list[ModelCall]) -> str | None:
    """The user's request: the first convention's record (``PRECEDENCE.task_input``), else the
    last user message of the first model call that has one, else its last message whose role was not
    recorded or is hidden (it may be the request: values the request states are not counted as the
    answer's)."""
    found = _first_read(PRECEDENCE.task_input, lambda c: c.task_input(root, views))
    if found:  # "" is owned and empty: later conventions are not asked
        return found
    for is_request in (lambda role: role == "user", lambda role: role not in _NOT_REQUEST_ROLES):
        for call in models:
            text = next(
                (m.content for m in reversed(call.input_messages) if is_request(m.role) and m.content), None
            )
            if text:
                return text
    return None


# Roles a request is never sent under; any other (a role not recorded, or hidden) may be the user's.
_NOT_REQUEST_ROLES = frozenset(
    {"system", "developer", "assistant", "model", "ai", "tool", "function", "ipython"}
)


# Trace metadata fields: the attribute keys that record each, first first, and whether a key is also
# read from the spans' resources (the deployment environment is a resource attribute in OTel).
_METADATA_FIELDS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("session_id", ("session.id", "langfuse.session.id", "gen_ai.conversation.id"), False),
    ("user_id", ("user.id", "langfuse.user.id"), False),
    ("environment", ("langfuse.environment", "deployment.environment.name", "deployment.environment"), True),
    ("release", ("langfuse.release",), False),
)
_TAG_KEYS = ("langfuse.trace.tags", "tag.tags")


def _metadata(views: list[SpanView], root: SpanView, keys: _Keys) -> dict[str, Any]:
    ordered_views = [root, *views]
    found: dict[str, Any] = {"service_name": _service_name(views, root)}
    for field, field_keys, in_resource in _METADATA_FIELDS:
        found[field] = _metadata_value(ordered_views, field_keys, in_resource, keys)
    found["tags"] = _trace_tags(views, keys)
    return {field: value for field, value in found.items() if value}


def _service_name(views: list[SpanView], root: SpanView) -> str | None:
    """The root's service, else the first span's that names one."""
    service = as_str(root.resource.get("service.name"))
    if service is None:
        service = next((s for s in (as_str(v.resource.get("service.name")) for v in views) if s), None)
    return service


def _metadata_value(
    views: list[SpanView], field_keys: tuple[str, ...], in_resource: bool, keys: _Keys
) -> str | None:
    """The first key any span records, each key read from the spans' attributes, then (when a
    resource attribute too) from their resources."""
    for key in field_keys:
        value = as_str(_first(views, key, keys))
        if value is None and in_resource and key in keys.resource:
            value = next((as_str(v.resource.get(key)) for v in views if v.resource.get(key)), None)
        if value is not None:
            return value
    return None


def _trace_tags(views: list[SpanView], keys: _Keys) -> list[str]:
    """Every tag any span gave the trace, once each, in first-seen order."""
    tag_keys = [key for key in _TAG_KEYS if key in keys.attrs]
    tags: dict[str, None] = {}
    for view in views if tag_keys else ():
        for key in tag_keys:
            if view.attrs.get(key) is not None:
                tags.update(dict.fromkeys(as_str_list(view.attrs[key]) or ()))
    return list(tags)


def _node(view: SpanView, parent: str | None) -> SpanNode:
    status: Literal["unset", "ok", "error"] = _STATUS.get(view.raw.status_code, "unset")
    return SpanNode(
        span_id=view.span_id,
        parent_span_id=parent,
        name=view.raw.name,
        step=view.step,
        start_time=view.start,
        end_time=nanos_to_datetime(view.raw.end_time_unix_nano),
        status=status,
        convention=view.convention,
    )
