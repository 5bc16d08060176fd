"""``tracejudge score``: hard checks plus an LLM judge over stored traces, recorded as a run."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tracejudge._errors import InputError
from tracejudge.checks import read_manifest
from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.judge import load_rubric
from tracejudge.report import RunMetrics
from tracejudge.runs import (
    ScoreOptions,
    run_json,
    score_run_async,
    select_trace_ids,
    write_back,
)
from tracejudge.schema import GroupSummary, ItemResult, RunRecord
from tracejudge.write import target_names, targets_help


def _fraction(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not 0 < value <= 1:
        raise click.BadParameter("give a fraction in (0, 1], e.g. 0.05")
    return value


def _gate_rate(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not 0 <= value <= 1:
        raise click.BadParameter(f"give the pass rate as a fraction in [0, 1], e.g. 0.9 (not {value:g})")
    return value


def _rate(g: GroupSummary) -> str:
    return "-" if g.pass_rate is None else f"{g.pass_rate:.0%}"


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def _table(title: str, groups: dict[str, GroupSummary], *, cost: bool = False) -> Table:
    # Categories carry latency and tokens; criteria and checks carry repeat flips.
    extra = ("p95 ms", "tokens") if cost else ("flips",)
    table = Table("name", "n", "pass", "fail", "indet.", "pass rate", "mean", "range", *extra, title=title)
    for name, g in groups.items():
        rng = f"{g.min:g}-{g.max:g}" if g.min is not None and g.max is not None else "-"
        tail = (
            (_num(g.p95_latency_ms, ".0f"), str(g.input_tokens + g.output_tokens))
            if cost
            else (_num(g.flip_rate, ".0%"),)
        )
        table.add_row(
            escape(name),
            str(g.n),
            str(g.pass_),
            str(g.fail),
            str(g.indeterminate),
            _rate(g),
            _num(g.mean),
            rng,
            *tail,
        )
    return table


def _render(app: App, run: RunRecord, items: list[ItemResult]) -> None:
    s = run.summary
    o = s.overall
    p = run.provenance
    app.console.print(
        f"[bold]run {run.run_id}[/bold]  rubric {escape(p.rubric_name)} v{escape(p.rubric_version)}"
        f"  judge {escape(p.judge_model or '-')} t={p.temperature}  status {run.status}"
    )
    if run.previous_run_id:
        app.console.print(f"previous run in this series: {run.previous_run_id}")
    verdicts = Table("trace", "category", "verdict", "reason")
    colour = {"pass": "green", "fail": "red", "indeterminate": "yellow"}
    for item in items[:50]:
        verdicts.add_row(
            item.trace_id[:16],
            escape(item.category),
            f"[{colour[item.verdict]}]{item.verdict}[/]",
            escape(item.reason[:120]),
        )
    if items:
        app.console.print(verdicts)
    if len(items) > 50:
        app.console.print(f"… {len(items) - 50} more items (use --json for all)")
    app.console.print(_table("per criterion", s.criteria))
    if s.checks:
        app.console.print(_table("per check", s.checks))
    app.console.print(_table("per category", s.categories, cost=True))
    lat = "-" if o.p95_latency_ms is None else f"{o.p95_latency_ms:.0f} ms"
    app.console.print(
        f"items {o.n}: [green]{o.pass_} pass[/green], [red]{o.fail} fail[/red], "
        f"[yellow]{o.indeterminate} indeterminate[/yellow]; pass rate {_rate(o)}; p95 item latency {lat}"
    )
    app.console.print(
        f"judge calls {s.judge_calls}, cache hits {s.cache_hits}, tokens {o.input_tokens}+{o.output_tokens},"
        f" cost ${s.cost_usd:.4f}"
    )
    if s.reasons:
        app.console.print("indeterminate reasons: " + ", ".join(f"{k} ×{v}" for k, v in s.reasons.items()))
    if s.not_scored:
        app.console.print(f"[yellow]budget reached: {s.not_scored} selected items not scored[/yellow]")


@click.command("score")
@click.option("--rubric", "rubric_path", required=True, type=click.Path(path_type=Path), help="Rubric YAML.")
@click.option("--trace", "trace_ids", multiple=True, metavar="ID", help="Score this trace (repeatable).")
@click.option("--name", default=None, metavar="GLOB", help="Only traces whose name matches.")
@click.option("--since", type=click.DateTime(), default=None, help="Only traces starting at or after.")
@click.option("--until", type=click.DateTime(), default=None, help="Only traces starting before.")
@click.option(
    "--sample",
    type=float,
    default=None,
    callback=_fraction,
    metavar="FRACTION",
    help="Deterministic sample by trace-id hash: rubrics at the same rate score the same traces.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many traces.")
@click.option("--repeat", type=click.IntRange(min=1), default=None, help="Judge calls per item (stability).")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--manifest", type=click.Path(path_type=Path), default=None, help="Index manifest (ACL check).")
@click.option("--budget-usd", type=float, default=None, help="Stop launching items past this judge cost.")
@click.option("--budget-tokens", type=int, default=None, help="Stop launching items past this many tokens.")
@click.option("--no-cache", is_flag=True, help="Call the judge even when an identical reply is cached.")
@click.option(
    "--rerun", "rerun_of", default=None, metavar="RUN_ID", help="Score the traces of an earlier run."
)
@click.option(
    "--gate",
    type=float,
    default=None,
    callback=_gate_rate,
    metavar="RATE",
    help="Exit 1 when the pass rate is below RATE (0-1).",
)
@click.option(
    "--write-back",
    "targets",
    multiple=True,
    type=click.Choice(target_names("scores", "events")),
    help=f"Attach the scores to the traces ({targets_help('scores', 'events')}; repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def score(
    app: App,
    rubric_path: Path,
    trace_ids: tuple[str, ...],
    name: str | None,
    since: datetime | None,
    until: datetime | None,
    sample: float | None,
    limit: int | None,
    repeat: int | None,
    concurrency: int,
    manifest: Path | None,
    budget_usd: float | None,
    budget_tokens: int | None,
    no_cache: bool,
    rerun_of: str | None,
    gate: float | None,
    targets: tuple[str, ...],
    as_json: bool,
) -> None:
    """Score stored traces with a rubric: hard checks, then an LLM judge for the rest."""
    rubric = load_rubric(rubric_path)
    store = app.store
    if rerun_of is not None:
        old = store.get_run(rerun_of)
        if old is None:
            raise InputError(
                f"no run {rerun_of} in the store", hint="see the run ids printed by earlier runs"
            )
        trace_ids = tuple(i.trace_id for i in store.iter_score_items(rerun_of))
    selection = {
        k: v
        for k, v in {
            "trace_ids": list(trace_ids) or None,
            "name": name,
            "since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None,
            "sample": sample,
            "limit": limit,
        }.items()
        if v is not None
    }
    ids = select_trace_ids(
        store, trace_ids=trace_ids, name=name, since=since, until=until, sample=sample, limit=limit
    )
    if gate is not None:
        # Refused before any judge call: a gate needs a held-out calibration (DESIGN 2).
        from tracejudge.audit import require_gate_for_traces

        require_gate_for_traces(
            store,
            rubric,
            select_trace_ids(
                store, trace_ids=trace_ids, name=name, since=since, until=until, sample=sample, limit=limit
            ),
            rubric_path=str(rubric_path),
        )
    options = ScoreOptions(
        concurrency=concurrency,
        repeat=repeat,
        budget_usd=budget_usd,
        budget_tokens=budget_tokens,
        use_cache=not no_cache,
        manifest=read_manifest(manifest) if manifest else None,
        selection=selection,
        rerun_of=rerun_of,
    )
    with Progress(
        TextColumn("scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[verdicts]}"),
        TimeElapsedColumn(),
        console=app.err,
        transient=True,
        disable=not app.err.is_terminal,
    ) as progress:
        bar = progress.add_task("score", total=limit, verdicts="")
        counts = {"pass": 0, "fail": 0, "indeterminate": 0}
        metrics = RunMetrics.from_env()

        def on_item(item: ItemResult) -> None:
            counts[item.verdict] += 1
            progress.update(bar, advance=1, verdicts=" ".join(f"{k} {v}" for k, v in counts.items()))
            if metrics is not None:
                metrics.item_scored(item, rubric=rubric.name)

        try:
            run = asyncio.run(score_run_async(rubric, store, ids, options=options, on_item=on_item))
        finally:
            if metrics is not None:
                metrics.close()
    items = list(store.iter_score_items(run.run_id))
    reports = [write_back(t, run, items) for t in targets]
    gate_ok, gate_reason = _gate(run, gate) if gate is not None else (True, "")
    if as_json:
        data = run_json(run, items)
        data["write_back"] = [r.model_dump(mode="json") for r in reports]
        if gate is not None:
            data["gate"] = {"threshold": gate, "passed": gate_ok, "reason": gate_reason}
        print_json(data)
    else:
        _render(app, run, items)
        for r in reports:
            failed = f", {len(r.failed)} failed" if r.failed else ""
            app.console.print(f"write-back {r.target}: {r.written} written{failed}")
    for r in reports:
        for f in r.failed[:5]:
            app.err.print(f"write-back {r.target} failed for {escape(f.key)}: {escape(f.reason)}")
    if run.summary.overall.n == 0:
        app.err.print("no traces were selected: check --trace/--name/--sample, or collect traces first")
    if gate is not None and not as_json:
        colour = "green" if gate_ok else "red"
        app.err.print(f"[{colour}]gate {'passed' if gate_ok else 'failed'}[/{colour}]: {escape(gate_reason)}")
    if gate is not None and not gate_ok:
        raise SystemExit(1)


def _gate(run: RunRecord, gate: float) -> tuple[bool, str]:
    """Whether the run clears the gate, and why. Indeterminate items count against the pass rate, and a
    run that did not score every selected trace cannot pass: the unscored traces might have failed."""
    o = run.summary.overall
    if run.summary.not_scored:
        return False, (
            f"the budget stopped the run with {run.summary.not_scored} selected traces not scored;"
            " raise --budget-usd/--budget-tokens or select fewer traces"
        )
    if run.status != "complete":
        return False, f"the run ended {run.status}, not complete"
    if o.pass_rate is None:
        return False, "no items were scored"
    shown = f"pass rate {o.pass_rate:.1%} ({o.pass_} of {o.n}, {o.indeterminate} indeterminate)"
    if o.pass_rate >= gate:
        return True, f"{shown} is at or above {gate:.1%}"
    return False, f"{shown} is under {gate:.1%}"
