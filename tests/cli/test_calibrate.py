"""``tracejudge calibrate`` on the example, through the real ``openai`` client against the scripted server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import load_module
from tests.store.damage import cut_chunks
from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import LangfuseServer, synthetic_trace
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge.write import LangfuseApi, LangfuseCredentials
from tracejudge_collectors.langfuse import pull_langfuse

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "calibration"


scripted = load_module(EXAMPLE / "scripted.py", "calibration_scripted")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(scripted.rules()) as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-do-not-print")
        yield s


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 't.db'}"


def run(store_url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", store_url, *args])
    return result.exit_code, result.output


def calibrate_json(store_url: str, rubric: str, *args: str) -> dict[str, Any]:
    code, out = run(
        store_url,
        "calibrate",
        "--rubric",
        str(EXAMPLE / rubric),
        "--labels",
        str(EXAMPLE / "labels.jsonl"),
        *args,
        "--json",
    )
    assert code == 0, out
    assert "sk-test-secret" not in out
    data: dict[str, Any] = json.loads(out)
    return data


def test_support_rubric_is_strict_and_correctness_agrees(
    server: ScriptedOpenAIServer, store_url: str
) -> None:
    support = calibrate_json(store_url, "rubric-support.yaml")
    for key in (
        "n",
        "accuracy",
        "kappa",
        "kappa_ci",
        "judge_pass_rate",
        "label_pass_rate",
        "confusion",
        "indeterminate",
        "interpretation",
        "items",
    ):
        assert key in support
    assert support["n"] == 20
    assert support["label_pass_rate"] == 0.5
    assert support["judge_pass_rate"] == pytest.approx(0.2)
    assert support["bias"] == "strict"
    assert support["confusion"] == {"true_pass": 3, "true_fail": 9, "false_pass": 1, "false_fail": 7}
    assert support["kappa"] == pytest.approx(0.2)
    assert support["interpretation"] == "slight"
    # The one-word correct answers fail the support-bot rubric.
    items = {i["id"]: i for i in support["items"]}
    assert items["q01"] == items["q01"] | {"label": "pass", "judge": "fail"}
    # What the rubric grades is visible beside the labels' definition before any number.
    assert {c["name"]: c["covered"] for c in support["criteria"]} == {"next_step": False, "tone": False}

    correct = calibrate_json(store_url, "rubric-correctness.yaml")
    assert correct["accuracy"] == pytest.approx(0.95)
    assert correct["kappa"] == pytest.approx(0.9)
    assert correct["confusion"]["false_pass"] == 1
    assert correct["criteria"][0]["covered"] is True
    assert "correct" in " ".join(correct["criteria"][0]["shared_words"])
    lo, hi = correct["kappa_ci"]
    assert lo < 0.9 <= hi
    # The sweep finds that 7.5 would have rejected the lenient 7 on q20.
    assert correct["sweep"]["best_threshold"] == 7.5
    assert correct["sweep"]["best_kappa"] == pytest.approx(1.0)
    # Every call went through the real client to the scripted server: 20 per rubric.
    assert len(server.completion_requests()) == 40


def test_terminal_report(server: ScriptedOpenAIServer, store_url: str) -> None:
    code, out = run(
        store_url,
        "calibrate",
        "--rubric",
        str(EXAMPLE / "rubric-support.yaml"),
        "--labels",
        str(EXAMPLE / "labels.jsonl"),
    )
    assert code == 0, out
    flat = " ".join(out.split())
    assert "not in the definition" in flat
    assert "judge pass rate 20% vs labels 50% (fewer than people: strict)" in flat
    assert "7 false fail" in flat
    assert "balanced_labels" in flat


def test_holdout_records_tuning_use_and_is_stored(server: ScriptedOpenAIServer, store_url: str) -> None:
    first = calibrate_json(store_url, "rubric-correctness.yaml", "--holdout", "0.4")
    assert first["evaluated_on"] == "holdout"
    held = [i["id"] for i in first["items"] if i["split"] == "holdout"]
    assert held
    assert first["n"] == len(held)
    assert first["tuning"]["n"] == 20 - len(held)
    store = SqliteStore(store_url.removeprefix("sqlite:///"))
    marks = store.tuning_marks("correctness")
    assert sum(m.kind == "tuning" for m in marks) == 20 - len(held)
    assert sum(m.kind == "holdout_seen" for m in marks) == len(held)
    stored = store.list_reports("calibration", rubric_name="correctness")
    assert stored[0].payload["calibration_id"] == first["calibration_id"]
    store.close()
    # Calibrating on everything uses the holdout for tuning: a later holdout of it is contaminated.
    calibrate_json(store_url, "rubric-correctness.yaml")
    again = calibrate_json(store_url, "rubric-correctness.yaml", "--holdout", "0.4")
    assert sorted(again["contaminated"]) == sorted(held)
    assert again["evaluated_on"] == "all"
    assert any(f.startswith("no_holdout_items") for f in again["flags"])


def test_two_raters_give_the_ceiling(server: ScriptedOpenAIServer, store_url: str, tmp_path: Path) -> None:
    both = tmp_path / "both.jsonl"
    both.write_text(
        (EXAMPLE / "labels.jsonl").read_text() + (EXAMPLE / "labels-second-rater.jsonl").read_text()
    )
    code, out = run(
        store_url,
        "calibrate",
        "--rubric",
        str(EXAMPLE / "rubric-correctness.yaml"),
        "--labels",
        str(both),
        "--json",
    )
    assert code == 0, out
    raters = json.loads(out)["raters"]
    assert raters["raters"] == ["ana", "ben"]
    assert raters["primary"] == "ana"
    # ben flips q14 and q20: 18/20 agree, marginals 11 vs 9 / 10 vs 10 -> kappa = (0.9-0.5)/0.5
    assert raters["ceiling_accuracy"] == pytest.approx(0.9)
    assert raters["ceiling_kappa"] == pytest.approx(0.8)
    assert raters["judge_kappa"]["ana"] == pytest.approx(0.9)


def test_second_model_side_by_side(server: ScriptedOpenAIServer, store_url: str) -> None:
    # The second model passes everything: its errors are the ten bad items, one shared with the primary.
    other = {"criteria": {"correctness": {"reasoning": "Looks fine.", "score": 9}}, "reasoning": "ok"}
    server.set_rules([Rule(reply=other, model="other-judge"), *scripted.rules()])
    data = calibrate_json(store_url, "rubric-correctness.yaml", "--compare-model", "other-judge")
    cmp = data["comparison"]
    assert cmp["model"] == "other-judge"
    assert cmp["agreement"]["judge_pass_rate"] == 1.0
    assert cmp["shared_errors"] == ["q20"]
    assert len(cmp["only_other_errors"]) == 9
    assert "different items" in cmp["reading"]
    models = {r["model"] for r in server.completion_requests()}
    assert models == {"scripted-judge", "other-judge"}


def test_bad_labels_and_usage(store_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "input": "q", "output": "x", "label": "maybe"}\n')
    code, out = run(
        store_url, "calibrate", "--rubric", str(EXAMPLE / "rubric-correctness.yaml"), "--labels", str(bad)
    )
    assert code == 2
    assert "bad.jsonl:1" in out
    assert "maybe" in out
    code, out = run(store_url, "calibrate")
    assert code == 2


def test_score_gate_refuses_without_calibration(store_url: str) -> None:
    code, out = run(store_url, "score", "--rubric", str(EXAMPLE / "rubric-correctness.yaml"), "--gate", "0.8")
    assert code == 2
    assert "refusing to gate" in out
    assert "never been calibrated" in out
    assert "tracejudge calibrate --rubric" in out
    assert "--holdout" in out


def test_labels_from_langfuse_scores_leave_out_a_trace_the_store_holds_damaged(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--labels langfuse:SCORE`` reads the scores kept on pulled traces; one trace that no longer reads
    back is named in ``labels_skipped`` (and the terminal report) and the rest are calibrated on."""
    traces = [synthetic_trace(i, answer=f"The cap is {30 + i},000 RMB.") for i in range(3)]
    with LangfuseServer() as langfuse:
        for value, trace in zip((1, 0, 1), traces, strict=True):
            langfuse.add_trace(trace)
            langfuse.add_score(
                {"traceId": trace["id"], "name": "helpful", "value": value, "dataType": "NUMERIC"}
            )
        monkeypatch.setenv("LANGFUSE_BASE_URL", langfuse.base_url)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", langfuse.public_key)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", langfuse.secret_key)
        store = SqliteStore(tmp_path / "t.db")
        try:
            with LangfuseApi(LangfuseCredentials.from_env()) as api:
                pull_langfuse(store, api)
        finally:
            store.close()
    judge = Rule(reply=scripted.correctness_reply({"id": "any", "label": "pass"}))
    args = ("calibrate", "--rubric", str(EXAMPLE / "rubric-correctness.yaml"), "--labels", "langfuse:helpful")
    with ScriptedOpenAIServer([judge]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-do-not-print")
        code, out = run(store_url, *args, "--json")
        assert code == 0, out
        whole = json.loads(out)
        cut_chunks(tmp_path / "t.db", traces[1]["id"])
        code, out = run(store_url, *args, "--json")
        assert code == 0, out
        after = json.loads(out)
        code, text = run(store_url, *args)
    assert (whole["n"], whole["labels_skipped"]) == (3, [])
    assert after["n"] == 2
    assert {i["label"] for i in after["items"]} == {"pass"}  # the damaged trace held the one fail
    [skipped] = after["labels_skipped"]
    assert skipped.startswith(f"trace {traces[1]['id']} skipped: store_damaged:")
    assert "tracejudge doctor --deep" in skipped
    assert code == 0, text
    assert f"label not read: trace {traces[1]['id']}" in " ".join(text.split())
