"""``tracejudge collect phoenix`` end to end, then triage and score written back as annotations."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.store import SqliteStore
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge.testing.phoenix_server import PhoenixServer, synthetic_spans

from .conftest import KEY

TICKET = """\
ticket: EXP-311
feedback: "the agent allowed a 50,000 RMB prepayment"
required:
  - doc_id: C-17/attachment
    version: v2
    clause: "Prepayment shall not exceed 30,000 RMB"
    facts: {prepayment_cap_rmb: 30000}
superseded:
  - doc_id: C-17/attachment
    version: v1
    facts: {prepayment_cap_rmb: 50000}
"""
RUBRIC = """\
name: answer-correctness
version: 3
judge: {{model: judge-a, temperature: 0, base_url: "{url}", max_retries: 0}}
judged: [input, context, output]
criteria:
  - {{name: correctness, description: "The answer is right given the context.", threshold: 7}}
checks:
  - {{name: states_cap, type: contains, target: output, value: "30,000"}}
"""


def env_for(srv: PhoenixServer, **extra: str) -> dict[str, str]:
    return {"PHOENIX_COLLECTOR_ENDPOINT": srv.base_url, "PHOENIX_API_KEY": KEY, **extra}


def run(args: list[str], env: dict[str, str | None]):
    return CliRunner().invoke(cli, args, env=env, catch_exceptions=False)


def seed(srv: PhoenixServer, n: int) -> None:
    for i in range(n):
        spans = synthetic_spans(i)
        if i == 1:  # the clause dropped from the model input, the stale value answered
            llm = spans[2]["attributes"]
            llm["llm.input_messages.0.message.content"] = "Answer from the context.\n\n(attachment omitted)"
            llm["llm.output_messages.0.message.content"] = "The prepayment cap is 50,000 RMB."
            spans[0]["attributes"]["output.value"] = "The prepayment cap is 50,000 RMB."
        for span in spans:
            srv.add_span("default", span)


def test_cli_pulls_json_and_never_shows_the_key(server, tmp_path):
    seed(server, 4)
    db = tmp_path / "t.db"
    result = run(["--store", str(db), "collect", "phoenix", "--json"], env_for(server))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["project"], report["fetched"], report["spans_new"]) == ("default", 4, 16)
    again = run(["--store", str(db), "collect", "phoenix", "--limit", "2"], env_for(server))
    assert "fetched 0, already stored 4" in again.stdout
    shown = run(["--store", str(db), "traces", "show", synthetic_spans(0)[0]["trace_id"]], env_for(server))
    assert "C-17/attachment@v2" in shown.stdout
    for out in (result.output, again.output, shown.output):
        assert KEY not in out
    st = SqliteStore(db)
    try:
        dumped = json.dumps([s.model_dump() for t in st.list_traces() for s in st.get_spans(t.trace_id)])
        assert KEY not in dumped
    finally:
        st.close()


def test_cli_errors_are_input_errors_with_hints(server, tmp_path):
    db = str(tmp_path / "t.db")
    missing = run(["--store", db, "collect", "phoenix"], {"PHOENIX_COLLECTOR_ENDPOINT": None})  # type: ignore[dict-item]
    assert missing.exit_code == 2
    assert "PHOENIX_COLLECTOR_ENDPOINT" in missing.output
    unknown = run(["--store", db, "collect", "phoenix", "--project", "nope"], env_for(server))
    assert unknown.exit_code == 2
    assert "default" in unknown.output
    refused = run(["--store", db, "collect", "phoenix"], env_for(server, PHOENIX_API_KEY="bad-key-77"))
    assert refused.exit_code == 1
    assert "401" in refused.output
    assert "bad-key-77" not in refused.output
    bad_time = run(["--store", db, "collect", "phoenix", "--from", "yesterday"], env_for(server))
    assert bad_time.exit_code == 2


def test_pull_triage_write_back_twice_keeps_one_annotation_per_trace(server, tmp_path):
    seed(server, 3)
    db = str(tmp_path / "t.db")
    ticket = tmp_path / "EXP-311.yaml"
    ticket.write_text(TICKET)
    env = env_for(server)
    assert run(["--store", db, "collect", "phoenix"], env).exit_code == 0
    verdicts = {}
    for _ in range(2):
        for i in range(3):
            tid = synthetic_spans(i)[0]["trace_id"]
            out = run(
                ["--store", db, "triage", tid, "--ticket", str(ticket), "--json", "--write-back", "phoenix"],
                env,
            )
            assert out.exit_code == 0, out.output
            assert "wrote 1 triage verdict(s) to phoenix" in out.stderr
            assert KEY not in out.output
            verdicts[tid] = json.loads(out.stdout)["verdict"]
        assert run(["--store", db, "collect", "phoenix"], env).exit_code == 0
        annotations = server.trace_annotations
        assert len(annotations) == 3
    assert verdicts[synthetic_spans(1)[0]["trace_id"]] == "dropped_in_context"
    assert verdicts[synthetic_spans(0)[0]["trace_id"]] == "no_fault"
    by_trace = {a["trace_id"]: a for a in annotations}
    assert {a["annotator_kind"] for a in annotations} == {"CODE"}
    assert by_trace[synthetic_spans(1)[0]["trace_id"]]["result"]["label"] == "dropped_in_context"
    assert all(a["created_at"] <= a["updated_at"] for a in annotations)


def test_score_write_back_to_phoenix_span_annotations(server, tmp_path):
    seed(server, 2)
    db = str(tmp_path / "t.db")
    reply = {
        "criteria": {"correctness": {"score": 8, "reasoning": "agrees with the context"}},
        "reasoning": "ok",
    }
    with ScriptedOpenAIServer([Rule(reply=reply)]) as judge:
        rubric = tmp_path / "rubric.yaml"
        rubric.write_text(RUBRIC.format(url=judge.base_url))
        env = env_for(server, OPENAI_API_KEY="sk-test")
        assert run(["--store", db, "collect", "phoenix"], env).exit_code == 0
        for _ in range(2):
            out = run(
                ["--store", db, "score", "--rubric", str(rubric), "--write-back", "phoenix", "--json"], env
            )
            assert out.exit_code == 0, out.output
            data = json.loads(out.stdout)
            (report,) = data["write_back"]
            assert report["target"] == "phoenix"
            assert report["failed"] == []
            assert report["written"] == 6  # per item: the criterion, the states_cap check, the verdict
    spans = server.span_annotations
    # Each item has an evaluated span (the final-answer span), so every score is a span annotation.
    assert len(spans) == 6
    assert server.trace_annotations == []
    assert {a["span_id"] for a in spans} == {synthetic_spans(i)[0]["span_id"] for i in range(2)}
    kinds = {a["name"]: a["annotator_kind"] for a in spans}
    assert kinds["answer-correctness.correctness"] == "LLM"
    assert kinds["answer-correctness.verdict"] == "CODE"
    assert kinds["answer-correctness.states_cap"] == "CODE"
    correctness = [a for a in spans if a["name"] == "answer-correctness.correctness"]
    assert {a["identifier"] for a in correctness} == {"tracejudge:answer-correctness.correctness:3"}
    assert {a["result"]["score"] for a in correctness} == {8.0}
    assert all(a["metadata"]["judge_model"] == "judge-a" for a in correctness)
