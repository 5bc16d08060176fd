"""``calibrate sample``: a scored run -> traces to label (JSONL, optionally queued in a Langfuse
annotation queue on the local spec-validated server) -> labels -> ``calibrate`` on those traces."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import Restaurant
from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge.testing.openai_server import ScriptedOpenAIServer


@pytest.fixture
def store_url(tmp_path: Path, restaurant: Restaurant, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    path = tmp_path / "t.db"
    store = SqliteStore(path)
    store.put_spans(restaurant.spans)
    store.close()
    url = f"sqlite:///{path}"
    with ScriptedOpenAIServer(restaurant.rules) as judge:
        monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-do-not-print")
        scored = CliRunner().invoke(cli, restaurant.score_args(url))
        assert scored.exit_code == 0, scored.output
        yield url


@pytest.fixture
def langfuse(monkeypatch: pytest.MonkeyPatch) -> Iterator[LangfuseServer]:
    with LangfuseServer(generation="v4") as server:
        monkeypatch.setenv("LANGFUSE_BASE_URL", server.base_url)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", server.public_key)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", server.secret_key)
        yield server


def _sample(store_url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", store_url, "calibrate", "sample", *args])
    return result.exit_code, result.output


def test_sample_is_queued_once_in_a_langfuse_annotation_queue(
    store_url: str, langfuse: LangfuseServer, tmp_path: Path, restaurant: Restaurant
) -> None:
    queue = langfuse.add_annotation_queue("judge-calibration")
    out = tmp_path / "to-label.jsonl"
    args = ("--n", "8", "--rubric", str(restaurant.rubric), "--out", str(out), "--queue", queue, "--json")
    code, text = _sample(store_url, *args)
    assert code == 0, text
    summary = json.loads(text)
    picked = [json.loads(line)["trace_id"] for line in out.read_text().splitlines()]
    assert len(picked) == 8 == summary["n"]
    assert summary["queue"] == {"id": queue, "queued": 8, "already": 0}
    items = langfuse.annotation_queue_items
    assert sorted(i["objectId"] for i in items) == sorted(picked)
    assert {(i["queueId"], i["objectType"], i["status"]) for i in items} == {(queue, "TRACE", "PENDING")}
    # The same sample again (hash order: the same traces) adds nothing to the queue.
    code, text = _sample(store_url, *args)
    assert code == 0, text
    assert json.loads(text)["queue"] == {"id": queue, "queued": 0, "already": 8}
    assert len(langfuse.annotation_queue_items) == 8
    assert langfuse.request_errors == []
    assert langfuse.response_errors == []
    assert langfuse.secret_key not in text
    # The terminal form says where the traces went.
    code, text = _sample(
        store_url, "--n", "10", "--rubric", str(restaurant.rubric), "--out", str(out), "--queue", queue
    )
    assert code == 0, text
    assert f"queued 2 traces in Langfuse annotation queue {queue} (8 were queued already)" in " ".join(
        text.split()
    )


def test_unknown_queue_and_missing_settings_are_input_errors(
    store_url: str, langfuse: LangfuseServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    langfuse.add_annotation_queue("judge-calibration")
    code, text = _sample(store_url, "--n", "4", "--queue", "no-such-queue")
    assert code == 2
    flat = " ".join(text.split())
    assert "no annotation queue 'no-such-queue'" in flat
    assert "judge-calibration (" in flat
    assert "Traceback" not in text
    assert langfuse.annotation_queue_items == []
    # Without Langfuse settings nothing is sampled or written: the error comes first.
    monkeypatch.delenv("LANGFUSE_SECRET_KEY")
    out = tmp_path / "never.jsonl"
    code, text = _sample(store_url, "--n", "4", "--out", str(out), "--queue", "q")
    assert code == 2
    assert "LANGFUSE_SECRET_KEY" in text
    assert not out.exists()


def test_labelled_sample_calibrates_on_the_stored_traces(
    store_url: str, tmp_path: Path, restaurant: Restaurant, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "to-label.jsonl"
    code, text = _sample(store_url, "--n", "14", "--rubric", str(restaurant.rubric), "--out", str(out))
    assert code == 0, text
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # A person labels: pass where the answer is right and allowed, fail otherwise.
    for row in rows:
        row.update(label="pass", rater="ana")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with ScriptedOpenAIServer(restaurant.rules) as judge:
        monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
        result = CliRunner().invoke(
            cli,
            [
                "--store",
                store_url,
                "calibrate",
                "--rubric",
                str(restaurant.rubric),
                "--labels",
                str(labels),
                "--manifest",
                str(restaurant.manifest),
                "--json",
            ],
        )
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    reasons = {i["id"]: i["reason"] for i in data["items"]}
    # The stored trace carries the principal, so the permission check decides instead of staying
    # indeterminate, and the tool results let the totals check read the right amount.
    assert any("unauthorized read: staff-payroll" in r for r in reasons.values())
    assert any("check totals" in r for r in reasons.values())
    assert not any("no index manifest" in r or "no principal" in r for r in reasons.values())
    # Same verdicts as the scoring run of the same traces: 7 pass, 6 fail, 1 indeterminate.
    verdicts = [i["judge"] for i in data["items"]]
    assert (verdicts.count("pass"), verdicts.count("fail"), verdicts.count("indeterminate")) == (7, 6, 1)
