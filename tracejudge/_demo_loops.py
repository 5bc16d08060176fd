"""``tracejudge demo score|calibrate|regress``: the other bundled examples, offline, from any folder.

Each demo starts the scripted OpenAI-compatible model in this process, points the real commands at
it, and keeps everything it writes (store, suite, run records) in a work folder under the current
directory (``.tracejudge/demo/<name>-<time>/``, or ``--out``). Nothing is written into the bundled
examples or the installed package.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from tracejudge._bundled import example_module
from tracejudge._demo import load_example

if TYPE_CHECKING:
    from tracejudge.schema import BuildReport
    from tracejudge.testing.openai_server import Rule

__all__ = [
    "RegressDemoReport",
    "RegressDemoRun",
    "RegressDemoSample",
    "ScriptedSetup",
    "calibrate_setup",
    "demo_workdir",
    "load_script",
    "run_regress_demo",
    "score_setup",
]

Progress = Callable[[str], None]

_DEMO_KEY = "tracejudge-demo-key-not-secret"


def demo_workdir(out: Path | None, name: str) -> Path:
    """``out``, else a new ``.tracejudge/demo/<name>-<UTC time>`` under the current directory."""
    folder = out or Path(".tracejudge") / "demo" / f"{name}-{datetime.now(UTC):%Y%m%dT%H%M%S%f}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def load_script(path: Path) -> ModuleType:
    """Import one example script by path (the examples are data, not installed modules), writing no
    bytecode next to it."""
    name = f"_tracejudge_demo_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has a loader
        raise ImportError(f"cannot import {path}")
    if name in sys.modules:
        return sys.modules[name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the script runs
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.dont_write_bytecode = before
    return module


@contextmanager
def _scripted_env(base_url: str) -> Iterator[None]:
    """Point ``OPENAI_BASE_URL`` at the scripted model for the demo; a real key is never sent to it."""
    saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    os.environ["OPENAI_BASE_URL"] = base_url
    os.environ["OPENAI_API_KEY"] = _DEMO_KEY
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass(frozen=True)
class ScriptedSetup:
    """What a demo command needs to run a real tracejudge command against the scripted model."""

    store_url: str
    """The demo's own store (in the work folder)."""
    base_url: str
    """The scripted model's OpenAI-compatible endpoint."""
    folder: Path
    """The bundled example's folder (read only)."""
    workdir: Path
    """Where the demo writes."""


def restaurant_judge_rules(folder: Path) -> list[Rule]:
    """The restaurant example's scripted judge: one reply per scenario, matched on its question and
    answering only the rubric's judge model (so it can serve beside other scripted models)."""
    from tracejudge.judge import load_rubric
    from tracejudge.testing.openai_server import Rule

    traces = load_script(folder / "traces.py")
    judge = load_rubric(folder / "rubric.yaml").judge
    model = judge.model if judge is not None else None
    return [
        Rule(reply=r["reply"], any_message=re.escape(r["match"]), model=model) for r in traces.judge_rules()
    ]


@contextmanager
def score_setup(folder: Path, workdir: Path) -> Iterator[ScriptedSetup]:
    """The restaurant battery stored in ``workdir``'s store and the scripted judge serving, with
    ``OPENAI_BASE_URL`` pointing at it while the context is open."""
    from tracejudge.store import SqliteStore
    from tracejudge.testing.openai_server import ScriptedOpenAIServer

    traces = load_script(folder / "traces.py")
    db = workdir / "tracejudge.db"
    store = SqliteStore(db)
    try:
        store.put_spans(traces.all_spans())
    finally:
        store.close()
    with ScriptedOpenAIServer(restaurant_judge_rules(folder)) as server, _scripted_env(server.base_url):
        yield ScriptedSetup(f"sqlite:///{db}", server.base_url, folder, workdir)


@contextmanager
def calibrate_setup(folder: Path, workdir: Path) -> Iterator[ScriptedSetup]:
    """The calibration example's scripted judge serving, ``OPENAI_BASE_URL`` pointing at it."""
    from tracejudge.testing.openai_server import ScriptedOpenAIServer

    scripted = load_script(folder / "scripted.py")
    with ScriptedOpenAIServer(scripted.rules()) as server, _scripted_env(server.base_url):
        yield ScriptedSetup(f"sqlite:///{workdir / 'tracejudge.db'}", server.base_url, folder, workdir)


# --- the regression loop ------------------------------------------------------------------------


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RegressDemoSample(_Record):
    """One sample in one replay."""

    sample_id: str
    """The sample."""
    kind: str
    """failure, success, reasonable_rejection or boundary."""
    outcome: str
    """pass, fail, flaky or indeterminate."""
    change: str
    """Against the previous run: new, fixed, regressed, still_failing, still_passing, flaky, undecided."""
    reason: str = ""
    """Why the first attempt did not pass."""


class RegressDemoRun(_Record):
    """One replay of the suite against one agent."""

    target: str
    """``agent`` (as deployed) or ``agent_fixed`` (with the fix)."""
    run_id: str
    """The run record's id."""
    path: str
    """The run record's file."""
    summary: dict[str, int]
    """Counts per outcome and per change."""
    samples: tuple[RegressDemoSample, ...]
    """Per sample."""


class RegressDemoReport(_Record):
    """``tracejudge demo regress``: build, check, replay the deployed agent, replay the fixed one."""

    workdir: str
    """Where everything was written."""
    suite: str
    """The suite that was built (in the work folder)."""
    kinds: dict[str, int] = Field(default_factory=dict)
    """Samples built, per kind."""
    check_ok: bool
    """``regress check`` found no violation."""
    violations: tuple[str, ...] = ()
    """What ``regress check`` objected to."""
    runs: tuple[RegressDemoRun, ...]
    """The two replays, in order."""
    fixed: tuple[str, ...] = ()
    """Samples that failed under ``agent`` and pass under ``agent_fixed``."""
    target_module: str | None = None
    """The example's replay module as ``regress run --target`` imports it from here (None: not importable
    from the current directory)."""
    ok: bool
    """The fix fixes every failing sample and regresses none, and the suite is clean."""


def _demo_run(target: str, record: Any, path: Path) -> RegressDemoRun:
    samples = tuple(
        RegressDemoSample(
            sample_id=r.sample_id,
            kind=r.kind,
            outcome=r.outcome,
            change=r.change,
            reason=(r.attempts[0].reason or "") if r.attempts and r.outcome != "pass" else "",
        )
        for r in record.samples
    )
    return RegressDemoRun(
        target=target, run_id=record.run_id, path=str(path), summary=dict(record.summary), samples=samples
    )


def run_regress_demo(folder: Path, workdir: Path, *, progress: Progress | None = None) -> RegressDemoReport:
    """The procurement example's regression loop, offline: record its traces into a store in
    ``workdir``, build a suite there from the tickets, check it, replay the deployed agent, then the
    fixed one, against the scripted model and judge. Run records go to ``workdir/suite/runs``."""
    from tracejudge.regress import check_suite_path
    from tracejudge.testing.openai_server import ScriptedOpenAIServer

    say = progress or (lambda _msg: None)
    example = load_example(folder)
    regress_mod = importlib.import_module(example.__name__ + ".regress")
    suite_dir = workdir / "suite"
    with (
        ScriptedOpenAIServer(regress_mod.replay_model_rules()) as model,
        _scripted_env(model.base_url),
    ):
        say(f"scripted model and judge at {model.base_url}; writing under {workdir}")
        built = _record_and_build(regress_mod, folder, workdir, suite_dir, model.base_url)
        say(f"built {len(built.written) + len(built.kept)} samples in {suite_dir}")
        check = check_suite_path(suite_dir)
        runs = _replay_before_and_after(regress_mod, suite_dir, model.base_url, say)
    fixed, fix_is_clean = _compare_replays(runs)
    return RegressDemoReport(
        workdir=str(workdir),
        suite=str(suite_dir),
        kinds=dict(built.kinds),
        check_ok=check.ok,
        violations=tuple(f"{v.rule}: {v.message}" for v in check.violations),
        runs=tuple(runs),
        fixed=fixed,
        target_module=(m + ".regress") if (m := example_module(folder)) else None,
        ok=check.ok and fix_is_clean,
    )


def _record_and_build(
    regress_mod: ModuleType, folder: Path, workdir: Path, suite_dir: Path, model_url: str
) -> BuildReport:
    """Record the example's traces into a store in ``workdir`` and build the suite from its tickets."""
    from tracejudge.localize import load_manifest
    from tracejudge.regress import build_suite
    from tracejudge.store import SqliteStore

    store = SqliteStore(workdir / "tracejudge.db")
    try:
        regress_mod.record_traces(store, model_url, base=folder)
        return build_suite(
            store,
            suite_dir,
            tickets=regress_mod.example_tickets(folder),
            manifest=load_manifest(folder / "manifest.jsonl"),
        )
    finally:
        store.close()


def _replay_before_and_after(
    regress_mod: ModuleType, suite_dir: Path, model_url: str, say: Progress
) -> tuple[RegressDemoRun, RegressDemoRun]:
    """Replay the suite against the deployed agent, then the fixed one; each run record written."""
    from tracejudge.regress import ReplayOptions, load_suite, run_suite, write_run
    from tracejudge.schema import JudgeConfig

    options = ReplayOptions(judge=JudgeConfig(model=regress_mod.JUDGE_MODEL, base_url=model_url))

    def replay(name: str) -> RegressDemoRun:
        say(f"replaying the suite against {name}")
        record = run_suite(
            load_suite(suite_dir), getattr(regress_mod, name), target_name=name, options=options
        )
        return _demo_run(name, record, write_run(suite_dir, record))

    return replay("agent"), replay("agent_fixed")


def _compare_replays(runs: tuple[RegressDemoRun, RegressDemoRun]) -> tuple[tuple[str, ...], bool]:
    """The samples the fix fixes, and whether it fixes every failing one (there being some) and
    regresses none."""
    before, after = runs
    failing = {s.sample_id for s in before.samples if s.outcome != "pass"}
    changes = {s.sample_id: s.change for s in after.samples}
    fixed = tuple(sorted(sid for sid in failing if changes.get(sid) == "fixed"))
    clean = bool(failing) and set(fixed) == failing
    return fixed, clean and all(s.change in ("fixed", "still_passing") for s in after.samples)
