"""``tracejudge score``: hard checks plus an LLM judge over stored traces, recorded as a run."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import click

from tracejudge._errors import InputError, StoreDamageError
from tracejudge.cli._app import App, exit_unless, handle_errors, json_element, pass_app, print_json_elements
from tracejudge.cli._gc import collected_after_start_up
from tracejudge.cli._safe import escape
from tracejudge.cli._when import FROM_HELP, TO_HELP, parse_when
from tracejudge.judge import load_rubric
from tracejudge.runs import ScoreOptions, ScoreOutcome, item_json, resume_store_arg, score_traces
from tracejudge.schema import GroupSummary, ItemResult, RunRecord, RunSummary
from tracejudge.store import resolve_store_url, resolve_trace_id
from tracejudge.write import target_names, targets_help

if TYPE_CHECKING:
    from rich.progress import Progress
    from rich.table import Table

    from tracejudge.report import RunMetrics


def _fraction(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not 0 < value <= 1:
        raise click.BadParameter("give a fraction in (0, 1], e.g. 0.05")
    return value


def _gate_rate(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not 0 <= value <= 1:
        raise click.BadParameter(f"give the pass rate as a fraction in [0, 1], e.g. 0.9 (not {value:g})")
    return value


def _renamed(old: str, new: str, old_value: str | None, new_value: str | None) -> datetime | None:
    """The time given as ``new``, or as its deprecated spelling ``old`` (kept so scripts do not break)."""
    if old_value is None:
        return parse_when(new_value, option=new)
    if new_value is not None:
        raise InputError(f"{old} and {new} are the same option", hint=f"give {new} only")
    click.echo(f"warning: {old} is deprecated; use {new} (the same as in `collect`)", err=True)
    return parse_when(old_value, option=old)


def _rate(g: GroupSummary) -> str:
    return "-" if g.pass_rate is None else f"{g.pass_rate:.0%}"


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def _table(title: str, groups: dict[str, GroupSummary], *, cost: bool = False) -> Table:
    from rich.table import Table

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


_COLOUR = {"pass": "green", "fail": "red", "indeterminate": "yellow"}
_SHOWN = 50


def _render(app: App, run: RunRecord, items: list[ItemResult]) -> None:
    p = run.provenance
    app.console.print(
        f"[bold]run {run.run_id}[/bold]  rubric {escape(p.rubric_name)} v{escape(p.rubric_version)}"
        f"  judge {escape(p.judge_model or '-')} t={p.temperature}  status {run.status}"
    )
    if run.previous_run_id:
        app.console.print(f"previous run in this series: {run.previous_run_id}")
    if items:
        app.console.print(_item_table(items[:_SHOWN]))
    if len(items) > _SHOWN:
        app.console.print(f"… {len(items) - _SHOWN} more items (use --json for all)")
    s = run.summary
    app.console.print(_table("per criterion", s.criteria))
    if s.checks:
        app.console.print(_table("per check", s.checks))
    app.console.print(_table("per category", s.categories, cost=True))
    _render_totals(app, s)


def _item_table(items: list[ItemResult]) -> Table:
    from rich.table import Table

    verdicts = Table("trace", "category", "verdict", "reason")
    for item in items:
        verdicts.add_row(
            item.trace_id[:16],
            escape(item.category),
            f"[{_COLOUR[item.verdict]}]{item.verdict}[/]",
            escape(item.reason[:120]),
        )
    return verdicts


def _render_totals(app: App, s: RunSummary) -> None:
    o = s.overall
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
        # Counted per criterion (an item with two undecided criteria counts twice), as `reasons` in --json.
        reasons = ", ".join(f"{k} ×{v}" for k, v in s.reasons.items())
        app.console.print(f"indeterminate criteria by reason: {reasons}")
    if s.not_scored:
        app.console.print(f"[yellow]budget reached: {s.not_scored} selected items not scored[/yellow]")


class _ScoreProgress:
    """The progress bar on a terminal (pass/fail/indeterminate so far) and the optional
    Prometheus push of each item, fed by ``on_item`` while a run scores; ``started`` is called with
    the first item. Off a terminal there is no bar to draw (rich is not even imported): a line now
    and then instead (``every_s``)."""

    def __init__(
        self,
        app: App,
        rubric_name: str,
        total: int | None,
        *,
        started: Callable[[], None] | None = None,
        every_s: float = 0.0,
        label: str = "",
    ) -> None:
        self._app = app
        self._rubric = rubric_name
        self._started = started
        self._progress: Progress | None = None
        # Off a terminal (a CronJob's log, a file): a line every ``every_s`` seconds as items finish,
        # so that a worker's log shows it alive and how far it got, not nothing until the end.
        self._every_s = 0.0
        self._label = label or rubric_name
        self._began = self._next_line = time.monotonic()
        if not app.err_is_terminal():
            self._every_s = every_s
            self._next_line += every_s
        else:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("scoring"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[verdicts]}"),
                TimeElapsedColumn(),
                console=app.err,
                transient=True,
            )
            self._bar = self._progress.add_task("score", total=total, verdicts="")
        self._counts = {"pass": 0, "fail": 0, "indeterminate": 0}
        self._metrics: RunMetrics | None = None

    def __enter__(self) -> _ScoreProgress:
        from tracejudge.report import RunMetrics

        if self._progress is not None:
            self._progress.__enter__()
        self._metrics = RunMetrics.from_env()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._metrics is not None:
                self._metrics.close()
        finally:
            if self._progress is not None:
                self._progress.__exit__(None, None, None)

    def on_item(self, item: ItemResult) -> None:
        if self._started is not None:
            self._started()  # the run is under way: what its start made lives until the end
            self._started = None
        self._counts[item.verdict] += 1
        if self._progress is not None:
            verdicts = " ".join(f"{k} {v}" for k, v in self._counts.items())
            self._progress.update(self._bar, advance=1, verdicts=verdicts)
        elif self._every_s > 0 and (now := time.monotonic()) >= self._next_line:
            self._next_line = now + self._every_s
            c = self._counts
            self._app.err.print(
                escape(
                    f"scoring {self._label}: {sum(c.values())} scored here so far (pass {c['pass']}, fail"
                    f" {c['fail']}, indeterminate {c['indeterminate']}) in {now - self._began:.0f} s"
                ),
                soft_wrap=True,  # one line each in a log, whatever its width
            )
        if self._metrics is not None:
            self._metrics.item_scored(item, rubric=self._rubric)


class _RenderedItems:
    """Each item's ``--json`` text, rendered while the run's calls are out rather than all after the
    last reply (2,000 items: ~0.15 s of building, redacting and encoding between the last reply and the
    output); printed as the same text :func:`~tracejudge.cli.print_json` prints for the whole."""

    def __init__(self) -> None:
        self._rendered: dict[int, tuple[ItemResult, bytes | None]] = {}

    def add(self, item: ItemResult) -> None:
        # By identity: the outcome lists these very objects (a trace scored twice has two).
        self._rendered[id(item)] = (item, json_element(item_json(item), depth=2))

    def print(self, out: ScoreOutcome) -> bool:
        """Print the outcome's JSON with the items rendered ahead; False (nothing printed) when one was
        not rendered or needs the whole document's fallback encoding."""
        elements: list[bytes] = []
        for item in out.items:
            item_, text = self._rendered.get(id(item), (None, None))
            if item_ is not item or text is None:
                return False
            elements.append(text)
        return print_json_elements(out.json(items=False), "items", elements)


def _stored_trace_ids(app: App, given: tuple[str, ...]) -> tuple[str, ...]:
    """The stored traces ``--trace`` names (unique prefixes resolved); one that is not stored is an
    input error before any work, as in ``triage``."""
    ids = tuple(resolve_trace_id(app.store, t) for t in given)
    missing = [t for t in ids if not _stored(app, t)]
    if missing:
        raise InputError(
            f"no spans stored for trace {', '.join(missing)}",
            hint="collect it first (tracejudge collect otlp|file|langfuse|phoenix), or check the id with"
            " `tracejudge traces list`",
        )
    return ids


def _stored(app: App, trace_id: str) -> bool:
    try:
        return bool(app.store.get_spans(trace_id))
    except StoreDamageError:
        return True  # stored, and damaged: the run makes it an indeterminate item that says so


def _store_arg(url: str) -> str | None:
    """The ``--store`` a resume command names: the one this command was given, unless it is the
    environment's (or the default) — without its secrets (:func:`~tracejudge.runs.resume_store_arg`)."""
    return resume_store_arg(url, environment=resolve_store_url(None))


# What the resume command leaves out of the store's URL, and where PostgreSQL then reads it (no secret).
_PASSWORD_NOTE = "; the store's password is not printed: give it as PGPASSWORD or in ~/.pgpass"  # noqa: S105


def _password_left_out(url: str, command: str | None) -> bool:
    return urlsplit(url).password is not None and "--store" in (command or "")


def _render_outcome(app: App, out: ScoreOutcome, as_json: bool) -> None:
    """What went wrong beside the results, on stderr (so --json keeps stdout pure)."""
    for r in out.write_back:
        for f in r.failed[:5]:
            app.err.print(f"write-back {r.target} failed for {escape(f.key)}: {escape(f.reason)}")
    if out.write_back_pending:
        app.err.print(
            f"write-back: {out.write_back_pending} of the run's stored items are not written back yet —"
            " another worker is writing them, or run the command again to write them"
        )
    if out.waiting:
        minutes = math.ceil((out.waiting_s or 0) / 60)
        app.err.print(
            escape(
                f"{out.waiting} trace(s) still arriving, not scored yet (kept indeterminate, still_arriving;"
                f" the run is not done: status {out.run.status}); rerun in {minutes} min or later, or once"
                " they have arrived, to score them (items already scored are not scored again"
                f"{_PASSWORD_NOTE if _password_left_out(app.store_url, out.resume) else ''}):"
                f"\n  {out.resume}"
            ),
            soft_wrap=True,  # the command on one line, to copy whole
        )
    if out.run.summary.overall.n == 0:
        app.err.print("no traces were selected: check --trace/--name/--sample, or collect traces first")
    if out.gate is not None and not as_json:
        colour = "green" if out.gate.passed else "red"
        verdict = "passed" if out.gate.passed else "failed"
        app.err.print(f"[{colour}]gate {verdict}[/{colour}]: {escape(out.gate.reason)}")


def _render_run(app: App, out: ScoreOutcome) -> None:
    _render(app, out.run, list(out.items))
    for r in out.write_back:
        failed = f", {len(r.failed)} failed" if r.failed else ""
        app.console.print(f"write-back {r.target}: {r.written} written{failed}")


@click.command("score")
@click.option("--rubric", "rubric_path", required=True, type=click.Path(path_type=Path), help="Rubric YAML.")
@click.option(
    "--trace",
    "trace_ids",
    multiple=True,
    metavar="ID",
    help="Score this trace (repeatable; a unique id prefix will do).",
)
@click.option("--name", default=None, metavar="GLOB", help="Only traces whose name matches.")
@click.option("--from", "from_", default=None, metavar="T", help=FROM_HELP)
@click.option("--to", "to", default=None, metavar="T", help=TO_HELP)
# The names score had before --from/--to: hidden, still accepted, with a warning.
@click.option("--since", "since", default=None, hidden=True)
@click.option("--until", "until", default=None, hidden=True)
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
@click.option(
    "--concurrency", type=click.IntRange(min=1), default=ScoreOptions.concurrency, show_default=True
)
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
@click.option(
    "--run",
    "run_name",
    default=None,
    metavar="NAME",
    help="Share the run NAME with every worker started with it (PostgreSQL store): each item is scored"
    " once, a dead worker's items go to the others; the first worker's selection is the run's.",
)
@click.option(
    "--lease",
    "lease_s",
    type=click.FloatRange(min=1),
    default=ScoreOptions.lease_s,
    show_default=True,
    metavar="SECONDS",
    help="With --run: how soon the items of a worker that stopped renewing (it died) go to the others.",
)
@click.option(
    "--reconnect-timeout",
    "reconnect_s",
    type=click.FloatRange(min=0),
    default=ScoreOptions.reconnect_s,
    envvar="TRACEJUDGE_SCORE_RECONNECT_TIMEOUT",
    show_default=True,
    metavar="SECONDS",
    help="With --run: how long a worker waits for PostgreSQL to come back when it dropped the"
    " connection (a restart) before it exits 1 (env TRACEJUDGE_SCORE_RECONNECT_TIMEOUT; 0: at once).",
)
@click.option(
    "--progress-every",
    "progress_s",
    type=click.FloatRange(min=0),
    default=30.0,
    envvar="TRACEJUDGE_SCORE_PROGRESS_EVERY",
    show_default=True,
    metavar="SECONDS",
    help="Off a terminal (a log file, a CronJob's log): a line on stderr this often, as items finish,"
    " saying how many this process scored (env TRACEJUDGE_SCORE_PROGRESS_EVERY; 0: none).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_app
@handle_errors
def score(
    app: App,
    rubric_path: Path,
    trace_ids: tuple[str, ...],
    name: str | None,
    from_: str | None,
    to: str | None,
    since: str | None,
    until: str | None,
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
    run_name: str | None,
    lease_s: float,
    reconnect_s: float,
    progress_s: float,
    as_json: bool,
) -> None:
    """Score stored traces with a rubric: hard checks, then an LLM judge for the rest."""
    # No collection while the run starts, then start-up frozen out of every later one (cli._gc).
    with collected_after_start_up() as started:
        rubric = load_rubric(rubric_path)
        from_time = _renamed("--since", "--from", since, from_)
        to_time = _renamed("--until", "--to", until, to)
        options = ScoreOptions(
            concurrency=concurrency,
            repeat=repeat,
            budget_usd=budget_usd,
            budget_tokens=budget_tokens,
            use_cache=not no_cache,
            run_name=run_name,
            lease_s=lease_s,
            reconnect_s=reconnect_s,
        )
        trace_ids = _stored_trace_ids(app, trace_ids)
        rendered = _RenderedItems() if as_json else None
        label = f"run {run_name}" if run_name else rubric.name
        with _ScoreProgress(
            app, rubric.name, limit, started=started, every_s=progress_s, label=label
        ) as progress:
            out = score_traces(
                app.store,
                rubric,
                rubric_path=str(rubric_path),
                trace_ids=trace_ids,
                name=name,
                from_time=from_time,
                to_time=to_time,
                sample=sample,
                limit=limit,
                rerun_of=rerun_of,
                manifest_path=manifest,
                options=options,
                gate=gate,
                targets=targets,
                on_item=progress.on_item,
                in_quiet=rendered.add if rendered is not None else None,
                store_arg=_store_arg(app.store_url),
            )
        if rendered is None or not rendered.print(out):
            app.show(as_json, out.json(), lambda: _render_run(app, out))
        _render_outcome(app, out, as_json)
    exit_unless(not out.gate_failed)
