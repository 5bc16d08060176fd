"""``tracejudge ticket draft``: a ticket to verify, from a trace, the manifest and the feedback."""

from __future__ import annotations

from pathlib import Path

import click

from tracejudge._errors import InputError
from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.cli._safe import safe_text
from tracejudge.localize import load_manifest
from tracejudge.store import resolve_trace_id


@click.group("ticket")
def ticket() -> None:
    """Tickets: draft one from a trace and its feedback, for a person to verify."""


@ticket.command("draft")
@click.option(
    "--trace",
    "trace_id",
    required=True,
    metavar="ID",
    help="The trace the feedback is about (a unique id prefix will do).",
)
@click.option(
    "--manifest",
    "manifest_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Index manifest JSONL with each version's content.",
)
@click.option("--feedback", default=None, metavar="TEXT", help="The feedback's text.")
@click.option(
    "--langfuse-score",
    "langfuse_score",
    default=None,
    metavar="NAME",
    help="Read the feedback from the comment of this Langfuse score on the trace (LANGFUSE_* env).",
)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write the ticket YAML here.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the ticket, what is ambiguous, evidence).")
@pass_app
@handle_errors
def draft(
    app: App,
    trace_id: str,
    manifest_path: Path,
    feedback: str | None,
    langfuse_score: str | None,
    out: Path | None,
    as_json: bool,
) -> None:
    """Draft a ticket (status: draft): required = the version in effect at the task time of the document
    the trace used or the feedback names, its clause that changed, the changed values as facts, and the
    version the trace used as superseded. What it cannot tell is left empty with a comment saying why.

    Without --out the YAML goes to stdout. Exit 2 when the trace is not stored or the manifest has no
    versions with content."""
    from tracejudge.sweep import draft_ticket_for

    if feedback is not None and langfuse_score is not None:
        raise InputError("give --feedback or --langfuse-score, not both", hint="pick one source of feedback")
    result = draft_ticket_for(
        app.reader,
        resolve_trace_id(app.reader, trace_id),
        load_manifest(manifest_path),
        feedback or "",
        langfuse_score=langfuse_score,
        out=out,
    )
    if as_json:
        print_json(result)
    elif out is None:
        app.console.file.write(result.yaml)  # the redacting stdout, unwrapped
    else:
        app.console.print(safe_text(f"wrote draft ticket {out}"))
    if not as_json:
        if result.still_arriving is not None:
            app.err.print(safe_text(f"still arriving: {result.still_arriving}"))
        for a in result.ambiguous:
            app.err.print(safe_text(f"to decide: {a.field}: {a.reason}"))
        if result.ambiguous or result.still_arriving is not None or out is not None:
            app.err.print(safe_text("  → check the draft, fill what is left, then set status: verified"))
