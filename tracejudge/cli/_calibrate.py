"""``tracejudge calibrate``: the judge against people's labels; ``calibrate sample``: what to label."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from tracejudge.audit import (
    CalibrateOptions,
    LabellingSample,
    Queued,
    calibrate,
    labelling_sample,
    langfuse_labels,
    load_labels,
    queue_for_annotation,
)
from tracejudge.checks import read_manifest
from tracejudge.cli._app import App, handle_errors, print_json
from tracejudge.cli._safe import escape
from tracejudge.judge import load_rubric
from tracejudge.schema import Agreement, CalibrationReport

if TYPE_CHECKING:
    from tracejudge.write import LangfuseCredentials


def _fraction(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not 0 < value < 1:
        raise click.BadParameter("give a fraction in (0, 1), e.g. 0.3")
    return value


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _agreement_line(title: str, a: Agreement) -> str:
    ci = f" [{a.kappa_ci[0]:.2f}, {a.kappa_ci[1]:.2f}]" if a.kappa_ci else ""
    return (
        f"{title}: n {a.n}, accuracy {_pct(a.accuracy)}, kappa {_num(a.kappa)}{ci} ({a.interpretation}),"
        f" weighted kappa {_num(a.weighted_kappa)}, indeterminate {a.indeterminate}"
    )


def _header(c: Console, r: CalibrationReport) -> None:
    c.print(
        f"[bold]calibration {r.calibration_id}[/bold]"
        f"  rubric {escape(r.rubric_name)} v{escape(r.rubric_version)}"
        f"  judge {escape(r.judge_model or '-')}  labels {escape(r.labels_source)}"
    )
    for skipped in r.labels_skipped:
        c.print(f"[yellow]label not read:[/yellow] {escape(skipped)}")


def _criteria_beside_labels(c: Console, r: CalibrationReport) -> None:
    side = Table(
        "rubric grades", "threshold", "shared with the labels' definition", title="criteria vs labels"
    )
    for cov in r.criteria:
        mark = "" if cov.covered is None else ("" if cov.covered else "[red]not in the definition[/red] ")
        side.add_row(
            f"{escape(cov.name)}: {escape(cov.description)}",
            "-" if cov.threshold is None else f"{cov.threshold:g}",
            mark + escape(", ".join(cov.shared_words) or "-"),
        )
    c.print(side)
    c.print(
        "labels' definition: " + (escape(r.definition) if r.definition else "[yellow](none given)[/yellow]")
    )


_DIRECTION = {"lenient": "more than people: lenient", "strict": "fewer than people: strict", "even": "even"}


def _agreement(c: Console, r: CalibrationReport) -> None:
    where = "held-out items" if r.evaluated_on == "holdout" else "all items (none held out)"
    c.print(f"[bold]{_agreement_line('on ' + where, r)}[/bold]")
    if r.tuning is not None:
        c.print(_agreement_line("on tuning items", r.tuning))
    c.print(
        f"judge pass rate {_pct(r.judge_pass_rate)} vs labels {_pct(r.label_pass_rate)}"
        f" ({_DIRECTION.get(r.bias or '', '-')})"
    )
    cf = r.confusion
    conf = Table("", "label pass", "label fail", title="confusion")
    conf.add_row("judge pass", str(cf.true_pass), f"[red]{cf.false_pass} false pass[/red]")
    conf.add_row("judge fail", f"[red]{cf.false_fail} false fail[/red]", str(cf.true_fail))
    c.print(conf)


def _flags(c: Console, r: CalibrationReport) -> None:
    for f in r.flags:
        c.print(f"[yellow]! {escape(f)}[/yellow]")
    if r.contaminated:
        c.print(f"[yellow]{len(r.contaminated)} holdout-bucket items were already used for tuning[/yellow]")


def _raters(c: Console, r: CalibrationReport) -> None:
    if r.raters is None:
        return
    ra = r.raters
    per = ", ".join(f"{escape(k)} {_num(v)}" for k, v in ra.judge_kappa.items())
    c.print(
        f"raters {', '.join(ra.raters)}: agreement with each other kappa {_num(ra.ceiling_kappa)}"
        f" on {ra.ceiling_n} items (the ceiling); judge vs each: {per}"
    )


def _sweep(c: Console, r: CalibrationReport) -> None:
    if r.sweep is None or not r.sweep.points:
        return
    s = r.sweep
    pts = "  ".join(f"{p.threshold:g}:{_num(p.kappa)}" for p in s.points if p.threshold == int(p.threshold))
    c.print(f"threshold sweep (kappa on tuning items): {pts}")
    hk = (
        f", held-out kappa there {_num(s.holdout_kappa_at_best)}"
        if s.holdout_kappa_at_best is not None
        else ""
    )
    cur = ", ".join(f"{k} {v:g}" for k, v in s.rubric_thresholds.items())
    c.print(f"best threshold {s.best_threshold} (kappa {_num(s.best_kappa)}{hk}); rubric now: {cur}")


def _comparison(c: Console, r: CalibrationReport) -> None:
    if r.comparison is None:
        return
    m = r.comparison
    c.print(f"[bold]{_agreement_line('second judge ' + escape(m.model), m.agreement)}[/bold]")
    c.print(
        f"between the two judges kappa {_num(m.between_models_kappa)};"
        f" shared errors {len(m.shared_errors)},"
        f" only primary {len(m.only_primary_errors)}, only {escape(m.model)} {len(m.only_other_errors)}:"
        f" {escape(m.reading)}"
    )


def _disagreements(c: Console, r: CalibrationReport) -> None:
    wrong = [
        i
        for i in r.items
        if i.judge in ("pass", "fail") and i.label in ("pass", "fail") and i.judge != i.label
    ]
    if wrong:
        t = Table("item", "split", "label", "judge", "reason", title="disagreements")
        for i in wrong[:30]:
            t.add_row(escape(i.id), i.split, i.label, i.judge, escape(i.reason[:100]))
        c.print(t)


_SECTIONS: tuple[Callable[[Console, CalibrationReport], None], ...] = (
    _header,
    _criteria_beside_labels,
    _agreement,
    _flags,
    _raters,
    _sweep,
    _comparison,
    _disagreements,
)
"""The report's sections, in the order a person reads them: what is graded before how well."""


def render_calibration(app: App, r: CalibrationReport) -> None:
    """The calibration report for a person: what is graded before how well."""
    for section in _SECTIONS:
        section(app.console, r)


@click.group("calibrate", invoke_without_command=True)
@click.option("--rubric", "rubric_path", type=click.Path(path_type=Path), default=None, help="Rubric YAML.")
@click.option(
    "--labels",
    "labels_arg",
    default=None,
    metavar="LABELS.jsonl|langfuse:SCORE",
    help="Labels JSONL ({id, input, output, label}), or langfuse:SCORE_NAME for annotation scores"
    " on pulled traces.",
)
@click.option(
    "--definition",
    type=click.Path(path_type=Path),
    default=None,
    help="Side file: what the labels' pass means.",
)
@click.option(
    "--holdout",
    type=float,
    default=None,
    callback=_fraction,
    metavar="FRACTION",
    help="Keep this fraction aside (by id hash) and report on items never used for tuning.",
)
@click.option("--manifest", type=click.Path(path_type=Path), default=None, help="Index manifest (ACL check).")
@click.option("--compare-model", default=None, metavar="MODEL", help="Run a second judge model side by side.")
@click.option("--rater", default=None, help="Measure against this rater (default: the first in the file).")
@click.option(
    "--agent-prompt",
    "agent_prompts",
    multiple=True,
    metavar="NAME@VERSION",
    help="Agent prompt the labels cover.",
)
@click.option(
    "--band", type=float, default=2.0, show_default=True, help="Borderline band below the threshold."
)
@click.option("--label-threshold", type=float, default=None, help="Numeric Langfuse scores pass at or above.")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--no-cache", is_flag=True, help="Call the judge even when an identical reply is cached.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@handle_errors
def calibrate_cmd(
    ctx: click.Context,
    rubric_path: Path | None,
    labels_arg: str | None,
    definition: Path | None,
    holdout: float | None,
    manifest: Path | None,
    compare_model: str | None,
    rater: str | None,
    agent_prompts: tuple[str, ...],
    band: float,
    label_threshold: float | None,
    concurrency: int,
    no_cache: bool,
    as_json: bool,
) -> None:
    """Measure the judge against people's labels: kappa, leniency, confusion, threshold, raters."""
    if ctx.invoked_subcommand is not None:
        return
    if rubric_path is None or labels_arg is None:
        raise click.UsageError("give --rubric RUBRIC.yaml and --labels LABELS.jsonl (or `calibrate sample`)")
    app = ctx.find_object(App)
    assert app is not None
    rubric = load_rubric(rubric_path)
    if labels_arg.startswith("langfuse:"):
        labels = langfuse_labels(app.store, labels_arg.removeprefix("langfuse:"), threshold=label_threshold)
    else:
        labels = load_labels(labels_arg, definition=definition)
    options = CalibrateOptions(
        holdout=holdout,
        compare_model=compare_model,
        rater=rater,
        band=band,
        concurrency=concurrency,
        use_cache=not no_cache,
        agent_prompts=agent_prompts,
        manifest=read_manifest(manifest) if manifest else None,
    )
    report = calibrate(rubric, labels, app.store, options=options)
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        render_calibration(app, report)


@calibrate_cmd.command("sample")
@click.option("--n", "n", type=click.IntRange(min=1), default=40, show_default=True, help="Traces to pick.")
@click.option("--run", "run_id", default=None, metavar="RUN_ID", help="Scoring run (default: the newest).")
@click.option(
    "--rubric", "rubric_path", type=click.Path(path_type=Path), default=None, help="Rubric (thresholds)."
)
@click.option(
    "--out", type=click.Path(path_type=Path), default=None, help="Write the JSONL here (default: stdout)."
)
@click.option(
    "--queue", "queue_id", default=None, metavar="QUEUE_ID", help="Also add them to a Langfuse queue."
)
@click.option("--json", "as_json", is_flag=True, help="Print the sample summary as JSON.")
@click.pass_context
@handle_errors
def sample_cmd(
    ctx: click.Context,
    n: int,
    run_id: str | None,
    rubric_path: Path | None,
    out: Path | None,
    queue_id: str | None,
    as_json: bool,
) -> None:
    """Pick traces for people to label: stratified by score band, heavy near the threshold."""
    app = ctx.find_object(App)
    assert app is not None
    rubric = load_rubric(rubric_path) if rubric_path else None
    credentials = None
    if queue_id:
        from tracejudge.write import LangfuseCredentials

        # Before any work: a missing Langfuse setting is a usage error, not a half-done sample.
        credentials = LangfuseCredentials.from_env()
    sample = labelling_sample(app.store, n, run_id=run_id, rubric=rubric)
    lines = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in sample.rows)
    if out is not None:
        out.write_text(lines, encoding="utf-8")
    queued = _queue(credentials, queue_id, sample) if queue_id else None
    summary = _sample_summary(sample, out, queued)
    if as_json and out is None:
        summary["rows"] = list(sample.rows)
    app.show(as_json, summary, lambda: _render_sample(app, sample, lines, out, queued))


def _queue(credentials: LangfuseCredentials | None, queue_id: str, sample: LabellingSample) -> Queued | None:
    from tracejudge.write import LangfuseApi

    if credentials is None:
        return None
    with LangfuseApi(credentials) as api:
        return queue_for_annotation(api, queue_id, [r["trace_id"] for r in sample.rows])


def _sample_summary(sample: LabellingSample, out: Path | None, queued: Queued | None) -> dict[str, Any]:
    return {
        "report_id": sample.report_id,
        "run_id": sample.run_id,
        "n": len(sample.rows),
        "bands": sample.bands,
        "available": sample.available,
        "out": str(out) if out else None,
        "queued": 0 if queued is None else queued.queued,
        "queue": None
        if queued is None
        else {"id": queued.queue_id, "queued": queued.queued, "already": queued.already},
        "still_arriving": list(sample.still_arriving),
    }


def _render_sample(
    app: App, sample: LabellingSample, lines: str, out: Path | None, queued: Queued | None
) -> None:
    """The rows on stdout unless written to a file; what was picked and what to do next on stderr."""
    if out is None:
        sys.stdout.write(lines)
    bands = ", ".join(f"{k} {v}/{sample.available[k]}" for k, v in sample.bands.items())
    app.err.print(f"picked {len(sample.rows)} traces of run {sample.run_id}: {bands}")
    if sample.still_arriving:
        app.err.print(
            f"left out {len(sample.still_arriving)} trace(s) that may still be arriving (their answer maybe a"
            " draft the user never got): sample again once they have arrived"
        )
    if out is not None:
        app.err.print(
            f"fill in `label` (pass/fail) and `rater` in {out}, then: tracejudge calibrate --labels {out}"
        )
    if queued is not None:
        already = f" ({queued.already} were queued already)" if queued.already else ""
        app.err.print(
            f"queued {queued.queued} traces in Langfuse annotation queue {escape(queued.queue_id)}{already}"
        )
