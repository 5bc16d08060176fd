"""Where ``regress run`` keeps run records: ``--runs``, else ``SUITE/runs``; never in a bundled suite."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.regress import load_suite, runs_folder

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "examples" / "procurement" / "suite"


def test_a_users_suite_keeps_its_runs_inside_unless_told(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    assert runs_folder(suite) == (suite / "runs", None)
    assert runs_folder(suite, tmp_path / "elsewhere") == (tmp_path / "elsewhere", None)


def test_the_bundled_suite_is_never_the_runs_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder, note = runs_folder(BUNDLED)
    assert folder == Path(".tracejudge/runs/procurement-suite")
    assert note is not None
    assert "--runs" in note
    assert runs_folder(BUNDLED, tmp_path / "r") == (tmp_path / "r", None)


def test_regress_run_on_the_bundled_suite_writes_nothing_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in BUNDLED.rglob("*"))
    # No judge and an agent that never reaches a model: the run still completes and is stored.
    result = CliRunner().invoke(
        cli,
        [
            "--store",
            f"sqlite:///{tmp_path / 't.db'}",
            "regress",
            "run",
            str(BUNDLED),
            "--target",
            "tests.regress.test_runs_folder:_refuse",
            "--sample",
            "rs-1be3a40e",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    stored = Path(json.loads(result.stdout)["path"])
    assert stored.resolve().is_relative_to(
        (tmp_path / ".tracejudge" / "runs" / "procurement-suite").resolve()
    )
    assert sorted(p.name for p in BUNDLED.rglob("*")) == before
    assert "never written to" in result.stderr


def test_runs_dir_is_read_back_for_comparison(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(BUNDLED, suite, ignore=shutil.ignore_patterns("runs"))
    runs = tmp_path / "runs"
    args = [
        "--store",
        f"sqlite:///{tmp_path / 't.db'}",
        "regress",
        "run",
        str(suite),
        "--target",
        "tests.regress.test_runs_folder:_refuse",
        "--sample",
        "rs-1be3a40e",
        "--runs",
        str(runs),
        "--json",
    ]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(cli, args)
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout)["previous_run_id"] == json.loads(first.stdout)["run_id"]
    assert not (suite / "runs").exists()
    assert len(load_suite(suite, runs_dir=runs).runs()) == 2


def _refuse(ctx: object) -> dict[str, str]:
    return {"answer": "I cannot confirm this from the documents."}
