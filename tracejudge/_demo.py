"""``tracejudge demo``: the triage job end to end on the bundled procurement example, offline.

The real pieces run as they would in production: the OTLP receiver as a subprocess writing to
the store, the agent traced with the OpenTelemetry SDK and exported over OTLP/HTTP, the model
behind an OpenAI-compatible HTTP endpoint (a local scripted one), then normalize + localize on
what the store holds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from tracejudge._bundled import find_example
from tracejudge._errors import InputError, TracejudgeError
from tracejudge.schema import Cause, Localization, ManifestEntry, Ticket, Verdict
from tracejudge.store import Store

__all__ = ["DemoReport", "DemoRow", "find_examples", "load_example", "run_demo"]

Progress = Callable[[str], None]

_LISTENING = re.compile(r"listening on (http://\S+)")
_RECEIVER_START_TIMEOUT = 60.0
_STORE_WAIT_TIMEOUT = 60.0


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DemoRow(_Record):
    """One scenario: what it should show and what triage found."""

    scenario: str
    """Scenario name in scenarios.yaml."""
    about: str = ""
    """What the scenario sets up."""
    ticket: str | None
    """Ticket id."""
    ticket_path: str
    """The ticket file."""
    trace_id: str
    """The scenario's trace."""
    expected_verdict: Verdict
    """The verdict the scenario is built to produce."""
    expected_cause: Cause | None = None
    """The cause it is built to produce (filtered, not_retrieved)."""
    verdict: Verdict | None
    """What triage found; None when triage could not run."""
    cause: Cause | None = None
    """The cause triage found."""
    summary: str = ""
    """Triage's one-line explanation, or why it could not run."""
    answer: str = ""
    """The agent's answer in this run."""
    ok: bool
    """Verdict (and cause, when one is expected) as expected."""


class DemoReport(_Record):
    """Everything ``tracejudge demo`` found."""

    store: str
    """The store the spans went to (secrets masked)."""
    examples: str
    """The example folder used."""
    files: str | None = None
    """Where the example's tickets, positive feedback and manifest were copied for the commands to run
    next (None: not copied)."""
    feedback_traces: tuple[str, ...] = ()
    """The positive-feedback tickets' traces also stored (``feedback/``), for ``regress build``."""
    rows: tuple[DemoRow, ...]
    """One per scenario."""
    summary: dict[str, int] = Field(default_factory=dict)
    """``n``, ``ok``, ``failed``."""

    @property
    def ok(self) -> bool:
        """Every scenario got its expected verdict."""
        return all(r.ok for r in self.rows) and bool(self.rows)


# --- the example folder ---------------------------------------------------------------------


def find_examples(explicit: Path | None = None) -> Path:
    """The procurement example folder: ``explicit``, else the installed copy, else the checkout's."""
    return find_example("procurement", explicit)


def load_example(path: Path) -> ModuleType:
    """Import the example folder as a package by path (it is not installed)."""
    path = path.resolve()
    name = "_tracejudge_example_" + hashlib.sha1(str(path).encode(), usedforsecurity=False).hexdigest()[:10]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, path / "__init__.py", submodule_search_locations=[str(path)]
    )
    if spec is None or spec.loader is None:
        raise InputError(f"cannot import the example at {path}", hint="check the folder has __init__.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # The bundled example may sit inside the installed package: never write bytecode there.
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


# --- the receiver subprocess ----------------------------------------------------------------


class _Receiver:
    """``tracejudge collect otlp`` in a subprocess, on a free loopback port."""

    def __init__(self, store_url: str) -> None:
        self.store_url = store_url
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self._reader: threading.Thread | None = None
        self.url = ""

    def __enter__(self) -> _Receiver:
        cmd = [
            sys.executable,
            "-m",
            "tracejudge",
            "--store",
            self.store_url,
            "collect",
            "otlp",
            "--listen",
            "127.0.0.1:0",
        ]
        self._log = tempfile.TemporaryFile("w+", encoding="utf-8")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # Its own receiver on loopback, which the demo's exporters send to without a token: one set
        # for the deployment's receivers (README "At scale") made every export a 401.
        env.pop("TRACEJUDGE_OTLP_TOKEN", None)
        self._proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env, bufsize=1
        )
        found: list[str] = []
        ready = threading.Event()
        stdout = self._proc.stdout
        assert stdout is not None

        def read() -> None:
            # Keep draining after the first line, so a chatty receiver never blocks on a full pipe.
            for line in stdout:
                if not found and (m := _LISTENING.search(line)):
                    found.append(m.group(1).rstrip("/"))
                    ready.set()
            ready.set()

        self._reader = threading.Thread(target=read, name="demo-receiver-stdout", daemon=True)
        self._reader.start()
        ready.wait(_RECEIVER_START_TIMEOUT)
        if not found:
            why = self._stderr_tail()
            self.__exit__()
            raise TracejudgeError(
                "the OTLP receiver (`tracejudge collect otlp`) did not start: " + why,
                hint="run `tracejudge collect otlp --listen 127.0.0.1:0` yourself to see why",
            )
        self.url = found[0]
        return self

    def _stderr_tail(self) -> str:
        if self._log is None:
            return "(no output)"
        self._log.seek(0)
        text = self._log.read().strip()
        return text[-800:] if text else "(no output)"

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(timeout=5)
            if self._reader is not None:
                self._reader.join(timeout=5)
            if self._proc.stdout is not None and (self._reader is None or not self._reader.is_alive()):
                self._proc.stdout.close()
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


def _mask(url: str) -> str:
    return re.sub(r"//([^/@:]+):([^/@]+)@", r"//\1:***@", url)


# --- the run --------------------------------------------------------------------------------


def _wait_for_spans(store: Store, expected: dict[str, int]) -> dict[str, int]:
    """Poll the store until each trace holds its expected spans; returns what is missing."""
    deadline = time.monotonic() + _STORE_WAIT_TIMEOUT
    missing = dict(expected)
    while missing:
        for trace_id, n in list(missing.items()):
            have = len(store.get_spans(trace_id))
            if have >= n:
                del missing[trace_id]
            else:
                missing[trace_id] = n - have
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return missing


def _triage(
    store: Store, ticket_path: Path, manifest: Sequence[ManifestEntry], trace_id: str
) -> tuple[Ticket, Localization | None]:
    from tracejudge.localize import load_ticket, localize
    from tracejudge.normalize import normalize

    ticket = load_ticket(ticket_path)
    spans = store.get_spans(trace_id)
    if not spans:
        return ticket, None
    return ticket, localize(normalize(spans), ticket, manifest)


_INPUTS = ("tickets", "feedback", "manifest.jsonl")
"""What ``tracejudge demo`` copies of the example for the commands a user runs next."""


def _copy_inputs(examples: Path, dest: Path) -> Path:
    """Copy the example's tickets, positive-feedback tickets and manifest into ``dest`` (replacing an
    earlier copy), so that the README's commands name files that exist wherever tracejudge is
    installed; the example folder itself (inside the package) is only read."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in _INPUTS:
        source, target = examples / name, dest / name
        if source.is_dir():
            target.mkdir(exist_ok=True)
            for f in sorted(source.glob("*.yaml")):
                shutil.copyfile(f, target / f.name)
        elif source.is_file():
            shutil.copyfile(source, target)
    return dest


def run_demo(
    store_url: str,
    store: Store,
    examples: Path,
    *,
    files: Path | None = None,
    progress: Progress | None = None,
) -> DemoReport:
    """Run every scenario of the example (and each positive-feedback ticket's run) through the receiver
    into the store, then triage each scenario's ticket. With ``files``, the example's tickets,
    feedback and manifest are copied there first."""
    if ":memory:" in store_url or store_url.rstrip("/") == "sqlite:":
        raise InputError(
            "the demo needs a store on disk: the OTLP receiver runs in its own process",
            hint="pass --store sqlite:///.tracejudge/demo.db (or any file-backed store)",
        )
    from tracejudge.localize import load_manifest

    say = progress or (lambda _msg: None)
    example = load_example(examples)
    scenarios = example.load_scenarios(examples)
    manifest = load_manifest(examples / "manifest.jsonl")
    copied = _copy_inputs(examples, files) if files is not None else None
    runs, feedback = _run_into_store(store_url, store, example, scenarios, examples, say)
    rows = tuple(_demo_row(store, run, manifest) for run in runs)
    n_ok = sum(r.ok for r in rows)
    return DemoReport(
        store=_mask(store_url),
        examples=str(examples),
        files=str(copied) if copied is not None else None,
        feedback_traces=feedback,
        rows=rows,
        summary={"n": len(rows), "ok": n_ok, "failed": len(rows) - n_ok},
    )


def _run_feedback(example: ModuleType, examples: Path, exporter: Any) -> dict[str, int]:
    """The positive-feedback tickets' runs (``feedback/``, run by the example's ``regress`` module
    against its replay model): without their traces a suite built from the tickets has failures
    only, and ``regress check`` rightly refuses it. Spans ended per trace; none when the example has
    no feedback."""
    from tracejudge.testing.openai_server import ScriptedOpenAIServer

    if not any((examples / "feedback").glob("*.yaml")) or not (examples / "regress.py").is_file():
        return {}
    regress_mod = importlib.import_module(example.__name__ + ".regress")
    with ScriptedOpenAIServer(regress_mod.replay_model_rules()) as model:
        counts: dict[str, int] = regress_mod.run_feedback(examples, model.base_url, exporter)
    return counts


def _run_into_store(
    store_url: str, store: Store, example: ModuleType, scenarios: Any, examples: Path, say: Progress
) -> tuple[list[Any], tuple[str, ...]]:
    """Run the agent on every scenario, and on each positive-feedback ticket, against the scripted
    model, exporting its spans over OTLP to a receiver that writes them into the store; returns the
    scenario runs and the feedback traces once the store holds them all."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from tracejudge.testing.openai_server import ScriptedOpenAIServer

    with _Receiver(store_url) as receiver, ScriptedOpenAIServer(example.model_rules()) as model:
        say(f"OTLP receiver at {receiver.url}; scripted model at {model.base_url}")
        exporter = OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces", timeout=30)
        runs: list[Any] = example.run_scenarios(
            scenarios, openai_base_url=model.base_url, exporter=exporter, base=examples
        )
        # Each run shuts its exporter down with its tracer provider: the feedback runs get their own.
        feedback = _run_feedback(
            example, examples, OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces", timeout=30)
        )
        say(
            f"ran the agent for {len(runs)} scenarios and {len(feedback)} positive-feedback tickets;"
            " waiting for the receiver to store the spans"
        )
        expected = {r.scenario.trace_id: r.span_count for r in runs} | feedback
        missing = _wait_for_spans(store, expected)
    if missing:
        raise TracejudgeError(
            f"the receiver did not store every span in {_STORE_WAIT_TIMEOUT:.0f} s "
            f"(missing per trace: {missing})",
            hint="check the store is writable and `tracejudge collect otlp` works on its own",
        )
    return runs, tuple(sorted(feedback))


def _demo_row(store: Store, run: Any, manifest: Sequence[ManifestEntry]) -> DemoRow:
    """Triage one scenario's ticket on what the store holds (the result stored), against what the
    scenario is built to show."""
    sc = run.scenario
    ticket, loc = _triage(store, sc.ticket_path, manifest, sc.trace_id)
    if loc is None:
        verdict, cause, summary = None, None, "no spans stored for this trace"
    else:
        store.put_triage_result(loc, ticket=ticket.ticket or sc.name)
        verdict, cause, summary = loc.verdict, loc.cause, loc.summary
    return DemoRow(
        scenario=sc.name,
        about=sc.about,
        ticket=ticket.ticket,
        ticket_path=str(sc.ticket_path),
        trace_id=sc.trace_id,
        expected_verdict=sc.expect_verdict,
        expected_cause=sc.expect_cause,
        verdict=verdict,
        cause=cause,
        summary=summary,
        answer=run.answer,
        ok=verdict == sc.expect_verdict and (sc.expect_cause is None or cause == sc.expect_cause),
    )
