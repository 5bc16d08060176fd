"""The whole tool on a PostgreSQL store: the demo (receiver subprocess, triage), scoring runs with the
judge cache, and the report, exactly as on SQLite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.store import open_store
from tracejudge.testing.openai_server import ScriptedOpenAIServer

if TYPE_CHECKING:
    from tests.conftest import Restaurant

ROOT = Path(__file__).resolve().parents[2]


def test_demo_triage_and_report_on_postgres(postgres_url: str, tmp_path: Path) -> None:
    demo = subprocess.run(
        [sys.executable, "-m", "tracejudge", "--store", postgres_url, "demo", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "tracejudge:tracejudge@" not in demo.stdout + demo.stderr  # the password never shows
    report = json.loads(demo.stdout)
    store = open_store(postgres_url)
    try:
        traces = store.list_traces()
        # The nine scenarios and the three positive-feedback tickets' runs (regress build's successes).
        assert {t.trace_id for t in traces} == {r["trace_id"] for r in report["rows"]} | set(
            report["feedback_traces"]
        )
        assert len(traces) == 12
        assert all(t.span_count == 4 for t in traces)
        stored = store.list_triage_results()
        assert len(stored) == 9
        assert {e.result.verdict for e in stored} >= {"not_indexed", "filtered", "dropped_in_context"}
    finally:
        store.close()
    out = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["--store", postgres_url, "report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "dropped_in_context" in html


def test_scoring_runs_and_judge_cache_on_postgres(
    postgres_url: str, restaurant: Restaurant, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(postgres_url)
    store.put_spans(restaurant.spans)
    store.close()
    args = restaurant.score_args(postgres_url, "--json")
    with ScriptedOpenAIServer(restaurant.rules) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        first = CliRunner().invoke(cli, args)
        calls_first = len(server.completion_requests())
        second = CliRunner().invoke(cli, args)
        calls_second = len(server.completion_requests()) - calls_first
    assert first.exit_code == 0, first.output
    assert second.exit_code == 0, second.output
    one, two = json.loads(first.output), json.loads(second.output)
    assert one["summary"]["n"] == 14
    verdicts = ("n", "pass", "fail", "indeterminate", "pass_rate")
    assert {k: one["summary"][k] for k in verdicts} == {k: two["summary"][k] for k in verdicts}
    assert two["summary"]["cache_hits"] == 14
    assert one["run_id"] != two["run_id"]  # a rerun is a new run
    assert calls_first > 0
    assert calls_second == 0  # unchanged judge, unchanged traces: all from the cache
    store = open_store(postgres_url)
    try:
        assert store.get_run(one["run_id"]) is not None
        assert store.get_run(two["run_id"]) is not None
    finally:
        store.close()
