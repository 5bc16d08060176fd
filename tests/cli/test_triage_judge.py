"""``tracejudge triage --judge-model``: the usage judge through the real ``openai`` client against the
scripted local server; without the option nothing changes, and facts that settle it call no judge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.cli.triage_records import V2, record, stand_in_normalizer, store_traces
from tracejudge.cli import cli
from tracejudge.store import open_store
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer

VAGUE_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLEAR_TRACE = "0af7651916cd43dd8448eb211c80319c"
VAGUE = "Yes, the prepayment is fine for order 7."
SECRET = "sk-test-do-not-print-0123456789"

TICKET = """\
ticket: EXP-311
trace_id: {trace}
required:
  - doc_id: C-17/attachment
    version: v2
    clause: "Prepayment shall not exceed 30,000 RMB"
    facts: {{prepayment_cap_rmb: 30000}}
superseded:
  - doc_id: C-17/attachment
    version: v1
    facts: {{prepayment_cap_rmb: 50000}}
"""


CONTEXT = f"Context: {V2}\nQuestion: can Acme be prepaid 40,000 RMB?"


RECORDS = {
    VAGUE_TRACE: record(VAGUE_TRACE, CONTEXT, VAGUE),
    CLEAR_TRACE: record(CLEAR_TRACE, CONTEXT, "No: the cap is 30,000 RMB."),
}


def fail_reply(*quotes: str) -> dict[str, Any]:
    return {
        "status": "fail",
        "evidence": [{"quote": q, "note": "approves an amount above the v2 cap"} for q in quotes],
        "reasoning": "approves 40,000 although v2 caps prepayment at 30,000",
    }


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TRACEJUDGE_JUDGE_MODEL", "TRACEJUDGE_JUDGE_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    stand_in_normalizer(monkeypatch, RECORDS)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as s:
        yield s


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "tj.db"
    store_traces(f"sqlite:///{path}", RECORDS)
    return path


def ticket(tmp_path: Path, trace: str = VAGUE_TRACE) -> str:
    p = tmp_path / f"{trace}.yaml"
    p.write_text(TICKET.format(trace=trace), encoding="utf-8")
    return str(p)


def run(db: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", "triage", *args], env=env)


def used(data: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in data["stages"] if s["name"] == "used_by_model")


def test_judge_decides_with_quotes(db: Path, tmp_path: Path, server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(reply=fail_reply("the prepayment is fine"))])
    args = ["--ticket", ticket(tmp_path), "--judge-model", "judge-model", "--judge-base-url", server.base_url]
    res = run(db, *args, "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    stage = used(data)
    assert data["verdict"] == "ignored_by_model"
    assert stage["status"] == "fail"
    assert stage["detail"].startswith("judge: judge-model finds the answer rests on superseded material")
    assert stage["evidence"][0] == {
        "span_id": "b" * 16,
        "note": "judge quotes the answer: 'the prepayment is fine' — approves an amount above the v2 cap",
    }
    assert any("usage judge provenance: model judge-model" in e["note"] for e in stage["evidence"])
    (body,) = server.completion_requests()
    assert body["model"] == "judge-model"
    # The table names the judge's finding too.
    server.clear_requests()
    table = run(db, *args, env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    assert "ignored_by_model" in table.stdout
    assert "judge: judge-model finds the answer rests on superseded material" in table.stdout
    assert "judge quotes the answer: 'the prepayment is fine'" in table.stdout
    # The rerun reused the cached reply: the store keeps it, and the model was not asked again.
    assert server.completion_requests() == []
    store = open_store(f"sqlite:///{db}")
    kept = store.list_triage_results()
    store.close()
    assert len(kept) == 2


def test_fabricated_quote_is_unconfirmed(db: Path, tmp_path: Path, server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(reply=fail_reply("the cap of 50,000 RMB applies"))])
    res = run(
        db, "--ticket", ticket(tmp_path), "--judge-model", "m", "--judge-base-url", server.base_url, "--json"
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["verdict"] == "unconfirmed"
    assert "judge cited text that is not in the answer" in used(data)["detail"]


def test_server_error_is_unconfirmed_and_json_stays_clean(
    db: Path, tmp_path: Path, server: ScriptedOpenAIServer
) -> None:
    server.set_rules([Rule(status=500)])
    res = run(
        db, "--ticket", ticket(tmp_path), "--judge-model", "m", "--judge-base-url", server.base_url, "--json"
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    stage = used(data)
    assert data["verdict"] == "unconfirmed"
    assert "server_error: HTTP 500" in stage["detail"]
    assert stage["missing"][0].startswith("a judge reply (the call failed: server_error")
    assert len(server.completion_requests()) == 3  # the first try and the default two retries


def test_endpoint_and_key_from_the_environment_key_never_printed(
    db: Path, tmp_path: Path, server: ScriptedOpenAIServer
) -> None:
    server.set_rules([Rule(reply=fail_reply("the prepayment is fine"))])
    env = {
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": SECRET,
        "TRACEJUDGE_JUDGE_MODEL": "env-model",
    }
    res = run(db, "--ticket", ticket(tmp_path), "--json", env=env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["verdict"] == "ignored_by_model"
    (req,) = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert req.body["model"] == "env-model"
    assert req.headers["authorization"] == "***"  # a key was sent (the server masks it)
    assert SECRET not in res.stdout + res.stderr
    assert SECRET.encode() not in db.read_bytes()


def test_without_a_judge_nothing_changes(db: Path, tmp_path: Path, server: ScriptedOpenAIServer) -> None:
    res = run(db, "--ticket", ticket(tmp_path), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["verdict"] == "unconfirmed"
    assert used(data)["missing"] == ["a usage judge to read the answer (its facts do not settle it)"]
    assert server.requests == []


def test_facts_that_settle_it_call_no_judge(db: Path, tmp_path: Path, server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(reply=fail_reply("anything"))])
    res = run(
        db,
        "--ticket",
        ticket(tmp_path, CLEAR_TRACE),
        "--judge-model",
        "m",
        "--judge-base-url",
        server.base_url,
        "--json",
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["verdict"] == "no_fault"
    assert used(data)["status"] == "pass"
    assert server.requests == []


def test_base_url_without_model_exits_2(db: Path, tmp_path: Path) -> None:
    res = run(db, "--ticket", ticket(tmp_path), "--judge-base-url", "http://127.0.0.1:9/v1")
    assert res.exit_code == 2
    assert "--judge-base-url needs --judge-model" in res.stderr


def test_help_names_the_options() -> None:
    res = CliRunner().invoke(cli, ["triage", "--help"])
    assert res.exit_code == 0
    assert "--judge-model" in res.stdout
    assert "--judge-base-url" in res.stdout
