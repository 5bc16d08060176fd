"""Stores for the report tests: one filled the way a team's would be (the demo's triage, the restaurant
battery scored three times through the real openai client against a scripted judge, an audit, a
calibration), and one whose every text field carries a script payload."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from tests.conftest import load_module
from tracejudge._demo import find_examples, run_demo
from tracejudge.audit import CalibrateOptions, audit_run, calibrate, parse_labels
from tracejudge.checks import read_manifest
from tracejudge.judge import load_rubric
from tracejudge.localize import load_manifest
from tracejudge.runs import ScoreOptions, score_run
from tracejudge.schema import (
    Evidence,
    Localization,
    MaterialResult,
    RawSpan,
    StageResult,
    SweepFlag,
    SweepReport,
)
from tracejudge.store import SqliteStore
from tracejudge.sweep import record_sweep, sweep
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
RESTAURANT = ROOT / "examples" / "restaurant"

PAYLOADS = (
    "<script>alert('xss')</script>",
    '<img src=x onerror="alert(1)">',
    "javascript:alert(2)",
    "</style><script>alert(3)</script>",
    '"><svg onload=alert(4)>',
    "</title></svg><iframe src=//evil.example>",
)
HOSTILE = " ".join(PAYLOADS)


def _restaurant() -> ModuleType:
    name = "_tracejudge_restaurant_traces"
    if name in sys.modules:
        return sys.modules[name]
    return load_module(RESTAURANT / "traces.py", name)


def _judge_reply(criteria: tuple[str, ...], score: float, why: str) -> dict[str, Any]:
    return {
        "criteria": {c: {"score": score, "reasoning": f"{c}: {why}"} for c in criteria},
        "reasoning": why,
    }


def _contradict_first(reply: dict[str, Any]) -> dict[str, Any]:
    """One reasoning that argues against its own high score, for the audit to find."""
    name, first = next(iter(reply["criteria"].items()))
    contradicted = {**first, "score": 9, "reasoning": "The answer is wrong, misleading and unhelpful."}
    return {**reply, "criteria": {**reply["criteria"], name: contradicted}}


def _labels(n: int = 16) -> str:
    lines = [json.dumps({"definition": "pass: the answer is right, relevant and polite"})]
    for i in range(n):
        label = "pass" if i % 2 == 0 else "fail"
        lines.append(
            json.dumps(
                {
                    "id": f"lab-{i}",
                    "input": f"calibration question {i}",
                    "output": f"answer {i}",
                    "label": label,
                }
            )
        )
    return "\n".join(lines) + "\n"


def _calibration_rules(criteria: tuple[str, ...], n: int = 16) -> list[Rule]:
    rules = []
    for i in range(n):
        # The judge agrees with the label except on items 3 and 6.
        good = (i % 2 == 0) != (i in (3, 6))
        score = 9 if good else 3
        why = "correct and complete" if good else "wrong total and unhelpful"
        rules.append(
            Rule(reply=_judge_reply(criteria, score, why), any_message=rf"calibration question {i}\b")
        )
    return rules


def fill_store(db: Path) -> dict[str, Any]:
    """The demo's triage plus three scoring runs (judge changed, then rubric bumped), an audit and a
    calibration, all through tracejudge's own library functions."""
    store = SqliteStore(db)
    demo = run_demo(f"sqlite:///{db}", store, find_examples())
    rest = _restaurant()
    spans = rest.all_spans()
    store.put_spans(spans)
    trace_ids = sorted({s.trace_id for s in spans})
    rubric = load_rubric(RESTAURANT / "rubric.yaml")
    criteria = tuple(c.name for c in rubric.criteria)
    rules = [
        Rule(reply=_contradict_first(r["reply"]) if i == 0 else r["reply"], any_message=re.escape(r["match"]))
        for i, r in enumerate(rest.judge_rules())
    ]
    rules += _calibration_rules(criteria)
    manifest = read_manifest(RESTAURANT / "manifest.jsonl")
    runs = []
    with ScriptedOpenAIServer(rules) as server:
        assert rubric.judge is not None
        judge = rubric.judge.model_copy(update={"base_url": server.base_url})
        r1 = rubric.model_copy(update={"judge": judge})
        r2 = rubric.model_copy(update={"judge": judge.model_copy(update={"model": "judge-model-2"})})
        r3 = r2.model_copy(update={"version": 2})
        for r in (r1, r2, r3):
            runs.append(
                score_run(r, store, trace_ids, options=ScoreOptions(manifest=manifest, use_cache=False))
            )
        calibration = calibrate(
            # Labelled items carry no trace, so only the judge is calibrated (the hard checks need one).
            r3.model_copy(update={"checks": ()}),
            parse_labels(_labels(), source="labels.jsonl"),
            store,
            options=CalibrateOptions(resamples=200),
        )
    audit = audit_run(store, runs[-1].run_id)
    # The demo's traces swept against its manifest (the procurement example's versions carry content).
    swept = record_sweep(store, sweep(store, load_manifest(find_examples() / "manifest.jsonl")))
    store.close()
    return {"demo": demo, "runs": runs, "calibration": calibration, "audit": audit, "sweep": swept}


@pytest.fixture(scope="session")
def populated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    db = tmp_path_factory.mktemp("report-store") / "tracejudge.db"
    return db, fill_store(db)


def fill_hostile(db: Path, payloads: tuple[str, ...] = PAYLOADS) -> None:
    """Every text the report shows from traces, tickets and judges carries script payloads."""
    PAYLOADS = payloads  # the module's names, swapped for a benign run
    HOSTILE = " ".join(payloads)
    store = SqliteStore(db)
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    trace_id = "a" * 32
    store.put_spans(
        [
            RawSpan(
                trace_id=trace_id,
                span_id="b" * 16,
                name=HOSTILE,
                start_time_unix_nano=1_700_000_000_000_000_000,
                end_time_unix_nano=1_700_000_001_000_000_000,
                attributes={"langfuse.trace.id": "lf-" + PAYLOADS[2]},
                source="langfuse",
            )
        ]
    )
    stage = StageResult(
        name="in_context",
        status="fail",
        detail=HOSTILE,
        evidence=(Evidence(span_id=PAYLOADS[1], note=HOSTILE),),
        missing=(HOSTILE,),
    )
    loc = Localization(
        ticket=PAYLOADS[0],
        trace_id=trace_id,
        task_time=t0,
        verdict="dropped_in_context",
        summary=HOSTILE,
        stages=(StageResult(name="indexed", status="pass", detail=HOSTILE), stage),
        materials=(
            MaterialResult(
                doc_id=PAYLOADS[3], version=PAYLOADS[4], verdict="dropped_in_context", stages=(stage,)
            ),
            MaterialResult(doc_id=PAYLOADS[5], version=None, verdict="no_fault", stages=()),
        ),
    )
    store.put_triage_result(loc, ticket=PAYLOADS[0], triaged_at=t0)
    store.put_triage_result(
        loc.model_copy(update={"ticket": None}), ticket=PAYLOADS[3], triaged_at=t0 + timedelta(1)
    )
    flag = SweepFlag(
        trace_id=PAYLOADS[1],
        task_time=t0,
        doc_id=PAYLOADS[2],
        in_effect=PAYLOADS[3],
        used=PAYLOADS[4],
        evidence=(Evidence(span_id=PAYLOADS[5], note=HOSTILE),),
    )
    record_sweep(store, SweepReport(flagged=(flag,), scanned=1))
    store.close()


@pytest.fixture
def hostile_store(tmp_path: Path) -> Path:
    db = tmp_path / "hostile.db"
    fill_hostile(db)
    return db


@pytest.fixture(scope="session")
def helpers() -> SimpleNamespace:
    """What the test modules share (with importlib import mode, conftest is not importable)."""
    return SimpleNamespace(payloads=PAYLOADS, fill_hostile=fill_hostile)
