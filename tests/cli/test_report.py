"""``tracejudge report`` and ``report langfuse-configs``; triage keeps its reports for them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.store.damage import cut_chunks
from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import LangfuseServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "procurement"
RUBRIC = ROOT / "examples" / "restaurant" / "rubric.yaml"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    code, out = run("--store", str(db), "demo", "--json")
    assert code == 0, out
    return db


def test_report_writes_the_demo_triage(demo_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    code, text = run("--store", str(demo_db), "report", "--out", str(out), "--json")
    assert code == 0, text
    summary = json.loads(text)
    assert summary["tickets"] == 9
    assert summary["verdicts"]["filtered"] == 2
    assert sum(summary["verdicts"].values()) == 9
    html = out.read_text()
    for ticket in ("EXP-302", "EXP-303", "EXP-306"):
        assert ticket in html
    assert "no scoring runs recorded" in html
    assert "no calibration recorded" in html


def test_triage_cli_keeps_each_report_and_a_rerun_adds(demo_db: Path, tmp_path: Path) -> None:
    store = SqliteStore(demo_db)
    before = len(store.list_triage_results())
    store.close()
    ticket = EXAMPLE / "tickets" / "EXP-303-filtered-region.yaml"
    assert ticket.is_file()
    for _ in range(2):
        code, out = run(
            "--store",
            str(demo_db),
            "triage",
            "--ticket",
            str(ticket),
            "--manifest",
            str(EXAMPLE / "manifest.jsonl"),
        )
        assert code == 0, out
    store = SqliteStore(demo_db)
    rows = store.list_triage_results()
    store.close()
    assert len(rows) == before + 2
    assert rows[0].ticket == "EXP-303"
    assert rows[0].result.verdict == "filtered"
    out_file = tmp_path / "r.html"
    code, _ = run("--store", str(demo_db), "report", "--out", str(out_file))
    assert code == 0
    assert "earlier triage(s) kept" in out_file.read_text()


def test_empty_store_says_what_to_run(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    code, text = run("--store", str(tmp_path / "empty.db"), "report", "--out", str(out))
    assert code == 0, text
    assert "wrote" in text
    html = out.read_text()
    assert "no triage recorded" in html
    assert "no audit recorded" in html
    assert "no regression suite given" in html


def test_report_includes_a_suite(demo_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    code, text = run(
        "--store", str(demo_db), "report", "--out", str(out), "--suite", str(EXAMPLE / "suite"), "--json"
    )
    assert code == 0, text
    assert json.loads(text)["suites"] == ["suite"]
    html = out.read_text()
    assert "active samples" in html
    assert "reasonable_rejection" in html or "failure" in html


def test_langfuse_configs_created_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with LangfuseServer() as server:
        monkeypatch.setenv("LANGFUSE_BASE_URL", server.base_url)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", server.public_key)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", server.secret_key)
        args = [
            "--store",
            str(tmp_path / "s.db"),
            "report",
            "langfuse-configs",
            "--rubric",
            str(RUBRIC),
            "--json",
        ]
        code, text = run(*args)
        assert code == 0, text
        first = json.loads(text)
        configs = {c["name"]: c for c in server.score_configs}
        assert set(first["created"]) == set(configs)
        assert configs["tracejudge.triage"]["dataType"] == "CATEGORICAL"
        assert {c["label"] for c in configs["tracejudge.triage"]["categories"]} >= {"filtered", "unconfirmed"}
        relevance = configs["restaurant-assistant.relevance"]
        assert (relevance["dataType"], relevance["minValue"], relevance["maxValue"]) == ("NUMERIC", 0, 10)
        assert configs["restaurant-assistant.verdict"]["dataType"] == "CATEGORICAL"
        assert configs["restaurant-assistant.totals"]["dataType"] == "BOOLEAN"
        code, text = run(*args)
        again = json.loads(text)
        assert again["created"] == []
        assert set(again["existing"]) == set(configs)
        assert len(server.score_configs) == len(configs)
        assert server.request_errors == []
        assert server.response_errors == []
        assert server.secret_key not in text


def test_langfuse_configs_from_the_store_dry_run(demo_db: Path) -> None:
    code, text = run("--store", str(demo_db), "report", "langfuse-configs", "--dry-run", "--json")
    assert code == 0, text
    planned = json.loads(text)["planned"]
    assert [p["name"] for p in planned] == ["tracejudge.triage"]


def test_langfuse_configs_need_langfuse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("LANGFUSE_BASE_URL", "LANGFUSE_HOST", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"):
        monkeypatch.delenv(key, raising=False)
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "report", "langfuse-configs"])
    assert result.exit_code == 2
    assert "LANGFUSE_BASE_URL" in result.output


def test_report_shows_what_it_holds_past_a_trace_the_store_holds_damaged(
    demo_db: Path, tmp_path: Path
) -> None:
    db = tmp_path / "copy.db"
    shutil.copy(demo_db, db)  # the demo closed its store: the file holds it whole
    copy = SqliteStore(db)
    try:
        lost = sorted({r.trace_id for r in copy.list_triage_results()})[0]
    finally:
        copy.close()
    cut_chunks(db, lost)
    result = CliRunner().invoke(
        cli, ["--store", str(db), "report", "--out", str(tmp_path / "r.html"), "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["tickets"] == 9  # every triaged ticket still shown
    assert summary["unreadable_traces"] == [lost]
    assert (
        f"do not read back (a damaged store), shown without their Langfuse link or prompt version: {lost}"
        in (" ".join(result.stderr.split()))
    )
    assert "tracejudge doctor --deep" in result.stderr
