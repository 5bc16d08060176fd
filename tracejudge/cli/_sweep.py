"""``tracejudge triage --sweep``: every stored trace whose answer rests on a document version not in
effect at its task time, with evidence and a draft ticket (DESIGN 5.5, Sweep)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from tracejudge._errors import InputError
from tracejudge.cli._app import App
from tracejudge.cli._safe import safe_text
from tracejudge.cli._when import parse_when
from tracejudge.localize import load_manifest
from tracejudge.schema import ManifestEntry, SweepReport

__all__ = ["run_sweep"]


def _render(app: App, report: SweepReport) -> None:
    by_version: Counter[tuple[str, str, str]] = Counter(
        (f.doc_id, f.used, f.in_effect or "several") for f in report.flagged
    )
    table = Table("document", "version used", "in effect then", "flagged traces", title="by document version")
    for (doc, used, now), n in sorted(by_version.items()):
        table.add_row(safe_text(doc), safe_text(used), safe_text(now), str(n))
    if report.flagged:
        app.console.print(table)
        traces = Table("trace", "task time", "document", "evidence", show_lines=True)
        for f in report.flagged:
            when = f.task_time.isoformat() if f.task_time else "-"
            ev = f.evidence[0].note if f.evidence else ""
            traces.add_row(
                safe_text(f.trace_id), safe_text(when), safe_text(f"{f.doc_id}@{f.used}"), safe_text(ev)
            )
        app.console.print(traces)
    app.console.print(
        safe_text(f"{len(report.flagged)} flagged of {report.scanned} trace(s) scanned")
        if report.scanned
        else safe_text("no stored trace in the window: collect traces first, or widen --from/--to")
    )
    if report.still_arriving:
        app.console.print(
            safe_text(
                f"{len(report.still_arriving)} trace(s) not judged: they may still be arriving and their"
                " answer may be a draft; sweep again once they have arrived"
            )
        )
    if report.unreadable:
        app.console.print(
            safe_text(
                f"{len(report.unreadable)} stored trace(s) not read: the store holds them damaged"
                f" ({', '.join(report.unreadable[:5])}{' …' if len(report.unreadable) > 5 else ''});"
                " `tracejudge doctor --deep` lists them and says what to do"
            )
        )


def run_sweep(
    app: App,
    manifest_path: Path | None,
    from_: str | None,
    to: str | None,
    write_back: str | None,
    as_json: bool,
) -> dict[str, Any] | None:
    """Sweep, print, and write back; returns what write-back reported (or None)."""
    from tracejudge.sweep import record_sweep

    if manifest_path is None:
        raise InputError(
            "--sweep needs --manifest",
            hint="give the index manifest with each version's content: triage --sweep --manifest M.jsonl",
        )
    manifest = load_manifest(manifest_path)
    since, until = parse_when(from_, option="--from"), parse_when(to, option="--to")
    report = _sweep_with_progress(app, manifest, since, until)
    # Kept for `tracejudge report` / `serve` (the latest sweep's counts per document version).
    record_sweep(app.store, report, since=since, until=until)
    wb = _write_back(write_back, report) if write_back is not None and report.flagged else None
    data = report.model_dump(mode="json")
    app.show(as_json, {**data, "write_back": wb} if wb is not None else data, lambda: _render(app, report))
    if wb is not None:
        _render_write_back(app, wb, as_json)
    return wb


def _sweep_with_progress(
    app: App, manifest: list[ManifestEntry], since: datetime | None, until: datetime | None
) -> SweepReport:
    from tracejudge.sweep import sweep

    with Progress(
        SpinnerColumn(),
        TextColumn("sweeping: {task.fields[scanned]} scanned, {task.fields[flagged]} flagged"),
        TimeElapsedColumn(),
        console=app.err,
        transient=True,
        disable=not app.err.is_terminal,
    ) as progress:
        bar = progress.add_task("sweep", total=None, scanned=0, flagged=0)
        return sweep(
            app.store,
            manifest,
            since=since,
            until=until,
            progress=lambda n, k: progress.update(bar, scanned=n, flagged=k),
        )


def _write_back(target: str, report: SweepReport) -> dict[str, Any]:
    from tracejudge.sweep import write_sweep

    done = write_sweep(target, report.flagged)
    return {
        "target": target,
        "written": done.written,
        "failed": [{"key": f.key, "reason": f.reason} for f in done.failed],
    }


def _render_write_back(app: App, wb: dict[str, Any], as_json: bool) -> None:
    line = f"marked {wb['written']} flagged trace(s) in {wb['target']}"
    # Keep stdout pure JSON under --json.
    (app.err if as_json else app.console).print(
        safe_text(line + (f"; {len(wb['failed'])} failed" if wb["failed"] else ""))
    )
    for f in wb["failed"]:
        app.err.print(safe_text(f"  failed: {f['key']}: {f['reason']}"))
