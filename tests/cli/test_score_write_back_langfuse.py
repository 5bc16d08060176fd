"""`score --write-back langfuse` through the CLI against the local Langfuse API server (every request
validated against the official OpenAPI spec): one score per (trace, criterion) plus the verdict, with
provenance; scoring again replaces instead of duplicating."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge.testing.openai_server import ScriptedOpenAIServer

if TYPE_CHECKING:
    from tests.conftest import Restaurant


def test_scores_written_twice_stay_one_per_trace_and_name(
    restaurant: Restaurant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "t.db"
    store = SqliteStore(db)
    store.put_spans(restaurant.spans)
    store.close()
    srv = LangfuseServer(generation="v4").start()
    try:
        monkeypatch.setenv("LANGFUSE_BASE_URL", srv.base_url)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", srv.public_key)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", srv.secret_key)
        args = restaurant.score_args(f"sqlite:///{db}", "--write-back", "langfuse", "--json")
        with ScriptedOpenAIServer(restaurant.rules) as judge:
            monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
            monkeypatch.setenv("OPENAI_API_KEY", "test-key")
            first = CliRunner().invoke(cli, args)
            assert first.exit_code == 0, first.output
            count_first = len(srv.scores)
            second = CliRunner().invoke(cli, args)
            assert second.exit_code == 0, second.output
        out = json.loads(first.output)
        [report] = out["write_back"]
        assert report["target"] == "langfuse"
        assert report["failed"] == []
        assert report["written"] == count_first
        assert count_first >= 14 * 5  # five criteria per item, plus verdicts and checks
        assert len(srv.scores) == count_first  # rerun replaced, did not duplicate
        assert srv.request_errors == []
        assert srv.response_errors == []
        keys = {(s["traceId"], s["name"]) for s in srv.scores}
        assert len(keys) == len(srv.scores)
        numeric = [s for s in srv.scores if s.get("dataType") == "NUMERIC"]
        assert numeric
        for score in numeric:  # judge-scored criteria carry their full provenance
            meta = score["metadata"]
            assert meta["rubric"] == "restaurant-assistant"
            assert meta["rubric_version"]
            assert meta["judge_model"]
            assert meta["prompt_hash"]
            assert meta["tracejudge_version"]
            assert "temperature" in meta
        # Hard checks land as BOOLEAN scores matching the run's own check verdicts.
        items = {i["trace_id"]: i for i in out["items"]}
        booleans = [s for s in srv.scores if s.get("dataType") == "BOOLEAN"]
        assert booleans
        for score in booleans:
            check = score["name"].removeprefix("restaurant-assistant.")
            verdict = items[score["traceId"]]["checks"][check]["verdict"]
            assert score["value"] == (1 if verdict == "pass" else 0)
        expected = sum(
            1 for i in out["items"] for c in i["checks"].values() if c["verdict"] in ("pass", "fail")
        )
        assert len(booleans) == expected
        assert any(s["value"] == 0 for s in booleans)  # the wrong total, change, handoff, unauthorized read
        assert srv.secret_key not in first.output + second.output
    finally:
        srv.stop()


def test_a_target_that_is_not_configured_is_refused_before_any_judge_call(
    restaurant: Restaurant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Refused after the run, it spent the judge and recorded a complete run whose scores never landed
    # (a shared run's workers started again then found nothing left to write back).
    db = tmp_path / "t.db"
    store = SqliteStore(db)
    store.put_spans(restaurant.spans)
    store.close()
    for name in ("LANGFUSE_BASE_URL", "LANGFUSE_HOST", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    with ScriptedOpenAIServer(restaurant.rules) as judge:
        monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        args = restaurant.score_args(f"sqlite:///{db}", "--write-back", "langfuse", "--run", "nightly")
        result = CliRunner().invoke(cli, args)
        assert judge.completion_requests() == [], result.output
    assert result.exit_code == 2, result.output
    assert "LANGFUSE_BASE_URL" in result.output
    store = SqliteStore(db)
    try:
        assert store.get_run("nightly") is None
    finally:
        store.close()
