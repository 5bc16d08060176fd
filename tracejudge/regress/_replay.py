"""Replaying a suite against an agent: a Python callable or an HTTP endpoint, mocked tools that record
every call, fixed or included retrieval, repeats, hard checks plus the judge, and a run record compared
with the previous run."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tracejudge._errors import InputError
from tracejudge._redact import redact
from tracejudge.judge import Judge, JudgeClient, OpenAIJudgeClient
from tracejudge.regress._suite import LoadedSample, Suite, sample_hash
from tracejudge.schema import (
    Attempt,
    Change,
    Document,
    FixedDocument,
    JudgeConfig,
    ModelCall,
    RetrievalCall,
    RetrievalMode,
    Rubric,
    RunPurpose,
    Sample,
    SampleMaterial,
    SampleOutcome,
    SampleRunResult,
    SampleTool,
    SuiteRun,
    TaskRecord,
    ToolCall,
    ToolCallRecord,
)

__all__ = [
    "HttpTarget",
    "ReplayContext",
    "ReplayOptions",
    "Target",
    "ToolBox",
    "compare_outcome",
    "load_target",
    "outcome_of",
    "run_suite",
    "run_suite_async",
]


class ToolBox:
    """The sample's mocked tools. Every call is recorded; a ``block`` tool refuses (and is reported)."""

    def __init__(self, tools: Sequence[SampleTool]) -> None:
        self._tools = {t.name: t for t in tools}
        self.calls: list[ToolCallRecord] = []
        self.turn = 0
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        """Declared tools."""
        return list(self._tools)

    def describe(self) -> list[dict[str, Any]]:
        """The tools as the agent is told about them."""
        return [{"name": t.name, "mode": t.mode, "description": t.description} for t in self._tools.values()]

    def call(self, name: str, /, **arguments: Any) -> dict[str, Any]:
        """Call a tool; the reply says whether it was blocked."""
        tool = self._tools.get(name)
        with self._lock:
            self.calls.append(
                ToolCallRecord(
                    name=name,
                    arguments=arguments,
                    blocked=tool is not None and tool.mode == "block",
                    known=tool is not None,
                    turn=self.turn,
                )
            )
        if tool is None:
            return {"ok": False, "error": f"unknown tool {name!r}"}
        if tool.mode == "block":
            return {"ok": False, "blocked": True, "error": f"{name} is not allowed here"}
        return {"ok": True, "result": tool.result}


@dataclass
class ReplayContext:
    """What a Python target receives for one user turn. State is fresh for every sample and repeat."""

    sample_id: str
    """The sample."""
    conversation_id: str
    """Fresh per sample and repeat."""
    turn: int
    """0-based user turn."""
    messages: list[dict[str, str]]
    """The conversation so far, ending with the new user message."""
    principal: str | None
    """Who the agent runs as."""
    task_time: datetime | None
    """The time the task is posed at."""
    retrieval_mode: RetrievalMode
    """``fixed``: use :attr:`fixed_documents`; ``include``: retrieve from :attr:`materials` yourself."""
    materials: list[dict[str, Any]]
    """Searchable materials (``doc_id, version, content, effective_from, effective_to, metadata, acl``)."""
    fixed_documents: list[dict[str, Any]] | None
    """Fixed-retrieval results in rank order (``doc_id, version, content, score, metadata, ...``)."""
    tools: ToolBox
    """Mocked tools: ``ctx.tools.call("escalate", reason=...)``."""
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    """What the agent reports it retrieved (see :meth:`record_retrieval`)."""
    model_input: list[str] = field(default_factory=list)
    """What the agent reports it sent the model."""
    usage: dict[str, float] = field(default_factory=dict)
    """Tokens and cost the agent reports."""

    @property
    def message(self) -> str:
        """The new user message."""
        return self.messages[-1]["content"]

    def record_retrieval(self, documents: Sequence[Mapping[str, Any]]) -> None:
        """Report retrieved documents (``doc_id``, ``version``, ``content``) for the checks and the judge."""
        self.retrieved.extend(dict(d) for d in documents)

    def record_model_input(self, text: str) -> None:
        """Report the text sent to the model."""
        self.model_input.append(text)

    def record_usage(
        self, *, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float | None = None
    ) -> None:
        """Report tokens (and cost, if the agent knows it)."""
        self.usage["input_tokens"] = self.usage.get("input_tokens", 0) + input_tokens
        self.usage["output_tokens"] = self.usage.get("output_tokens", 0) + output_tokens
        if cost_usd is not None:
            self.usage["cost_usd"] = self.usage.get("cost_usd", 0.0) + cost_usd


Target = Callable[[ReplayContext], Any]
"""A Python agent: returns the answer text, or ``{"answer": ..., "usage": {...}}``. An optional
``reset()`` attribute is called before every sample."""


def load_target(spec: str) -> Target:
    """Import ``module:function`` (the current directory is importable)."""
    import sys
    from pathlib import Path

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"--target {spec!r} is not module:function", hint="e.g. --target my_agent:answer")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"--target: cannot import {module_name!r}: {exc}", hint="check PYTHONPATH") from None
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise InputError(f"--target: {module_name!r} has no {attr!r}", hint="name a callable in it")
    if not callable(obj):
        raise InputError(f"--target: {spec} is not callable", hint="name a function taking a ReplayContext")
    return obj  # type: ignore[no-any-return]


# --- HTTP -------------------------------------------------------------------------------------


class _ToolServer:
    """Mocked tools over HTTP for endpoint targets: ``POST {tools_url}/{tool}`` with JSON arguments."""

    def __init__(self) -> None:
        self.boxes: dict[str, ToolBox] = {}
        boxes = self.boxes

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                return

            def do_POST(self) -> None:
                parts = self.path.strip("/").split("/")
                box = boxes.get(parts[1]) if len(parts) == 3 and parts[0] == "tools" else None
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                if box is None:
                    self._send(404, {"ok": False, "error": "unknown conversation"})
                    return
                try:
                    args = json.loads(raw or b"{}")
                except ValueError:
                    args = {"_raw": raw.decode("utf-8", "replace")}
                reply = box.call(parts[2], **(args if isinstance(args, dict) else {"value": args}))
                status = 200 if reply.get("ok") else (403 if reply.get("blocked") else 404)
                self._send(status, reply)

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body, default=str).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/tools"
        self._thread = threading.Thread(target=self._server.serve_forever, name="regress-tools", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _safe_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class HttpTarget:
    """An agent behind an HTTP endpoint: one POST per user turn, a fresh conversation id per sample.

    The request carries ``conversation_id``, ``message``, ``messages``, ``principal``, ``task_time``,
    ``retrieval`` (``mode`` and fixed ``documents``), ``materials``, ``tools`` and ``tools_url`` (the
    mocked tools: ``POST {tools_url}/{name}``). The reply is the answer as text, or JSON with ``answer``
    (and optionally ``retrieved``, ``usage``, ``cost_usd``).
    """

    def __init__(self, url: str, *, reset_url: str | None = None, timeout_s: float = 120.0) -> None:
        import httpx

        if urlsplit(url).scheme not in ("http", "https"):
            raise InputError(
                f"--endpoint {url!r} is not an http(s) URL", hint="e.g. http://127.0.0.1:8000/chat"
            )
        self.url = url
        self.reset_url = reset_url
        self._client = httpx.Client(timeout=timeout_s)
        self._tools = _ToolServer()
        self.name = _safe_url(url)

    def reset(self) -> None:
        if self.reset_url:
            self._client.post(self.reset_url, json={}).raise_for_status()

    def __call__(self, ctx: ReplayContext) -> Any:
        token = uuid.uuid4().hex
        self._tools.boxes[token] = ctx.tools
        try:
            body = {
                "conversation_id": ctx.conversation_id,
                "sample_id": ctx.sample_id,
                "turn": ctx.turn,
                "message": ctx.messages[-1],
                "messages": ctx.messages,
                "principal": ctx.principal,
                "task_time": ctx.task_time.isoformat() if ctx.task_time else None,
                "retrieval": {"mode": ctx.retrieval_mode, "documents": ctx.fixed_documents},
                "materials": ctx.materials,
                "tools": ctx.tools.describe(),
                "tools_url": f"{self._tools.url}/{token}",
            }
            resp = self._client.post(
                self.url, content=json.dumps(body, default=str), headers={"content-type": "application/json"}
            )
            resp.raise_for_status()
        finally:
            del self._tools.boxes[token]
        if "json" in resp.headers.get("content-type", ""):
            data = resp.json()
            return data if isinstance(data, dict) else str(data)
        return resp.text

    def close(self) -> None:
        self._client.close()
        self._tools.close()


# --- running ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayOptions:
    """How a replay run goes; resolved at the edge."""

    retrieval: RetrievalMode = "include"
    """fixed: the sample's recorded retrieval; include: the agent retrieves from the materials."""
    repeat: int = 1
    """Attempts per sample, every one kept."""
    purpose: RunPurpose = "evaluate"
    """debug marks acceptance samples as seen while debugging."""
    judge: JudgeConfig | None = None
    """The judge; None leaves every criterion indeterminate."""
    agent_input_cost_per_mtok: float = 0.0
    """USD per million agent prompt tokens (when the agent reports tokens but no cost)."""
    agent_output_cost_per_mtok: float = 0.0
    """USD per million agent completion tokens."""
    compare_with: str | None = None
    """Run id to compare with; None: the latest run of the suite."""
    split: str | None = None
    """Run only this split."""
    sample_ids: tuple[str, ...] = ()
    """Run only these samples."""


def _fixed_docs(sample: Sample) -> list[dict[str, Any]] | None:
    if sample.environment.retrieval is None:
        return None
    by_key = {(m.doc_id, m.version): m for m in sample.environment.materials}
    return [_fixed_doc(d, by_key.get((d.doc_id, d.version))) for d in sample.environment.retrieval.documents]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _fixed_doc(d: FixedDocument, m: SampleMaterial | None) -> dict[str, Any]:
    """A fixed retrieval document as the agent gets it: with its material's text, metadata, window and
    acl (empty when the environment lacks the material)."""
    doc = {"doc_id": d.doc_id, "version": d.version, "score": d.score}
    if m is None:
        return doc | {
            "content": "",
            "metadata": {},
            "effective_from": None,
            "effective_to": None,
            "acl": None,
        }
    return doc | {
        "content": m.content,
        "metadata": dict(m.metadata),
        "effective_from": _iso(m.effective_from),
        "effective_to": _iso(m.effective_to),
        "acl": list(m.acl) if m.acl is not None else None,
    }


def _materials(sample: Sample) -> list[dict[str, Any]]:
    return [
        m.model_dump(mode="json", exclude={"searchable"})
        for m in sample.environment.materials
        if m.searchable
    ]


def _reply(result: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(result, Mapping):
        answer = result.get("answer", result.get("content", result.get("output")))
        return ("" if answer is None else str(answer)), dict(result)
    return ("" if result is None else str(result)), {}


def _documents(raw: Sequence[Mapping[str, Any]]) -> tuple[Document, ...]:
    out = []
    for i, d in enumerate(raw):
        doc_id = d.get("doc_id")
        out.append(
            Document(
                doc_id=None if doc_id is None else str(doc_id),
                version=None if d.get("version") is None else str(d.get("version")),
                content=d.get("content"),
                score=d.get("score") if isinstance(d.get("score"), int | float) else None,
                position=i,
            )
        )
    return tuple(out)


def _task(
    sample: Sample,
    conv: str,
    replies: list[str],
    ctx_docs: list[dict[str, Any]],
    model_input: list[str],
    calls: list[ToolCallRecord],
) -> TaskRecord:
    """The replay as a task record, so the scoring checks and judge read it like any trace."""
    trace_id = hashlib.sha256(conv.encode()).hexdigest()[:32]
    users = [m.content for m in sample.input.messages if m.role == "user"]
    answer = replies[-1] if replies else None
    docs = _documents(ctx_docs)
    principal = sample.input.principal
    retrievals = (
        (RetrievalCall(span_id="replay-retrieval", documents=docs, principal=principal),) if docs else ()
    )
    model = ModelCall(
        span_id="replay-model",
        input_text="\n\n".join(model_input),
        input_recorded=bool(model_input),
        output_recorded=answer is not None,
        output_text=answer,
    )
    return TaskRecord(
        trace_id=trace_id,
        name=f"replay {sample.id}",
        input="\n\n".join(users),
        final_answer=answer,
        final_answer_span_id="replay-model",
        retrievals=retrievals,
        model_calls=(model,),
        tool_calls=tuple(
            ToolCall(span_id=f"replay-tool-{i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(calls)
        ),
    )


def _rubric(suite: str, sample: Sample, judge: JudgeConfig | None) -> Rubric:
    # Without a judge the rubric still needs a judge section to validate; criteria then come out
    # indeterminate ("no_judge") because no Judge object is passed to score_task.
    return Rubric(
        name=f"regress:{suite}",
        version=sample_hash(sample),
        judge=judge or JudgeConfig(model="none"),
        judged=("input", "context", "output", "tool_calls"),
        criteria=sample.expected.criteria,
        checks=sample.expected.checks,
    )


@dataclass
class _Transcript:
    """What the agent did over one replay of a sample's conversation."""

    conversation_id: str
    """The replay's own conversation id (the agent's state is keyed by it)."""
    tools: ToolBox
    """The sample's tools, recording every call."""
    replies: list[str] = field(default_factory=list)
    """The agent's answer to each user turn."""
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    """Documents the agent retrieved (reported by the context or its reply)."""
    model_input: list[str] = field(default_factory=list)
    """What the agent reported sending its model."""
    usage: dict[str, float] = field(default_factory=dict)
    """Summed token counts and cost the agent reported."""
    error: str | None = None
    """Why the replay stopped, when the agent (or the sample) failed."""

    def add_turn(self, ctx: ReplayContext, answer: str, extra: Mapping[str, Any]) -> None:
        """Record one turn's answer, retrievals, model input and usage."""
        self.replies.append(answer)
        self.retrieved += ctx.retrieved or list(extra.get("retrieved") or [])
        self.model_input += ctx.model_input
        for k, v in {**ctx.usage, **(extra.get("usage") or {})}.items():
            if isinstance(v, int | float):
                self.usage[k] = self.usage.get(k, 0) + v
        if isinstance(extra.get("cost_usd"), int | float):
            self.usage["cost_usd"] = self.usage.get("cost_usd", 0.0) + float(extra["cost_usd"])


@dataclass(frozen=True)
class _Conversation:
    """One replay of a sample's conversation with the agent under test."""

    sample: Sample
    target: Target
    opts: ReplayOptions
    fixed: list[dict[str, Any]] | None
    """The fixed retrieval's documents (retrieval mode fixed), else None."""

    def context(self, t: _Transcript, turn: int, history: Sequence[Mapping[str, str]]) -> ReplayContext:
        """What the agent gets for one user turn."""
        return ReplayContext(
            sample_id=self.sample.id,
            conversation_id=t.conversation_id,
            turn=turn,
            messages=[dict(m) for m in history],
            principal=self.sample.input.principal,
            task_time=self.sample.environment.task_time,
            retrieval_mode=self.opts.retrieval,
            materials=_materials(self.sample),
            fixed_documents=[dict(d) for d in self.fixed] if self.fixed is not None else None,
            tools=t.tools,
        )

    def turns(self, t: _Transcript, reset: Any) -> None:
        """Reset the agent, then send it the messages, one user turn at a time, recording into ``t``."""
        if callable(reset):
            reset()
        history: list[dict[str, str]] = []
        turn = 0
        for msg in self.sample.input.messages:
            history.append({"role": msg.role, "content": msg.content})
            if msg.role != "user":
                continue
            t.tools.turn = turn
            ctx = self.context(t, turn, history)
            answer, extra = _reply(self.target(ctx))
            t.add_turn(ctx, answer, extra)
            history.append({"role": "assistant", "content": answer})
            turn += 1


def _converse(
    sample: Sample, target: Target, opts: ReplayOptions, fixed: list[dict[str, Any]] | None
) -> _Transcript:
    """Reset the agent, then send it the sample's messages, one user turn at a time."""
    t = _Transcript(conversation_id=f"regress-{uuid.uuid4().hex}", tools=ToolBox(sample.environment.tools))
    if opts.retrieval == "fixed" and fixed is None:
        t.error = "the sample has no fixed retrieval (environment.retrieval)"
        return t
    reset = getattr(target, "reset", None)
    try:
        _Conversation(sample, target, opts, fixed).turns(t, reset)
    except Exception as exc:  # the agent under test may fail in any way; that is a result, not a crash
        # Kept in the run's results: redacted before it is cut short (an HTTP agent's error may echo
        # the request's credentials).
        t.error = f"{type(exc).__name__}: {redact(str(exc))[:300]}"
    if opts.retrieval == "fixed" and not t.retrieved and fixed:
        t.retrieved = fixed
    return t


def _attempt_fields(t: _Transcript, opts: ReplayOptions, repeat: int) -> dict[str, Any]:
    """What every attempt records, scored or not: answers, tool calls, retrievals, the agent's cost."""
    tin, tout = int(t.usage.get("input_tokens", 0)), int(t.usage.get("output_tokens", 0))
    agent_cost = (
        float(t.usage.get("cost_usd", 0.0))
        or (tin * opts.agent_input_cost_per_mtok + tout * opts.agent_output_cost_per_mtok) / 1e6
    )
    calls = list(t.tools.calls)
    return {
        "repeat": repeat,
        "conversation_id": t.conversation_id,
        "answer": t.replies[-1] if t.replies else None,
        "turns": tuple(t.replies),
        "tool_calls": tuple(calls),
        "blocked_calls": tuple(dict.fromkeys(c.name for c in calls if c.blocked)),
        "never_called": tuple(n for n in t.tools.names if all(c.name != n for c in calls)),
        "retrieved": tuple(dict.fromkeys(f"{d.get('doc_id')}@{d.get('version')}" for d in t.retrieved)),
        "agent_input_tokens": tin,
        "agent_output_tokens": tout,
        "agent_cost_usd": agent_cost,
    }


async def _attempt(
    loaded: LoadedSample,
    target: Target,
    opts: ReplayOptions,
    repeat: int,
    suite: str,
    client: JudgeClient | None,
) -> Attempt:
    """One replay of a sample: converse, then score the conversation with the sample's rubric."""
    from tracejudge.runs import score_task

    sample = loaded.sample
    t = _converse(sample, target, opts, _fixed_docs(sample) if opts.retrieval == "fixed" else None)
    common = _attempt_fields(t, opts, repeat)
    if t.error is not None:
        return Attempt(**common, verdict="indeterminate", reason=f"agent_error: {t.error}", error=t.error)
    calls = list(t.tools.calls)
    task = _task(sample, t.conversation_id, t.replies, t.retrieved, t.model_input, calls)
    try:
        rubric = _rubric(suite, sample, opts.judge)
    except ValueError as exc:
        return Attempt(**common, verdict="indeterminate", reason=f"sample not scorable: {exc}")
    judge = Judge(rubric, client) if client is not None and opts.judge is not None else None
    item = await score_task(task, rubric, run_id=t.conversation_id, judge=judge, repeat=1)
    reason = item.reason
    blocked = common["blocked_calls"]
    if blocked:
        reason = (reason + " | " if reason else "") + f"blocked calls: {', '.join(blocked)}"
    return Attempt(
        **common,
        verdict=item.verdict,
        reason=reason,
        checks=item.checks,
        criteria=item.criteria,
        judge_cost_usd=item.cost_usd,
    )


def outcome_of(attempts: Sequence[Attempt]) -> SampleOutcome:
    """Over repeats: pass when all pass, flaky when pass and fail mix, any fail fails, else indeterminate."""
    verdicts = {a.verdict for a in attempts}
    if verdicts == {"pass"}:
        return "pass"
    if "pass" in verdicts and "fail" in verdicts:
        return "flaky"
    if "fail" in verdicts:
        return "fail"
    return "indeterminate"


def compare_outcome(previous: SampleOutcome | None, now: SampleOutcome) -> Change:
    """fixed, regressed, still failing, still passing, flaky, new, or undecided."""
    if previous is None:
        return "new"
    if now == "flaky":
        return "flaky"
    if now == "indeterminate" or previous == "indeterminate":
        return "undecided"
    if now == "pass":
        return "still_passing" if previous == "pass" else "fixed"
    return "regressed" if previous == "pass" else "still_failing"


def new_run_id() -> str:
    """Sortable and unique."""
    return f"rr-{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:6]}"


def _previous_run(suite: Suite, opts: ReplayOptions) -> SuiteRun | None:
    """The run compared with: ``--compare-with``'s (which must exist), else the suite's latest."""
    runs = suite.runs()
    if not opts.compare_with:
        return runs[-1] if runs else None
    previous = next((r for r in runs if r.run_id == opts.compare_with), None)
    if previous is None:
        raise InputError(
            f"no run {opts.compare_with!r} in {suite.runs_dir}", hint=f"pass a run id from {suite.runs_dir}"
        )
    return previous


def _chosen(suite: Suite, opts: ReplayOptions) -> list[LoadedSample]:
    """The active samples of the asked split and ids."""
    return [
        s
        for s in suite.active
        if (opts.split is None or s.sample.split == opts.split)
        and (not opts.sample_ids or s.sample.id in opts.sample_ids)
    ]


async def _replay_sample(
    loaded: LoadedSample,
    target: Target,
    opts: ReplayOptions,
    suite: str,
    client: JudgeClient | None,
    previous: SampleOutcome | None,
) -> SampleRunResult:
    """``repeat`` attempts at one sample, their outcome, and how it changed since the previous run."""
    attempts = [await _attempt(loaded, target, opts, i, suite, client) for i in range(opts.repeat)]
    outcome = outcome_of(attempts)
    return SampleRunResult(
        sample_id=loaded.sample.id,
        sample_hash=loaded.hash,
        kind=loaded.sample.kind,
        split=loaded.sample.split,
        outcome=outcome,
        change=compare_outcome(previous, outcome),
        previous_outcome=previous,
        attempts=tuple(attempts),
        cost_usd=sum(a.agent_cost_usd + a.judge_cost_usd for a in attempts),
    )


def _counts(results: Sequence[SampleRunResult]) -> dict[str, int]:
    """How many samples, per outcome and per change."""
    summary: dict[str, int] = {"n": len(results)}
    for r in results:
        summary[r.outcome] = summary.get(r.outcome, 0) + 1
        summary[r.change] = summary.get(r.change, 0) + 1
    return summary


@asynccontextmanager
async def _judge_client(
    client: JudgeClient | None, judge: JudgeConfig | None
) -> AsyncIterator[JudgeClient | None]:
    """The caller's client; else, with a judge, the run's own (closed after the run); else None."""
    if client is not None or judge is None:
        yield client
        return
    own = OpenAIJudgeClient(judge)
    try:
        yield own
    finally:
        await own.aclose()


async def run_suite_async(
    suite: Suite,
    target: Target,
    *,
    target_name: str,
    options: ReplayOptions | None = None,
    client: JudgeClient | None = None,
    on_sample: Callable[[SampleRunResult], None] | None = None,
) -> SuiteRun:
    """Replay every active sample ``repeat`` times (state reset before each), score each attempt, and
    compare with the previous run. The caller stores the returned record (``write_run``)."""
    opts = options or ReplayOptions()
    if opts.repeat < 1:
        raise InputError("--repeat must be at least 1", hint="pass --repeat 1 or more")
    previous = _previous_run(suite, opts)
    before = {r.sample_id: r.outcome for r in previous.samples} if previous else {}
    chosen = _chosen(suite, opts)
    async with _judge_client(client, opts.judge) as judge_client:
        created = datetime.now(UTC)
        results: list[SampleRunResult] = []
        for loaded in chosen:
            result = await _replay_sample(
                loaded, target, opts, suite.name, judge_client, before.get(loaded.sample.id)
            )
            results.append(result)
            if on_sample is not None:
                on_sample(result)
    return _run_record(suite, previous, opts, target_name, created, results)


def _run_record(
    suite: Suite,
    previous: SuiteRun | None,
    opts: ReplayOptions,
    target_name: str,
    created: datetime,
    results: Sequence[SampleRunResult],
) -> SuiteRun:
    return SuiteRun(
        run_id=new_run_id(),
        suite=suite.name,
        suite_hash=hashlib.sha256("".join(r.sample_hash for r in results).encode()).hexdigest()[:16],
        previous_run_id=previous.run_id if previous else None,
        created_at=created,
        finished_at=datetime.now(UTC),
        target=target_name,
        retrieval=opts.retrieval,
        repeat=opts.repeat,
        purpose=opts.purpose,
        judge_model=opts.judge.model if opts.judge else None,
        samples=tuple(results),
        summary=_counts(results),
        cost_usd=sum(r.cost_usd for r in results),
    )


def run_suite(suite: Suite, target: Target, **kwargs: Any) -> SuiteRun:
    """Synchronous :func:`run_suite_async`."""
    return asyncio.run(run_suite_async(suite, target, **kwargs))
