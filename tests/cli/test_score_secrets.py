"""No secret reaches ``tracejudge score``'s output, in --json or in its tables, wherever it comes
from: the trace itself (its answer, and a category that the table shows and wraps), the judge's
reply quoting it, or a judge reply that cannot be read (the error path). Secrets are removed before
anything is written, so not even a piece of one survives a table cell wrapped across lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.schema import RawSpan
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

KEY = "sk-proj-Zq8Wv3Lk5Tn2Rb7Yh4Pd9Xs1"  # the judge's own key, configured in the environment
TOKEN = "Mf7Qk2Wz9Lp4Vn8Rt3Yd6Hc"  # a bearer token no variable names: removed by its shape
GITHUB = "ghp_4Fh7Kd9Lm2Np5Qr8St1Vw3Xy6Za0Bc"

RUBRIC = """\
name: secrets
version: 1
judge: {{model: judge, temperature: 0, base_url: "{url}", max_retries: 0}}
judged: [input, output]
criteria:
  - {{name: relevance, description: "The answer addresses what was asked.", threshold: 7}}
"""


def _spans(i: int, answer: str, category: str) -> list[RawSpan]:
    tid = f"{i:032x}"
    t0 = 1_790_000_000_000_000_000 + i * 10**9
    return [
        RawSpan(
            trace_id=tid,
            span_id=f"{i:015x}a",
            name="assistant",
            start_time_unix_nano=t0,
            end_time_unix_nano=t0 + 10**8,
            attributes={
                "openinference.span.kind": "AGENT",
                "input.value": f"question {i}: what is my account's status?",
                "output.value": answer,
                "tag.tags": [f"category:{category}"],
            },
        )
    ]


@pytest.fixture
def scored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The arguments that score the two traces (store and rubric), the judge serving."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = SqliteStore(tmp_path / "t.db")
    # The answer leaks the key and a bearer header; the category (shown in the table) carries both.
    store.put_spans(
        _spans(1, f"Use key {KEY} with Authorization: Bearer {TOKEN}", f"billing {KEY} Bearer {TOKEN}")
    )
    store.put_spans(_spans(2, f"Your token is {GITHUB}.", f"support {GITHUB}"))
    store.close()
    rules = [
        # The judge quotes the trace's secrets in its reasoning.
        Rule(
            any_message="question 1",
            reply={
                "criteria": {"relevance": {"reasoning": f"it shows {KEY} and Bearer {TOKEN}", "score": 8}},
                "reasoning": f"the answer pastes {KEY}",
            },
        ),
        # A reply that is not JSON at all: the item is indeterminate, the raw reply kept.
        Rule(
            any_message="question 2",
            reply=f"cannot judge: upstream said Authorization: Bearer {TOKEN} ({GITHUB})",
        ),
    ]
    with ScriptedOpenAIServer(rules) as judge:
        rubric = tmp_path / "rubric.yaml"
        rubric.write_text(RUBRIC.format(url=judge.base_url))
        yield ["--store", f"sqlite:///{tmp_path / 't.db'}", "score", "--rubric", str(rubric), "--no-cache"]


def _score(scored: list[str], *args: str, columns: int = 80) -> tuple[str, str]:
    result = CliRunner(env={"COLUMNS": str(columns)}).invoke(cli, [*scored, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def _no_piece_of_a_secret(text: str) -> None:
    for secret in (KEY, TOKEN, GITHUB):
        pieces = [secret[i : i + 8] for i in range(len(secret) - 7)]
        shown = [p for p in pieces if p in text]
        assert not shown, f"pieces of {secret[:6]}… reached the output: {shown}"


def test_json_output_holds_no_secret_from_the_trace_the_reply_or_the_error(scored: list[str]) -> None:
    out, err = _score(scored, "--json")
    _no_piece_of_a_secret(out + err)
    items = {i["trace_id"][-1]: i for i in json.loads(out)["items"]}
    # The secrets were in what is printed, and were removed there (not merely absent).
    assert items["1"]["category"] == "billing [redacted] Bearer [redacted]"
    assert "[redacted]" in items["1"]["criteria"]["relevance"]["reasoning"]
    assert items["2"]["verdict"] == "indeterminate"
    assert items["2"]["replies"][0]["raw"].count("[redacted]") == 2


@pytest.mark.parametrize("columns", [200, 60])
def test_tables_hold_no_secret_nor_a_piece_of_one_when_cells_wrap(scored: list[str], columns: int) -> None:
    out, err = _score(scored, columns=columns)
    _no_piece_of_a_secret(out + err)
    assert "redacted" in out
    assert "billing" in out
    assert "support" in out
