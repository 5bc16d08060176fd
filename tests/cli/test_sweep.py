"""``triage --sweep`` and ``ticket draft`` from the command line, over the recorded convention traces;
``--langfuse-score`` and ``--write-back langfuse`` against the local spec-validated Langfuse server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.sweep.sweep_data import RECORDED, recorded_manifest
from tracejudge.cli import cli
from tracejudge.store import open_store
from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge_collectors.otel import read_otlp_file

STALE = "langchain_openinference_dropped.pb"
RIGHT = "langchain_openinference_rag.pb"


def _trace_id(name: str) -> str:
    return next(iter(read_otlp_file(RECORDED / name))).trace_id


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / 'tj.db'}"
    store = open_store(url)
    for name in (STALE, RIGHT, "openai_chat.pb", "genai_agent.json"):
        store.put_spans(list(read_otlp_file(RECORDED / name)))
    store.close()
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(e.model_dump_json() + "\n" for e in recorded_manifest()))
    return {"store": url, "manifest": str(manifest), "dir": str(tmp_path)}


def run(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", env["store"], *args], catch_exceptions=False)


def test_sweep_json_is_the_contract(env: dict[str, str]) -> None:
    res = run(env, "triage", "--sweep", "--manifest", env["manifest"], "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    # DESIGN's fields, and the two README's Beyond DESIGN row adds (only added fields).
    assert set(data) == {"flagged", "scanned", "still_arriving", "unreadable"}
    assert data["still_arriving"] == []
    assert data["unreadable"] == []
    assert data["scanned"] == 4
    assert {f["trace_id"] for f in data["flagged"]} == {_trace_id(STALE), _trace_id("openai_chat.pb")}
    for f in data["flagged"]:
        assert set(f) == {"trace_id", "task_time", "doc_id", "in_effect", "used", "evidence", "ticket"}
        assert (f["doc_id"], f["in_effect"], f["used"]) == ("C-17/attachment", "v2", "v1")
        assert f["ticket"]["status"] == "draft"
        assert all(set(e) == {"span_id", "note"} for e in f["evidence"])


def test_sweep_json_is_what_the_library_returns(env: dict[str, str]) -> None:
    from tracejudge.sweep import sweep

    res = run(env, "triage", "--sweep", "--manifest", env["manifest"], "--json")
    store = open_store(env["store"])
    try:
        assert json.loads(res.stdout) == json.loads(sweep(store, recorded_manifest()).model_dump_json())
    finally:
        store.close()


def test_sweep_table_for_people(env: dict[str, str]) -> None:
    res = run(env, "triage", "--sweep", "--manifest", env["manifest"])
    assert res.exit_code == 0
    assert "by document version" in res.stdout
    assert "C-17/attachment" in res.stdout
    assert "2 flagged of 4 trace(s) scanned" in res.stdout


def test_sweep_window_and_bad_input(env: dict[str, str]) -> None:
    res = run(env, "triage", "--sweep", "--manifest", env["manifest"], "--to", "2026-01-01", "--json")
    assert json.loads(res.stdout) == {"flagged": [], "scanned": 0, "still_arriving": [], "unreadable": []}
    bad = run(env, "triage", "--sweep", "--manifest", env["manifest"], "--from", "yesterday-ish")
    assert bad.exit_code == 2
    assert "--from" in bad.output
    assert run(env, "triage", "--sweep").exit_code == 2
    assert "--ticket" in run(env, "triage").output


def test_ticket_draft_then_triage_says_the_basis_is_unverified(env: dict[str, str]) -> None:
    out = Path(env["dir"]) / "draft.yaml"
    trace = _trace_id(STALE)
    res = run(
        env, "ticket", "draft", "--trace", trace, "--manifest", env["manifest"],
        "--feedback", "It said 50,000 RMB; the cap is 30,000 RMB now.", "--out", str(out),
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert 'status: "draft"' in out.read_text()
    text = run(env, "triage", "--ticket", str(out), "--manifest", env["manifest"])
    assert text.exit_code == 0
    assert "unverified basis" in text.stdout
    as_json = json.loads(
        run(env, "triage", "--ticket", str(out), "--manifest", env["manifest"], "--json").stdout
    )
    assert as_json["basis"] == "draft"
    assert as_json["verdict"] == "dropped_in_context"
    assert as_json["summary"].startswith("unverified basis")


def test_ticket_draft_json_and_stdout(env: dict[str, str]) -> None:
    trace = _trace_id(STALE)
    res = run(env, "ticket", "draft", "--trace", trace, "--manifest", env["manifest"], "--json")
    data = json.loads(res.stdout)
    assert data["trace_id"] == trace
    assert data["ticket"]["required"][0]["version"] == "v2"
    assert data["ambiguous"] == []
    plain = run(env, "ticket", "draft", "--trace", trace, "--manifest", env["manifest"])
    assert plain.stdout == data["yaml"]
    missing = run(env, "ticket", "draft", "--trace", "f" * 32, "--manifest", env["manifest"])
    assert missing.exit_code == 2
    assert "no spans stored" in missing.output


def test_ticket_draft_takes_a_unique_trace_id_prefix_as_traces_show_does(env: dict[str, str]) -> None:
    trace = _trace_id(STALE)
    full = run(env, "ticket", "draft", "--trace", trace, "--manifest", env["manifest"], "--json")
    short = run(env, "ticket", "draft", "--trace", trace[:8].upper(), "--manifest", env["manifest"], "--json")
    assert short.exit_code == 0, short.output
    assert json.loads(short.stdout) == json.loads(full.stdout)


@pytest.fixture
def langfuse(monkeypatch: pytest.MonkeyPatch) -> Iterator[LangfuseServer]:
    srv = LangfuseServer(generation="v4").start()
    monkeypatch.setenv("LANGFUSE_BASE_URL", srv.base_url)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", srv.public_key)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", srv.secret_key)
    yield srv
    srv.stop()
    assert srv.response_errors == []


def test_ticket_draft_reads_the_feedback_of_a_langfuse_score(
    env: dict[str, str], langfuse: LangfuseServer
) -> None:
    trace = _trace_id(RIGHT)
    langfuse.add_score(
        {"traceId": trace, "name": "user-feedback", "value": 0, "dataType": "NUMERIC",
         "comment": "Hotel? No: it said 50,000 RMB, the cap is 30,000 RMB now.",
         "timestamp": "2026-11-30T10:00:00Z"}
    )  # fmt: skip
    res = run(env, "ticket", "draft", "--trace", trace, "--manifest", env["manifest"],
              "--langfuse-score", "user-feedback", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["ticket"]["feedback"] == "Hotel? No: it said 50,000 RMB, the cap is 30,000 RMB now."
    assert data["ticket"]["required"][0]["clause"] == "Prepayment shall not exceed 30,000 RMB per order."
    none = run(
        env, "ticket", "draft", "--trace", trace, "--manifest", env["manifest"], "--langfuse-score", "nope"
    )
    assert none.exit_code == 2
    assert "no Langfuse score named 'nope'" in none.output


def test_sweep_write_back_marks_flagged_traces_in_langfuse(
    env: dict[str, str], langfuse: LangfuseServer
) -> None:
    args = ("triage", "--sweep", "--manifest", env["manifest"], "--write-back", "langfuse", "--json")
    res = run(env, *args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["write_back"]["written"] == 2
    marks = [s for s in langfuse.scores if s["name"] == "tracejudge.sweep"]
    assert {s["traceId"] for s in marks} == {_trace_id(STALE), _trace_id("openai_chat.pb")}
    assert all(s["stringValue" if "stringValue" in s else "value"] == "not_in_effect" for s in marks)
    assert all("C-17/attachment@v1" in s["comment"] for s in marks)
    run(env, *args)  # a rerun replaces
    assert len([s for s in langfuse.scores if s["name"] == "tracejudge.sweep"]) == 2
