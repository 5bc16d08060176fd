"""``tracejudge probe`` through the real ``openai`` client against the scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "calibration"


def reply(score: int) -> dict[str, object]:
    return {"criteria": {"correctness": {"reasoning": "r", "score": score}}, "reasoning": "r"}


def test_probe_reports_each_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The judge catches the amount and the citation (scripted on the changed text) but not "paused".
    rules = [
        Rule(reply=reply(2), any_message=r'"output": "[^"]*50,000'),
        Rule(reply=reply(2), any_message=r'"output": "[^"]*C-18'),
        Rule(reply=reply(9)),
    ]
    with ScriptedOpenAIServer(rules) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        store = f"sqlite:///{tmp_path / 't.db'}"
        args = ["--store", store, "probe", "--rubric", str(EXAMPLE / "rubric-correctness.yaml")]
        args += ["--case", str(EXAMPLE / "case-prepay.yaml")]
        result = CliRunner().invoke(cli, [*args, "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert data["base_verdict"] == "pass"
        status = {p["name"]: p["status"] for p in data["probes"]}
        assert status == {
            "amount_change": "expected",
            "citation_swap": "expected",
            "paused_vs_submitted": "unexpected",
            "reword": "expected",
        }
        assert len(server.completion_requests()) == 5
        strict = CliRunner().invoke(cli, [*args, "--strict"])
        assert strict.exit_code == 1
        assert "3 as expected, 1 not" in strict.output


def test_a_broken_case_names_its_line(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 't.db'}"
    rubric = str(EXAMPLE / "rubric-correctness.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("id: x\ninput: [\n")
    no_map = tmp_path / "probes.yaml"
    no_map.write_text("id: x\ninput: q\noutput: a\nprobes: [1]\n")
    for case, where in (
        (broken, f"{broken}:3: broken YAML"),
        (no_map, f"{no_map}:4: `probes` must be a mapping"),
    ):
        result = CliRunner().invoke(cli, ["--store", store, "probe", "--rubric", rubric, "--case", str(case)])
        assert result.exit_code == 2
        assert where in result.output
