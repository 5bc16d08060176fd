"""The full loop on the procurement example, offline: triage -> build -> check -> anonymize -> run ->
a fix in the agent -> run again: the failures are fixed and nothing regressed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "procurement"


def _cli(store: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", store, *args])
    return result.exit_code, result.output


def test_triage_build_check_anonymize_run_fix_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from examples.procurement.regress import example_tickets, record_traces, replay_model_rules

    monkeypatch.chdir(REPO)
    db = tmp_path / "t.db"
    store_url = f"sqlite:///{db}"
    with ScriptedOpenAIServer(replay_model_rules()) as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        store = SqliteStore(db)
        record_traces(store, model.base_url)
        store.close()

        code, out = _cli(
            store_url,
            "triage",
            "--ticket",
            str(EXAMPLE / "tickets"),
            "--manifest",
            str(EXAMPLE / "manifest.jsonl"),
            "--json",
        )
        assert code in (0, 1), out
        verdicts = {r["ticket"]: r["verdict"] for r in json.loads(out)["results"]}
        assert verdicts["EXP-307"] == "ignored_by_model"
        assert verdicts["EXP-302"] == "not_indexed"

        suite = tmp_path / "suite"
        tickets = [a for p in example_tickets() for a in ("--ticket", str(p))]
        code, out = _cli(
            store_url,
            "regress",
            "build",
            *tickets,
            "--manifest",
            str(EXAMPLE / "manifest.jsonl"),
            "--out",
            str(suite),
            "--json",
        )
        assert code == 0, out
        built = json.loads(out)
        assert built["kinds"] == {"failure": 7, "success": 2, "reasonable_rejection": 1, "boundary": 1}
        assert not built["skipped"]
        # What was built is what the example ships.
        assert sorted(p.name for p in suite.glob("*.yaml")) == sorted(
            p.name for p in (EXAMPLE / "suite").glob("*.yaml")
        )

        code, out = _cli(store_url, "regress", "check", str(suite), "--json")
        assert code == 0, out
        assert json.loads(out)["ok"] is True

        anon = tmp_path / "anon"
        code, out = _cli(
            store_url,
            "regress",
            "anonymize",
            str(suite),
            "--out",
            str(anon),
            "--mapping",
            str(tmp_path / "mapping.json"),
            "--json",
        )
        assert code == 0, out
        assert all(v["identical"] for v in json.loads(out)["verified"])
        assert "Huadong" not in "".join(p.read_text() for p in anon.glob("*.yaml"))

        run_args = [
            "regress",
            "run",
            str(anon),
            "--judge-model",
            "judge-mini",
            "--json",
            "--agent-cost-per-mtok",
            "0.4",
            "1.6",
        ]
        code, out = _cli(store_url, *run_args, "--target", "examples.procurement.regress:agent")
        assert code == 0, out
        first = json.loads(out)
        outcomes = {s["sample_id"]: (s["kind"], s["outcome"]) for s in first["samples"]}
        failing = {sid for sid, (_, o) in outcomes.items() if o == "fail"}
        assert len(failing) == 8
        assert {o for k, o in outcomes.values() if k in ("success", "boundary")} == {"pass"}
        assert first["cost_usd"] > 0

        code, out = _cli(
            store_url,
            *run_args,
            "--target",
            "examples.procurement.regress:agent_fixed",
            "--gate",
            "regressed",
        )
        assert code == 0, out
        second = json.loads(out)
    assert second["previous_run_id"] == first["run_id"]
    changes = {s["sample_id"]: s["change"] for s in second["samples"]}
    assert {sid for sid, c in changes.items() if c == "fixed"} == failing
    assert set(changes.values()) == {"fixed", "still_passing"}
    assert len(list((anon / "runs").glob("*.json"))) == 2  # the failing run stays in history
