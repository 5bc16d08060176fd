"""``tracejudge triage``: which of the four stages lost the applicable material, and how we know."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from tracejudge._errors import InputError
from tracejudge.cli._app import App, exit_unless, handle_errors, pass_app
from tracejudge.cli._safe import clean, safe_text
from tracejudge.cli._sweep import run_sweep
from tracejudge.cli._when import FROM_HELP, TO_HELP
from tracejudge.localize import NOT_STORED_HINT, TicketResult, TriageOutcome, triage_tickets
from tracejudge.schema import JudgeConfig, Localization, StageResult
from tracejudge.store import resolve_trace_id
from tracejudge.write import targets_help

_STYLE = {"pass": "green", "fail": "red", "unconfirmed": "yellow", "skipped": "dim"}


def _stage_table(stages: Sequence[StageResult]) -> Table:
    table = Table("stage", "status", "detail", "evidence", "missing", show_lines=True)
    for s in stages:
        status = s.status + (f" ({s.cause})" if s.cause else "")
        evidence = "\n".join(f"{e.span_id or 'manifest'}: {e.note}" for e in s.evidence)
        table.add_row(
            s.name,
            safe_text(status, style=_STYLE[s.status]),
            safe_text(s.detail),
            safe_text(evidence),
            safe_text("\n".join(s.missing)),
        )
    return table


def _render_one(app: App, loc: Localization) -> None:
    t = loc.task_time.isoformat() if loc.task_time else "unknown"
    head = Text.assemble(
        ("verdict: ", "bold"),
        (loc.verdict + (f" ({loc.cause})" if loc.cause else ""), "bold"),
        clean(f"   trace {loc.trace_id}   task time {t}"),
        clean(f"   ticket {loc.ticket}") if loc.ticket else "",
    )
    app.console.print(head)
    app.console.print(safe_text(loc.summary))
    if loc.session_id is not None:
        app.console.print(
            safe_text(
                f"session {loc.session_id}: read {len(loc.turns)} turn(s), this trace the last", style="dim"
            )
        )
    for note in loc.notes:
        app.console.print(safe_text(f"note: {note}", style="yellow"))
    if len(loc.materials) > 1:
        for m in loc.materials:
            label = f"{m.doc_id}@{m.version}" if m.version else m.doc_id
            app.console.print(Text.assemble(("\n" + clean(label), "bold"), f": {m.verdict}"))
            app.console.print(_stage_table(m.stages))
    else:
        app.console.print(_stage_table(loc.stages))


def _deciding(loc: Localization) -> str:
    return next((s.name for s in loc.stages if s.status in ("fail", "unconfirmed")), "-")


def _render_many(app: App, rows: Sequence[TicketResult], counts: dict[str, int]) -> None:
    app.console.print(_verdict_table(rows, app.console.width))
    summary = Table("verdict", "count")
    for verdict, n in counts.items():
        if n:
            summary.add_row(verdict, str(n))
    app.console.print(summary)


_HEADS = ("ticket", "trace", "verdict", "cause", "deciding stage")


def _verdict_table(rows: Sequence[TicketResult], console_width: int) -> Table:
    cells = [_cells(r) for r in rows]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(_HEADS)]
    # A long ticket name is what gives way on a narrow terminal (or a pipe, 80 columns); the trace id
    # (what the user copies), verdicts and stages are never cut.
    frame = 3 * len(_HEADS) + 1
    widths[0] = max(8, min(widths[0], console_width - frame - sum(widths) + widths[0]))
    table = Table()
    for head, width in zip(_HEADS, widths, strict=True):
        table.add_column(head, no_wrap=True, overflow="ellipsis", min_width=width, max_width=width)
    for row in cells:
        table.add_row(*(safe_text(c) for c in row))
    return table


def _cells(r: TicketResult) -> tuple[str, str, str, str, str]:
    loc = r.localization
    return (
        loc.ticket or r.ticket_file.name,
        loc.trace_id,
        loc.verdict + (" (unverified basis)" if loc.basis == "draft" else ""),
        loc.cause or "-",
        _deciding(loc),
    )


def _render_write_back(app: App, wb: dict[str, Any], as_json: bool) -> None:
    target, written, failed = wb["target"], wb["written"], wb["failed"]
    line = f"wrote {written} triage verdict(s) to {target}" if written is not None else f"wrote to {target}"
    if failed:
        line += f"; {len(failed)} failed"
    # Keep stdout pure JSON under --json.
    (app.err if as_json else app.console).print(safe_text(line))
    for f in failed:
        who = f"ticket {f['ticket']}, trace {f['trace_id']}" if f["trace_id"] else f"score id {f['score_id']}"
        status = f" (HTTP {f['status']})" if f["status"] else ""
        app.err.print(
            safe_text(f"  failed: {who}, score {f['score_name'] or '?'}{status}: {f['reason']}"),
            soft_wrap=True,
        )
    if failed:
        app.err.print(
            safe_text(
                f"  → fix the cause and rerun the same command: score ids are deterministic, so the"
                f" {written or 0} verdict(s) already written are replaced, not duplicated"
            )
        )


@click.command("triage")
@click.argument("trace_id", required=False)
@click.option(
    "--ticket",
    "ticket_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Ticket YAML, or a folder of them.",
)
@click.option(
    "--sweep",
    is_flag=True,
    help="No ticket: flag every stored trace whose answer rests on a document version not in effect at"
    " its task time (needs --manifest with each version's content).",
)
@click.option("--from", "from_", metavar="T", default=None, help="With --sweep: " + FROM_HELP)
@click.option("--to", "to", metavar="T", default=None, help="With --sweep: " + TO_HELP)
@click.option(
    "--manifest",
    "manifest_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Index manifest JSONL (one document version per line).",
)
@click.option(
    "--write-back",
    "write_back",
    metavar="TARGET",
    default=None,
    help=f"Write verdicts back ({targets_help('scores')}).",
)
@click.option(
    "--judge-model",
    envvar="TRACEJUDGE_JUDGE_MODEL",
    default=None,
    help="Judge model that reads the answer when its facts do not settle used_by_model"
    " (env TRACEJUDGE_JUDGE_MODEL; key from OPENAI_API_KEY).",
)
@click.option(
    "--judge-base-url",
    envvar="TRACEJUDGE_JUDGE_BASE_URL",
    default=None,
    help="Judge endpoint, OpenAI-compatible (env TRACEJUDGE_JUDGE_BASE_URL, else OPENAI_BASE_URL).",
)
@click.option(
    "--session",
    "session_id",
    metavar="SESSION_ID",
    default=None,
    help="Read this conversation's earlier stored turns too (default: the ticket's session_id, else"
    " the session the trace records).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def triage(
    app: App,
    trace_id: str | None,
    ticket_path: Path | None,
    sweep: bool,
    from_: str | None,
    to: str | None,
    manifest_path: Path | None,
    write_back: str | None,
    judge_model: str | None,
    judge_base_url: str | None,
    session_id: str | None,
    as_json: bool,
) -> None:
    """Localize why a trace's answer was wrong: not indexed, filtered, not retrieved, dropped in
    context, ignored by the model — or unconfirmed, with the records that would settle it.

    Exit code 0 whatever the verdict; 1 when --write-back could not write every verdict; 2 when a
    ticket or manifest does not parse, or when the trace of a single ticket is not stored (in a
    folder, such a ticket is unconfirmed and the rest go on).

    With --sweep (no ticket): every stored trace in --from/--to whose answer rests on a version not in
    effect at its task time, with evidence and a draft ticket each.
    """
    if sweep:
        _triage_sweep(app, trace_id, ticket_path, manifest_path, from_, to, write_back, as_json)
        return
    if ticket_path is None:
        raise InputError(
            "--ticket is required", hint="give --ticket FILE (or a folder), or --sweep --manifest M"
        )
    _check_judge_options(judge_model, judge_base_url)
    out = triage_tickets(
        app.store,
        ticket_path,
        trace_id=resolve_trace_id(app.store, trace_id) if trace_id else None,
        manifest_path=manifest_path,
        judge=JudgeConfig(model=judge_model, base_url=judge_base_url) if judge_model else None,
        write_back=write_back,
        on_warning=lambda text: app.err.print(safe_text(text)),
        session_id=session_id,
    )
    app.show(as_json, out.json(), lambda: _render_triage(app, out))
    if out.unstored:
        _render_unstored(app, out.unstored)
    if out.write_back is not None:
        _render_write_back(app, out.write_back, as_json)
        # The verdict never gates; a write that did not land is a failure the user must act on.
        exit_unless(not out.write_failed)


def _triage_sweep(
    app: App,
    trace_id: str | None,
    ticket_path: Path | None,
    manifest_path: Path | None,
    from_: str | None,
    to: str | None,
    write_back: str | None,
    as_json: bool,
) -> None:
    if ticket_path is not None or trace_id:
        raise InputError("--sweep takes no ticket or trace id", hint="run triage --sweep --manifest M alone")
    wb = run_sweep(app, manifest_path, from_, to, write_back, as_json)
    exit_unless(wb is None or not wb["failed"])


def _check_judge_options(judge_model: str | None, judge_base_url: str | None) -> None:
    """--judge-base-url typed without --judge-model is a mistake (from the environment it is not)."""
    given = click.get_current_context().get_parameter_source("judge_base_url")
    if judge_base_url and not judge_model and given == click.core.ParameterSource.COMMANDLINE:
        raise InputError(
            "--judge-base-url needs --judge-model",
            hint="e.g. --judge-model gpt-4.1-mini --judge-base-url URL",
        )


def _render_triage(app: App, out: TriageOutcome) -> None:
    if out.folder:
        _render_many(app, out.results, out.summary)
    else:
        _render_one(app, out.results[0].localization)


_DAMAGED = (
    "run `tracejudge doctor --deep` to list every trace that no longer reads back; restore the store from"
    " a backup"
)


def _render_unstored(app: App, unstored: Sequence[TicketResult]) -> None:
    for damaged, what, hint in (
        (False, "name a trace with no stored spans", NOT_STORED_HINT),
        (True, "name a trace the store holds damaged (it, or an earlier turn, does not read back)", _DAMAGED),
    ):
        these = [r for r in unstored if r.unreadable is damaged]
        if these:
            names = ", ".join(r.localization.ticket or r.ticket_file.name for r in these)
            app.err.print(safe_text(f"{len(these)} ticket(s) {what} ({names}): unconfirmed"))
            app.err.print(safe_text(f"  → {hint}"))
