"""``tracejudge demo [score|calibrate|regress]``: the bundled examples end to end, offline."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys
import threading
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.table import Table

from tracejudge._bundled import example_module, find_example
from tracejudge._demo import DemoReport, find_examples, run_demo
from tracejudge._demo_loops import (
    RegressDemoReport,
    calibrate_setup,
    demo_workdir,
    restaurant_judge_rules,
    run_regress_demo,
    score_setup,
)
from tracejudge.cli._app import App, handle_errors, pass_app, print_json
from tracejudge.cli._safe import escape


def _verdict(verdict: str | None, cause: str | None) -> str:
    if verdict is None:
        return "-"
    return f"{verdict} ({cause})" if cause else verdict


def _rel(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def render(app: App, report: DemoReport) -> None:
    app.console.print(_triage_table(report))
    for r in report.rows:
        app.console.print(f"[bold]{escape(r.ticket or r.scenario)}[/bold] {escape(r.summary)}")
    s = report.summary
    colour = "green" if report.ok else "red"
    app.console.print(
        f"\n[{colour}]{s.get('ok', 0)} of {s.get('n', 0)} scenarios got their expected verdict[/{colour}]"
    )
    if report.rows:
        _explore_hint(app, report)


def _triage_table(report: DemoReport) -> Table:
    # Compact enough for an 80-column terminal without cutting a scenario name or verdict.
    table = Table(title="tracejudge demo: triage", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    for name in ("scenario", "ticket", "expected", "actual", "result"):
        table.add_column(name, overflow="fold")
    for r in report.rows:
        table.add_row(
            escape(r.scenario),
            escape(r.ticket or "-"),
            escape(_verdict(r.expected_verdict, r.expected_cause)),
            escape(_verdict(r.verdict, r.cause)),
            "[green]ok[/green]" if r.ok else "[red]WRONG[/red]",
        )
    return table


def _explore_hint(app: App, report: DemoReport) -> None:
    # Point at a fault rather than the healthy run: that is the trace worth opening.
    first = next((r for r in report.rows if r.verdict not in (None, "no_fault")), report.rows[0])
    # The copies the demo wrote into the working directory, when it did: the same paths whether
    # tracejudge runs from a checkout or an installed package.
    base = Path(report.files) if report.files else Path(report.examples)
    ticket = escape(_rel(str(base / "tickets" / Path(first.ticket_path).name)))
    store = escape(report.store)
    manifest = escape(_rel(str(base / "manifest.jsonl")))
    copied = (
        f"the example's tickets, feedback and manifest: {escape(_rel(str(base)))}/\n" if report.files else ""
    )
    app.console.print(
        f"{copied}explore:\n"
        f"  tracejudge --store {store} traces show {first.trace_id}\n"
        f"  tracejudge --store {store} triage --ticket {ticket} --manifest {manifest}",
        soft_wrap=True,
    )


DEMO_FILES = Path(".tracejudge") / "demo" / "procurement"
"""Where ``tracejudge demo`` copies the example's tickets, feedback and manifest (under the working
directory, as the store): the README's commands name these files."""

_EXAMPLES_HELP = "The example folder, or a checkout's examples/ (default: the bundled copy)."


def _examples_option(f: Any) -> Any:
    return click.option(
        "--examples", type=click.Path(path_type=Path, file_okay=False), default=None, help=_EXAMPLES_HELP
    )(f)


def _out_option(f: Any) -> Any:
    return click.option(
        "--out",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Work folder for the store, suite and runs (default: a new .tracejudge/demo/NAME-TIME/).",
    )(f)


@click.group("demo", invoke_without_command=True)
@_examples_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def demo(ctx: click.Context, examples: Path | None, as_json: bool) -> None:
    """Run the bundled procurement agent through every fault scenario and triage each ticket.

    Offline: starts the OTLP receiver and a scripted OpenAI-compatible model on loopback, traces
    the agent into the store, then localizes every ticket. The positive-feedback tickets' traces are
    stored too, and the example's tickets, feedback and manifest copied to .tracejudge/demo/procurement/
    for the commands to run next (regress build, triage, mcp). Exit 0 when every scenario gets its
    expected verdict, 1 otherwise. `demo score`, `demo calibrate` and `demo regress` run the other
    bundled examples the same way.
    """
    # The examples may live inside the installed package: the demos never write bytecode there.
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    ctx.call_on_close(lambda: setattr(sys, "dont_write_bytecode", before))
    if ctx.invoked_subcommand is not None:
        return
    ctx.invoke(_triage_demo, examples=examples, as_json=as_json)


@pass_app
@handle_errors
def _triage_demo(app: App, examples: Path | None, as_json: bool) -> None:
    folder = find_examples(examples)
    report = run_demo(
        app.store_url, app.store, folder, files=DEMO_FILES, progress=lambda m: app.err.print(escape(m))
    )
    if as_json:
        print_json(report.model_dump(mode="json") | {"ok": report.ok})
    else:
        render(app, report)
    raise SystemExit(0 if report.ok else 1)


def _run_command(args: list[str]) -> int:
    """Run a real tracejudge command in this process (its own output, its exit code)."""
    from tracejudge.cli import cli

    try:
        code = cli.main(args, prog_name="tracejudge", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code if isinstance(code, int) else 0


def _run_json(args: list[str]) -> tuple[int, Any]:
    """Run a real tracejudge command with --json in this process; its exit code and parsed JSON."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = _run_command([*args, "--json"])
    text = buffer.getvalue()
    try:
        return code, json.loads(text)
    except ValueError:
        return code, {"output": text}


@demo.command("score")
@_examples_option
@_out_option
@click.option("--json", "as_json", is_flag=True, help="Print score's JSON.")
@pass_app
@handle_errors
def demo_score(app: App, examples: Path | None, out: Path | None, as_json: bool) -> None:
    """Score the restaurant example's fourteen traces with its rubric and a scripted judge, offline.

    Runs `tracejudge score --rubric rubric.yaml --manifest manifest.jsonl` on a store in the work
    folder; expect 7 pass, 6 fail, 1 indeterminate. Exit code: score's."""
    folder = find_example("restaurant", examples)
    work = demo_workdir(out, "score")
    app.err.print(f"restaurant example: {escape(str(folder))}; writing under {escape(str(work))}")
    with score_setup(folder, work) as s:
        code = _run_command(
            [
                "--store",
                s.store_url,
                "score",
                "--rubric",
                str(folder / "rubric.yaml"),
                "--manifest",
                str(folder / "manifest.jsonl"),
                *(["--json"] if as_json else []),
            ]
        )
    app.err.print(
        f"store: {escape(s.store_url)}\nexplore:\n  tracejudge --store {escape(s.store_url)} report --out "
        f"{escape(str(work / 'report.html'))}\n  tracejudge --store {escape(s.store_url)} audit",
        soft_wrap=True,
    )
    raise SystemExit(code)


@demo.command("calibrate")
@_examples_option
@_out_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON: calibrate's report per rubric.")
@pass_app
@handle_errors
def demo_calibrate(app: App, examples: Path | None, out: Path | None, as_json: bool) -> None:
    """Calibrate the calibration example's two rubrics against its labels with a scripted judge, offline.

    Runs `tracejudge calibrate --rubric R --labels labels.jsonl` for rubric-support.yaml (a judge
    stricter than the labels) and rubric-correctness.yaml (one that agrees). Exit code: the worst
    of the two."""
    folder = find_example("calibration", examples)
    work = demo_workdir(out, "calibrate")
    app.err.print(f"calibration example: {escape(str(folder))}; writing under {escape(str(work))}")
    codes = []
    reports: dict[str, Any] = {}
    with calibrate_setup(folder, work) as s:
        for rubric in ("rubric-support.yaml", "rubric-correctness.yaml"):
            args = ["--store", s.store_url, "calibrate", "--rubric", str(folder / rubric)]
            args += ["--labels", str(folder / "labels.jsonl")]
            if as_json:
                code, reports[rubric] = _run_json(args)
            else:
                app.err.print(f"\n[bold]calibrate --rubric {rubric}[/bold]")
                code = _run_command(args)
            codes.append(code)
    if as_json:
        print_json({"workdir": str(work), "store": s.store_url, "rubrics": reports})
    app.err.print(f"store: {escape(s.store_url)}", soft_wrap=True)
    raise SystemExit(max(codes))


def render_regress(app: App, report: RegressDemoReport) -> None:
    first, second = report.runs
    app.console.print(_regress_table(report))
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(report.kinds.items()))
    app.console.print(f"built {escape(report.suite)} ({escape(kinds)})")
    if report.check_ok:
        app.console.print("regress check: [green]no violations[/green]")
    for v in report.violations:
        app.console.print(f"regress check: [red]{escape(v)}[/red]")
    n_fail = sum(s.outcome != "pass" for s in first.samples)
    regressed = sum(s.change == "regressed" for s in second.samples)
    colour = "green" if report.ok else "red"
    app.console.print(
        f"[{colour}]agent failed {n_fail} of {len(first.samples)} samples; agent_fixed fixed "
        f"{len(report.fixed)} of them, {regressed} regressed[/{colour}]"
    )
    target = f"{report.target_module}:agent_fixed" if report.target_module else "MODULE:FUNCTION"
    app.console.print(
        "runs: " + ", ".join(escape(r.path) for r in report.runs) + "\nagain by hand (with "
        "`tracejudge demo model` serving the scripted model and judge):\n"
        f"  tracejudge regress check {escape(report.suite)}\n"
        f"  tracejudge regress run {escape(report.suite)} --target {escape(target)} --judge-model judge-mini",
        soft_wrap=True,
    )


def _regress_table(report: RegressDemoReport) -> Table:
    """One row per sample: its outcome under the agent, then under the fix, and the change."""
    first, second = report.runs
    after = {s.sample_id: s for s in second.samples}
    table = Table(
        title="tracejudge demo regress: agent, then agent_fixed",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
    )
    for name in ("sample", "kind", "agent", "agent_fixed", "change"):
        table.add_column(name, overflow="fold")
    for s in first.samples:
        a = after.get(s.sample_id)
        change = a.change if a else "-"
        colour = "green" if change in ("fixed", "still_passing") else "red"
        table.add_row(
            escape(s.sample_id),
            escape(s.kind),
            escape(s.outcome),
            escape(a.outcome if a else "-"),
            f"[{colour}]{escape(change)}[/{colour}]",
        )
    return table


@demo.command("regress")
@_examples_option
@_out_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def demo_regress(app: App, examples: Path | None, out: Path | None, as_json: bool) -> None:
    """The procurement example's regression loop in one offline command.

    Records the example's traces, builds a suite from its tickets (`regress build`), checks it
    (`regress check`), replays the deployed agent and then the fixed one (`regress run`) against a
    scripted model and judge started in this process. Everything goes to the work folder; the
    bundled suite is never written to. Exit 0 when the fix fixes every failing sample and regresses
    none, 1 otherwise."""
    folder = find_examples(examples)
    work = demo_workdir(out, "regress")
    report = run_regress_demo(folder, work, progress=lambda m: app.err.print(escape(m)))
    app.show(as_json, report.model_dump(mode="json"), lambda: render_regress(app, report))
    raise SystemExit(0 if report.ok else 1)


@demo.command("model")
@_examples_option
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="Loopback port (default: a free one).")
@pass_app
@handle_errors
def demo_model(app: App, examples: Path | None, port: int) -> None:
    """Serve the procurement example's scripted model and judge on loopback until Ctrl-C.

    For running the regression loop's steps by hand: point OPENAI_BASE_URL at the address printed,
    then `regress check` / `regress run --target ...regress:agent --judge-model judge-mini`."""
    from tracejudge._demo import load_example
    from tracejudge.testing.openai_server import ScriptedOpenAIServer

    folder = find_examples(examples)
    regress_mod = importlib.import_module(load_example(folder).__name__ + ".regress")
    module = example_module(folder)
    suite = folder / "suite"
    restaurant = find_example("restaurant")
    # The restaurant judge answers only its rubric's model, so both examples' scripts serve side by side.
    rules = [*restaurant_judge_rules(restaurant), *regress_mod.replay_model_rules()]
    with ScriptedOpenAIServer(rules, port=port) as model:
        target = escape(f"{module}.regress" if module else "MODULE")
        run = f"tracejudge regress run {escape(str(suite))} --target {target}"
        score = (
            f"tracejudge --store STORE score --rubric {escape(str(restaurant / 'rubric.yaml'))}"
            f" --manifest {escape(str(restaurant / 'manifest.jsonl'))}"
        )
        app.console.print(
            f"scripted model and judge (gpt-4.1-nano, judge-mini) at {model.base_url}; Ctrl-C stops it\n"
            f"  export OPENAI_BASE_URL={model.base_url}\n"
            f"  {run}:agent --judge-model judge-mini\n"
            f"  {run}:agent_fixed --judge-model judge-mini\n"
            f"and the restaurant example's judge, for the store `tracejudge demo score` leaves (STORE):\n"
            f"  {score}",
            soft_wrap=True,
        )
        sys.stdout.flush()  # the address must reach a pipe or file now, not when the server stops
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            app.err.print("stopped")
