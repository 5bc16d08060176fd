"""``tracejudge audit``: a pairwise run judged both ways, through the real ``openai`` client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

RUBRIC = """\
name: pairwise
version: 1
judge: {model: judge-m}
judged: [input, output]
criteria:
  - {name: first_better, description: "Answer 1 is better than Answer 2.", threshold: 5}
"""


def reply(score: int, why: str) -> dict[str, object]:
    return {"criteria": {"first_better": {"reasoning": why, "score": score}}, "reasoning": why}


def test_pairs_both_orders_and_reasoning_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "\n".join(
            json.dumps({"id": i, "input": f"question {i}", "a": f"good {i}", "b": f"weak {i}"})
            for i in ("p1", "p2")
        )
    )
    rubric = tmp_path / "pairwise.yaml"
    rubric.write_text(RUBRIC)
    rules = [
        # p1: the good answer wins in both orders. p2: whichever is shown first wins.
        Rule(reply=reply(8, "Answer 1 is correct and clear."), any_message=r"Answer 1:\\ngood p1"),
        Rule(reply=reply(2, "Answer 1 is wrong."), any_message=r"Answer 1:\\nweak p1"),
        Rule(reply=reply(9, "Answer 1 is incorrect and misleading."), any_message=r"p2"),
    ]
    with ScriptedOpenAIServer(rules) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        store = f"sqlite:///{tmp_path / 't.db'}"
        result = CliRunner().invoke(
            cli, ["--store", store, "audit", "--pairs", str(pairs), "--rubric", str(rubric), "--json"]
        )
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert data["position"]["pairs"] == 2
        assert data["position"]["inconsistent"] == ["p2"]
        assert data["position"]["first_position_rate"] == pytest.approx(3 / 4)
        assert {m["trace_id"] for m in data["mismatches"]} == {"p2::ab", "p2::ba"}
        assert data["mismatches"][0]["negative_cues"] == ["incorrect", "misleading"]
        # The same report again, in the terminal, for the newest run.
        text = CliRunner().invoke(cli, ["--store", store, "audit"])
        assert text.exit_code == 0
        flat = " ".join(text.output.split())
        assert "1/2 pairs consistent" in flat
        assert "no repeats" in flat
        missing = CliRunner().invoke(cli, ["--store", store, "audit", "run-nope"])
        assert missing.exit_code == 2
