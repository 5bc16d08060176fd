"""``tracejudge mcp``: the Model Context Protocol server (DESIGN 5.9) on the official ``mcp`` SDK.

The only module that imports the SDK. Tools return the CLI's ``--json`` as text content and as
structured content; a result longer than one page is split into pages the caller walks with
``cursor`` (never cut); a bad argument is a tool error saying what to fix, never a crash."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from tracejudge._errors import InputError, MissingDependencyError, TracejudgeError
from tracejudge.mcp._tools import Toolbox
from tracejudge.write import targets_help

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult

__all__ = [
    "DEFAULT_PAGE_CHARS",
    "McpOptions",
    "build_server",
    "guarded_app",
    "paged_result",
    "run_http",
    "run_stdio",
]

DEFAULT_PAGE_CHARS = 60_000
"""Characters of JSON text per page: large enough for a task record, small enough for a context window."""

_INSTRUCTIONS = """\
tracejudge localizes why a retrieval-augmented agent gave a wrong answer, from its recorded trace.
Typical session: list_traces → show_trace (what the agent retrieved, put in the model input and
answered) → triage with a ticket naming the material that should have been used (doc_id, version,
clause, facts). The verdict names the stage that lost the material: not_indexed (ingestion),
filtered (query filter or permission rule), not_retrieved (ranking), dropped_in_context (context
assembly), ignored_by_model (prompt/model), no_fault, basis_not_in_effect (the ticket is wrong about
what applied). `unconfirmed` means the trace cannot settle it: each stage's `missing` lists the
records that would — do not guess past it; tell the user what to record or collect.
Results longer than one page carry next_cursor: call the same tool with the same arguments and
cursor to get the next page of the JSON text."""


@dataclass
class McpOptions:
    """What ``tracejudge mcp`` was started with."""

    roots: Sequence[Path] = field(default_factory=lambda: [Path.cwd()])
    """Folders the tools may read and (with ``allow_write``) write: the working directory and every
    folder named with --root or --tickets."""
    tickets: Path | None = None
    """A folder of ticket files served as ``ticket://NAME`` resources."""
    allow_write: bool = False
    page_chars: int = DEFAULT_PAGE_CHARS


Cursor = Annotated[
    str | None,
    Field(description="From a previous result's next_cursor, to get the next page; omit for the first."),
]


def _sdk() -> Any:
    try:
        from mcp.server import mcpserver
    except ImportError:
        raise MissingDependencyError("mcp", "mcp") from None
    return mcpserver


def _cursor_for(text: str, offset: int) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return base64.urlsafe_b64encode(f"{offset}:{digest}".encode()).decode()


def _read_cursor(cursor: str, text: str) -> int:
    try:
        offset_text, _, digest = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        offset = int(offset_text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InputError(
            "cursor is not one this server gave out", hint="call the tool again without cursor"
        ) from None
    if digest != hashlib.sha256(text.encode()).hexdigest()[:16] or not 0 <= offset < len(text):
        raise InputError(
            "the result changed since that cursor was given (new spans or results were stored)",
            hint="call the tool again without cursor to start over",
        )
    return offset


def paged_result(data: Any, cursor: str | None, page_chars: int) -> CallToolResult:
    """``data`` as the CLI prints it with ``--json``: whole when it fits one page, else the page at
    ``cursor`` with ``next_cursor`` for the rest (the pages' texts concatenate to the whole)."""
    from mcp_types import CallToolResult, TextContent

    from tracejudge import _redact

    # As the CLI prints it: every string redacted before encoding (escaping cannot hide a secret).
    data = _redact.redact_data(data)
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    structured = data if isinstance(data, dict) else {"result": data}
    if cursor is None and len(text) <= page_chars:
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)
    start = 0 if cursor is None else _read_cursor(cursor, text)
    end = min(len(text), start + page_chars)
    pages = -(-len(text) // page_chars)
    nxt = _cursor_for(text, end) if end < len(text) else None
    note = f"page {start // page_chars + 1} of {pages} of the JSON text; " + (
        f"call again with cursor={nxt!r} for the next page" if nxt else "this is the last page"
    )
    return CallToolResult(
        content=[TextContent(type="text", text=text[start:end]), TextContent(type="text", text=note)],
        structured_content={
            "page": start // page_chars + 1,
            "pages": pages,
            "next_cursor": nxt,
            "text": text[start:end],
        },
    )


class _Runner:
    """Runs a tool's call under the store lock and pages its result; a failure is a tool error
    saying what to fix (redacted), never a crash of the server."""

    def __init__(self, lock: threading.Lock, page_chars: int) -> None:
        self._lock = lock
        self._page_chars = page_chars

    def __call__(self, fn: Callable[[], Any], cursor: str | None) -> CallToolResult:
        from mcp.server.mcpserver.exceptions import ToolError

        from tracejudge import _redact

        try:
            with self._lock:
                data = fn()
            return paged_result(data, cursor, self._page_chars)
        except TracejudgeError as exc:
            raise ToolError(_redact.redact(str(exc))) from None
        except Exception as exc:  # a tool must answer, whatever broke underneath
            raise ToolError(
                _redact.redact(
                    f"internal error ({type(exc).__name__}: {exc}); the server keeps running"
                    " — report this with the arguments you passed"
                )
            ) from None


def build_server(toolbox: Toolbox, options: McpOptions | None = None) -> MCPServer:
    """The MCP server with tracejudge's tools, resources and the ``debug-wrong-answer`` prompt."""
    from tracejudge import __version__

    opts = options or McpOptions()
    sdk = _sdk()
    server: MCPServer = sdk.MCPServer(
        name="tracejudge", version=__version__, instructions=_INSTRUCTIONS, log_level="WARNING"
    )
    # Tool calls run in worker threads; one store connection serves them one at a time.
    lock = threading.Lock()
    run = _Runner(lock, opts.page_chars)
    for add_tools in (_trace_tools, _triage_tools, _scoring_tools):
        add_tools(server, toolbox, run)
    _resources(server, toolbox, opts, lock)
    _prompt(server)
    return server


def _trace_tools(server: MCPServer, toolbox: Toolbox, run: _Runner) -> None:
    """Reading the store: list the traces, show one as its task record."""

    @server.tool(
        structured_output=False,
        description=(
            "List the traces in tracejudge's store, newest first: trace_id, name, span count, start and"
            " end time, source. Same JSON as `tracejudge traces list --json`. Use it to find the"
            " trace a user's complaint is about; then call show_trace or triage."
        ),
    )
    def list_traces(
        limit: Annotated[int, Field(description="At most this many traces.", ge=1)] = 50,
        from_: Annotated[
            str | None,
            Field(validation_alias="from", description="Only traces started at or after (ISO 8601)."),
        ] = None,
        to: Annotated[str | None, Field(description="Only traces started at or before (ISO 8601).")] = None,
        cursor: Cursor = None,
    ) -> Any:  # a CallToolResult: text and structured content
        return run(lambda: toolbox.list_traces(limit=limit, from_=from_, to=to), cursor)

    @server.tool(
        structured_output=False,
        description=(
            "The task record of one trace: the question, every retrieval (query, filter, principal,"
            " returned documents with doc_id/version/content/score), context assembly, model calls"
            " (input messages, output), tool calls, the final answer, and gaps (what the trace did not"
            " record). Same JSON as `tracejudge traces show TRACE_ID --json`."
        ),
    )
    def show_trace(
        trace_id: Annotated[str, Field(description="The trace id (32 hex characters).")],
        cursor: Cursor = None,
    ) -> Any:  # a CallToolResult: text and structured content
        return run(lambda: toolbox.show_trace(trace_id), cursor)


def _triage_tools(server: MCPServer, toolbox: Toolbox, run: _Runner) -> None:
    """Localizing a wrong answer: triage with a ticket, draft a ticket from feedback, sweep for
    stale answers."""

    @server.tool(
        structured_output=False,
        description=(
            "Localize why a trace's answer was wrong, given a ticket naming the material that should"
            " have been used. Runs four checks in order — indexed, retrieved, in_context,"
            " used_by_model — and returns the verdict with evidence (span ids, excerpts). Same JSON as"
            " `tracejudge triage --json`. If the verdict or a stage is `unconfirmed`, read that stage's"
            " `missing`: those are the records (a manifest, content capture, a filter attribute, a"
            " span) that would settle it — ask for them or collect them; do not guess the cause."
        ),
    )
    def triage(
        ticket: Annotated[
            str,
            Field(
                description="The ticket as YAML or JSON text (trace_id, task_time?, required:"
                " [{doc_id, version, clause, facts}], superseded?), or the path of a ticket file."
            ),
        ],
        manifest: Annotated[
            str | None,
            Field(description="Path of the index manifest (JSONL); settles the indexed and filter checks."),
        ] = None,
        trace_id: Annotated[
            str | None, Field(description="The trace, when the ticket does not name it.")
        ] = None,
        write_back: Annotated[
            str | None,
            Field(
                description=f"Also write the verdict onto the trace: {targets_help('scores')}. Needs"
                " a server started with --allow-write."
            ),
        ] = None,
        cursor: Cursor = None,
    ) -> Any:  # a CallToolResult: text and structured content
        return run(
            lambda: toolbox.triage(ticket, manifest=manifest, trace_id=trace_id, write_back=write_back),
            cursor,
        )

    @server.tool(
        structured_output=False,
        description=(
            "Draft a ticket for a trace from its feedback, for a person to verify: required = the"
            " version in effect at the task time of the document the answer rests on (or the feedback"
            " names), its changed sentence as the clause, the changed values as facts, the version the"
            " trace used as superseded; `status: draft`. Fields it cannot settle are null and listed"
            " in `ambiguous` — ask the user, do not fill them in. Same JSON as `tracejudge ticket draft"
            " --trace ID --manifest M --json`. The manifest's versions must carry `content`."
        ),
    )
    def draft_ticket(
        trace_id: Annotated[str, Field(description="The trace the feedback is about.")],
        manifest: Annotated[str, Field(description="Path of the index manifest (JSONL) with content.")],
        feedback: Annotated[str | None, Field(description="The feedback's text.")] = None,
        cursor: Cursor = None,
    ) -> Any:  # a CallToolResult: text and structured content
        return run(lambda: toolbox.draft_ticket(trace_id, manifest, feedback), cursor)

    @server.tool(
        structured_output=False,
        description=(
            "Find stored traces whose answer rests on a document version not in effect at their task"
            " time (values only that version holds, or a citation of it), with evidence and a draft"
            " ticket each. Same JSON as `tracejudge triage --sweep --manifest M --json`:"
            " {flagged: [{trace_id, task_time, doc_id, in_effect, used, evidence, ticket}], scanned}."
        ),
    )
    def sweep(
        manifest: Annotated[str, Field(description="Path of the index manifest (JSONL) with content.")],
        from_: Annotated[
            str | None, Field(validation_alias="from", description="Traces started at or after (ISO 8601).")
        ] = None,
        to: Annotated[str | None, Field(description="Traces started before (ISO 8601).")] = None,
        cursor: Cursor = None,
    ) -> Any:  # a CallToolResult: text and structured content
        return run(lambda: toolbox.sweep(manifest, from_=from_, to=to), cursor)


def _scoring_tools(server: MCPServer, toolbox: Toolbox, run: _Runner) -> None:
    """Scoring a trace with a rubric, and turning a ticket into a regression sample."""

    @server.tool(
        structured_output=False,
        description=(
            "Score one trace with a rubric: deterministic checks first, then the rubric's LLM judge"
            " (OPENAI_BASE_URL / OPENAI_API_KEY of the server's environment, or the rubric's base_url)."
            " Returns pass/fail/indeterminate per criterion and check with the judge's reasoning, as"
            " `tracejudge score --rubric R --trace ID --json` (the run is recorded in the store)."
            " `indeterminate` means the judge could not score (see reason): not a pass."
        ),
    )
    def score_trace(
        trace_id: Annotated[str, Field(description="The trace to score.")],
        rubric: Annotated[str, Field(description="The rubric YAML text, or the path of a rubric file.")],
        manifest: Annotated[
            str | None,
            Field(description="Index manifest (JSONL), for the stayed-within-permissions check."),
        ] = None,
        write_back: Annotated[
            str | None,
            Field(description="Also write the scores back (langfuse, otel or phoenix); needs --allow-write."),
        ] = None,
        cursor: Cursor = None,
    ) -> Any:  # a CallToolResult: text and structured content
        return run(
            lambda: toolbox.score_trace(trace_id, rubric, manifest=manifest, write_back=write_back), cursor
        )

    @server.tool(
        structured_output=False,
        description=(
            "Turn a verified ticket into a regression sample file (YAML) in the suite folder `out`:"
            " the input the agent received, the applicable basis, an environment fixture, the observed"
            " deviation with its triage verdict, expected behaviour and checks. Same JSON as"
            " `tracejudge regress build --ticket FILE --out SUITE --json`. Writes files: needs a server"
            " started with --allow-write."
        ),
    )
    def build_sample(
        ticket: Annotated[str, Field(description="The ticket as YAML/JSON text or a file path.")],
        out: Annotated[str, Field(description="Suite folder to write the sample into.")],
        manifest: Annotated[
            str | None, Field(description="Index manifest (JSONL) with the documents' content.")
        ] = None,
        cursor: Cursor = None,
    ) -> Any:  # a CallToolResult: text and structured content
        return run(lambda: toolbox.build_sample(ticket, out, manifest=manifest), cursor)


def _resources(server: MCPServer, toolbox: Toolbox, opts: McpOptions, lock: threading.Lock) -> None:
    from mcp.server.mcpserver.exceptions import ResourceError

    @server.resource(
        "trace://{trace_id}",
        name="trace",
        description="The task record of a stored trace (as `tracejudge traces show TRACE_ID --json`).",
        mime_type="application/json",
    )
    def trace(trace_id: str) -> str:
        from tracejudge import _redact

        try:
            with lock:
                data = _redact.redact_data(toolbox.show_trace(trace_id))
            return json.dumps(data, indent=2, ensure_ascii=False)
        except TracejudgeError as exc:
            raise ResourceError(_redact.redact(str(exc))) from None

    if opts.tickets is None:
        return
    from mcp.server.mcpserver.resources import FunctionResource

    folder = opts.tickets
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):

        def read(p: Path = path) -> str:
            return p.read_text(encoding="utf-8-sig")

        server.add_resource(
            FunctionResource.from_function(
                read,
                uri=f"ticket://{path.stem}",
                name=f"ticket {path.stem}",
                description=f"Ticket file {path.name}: pass its text or path to triage.",
                mime_type="application/yaml",
            )
        )


_PROMPT = """\
Debug why the agent's answer was wrong{about}.

1. Find the trace: {find}
2. Read it with show_trace: what was asked, which documents each retrieval returned (doc_id,
   version), what reached the model input, and what the agent answered. Note the gaps.
3. Write or load the ticket: the material that should have been used (doc_id, version, the clause
   that must reach the model, facts the answer must agree with) and optionally the superseded
   version. {ticket}
4. Call triage with the ticket (and the index manifest if there is one). Then act on the verdict:
   - not_indexed: the version in force was never indexed → fix ingestion (check the manifest's
     indexed_at / removed_at for that document).
   - filtered (cause filter): the query filter excluded it → fix the filter (the evidence shows the
     recorded filter and the metadata it failed on). cause permission: the principal lacks the ACL.
   - not_retrieved (cause rank): it passed the filter but ranked below the cut → retrieval (top_k,
     embeddings, reranking).
   - dropped_in_context: retrieved, but context assembly cut the clause → the context builder
     (truncation, compression, chunk selection).
   - ignored_by_model: the clause reached the model and the answer still used the old value →
     prompt or model; build a regression sample with build_sample.
   - basis_not_in_effect: the ticket names material not yet in effect at task time → fix the ticket.
   - unconfirmed: read each stage's `missing` and get those records (manifest, content capture,
     filter/principal attributes, the retrieval span). Do not guess a cause.
5. Report the verdict with its evidence (span ids and excerpts) and the fix."""


def _prompt(server: MCPServer) -> None:
    @server.prompt(
        name="debug-wrong-answer",
        description="Walk through show_trace → triage → what to change for each verdict.",
    )
    def debug_wrong_answer(trace_id: str | None = None, ticket: str | None = None) -> str:
        return _PROMPT.format(
            about=f" in trace {trace_id}" if trace_id else "",
            find=(
                f"it is {trace_id}."
                if trace_id
                else "call list_traces (use from/to around the time of the complaint)."
            ),
            ticket=f"The ticket to use: {ticket}"
            if ticket
            else "Ask the user for the verified basis if unsure.",
        )


def guarded_app(app: Any, token: str | None) -> Any:
    """``app`` behind the rule every tracejudge server follows: without a token only requests
    addressed to a loopback name (DNS rebinding); with one, ``Authorization: Bearer TOKEN``."""
    from starlette.responses import PlainTextResponse

    from tracejudge._serving import loopback_host, token_matches

    expected = token.encode() if token else None

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            denied = None
            if expected is None and not loopback_host(headers.get("host", "")):
                denied = PlainTextResponse(
                    "without a token tracejudge mcp answers only requests to localhost or 127.0.0.1;"
                    " set --token (TRACEJUDGE_MCP_TOKEN) to serve under another name",
                    status_code=421,
                )
            elif expected is not None and not token_matches(
                headers.get("authorization", ""), expected, basic=False
            ):
                denied = PlainTextResponse(
                    "a token is required: send `Authorization: Bearer <token>`",
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer realm="tracejudge"'},
                )
            if denied is not None:
                await denied(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


def run_stdio(server: MCPServer) -> None:
    """Serve over stdin/stdout until the client closes them."""
    import anyio

    anyio.run(server.run_stdio_async)


def run_http(
    server: MCPServer,
    listen: str,
    *,
    token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until SIGINT/SIGTERM or ``stop``."""
    import asyncio
    import signal

    from tracejudge._serving import bind, check_exposure, parse_listen, quiet_server, socket_url

    host, port = parse_listen(listen, example_port=8766)
    check_exposure(
        host,
        token,
        refusal=f"refusing to serve MCP on {host} without a token: anyone who can reach it could read"
        " the traces and run triage",
        hint="set --token or TRACEJUDGE_MCP_TOKEN (clients send `Authorization: Bearer <token>`),"
        " or listen on 127.0.0.1",
    )
    from mcp.server.transport_security import TransportSecuritySettings

    # The SDK's own Host check would refuse a tokened server's other names; ours (above) applies instead.
    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False), host=host
    )
    sock = bind(host, port)
    url = socket_url(sock) + "/mcp"
    uv = quiet_server(guarded_app(app, token), lambda: on_ready(url) if on_ready is not None else None)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, lambda: setattr(uv, "should_exit", True))
        watcher = None
        if stop is not None:

            async def watch() -> None:
                while not stop.is_set() and not uv.should_exit:
                    await asyncio.sleep(0.05)
                uv.should_exit = True

            watcher = asyncio.create_task(watch())
        # quiet_server runs without ASGI lifespan; the session manager is what that lifespan starts.
        async with server.session_manager.run():
            await uv.serve(sockets=[sock])
        if watcher is not None:
            watcher.cancel()

    try:
        asyncio.run(main())
    finally:
        sock.close()
