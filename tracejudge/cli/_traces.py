"""``tracejudge traces``: list and show stored traces."""

from __future__ import annotations

import click
from rich.table import Column, Table
from rich.tree import Tree

from tracejudge._errors import InputError
from tracejudge._redact import redact
from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.cli._safe import escape, safe_text
from tracejudge.normalize import normalize
from tracejudge.schema import ContextAssembly, ModelCall, RetrievalCall, SpanNode, TaskRecord, ToolCall
from tracejudge.store import resolve_trace_id


def load_task(app: App, trace_id: str) -> TaskRecord:
    trace_id = resolve_trace_id(app.reader, trace_id)
    spans = app.reader.get_spans(trace_id.lower())
    if not spans:
        raise InputError(
            f"no spans stored for trace {trace_id}",
            hint="run `tracejudge traces list` to see stored traces, or collect the trace first",
        )
    return normalize(spans)


@click.group()
def traces() -> None:
    """Inspect the traces in the store."""


@traces.command("list")
@click.option("--limit", type=int, default=50, show_default=True, help="At most this many traces.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def list_cmd(app: App, limit: int, as_json: bool) -> None:
    """List stored traces, newest first."""
    rows = app.reader.list_traces(limit=limit)
    if as_json:
        print_json([r.model_dump(mode="json") for r in rows])
        return
    if not rows:
        app.console.print(
            "no traces stored yet: collect some with `tracejudge collect otlp` or `collect file`"
        )
        return
    table = Table("name", "spans", "start", "duration", "source")
    # The id is what the user copies: never cut, whatever the width (a pipe is 80 columns).
    table.columns.insert(0, Column("trace_id", no_wrap=True, min_width=32, overflow="fold"))
    for r in rows:
        dur = (
            f"{(r.end_time - r.start_time).total_seconds() * 1000:.0f} ms"
            if r.start_time and r.end_time
            else "-"
        )
        table.add_row(
            r.trace_id,
            safe_text(r.name or "-"),
            str(r.span_count),
            r.start_time.isoformat(timespec="seconds") if r.start_time else "-",
            dur,
            ",".join(r.sources),
        )
    app.console.print(table)


_NOT_RECORDED = "[dim]<not recorded>[/dim]"


def _short(text: str | None, n: int = 90) -> str:
    """``text`` on one line, at most ``n`` characters, as markup-safe text; a value the trace did not
    record is shown dim as ``<not recorded>`` (markup, so it must not be escaped again)."""
    if text is None:
        return _NOT_RECORDED
    # Redacted before it is cut: a secret cut in two matches nothing, and its first part would show.
    flat = " ".join(redact(text).split())
    return escape(flat if len(flat) <= n else flat[: n - 1] + "…")


def _retrieval_lines(r: RetrievalCall) -> list[str]:
    lines = [f"query: {_short(r.query)}"]
    if r.filter is not None:
        lines.append(f"filter: {_short(str(r.filter))}")
    if r.principal:
        lines.append(f"principal: {escape(r.principal)}")
    for d in r.documents:
        # A returned text with no id (a content-only retriever) is identified by the manifest, if at all.
        label = escape(f"{d.doc_id}@{d.version}" if d.doc_id and d.version else d.doc_id or "(no id)")
        score = f" score={d.score}" if d.score is not None else ""
        lines.append(f"doc {label}{score}: {_short(d.content, 60)}")
    return lines


def _output(m: ModelCall) -> str:
    """The model's output text; when it only called tools, the tools it called (recorded, not missing)."""
    calls = [str(c.get("name") or "?") for msg in m.output_messages for c in msg.tool_calls]
    if m.output_text is None and calls:
        return _short(f"tool call {', '.join(calls)}")
    return _short(m.output_text)


def _model_lines(m: ModelCall) -> list[str]:
    refused = any(msg.refusal for msg in m.output_messages)
    label = "[red]refusal[/red]" if refused else "[green]output[/green]"
    return [
        f"model: {escape(m.model or '-')}",
        *(f"{escape(msg.role)}: {_short(msg.content)}" for msg in m.input_messages),
        f"{label}: {_output(m)}",
    ]


def _tool_lines(t: ToolCall) -> list[str]:
    return [f"args: {_short(str(t.arguments))}", f"result: {_short(str(t.result))}"]


def _context_lines(c: ContextAssembly) -> list[str]:
    lines = [f"included: {escape(', '.join(c.included) or '-')}"]
    if c.dropped:
        lines.append(f"[yellow]dropped[/yellow]: {escape(', '.join(c.dropped))}")
    return lines


def _details(task: TaskRecord) -> dict[str, list[str]]:
    """What each span did, as lines under it: its retrieval, model call, tool call and context
    assembly, in that order (one record of each kind per span, the last if a trace repeats one)."""
    kinds: list[dict[str, list[str]]] = [
        {r.span_id: _retrieval_lines(r) for r in task.retrievals},
        {m.span_id: _model_lines(m) for m in task.model_calls},
        {t.span_id: _tool_lines(t) for t in task.tool_calls},
        {c.span_id: _context_lines(c) for c in task.context_assemblies},
    ]
    details: dict[str, list[str]] = {}
    for kind in kinds:
        for span_id, lines in kind.items():
            details.setdefault(span_id, []).extend(lines)
    return details


def render_task_tree(task: TaskRecord) -> Tree:
    """A readable tree of the task record: spans nested, each with what it did."""
    root = Tree(f"[bold]trace {task.trace_id}[/bold]  {escape(task.name or '')}")
    details = _details(task)
    known = {s.span_id for s in task.spans}
    children: dict[str | None, list[SpanNode]] = {}
    for s in task.spans:
        children.setdefault(s.parent_span_id if s.parent_span_id in known else None, []).append(s)

    def add(tree: Tree, s: SpanNode) -> None:
        status = " [red]ERROR[/red]" if s.status == "error" else ""
        branch = tree.add(f"[cyan]{s.step}[/cyan] {escape(s.name)} [dim]{s.span_id}[/dim]{status}")
        for line in details.get(s.span_id, ()):
            branch.add(line)
        for child in children.get(s.span_id, []):
            add(branch, child)

    for top in children.get(None, []):
        add(root, top)
    if task.final_answer is not None:
        root.add(f"[bold]answer[/bold]: {_short(task.final_answer, 200)}")
    for label, run in task.each_run() if task.runs else ():
        # Several runs under one trace id: each named as triage, the judge and the sweep name it.
        root.add(
            f"[bold]{escape(label)}[/bold]: {len(run.spans)} span(s), answer: {_short(run.final_answer, 120)}"
        )
    for g in task.gaps:
        root.add(f"[yellow]gap[/yellow] {g.kind}: {escape(g.detail)}")
    return root


@traces.command("show")
@click.argument("trace_id", required=False)
@click.option(
    "--session",
    "session_id",
    metavar="SESSION_ID",
    default=None,
    help="Show every stored turn of this conversation, oldest first (TRACE_ID then not needed).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the full task record as JSON.")
@pass_app
@handle_errors
def show_cmd(app: App, trace_id: str | None, session_id: str | None, as_json: bool) -> None:
    """Show one trace's task record as a tree (or JSON); with --session, every turn of a conversation."""
    if session_id is None:
        if trace_id is None:
            raise InputError(
                "give a TRACE_ID, or --session SESSION_ID",
                hint="`tracejudge traces list` shows the stored traces",
            )
        task = load_task(app, trace_id)
        if as_json:
            print_json(task.shown(), as_record=True)
            return
        app.console.print(render_task_tree(task))
        return
    turns = [load_task(app, t.trace_id) for t in app.reader.session_traces(session_id)]
    if not turns:
        raise InputError(
            f"no stored trace records session {session_id}",
            hint="collect the conversation's traces first (tracejudge collect langfuse --session ID, or send"
            " them to the receiver); the session id is read from session.id, gen_ai.conversation.id or"
            " langfuse.session.id",
        )
    if as_json:
        print_json({"session_id": session_id, "turns": [t.shown() for t in turns]})
        return
    app.console.print(f"[bold]session {escape(session_id)}[/bold]: {len(turns)} turn(s), oldest first")
    for n, task in enumerate(turns, start=1):
        when = task.start_time.isoformat(timespec="seconds") if task.start_time else "-"
        app.console.print(f"\n[bold]turn {n}[/bold]  {when}")
        app.console.print(render_task_tree(task))
