"""``tracejudge triage``: which of the four stages lost the applicable material, and how we know."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from tracejudge._errors import InputError
from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.localize import (
    LLMUsageJudge,
    UsageJudge,
    load_manifest,
    load_ticket,
    localize,
    ticket_files,
    trace_not_stored,
    verdict_counts,
)
from tracejudge.normalize import normalize
from tracejudge.schema import JudgeConfig, Localization, ManifestEntry, StageResult, Ticket

_STYLE = {"pass": "green", "fail": "red", "unconfirmed": "yellow", "skipped": "dim"}


def _trace_id(app: App, arg: str | None, ticket: Ticket, path: Path) -> str:
    own = (ticket.trace_id or "").strip().lower()
    if arg and own and arg.strip().lower() != own:
        # The command line wins, but a ticket about another trace is usually a mix-up worth seeing.
        app.err.print(
            Text(
                f"warning: {path}: the ticket names trace {own}, the command line {arg.strip().lower()};"
                " triaging the command line's trace"
            )
        )
    trace_id = arg or ticket.trace_id
    if not trace_id:
        raise InputError(
            f"{path}: no trace id: the ticket has no trace_id and none was given",
            hint="put trace_id in the ticket, or give it: tracejudge triage TRACE_ID --ticket FILE",
        )
    return trace_id.strip().lower()


_NOT_STORED_HINT = "run `tracejudge traces list` to see stored traces, or collect the trace first"


def _triage_one(
    app: App,
    trace_id: str,
    ticket: Ticket,
    manifest: Sequence[ManifestEntry] | None,
    judge: UsageJudge | None = None,
    *,
    batch: bool = False,
) -> Localization | None:
    """The localization; None (in a batch) or an error (alone) when the trace is not stored."""
    spans = app.store.get_spans(trace_id)
    if not spans:
        if batch:
            return None
        raise InputError(f"no spans stored for trace {trace_id}", hint=_NOT_STORED_HINT)
    return localize(normalize(spans), ticket, manifest, judge=judge)


def _stage_table(stages: Sequence[StageResult]) -> Table:
    table = Table("stage", "status", "detail", "evidence", "missing", show_lines=True)
    for s in stages:
        status = s.status + (f" ({s.cause})" if s.cause else "")
        evidence = "\n".join(f"{e.span_id or 'manifest'}: {e.note}" for e in s.evidence)
        table.add_row(
            s.name,
            Text(status, style=_STYLE[s.status]),
            Text(s.detail),
            Text(evidence),
            Text("\n".join(s.missing)),
        )
    return table


def _render_one(app: App, loc: Localization) -> None:
    t = loc.task_time.isoformat() if loc.task_time else "unknown"
    head = Text.assemble(
        ("verdict: ", "bold"),
        (loc.verdict + (f" ({loc.cause})" if loc.cause else ""), "bold"),
        f"   trace {loc.trace_id}   task time {t}",
        f"   ticket {loc.ticket}" if loc.ticket else "",
    )
    app.console.print(head)
    app.console.print(Text(loc.summary))
    if len(loc.materials) > 1:
        for m in loc.materials:
            label = f"{m.doc_id}@{m.version}" if m.version else m.doc_id
            app.console.print(Text.assemble(("\n" + label, "bold"), f": {m.verdict}"))
            app.console.print(_stage_table(m.stages))
    else:
        app.console.print(_stage_table(loc.stages))


def _deciding(loc: Localization) -> str:
    return next((s.name for s in loc.stages if s.status in ("fail", "unconfirmed")), "-")


def _render_many(app: App, rows: Sequence[tuple[Path, Localization]], counts: dict[str, int]) -> None:
    cells = [
        (loc.ticket or path.name, loc.trace_id, loc.verdict, loc.cause or "-", _deciding(loc))
        for path, loc in rows
    ]
    heads = ("ticket", "trace", "verdict", "cause", "deciding stage")
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(heads)]
    # A long trace id is what gives way on a narrow terminal; verdicts and stages are never cut.
    frame = 3 * len(heads) + 1
    widths[1] = max(8, min(widths[1], app.console.width - frame - sum(widths) + widths[1]))
    table = Table()
    for head, width in zip(heads, widths, strict=True):
        table.add_column(head, no_wrap=True, overflow="ellipsis", min_width=width, max_width=width)
    for row in cells:
        table.add_row(*(Text(c) for c in row))
    app.console.print(table)
    summary = Table("verdict", "count")
    for verdict, n in counts.items():
        if n:
            summary.add_row(verdict, str(n))
    app.console.print(summary)


_SECRET_ENV = ("LANGFUSE_SECRET_KEY", "LANGFUSE_PUBLIC_KEY", "PHOENIX_API_KEY", "OPENAI_API_KEY")
_SECRET_SHAPES = re.compile(
    r"\b(?:sk|pk)-lf-[\w-]+|\bsk-[A-Za-z0-9_-]{16,}|(?i:bearer|basic)\s+[\w.+/=-]{8,}"
)


def _no_secrets(text: str) -> str:
    """A backend's reason as it may be shown: keys it might echo (ours, or key-shaped text) blanked."""
    for name in _SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return _SECRET_SHAPES.sub("***", text)


def _write_back(target: str, results: Sequence[Localization]) -> dict[str, Any]:
    """Write the verdicts and say what landed: every failed write with its ticket, trace, score and
    the backend's reason. The result also goes into ``--json`` under ``write_back``."""
    try:
        from tracejudge.write import triage_scores, write_triage
    except ImportError as exc:
        raise InputError(
            f"--write-back is not available in this installation: {exc}",
            hint="reinstall tracejudge, or run triage without --write-back",
        ) from None
    report: Any = write_triage(target, results)
    # A failure names a score id; map it back to what the user knows (ticket and trace).
    by_id = {
        score.score_id: (score.name, r) for score, r in zip(triage_scores(results), results, strict=True)
    }
    failed: list[dict[str, Any]] = []
    for f in getattr(report, "failed", ()):
        name, loc = by_id.get(f.key, (None, None))
        failed.append(
            {
                "ticket": loc.ticket if loc is not None else None,
                "trace_id": loc.trace_id if loc is not None else None,
                "score_name": name,
                "score_id": f.key,
                "status": getattr(f, "status", None),
                "reason": _no_secrets(str(f.reason)),
            }
        )
    return {"target": target, "written": getattr(report, "written", None), "failed": failed}


def _render_write_back(app: App, wb: dict[str, Any], as_json: bool) -> None:
    target, written, failed = wb["target"], wb["written"], wb["failed"]
    line = f"wrote {written} triage verdict(s) to {target}" if written is not None else f"wrote to {target}"
    if failed:
        line += f"; {len(failed)} failed"
    # Keep stdout pure JSON under --json.
    (app.err if as_json else app.console).print(Text(line))
    for f in failed:
        who = f"ticket {f['ticket']}, trace {f['trace_id']}" if f["trace_id"] else f"score id {f['score_id']}"
        status = f" (HTTP {f['status']})" if f["status"] else ""
        app.err.print(
            Text(f"  failed: {who}, score {f['score_name'] or '?'}{status}: {f['reason']}"), soft_wrap=True
        )
    if failed:
        app.err.print(
            Text(
                f"  → fix the cause and rerun the same command: score ids are deterministic, so the"
                f" {written or 0} verdict(s) already written are replaced, not duplicated"
            )
        )


@click.command("triage")
@click.argument("trace_id", required=False)
@click.option(
    "--ticket",
    "ticket_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Ticket YAML, or a folder of them.",
)
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
    help="Write verdicts back (langfuse or phoenix).",
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
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def triage(
    app: App,
    trace_id: str | None,
    ticket_path: Path,
    manifest_path: Path | None,
    write_back: str | None,
    judge_model: str | None,
    judge_base_url: str | None,
    as_json: bool,
) -> None:
    """Localize why a trace's answer was wrong: not indexed, filtered, not retrieved, dropped in
    context, ignored by the model — or unconfirmed, with the records that would settle it.

    Exit code 0 whatever the verdict; 1 when --write-back could not write every verdict; 2 when a
    ticket or manifest does not parse, or when the trace of a single ticket is not stored (in a
    folder, such a ticket is unconfirmed and the rest go on).
    """
    folder = ticket_path.is_dir()
    if folder and trace_id:
        raise InputError(
            "TRACE_ID goes with a single ticket file, not a folder",
            hint="put trace_id in each ticket of the folder, or pass one ticket file",
        )
    paths = ticket_files(ticket_path)
    tickets = [(p, load_ticket(p)) for p in paths]
    manifest = load_manifest(manifest_path) if manifest_path is not None else None
    jobs = [(p, t, _trace_id(app, trace_id, t, p)) for p, t in tickets]
    given = click.get_current_context().get_parameter_source("judge_base_url")
    if judge_base_url and not judge_model and given == click.core.ParameterSource.COMMANDLINE:
        raise InputError(
            "--judge-base-url needs --judge-model",
            hint="e.g. --judge-model gpt-4.1-mini --judge-base-url URL",
        )
    judge = (
        LLMUsageJudge(JudgeConfig(model=judge_model, base_url=judge_base_url), cache=app.store)
        if judge_model
        else None
    )
    rows: list[tuple[Path, Localization]] = []
    unstored: list[tuple[Path, Localization]] = []
    try:
        for p, t, tid in jobs:
            loc = _triage_one(app, tid, t, manifest, judge, batch=folder)
            if loc is None:
                # One trace not collected yet does not stop a batch: its row says what is missing.
                unstored.append((p, trace_not_stored(t, tid)))
            else:
                rows.append((p, loc))
    finally:
        if judge is not None:
            judge.close()
    for p, loc in rows:
        # Kept for `tracejudge report` / `serve`: a rerun adds an entry, history is never rewritten.
        app.store.put_triage_result(loc, ticket=loc.ticket or p.stem)
    results = [loc for _, loc in rows]
    # Written before printing so that --json can carry what landed and what did not.
    wb = _write_back(write_back, results) if write_back is not None and results else None
    if folder:
        shown = sorted([*rows, *unstored], key=lambda row: row[0])
        counts = verdict_counts(loc for _, loc in shown)
        if as_json:
            items = [{**loc.model_dump(mode="json"), "ticket_file": str(p)} for p, loc in shown]
            data: dict[str, Any] = {"results": items, "summary": counts}
            if wb is not None:
                data["write_back"] = wb
            print_json(data)
        else:
            _render_many(app, shown, counts)
        if unstored:
            names = ", ".join(loc.ticket or p.name for p, loc in unstored)
            app.err.print(
                Text(f"{len(unstored)} ticket(s) name a trace with no stored spans ({names}): unconfirmed")
            )
            app.err.print(Text(f"  → {_NOT_STORED_HINT}"))
    elif as_json:
        if wb is None:
            print_json(results[0])
        else:
            print_json({**results[0].model_dump(mode="json"), "write_back": wb})
    else:
        _render_one(app, results[0])
    if wb is not None:
        _render_write_back(app, wb, as_json)
        if wb["failed"]:
            # The verdict never gates; a write that did not land is a failure the user must act on.
            raise SystemExit(1)
