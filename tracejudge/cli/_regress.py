"""``tracejudge regress``: regression samples from verified feedback (build, check, anonymize, push, run)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import click
from rich.table import Table

from tracejudge._errors import InputError
from tracejudge.cli._app import App, exit_unless, handle_errors, pass_app
from tracejudge.cli._safe import escape
from tracejudge.cli._when import FROM_HELP, TO_HELP, parse_when
from tracejudge.localize import load_manifest, ticket_files
from tracejudge.regress import (
    HttpTarget,
    HygieneOptions,
    PlannedReplacement,
    ReplayOptions,
    Suite,
    anonymize_suite,
    build_suite,
    check_suite_path,
    iter_samples,
    load_suite,
    load_target,
    plan_anonymization,
    push_suite_path,
    run_suite,
    runs_folder,
    write_run,
)
from tracejudge.schema import (
    AnonymizeReport,
    BuildReport,
    HygieneReport,
    JudgeConfig,
    SampleRunResult,
    SuiteRun,
)
from tracejudge.write import WriteReport, targets_help


@click.group()
def regress() -> None:
    """Regression sets from verified feedback: build, check, anonymize, push, run."""


@regress.command("build")
@click.option(
    "--ticket", "tickets", multiple=True, type=click.Path(path_type=Path), help="Ticket file or folder."
)
@click.option(
    "--langfuse-feedback", "feedback", metavar="SCORE_NAME", help="Build from stored Langfuse scores."
)
@click.option(
    "--langfuse-queue",
    "queue",
    metavar="QUEUE_ID",
    help="Build from the stored results of this Langfuse annotation queue (with --langfuse-feedback:"
    " only that score).",
)
@click.option(
    "--manifest", type=click.Path(path_type=Path), help="Index manifest (JSONL) with document content."
)
@click.option(
    "--sweep",
    "from_sweep",
    is_flag=True,
    help="Also build candidate failure samples from the traces `triage --sweep` flags (needs --manifest"
    " with content; split debug, tagged basis: draft until verified).",
)
@click.option("--from", "from_", metavar="T", default=None, help="With --sweep: " + FROM_HELP)
@click.option("--to", "to", metavar="T", default=None, help="With --sweep: " + TO_HELP)
@click.option(
    "--allow-draft",
    is_flag=True,
    help="Build draft tickets (status: draft) whose sample falls in the acceptance split (else refused).",
)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Suite folder to write.")
@click.option(
    "--positive-at", type=float, default=1.0, show_default=True, help="NUMERIC feedback counted positive."
)
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
@pass_app
@handle_errors
def build_cmd(
    app: App,
    tickets: tuple[Path, ...],
    feedback: str | None,
    queue: str | None,
    manifest: Path | None,
    from_sweep: bool,
    from_: str | None,
    to: str | None,
    allow_draft: bool,
    out: Path,
    positive_at: float,
    as_json: bool,
) -> None:
    """One sample per verified ticket (triaged against its stored trace), or per Langfuse feedback
    score or annotation-queue result kept in the store (refresh them with `collect langfuse
    --feedback NAME` / `--queue ID`)."""
    if tickets and (feedback or queue):
        raise InputError(
            "give --ticket or Langfuse feedback (--langfuse-feedback / --langfuse-queue), not both",
            hint="run build once for each source",
        )
    files = [f for t in tickets for f in ticket_files(t)]
    entries = load_manifest(manifest) if manifest else []
    report = build_suite(
        app.reader,
        out,
        tickets=files,
        langfuse_feedback=feedback,
        langfuse_queue=queue,
        manifest=entries,
        positive_threshold=positive_at,
        allow_draft=allow_draft,
        from_sweep=from_sweep,
        since=parse_when(from_, option="--from"),
        until=parse_when(to, option="--to"),
    )
    app.show(as_json, report, lambda: _render_build(app, report))


def _render_build(app: App, report: BuildReport) -> None:
    app.console.print(f"suite {escape(report.out)}: {len(report.written)} written, {len(report.kept)} kept")
    app.console.print("kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(report.kinds.items())))
    for sid, others in report.merged.items():
        app.console.print(f"  {sid} also covers {escape(', '.join(others))}")
    for s in report.skipped:
        app.err.print(f"skipped {escape(s.source)}: {escape(s.reason)}")


@regress.command("check")
@click.argument("suite", type=click.Path(path_type=Path))
@click.option("--max-failure-share", type=float, default=0.75, show_default=True)
@click.option(
    "--runs",
    "runs_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Folder of run records (default SUITE/runs; a bundled example's go to .tracejudge/runs/).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the hygiene report as JSON.")
@pass_app
@handle_errors
def check_cmd(app: App, suite: Path, max_failure_share: float, runs_dir: Path | None, as_json: bool) -> None:
    """Hygiene: balance, near-duplicate groups and splits, leakage, debug use, missing materials,
    duplicates. Exit 1 on violations."""
    runs, _note = runs_folder(suite, runs_dir)
    report = check_suite_path(suite, HygieneOptions(max_failure_share=max_failure_share), runs_dir=runs)
    app.show(as_json, {**report.model_dump(mode="json"), "ok": report.ok}, lambda: _render_check(app, report))
    exit_unless(report.ok)


def _render_check(app: App, report: HygieneReport) -> None:
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(report.kinds.items()))
    splits = ", ".join(f"{k} {v}" for k, v in sorted(report.splits.items()))
    app.console.print(f"{report.samples} samples ({kinds}); splits: {splits}; {len(report.groups)} groups")
    for v in report.violations:
        app.console.print(f"[red]{v.rule}[/red]: {escape(v.message)}")
    if report.ok:
        app.console.print("[green]no violations[/green]")


@regress.command("anonymize")
@click.argument("suite", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), help="New folder for the anonymized suite.")
@click.option(
    "--mapping", type=click.Path(path_type=Path), help="Write the mapping here (outside any suite)."
)
@click.option("--identifier", "identifiers", multiple=True, help="Extra name to pseudonymize (repeatable).")
@click.option(
    "--dry-run",
    is_flag=True,
    help="List what would be replaced (original, pseudonym, occurrences, samples); write nothing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_app
@handle_errors
def anonymize_cmd(
    app: App,
    suite: Path,
    out: Path | None,
    mapping: Path | None,
    identifiers: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
) -> None:
    """Consistent pseudonyms for ids, names, emails, phone and account numbers, found in metadata and in
    free text; amounts, dates, versions and relations kept; triage verdicts and hard checks verified
    unchanged (exit 1 if not). --dry-run shows the originals on this terminal only."""
    if dry_run:
        plan = plan_anonymization(list(iter_samples(suite)), identifiers=identifiers)
        app.show(as_json, [dataclasses.asdict(p) for p in plan], lambda: _render_plan(app, plan))
        return
    if out is None:
        raise InputError("--out is required", hint="give a new folder for the anonymized suite, or --dry-run")
    report = anonymize_suite(suite, out, mapping_file=mapping, identifiers=identifiers)
    app.show(
        as_json, {**report.model_dump(mode="json"), "ok": report.ok}, lambda: _render_anonymized(app, report)
    )
    exit_unless(report.ok)


def _render_plan(app: App, plan: list[PlannedReplacement]) -> None:
    table = Table("kind", "original", "pseudonym", "occurrences", "samples")
    for p in plan:
        table.add_row(
            p.kind, escape(p.original), escape(p.pseudonym), str(p.occurrences), str(len(p.samples))
        )
    app.console.print(table)
    app.console.print(f"{len(plan)} identifiers would be replaced; nothing written (dry run)")


def _render_anonymized(app: App, report: AnonymizeReport) -> None:
    replaced = ", ".join(f"{k} {v}" for k, v in sorted(report.replaced.items()))
    app.console.print(f"{report.samples} samples written to {escape(report.out)}; replaced: {replaced}")
    for v in report.verified:
        mark = "[green]same[/green]" if v.identical else "[red]CHANGED[/red]"
        app.console.print(f"  {v.sample_id}: verdict {v.verdict_before} -> {v.verdict_after}, checks {mark}")


@regress.command("push")
@click.argument("suite", type=click.Path(path_type=Path))
@click.option("--dataset", required=True, help=f"Dataset name in {targets_help('datasets')}.")
@click.option("--json", "as_json", is_flag=True, help="Print the write report as JSON.")
@pass_app
@handle_errors
def push_cmd(app: App, suite: Path, dataset: str, as_json: bool) -> None:
    """Upsert the samples as Langfuse dataset items (deterministic ids; pushing twice changes nothing)."""
    report = push_suite_path(suite, dataset)
    app.show(
        as_json,
        {**report.model_dump(mode="json"), "ok": report.ok},
        lambda: _render_push(app, report, dataset),
    )
    exit_unless(report.ok)


def _render_push(app: App, report: WriteReport, dataset: str) -> None:
    app.console.print(f"{report.written} items written to dataset {escape(dataset)}")
    for f in report.failed:
        app.err.print(f"failed {escape(f.key)}: {escape(f.reason)}")


def _line(r: SampleRunResult) -> str:
    costs = f"${r.cost_usd:.4f}"
    first = r.attempts[0] if r.attempts else None
    extra = ""
    if first is not None and first.blocked_calls:
        extra = f" blocked: {', '.join(first.blocked_calls)}"
    reason = f" — {first.reason}" if first is not None and first.reason and r.outcome != "pass" else ""
    return f"{r.sample_id} [{r.kind}/{r.split}] {r.outcome} ({r.change}) {costs}{extra}{reason}"


@regress.command("run")
@click.argument("suite", type=click.Path(path_type=Path))
@click.option("--target", help="Python agent: module:function taking a ReplayContext.")
@click.option("--endpoint", help="HTTP agent: URL taking one POST per user turn.")
@click.option("--reset-url", help="HTTP: POSTed before every sample to reset the agent's state.")
@click.option("--repeat", type=int, default=1, show_default=True, help="Attempts per sample; all are kept.")
@click.option("--retrieval", type=click.Choice(["include", "fixed"]), default="include", show_default=True)
@click.option("--purpose", type=click.Choice(["evaluate", "debug"]), default="evaluate", show_default=True)
@click.option(
    "--split", type=click.Choice(["debug", "acceptance"]), default=None, help="Run only this split."
)
@click.option("--sample", "sample_ids", multiple=True, help="Run only this sample (repeatable).")
@click.option(
    "--judge-model", envvar="TRACEJUDGE_JUDGE_MODEL", help="Judge model (env TRACEJUDGE_JUDGE_MODEL)."
)
@click.option(
    "--judge-base-url", envvar="TRACEJUDGE_JUDGE_BASE_URL", help="Judge endpoint (else OPENAI_BASE_URL)."
)
@click.option(
    "--agent-cost-per-mtok", nargs=2, type=float, default=(0.0, 0.0), help="Agent USD per M in/out tokens."
)
@click.option(
    "--judge-cost-per-mtok", nargs=2, type=float, default=(0.0, 0.0), help="Judge USD per M in/out tokens."
)
@click.option("--compare", "compare_with", help="Run id to compare with (default: the latest run).")
@click.option(
    "--runs",
    "runs_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Folder of run records (default SUITE/runs; a bundled example's go to .tracejudge/runs/).",
)
@click.option(
    "--gate", type=click.Choice(["none", "regressed", "failing"]), default="none", show_default=True
)
@click.option("--json", "as_json", is_flag=True, help="Print the run record as JSON.")
@pass_app
@handle_errors
def run_cmd(
    app: App,
    suite: Path,
    target: str | None,
    endpoint: str | None,
    reset_url: str | None,
    repeat: int,
    retrieval: str,
    purpose: str,
    split: str | None,
    sample_ids: tuple[str, ...],
    judge_model: str | None,
    judge_base_url: str | None,
    agent_cost_per_mtok: tuple[float, float],
    judge_cost_per_mtok: tuple[float, float],
    compare_with: str | None,
    runs_dir: Path | None,
    gate: str,
    as_json: bool,
) -> None:
    """Replay the suite against the agent (state reset per sample, mocked tools), score each attempt
    with hard checks plus the judge, store the run in SUITE/runs/ (or --runs DIR) and compare with the
    previous run there. A suite bundled with tracejudge is never written to: its runs go to
    .tracejudge/runs/<example>-<suite>/."""
    if bool(target) == bool(endpoint):
        raise InputError("give exactly one of --target and --endpoint", hint="e.g. --target my_agent:answer")
    runs, note = runs_folder(suite, runs_dir)
    if note:
        app.err.print(escape(note), soft_wrap=True)
    loaded = load_suite(suite, runs_dir=runs)
    options = ReplayOptions(
        retrieval="fixed" if retrieval == "fixed" else "include",
        repeat=repeat,
        purpose="debug" if purpose == "debug" else "evaluate",
        judge=_judge_config(judge_model, judge_base_url, judge_cost_per_mtok),
        agent_input_cost_per_mtok=agent_cost_per_mtok[0],
        agent_output_cost_per_mtok=agent_cost_per_mtok[1],
        compare_with=compare_with,
        split=split,
        sample_ids=sample_ids,
    )
    record = _replay(loaded, target, endpoint, reset_url, options)
    path = write_run(suite, record, runs_dir=runs)
    app.show(
        as_json, {**record.model_dump(mode="json"), "path": str(path)}, lambda: _render_run(app, record, path)
    )
    exit_unless(not any(_GATES[gate](r) for r in record.samples))


# What fails a run under each --gate (exit 1 after the run is stored and shown).
_GATES: dict[str, Callable[[SampleRunResult], bool]] = {
    "none": lambda _r: False,
    "regressed": lambda r: r.change == "regressed",
    "failing": lambda r: r.outcome != "pass",
}


def _judge_config(
    model: str | None, base_url: str | None, cost_per_mtok: tuple[float, float]
) -> JudgeConfig | None:
    if not model:
        return None
    return JudgeConfig(
        model=model,
        base_url=base_url,
        input_cost_per_mtok=cost_per_mtok[0],
        output_cost_per_mtok=cost_per_mtok[1],
    )


def _replay(
    loaded: Suite, target: str | None, endpoint: str | None, reset_url: str | None, options: ReplayOptions
) -> SuiteRun:
    """Run the suite against the Python target or, closing it after, the HTTP endpoint."""
    if target:
        return run_suite(loaded, load_target(target), target_name=target, options=options)
    assert endpoint is not None
    http = HttpTarget(endpoint, reset_url=reset_url)
    try:
        return run_suite(loaded, http, target_name=http.name, options=options)
    finally:
        http.close()


def _render_run(app: App, record: SuiteRun, path: Path) -> None:
    app.console.print(
        f"run {record.run_id} ({record.retrieval} retrieval, repeat {record.repeat}, judge "
        f"{record.judge_model or 'none: criteria indeterminate'}) vs {record.previous_run_id or '-'}"
    )
    for r in record.samples:
        app.console.print(escape(_line(r)))
    summary = ", ".join(f"{k} {v}" for k, v in record.summary.items())
    app.console.print(f"{summary}; cost ${record.cost_usd:.4f}; stored {escape(str(path))}")
