"""``tracejudge demo`` end to end: receiver subprocess, traced agent, scripted model, triage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.store import open_store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "procurement"

EXPECTED = {
    "no-fault": ("no_fault", None),
    "not-indexed": ("not_indexed", None),
    "filtered-region": ("filtered", "filter"),
    "filtered-permission": ("filtered", "permission"),
    "ranked-out": ("not_retrieved", "rank"),
    "dropped-in-context": ("dropped_in_context", None),
    "ignored-by-model": ("ignored_by_model", None),
    "capture-off": ("unconfirmed", None),
    "not-in-effect": ("basis_not_in_effect", None),
}


def _demo(
    store: str, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracejudge", "--store", store, "demo", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=None if env is None else {**os.environ, **env},
    )


def _span_counts(db: Path) -> dict[str, int]:
    store = open_store(str(db))
    try:
        return {t.trace_id: t.span_count for t in store.list_traces()}
    finally:
        store.close()


def test_every_scenario_gets_its_expected_verdict_and_a_rerun_adds_nothing(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    first = _demo(f"sqlite:///{db}", "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr + first.stdout
    report: dict[str, Any] = json.loads(first.stdout)
    rows = {r["scenario"]: r for r in report["rows"]}
    assert {name: (r["verdict"], r["cause"]) for name, r in rows.items()} == EXPECTED
    assert all(r["ok"] for r in rows.values())
    assert report["summary"] == {"n": 9, "ok": 9, "failed": 0}
    assert report["ok"] is True
    assert "50,000" in rows["ignored-by-model"]["answer"]
    assert "30,000" in rows["no-fault"]["answer"]
    counts = _span_counts(db)
    # The scenarios' traces and the positive-feedback tickets' (for regress build's success samples).
    feedback = {
        yaml.safe_load(p.read_text("utf-8"))["trace_id"] for p in (EXAMPLE / "feedback").glob("*.yaml")
    }
    assert len(feedback) == 3
    assert set(report["feedback_traces"]) == feedback
    assert set(counts) == {r["trace_id"] for r in rows.values()} | feedback
    assert set(counts.values()) == {4}
    # The example's inputs, copied where the README's next commands name them.
    files = tmp_path / ".tracejudge" / "demo" / "procurement"
    assert report["files"] == str(Path(".tracejudge") / "demo" / "procurement")
    for name in (
        "tickets/EXP-307-ignored-by-model.yaml",
        "feedback/EXP-401-policy-escalation.yaml",
        "manifest.jsonl",
    ):
        assert (files / name).read_bytes() == (EXAMPLE / name).read_bytes()

    second = _demo(f"sqlite:///{db}", cwd=tmp_path)
    assert second.returncode == 0, second.stderr + second.stdout
    assert "9 of 9 scenarios got their expected verdict" in second.stdout
    for name in EXPECTED:
        assert name in second.stdout
    assert _span_counts(db) == counts


def test_a_scenario_that_misses_its_verdict_fails_the_demo(tmp_path: Path) -> None:
    examples = tmp_path / "procurement"
    shutil.copytree(EXAMPLE, examples, ignore=shutil.ignore_patterns("__pycache__"))
    spec = yaml.safe_load((examples / "scenarios.yaml").read_text(encoding="utf-8"))
    # The ranked-out deployment, expected to be healthy: triage must disagree, and the demo must say so.
    spec["scenarios"] = [s for s in spec["scenarios"] if s["name"] == "ranked-out"]
    spec["scenarios"][0]["expect"] = {"verdict": "no_fault"}
    (examples / "scenarios.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    result = _demo(f"sqlite:///{tmp_path / 'x.db'}", "--json", "--examples", str(examples), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    (row,) = json.loads(result.stdout)["rows"]
    assert row["ok"] is False
    assert (row["verdict"], row["cause"]) == ("not_retrieved", "rank")


def test_a_receiver_token_in_the_environment_does_not_lock_the_demo_out(tmp_path: Path) -> None:
    # The token set for a deployment's receivers (README "At scale") is not the demo's: its own
    # receiver took it and answered every export 401, and the demo failed after a minute's wait.
    examples = tmp_path / "procurement"
    shutil.copytree(EXAMPLE, examples, ignore=shutil.ignore_patterns("__pycache__"))
    spec = yaml.safe_load((examples / "scenarios.yaml").read_text(encoding="utf-8"))
    spec["scenarios"] = [s for s in spec["scenarios"] if s["name"] == "no-fault"]
    (examples / "scenarios.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    result = _demo(
        f"sqlite:///{tmp_path / 'x.db'}",
        "--json",
        "--examples",
        str(examples),
        cwd=tmp_path,
        env={"TRACEJUDGE_OTLP_TOKEN": "the-deployments-token"},
    )
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)["rows"]
    assert row["ok"] is True


def test_in_memory_store_is_refused() -> None:
    result = CliRunner().invoke(cli, ["--store", "sqlite://:memory:", "demo"])
    assert result.exit_code == 2
    assert "store on disk" in result.output


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_examples_folder_must_hold_scenarios(tmp_path: Path, make: str) -> None:
    folder = tmp_path / "nothing-here"
    if make == "empty":
        folder.mkdir()
    result = CliRunner().invoke(
        cli, ["--store", f"sqlite:///{tmp_path / 'd.db'}", "demo", "--examples", str(folder)]
    )
    assert result.exit_code == 2
    assert "scenarios.yaml" in result.output
