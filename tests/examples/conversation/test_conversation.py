"""Sessions (DESIGN 5.5): a conversation traced over OTLP with the real OpenInference instrumentation,
retrieval in turn 1 and a wrong answer in turn 3 — read across turns, for every convention's
session attribute, and never a definite verdict when an earlier turn is not stored."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from tests.conftest import load_module
from tracejudge.cli import cli
from tracejudge.schema import RawSpan
from tracejudge.store import SqliteStore, open_store
from tracejudge.testing.openai_server import ScriptedOpenAIServer
from tracejudge_collectors.otel import serve_in_thread

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "conversation"
ex = load_module(EXAMPLE / "conversation.py", "conversation_example")
KEPT, CUT = ex.CONVERSATIONS
TICKET_KEPT = EXAMPLE / "tickets" / "CONV-1-history-kept.yaml"
TICKET_CUT = EXAMPLE / "tickets" / "CONV-2-history-cut.yaml"
MANIFEST = EXAMPLE / "manifest.jsonl"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    """Both conversations held against the scripted model, exported over OTLP into a receiver."""
    db = tmp_path_factory.mktemp("conversation") / "store.db"
    store = SqliteStore(db)
    with ScriptedOpenAIServer(ex.model_rules()) as model, serve_in_thread(store) as url:
        answers = ex.run_conversations(
            OTLPSpanExporter(endpoint=f"{url}/v1/traces"),
            model.base_url,
            as_of=datetime(2026, 11, 18, 9, 30, tzinfo=UTC),
        )
        deadline = time.monotonic() + 30
        while len(store.list_traces()) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(store.list_traces()) == 6
    store.close()
    return db, answers


def _triage(db: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli, ["--store", f"sqlite:///{db}", "triage", "--manifest", str(MANIFEST), "--json", *args]
    )
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _statuses(loc: dict[str, Any]) -> list[str]:
    return [s["status"] for s in loc["stages"]]


def test_the_turns_of_each_conversation_are_linked_in_order(recorded: tuple[Path, Any]) -> None:
    db, answers = recorded
    assert "50,000" in answers["history-kept"][2]
    store = open_store(f"sqlite:///{db}")
    try:
        assert [t.trace_id for t in store.session_traces(KEPT.session_id)] == list(KEPT.trace_ids)
        assert [t.trace_id for t in store.session_traces(CUT.session_id)] == list(CUT.trace_ids)
    finally:
        store.close()


def test_a_clause_retrieved_in_turn_1_and_carried_by_the_history_is_ignored_by_model(
    recorded: tuple[Path, Any],
) -> None:
    db, _ = recorded
    loc = _triage(db, "--ticket", str(TICKET_KEPT))
    assert loc["verdict"] == "ignored_by_model"
    assert _statuses(loc) == ["pass", "pass", "pass", "fail"]
    assert loc["session_id"] == KEPT.session_id
    assert [t["trace_id"] for t in loc["turns"]] == list(KEPT.trace_ids)
    # The retrieval evidence names the turn (and its trace) that retrieved the material.
    retrieved = loc["stages"][1]["evidence"]
    assert any(f"turn 1 of the session (trace {KEPT.trace_ids[0]})" in e["note"] for e in retrieved)
    # In context: this turn's own model input, which holds the history.
    assert loc["stages"][2]["status"] == "pass"


def test_history_cut_before_the_clause_is_dropped_in_context(recorded: tuple[Path, Any]) -> None:
    db, _ = recorded
    loc = _triage(db, "--ticket", str(TICKET_CUT))
    assert loc["verdict"] == "dropped_in_context"
    assert _statuses(loc) == ["pass", "pass", "fail", "skipped"]


def test_without_the_session_turn_3_alone_is_unconfirmed(recorded: tuple[Path, Any], tmp_path: Path) -> None:
    # Only turn 3 stored: nothing in the store retrieved anything; the verdict stays unconfirmed and
    # says which conversation's turns to collect.
    db, _ = recorded
    source = open_store(f"sqlite:///{db}")
    only = SqliteStore(tmp_path / "turn3.db")
    try:
        only.put_spans(source.get_spans(KEPT.trace_ids[2]))
    finally:
        source.close()
        only.close()
    loc = _triage(tmp_path / "turn3.db", "--ticket", str(TICKET_KEPT))
    assert loc["verdict"] == "unconfirmed"
    assert _statuses(loc)[:2] == ["pass", "unconfirmed"] or _statuses(loc)[0] == "unconfirmed"
    missing = " ".join(m for s in loc["stages"] for m in s["missing"])
    assert KEPT.session_id in missing
    assert "collect" in missing


def _renamed(spans: list[RawSpan], key: str) -> list[RawSpan]:
    out = []
    for s in spans:
        attrs = dict(s.attributes)
        if "session.id" in attrs:
            attrs[key] = attrs.pop("session.id")
        out.append(s.model_copy(update={"attributes": attrs}))
    return out


@pytest.mark.parametrize("key", ["gen_ai.conversation.id", "langfuse.session.id", "session.id"])
def test_every_conventions_session_attribute_links_the_turns(
    recorded: tuple[Path, Any], tmp_path: Path, key: str
) -> None:
    db, _ = recorded
    source = open_store(f"sqlite:///{db}")
    target = SqliteStore(tmp_path / "renamed.db")
    try:
        for tid in KEPT.trace_ids:
            target.put_spans(_renamed(source.get_spans(tid), key))
    finally:
        source.close()
        target.close()
    # Without session_id in the ticket: the session the trace records is read.
    ticket = tmp_path / "ticket.yaml"
    ticket.write_text(
        "\n".join(
            line for line in TICKET_KEPT.read_text("utf-8").splitlines() if not line.startswith("session_id")
        ),
        "utf-8",
    )
    loc = _triage(tmp_path / "renamed.db", "--ticket", str(ticket))
    assert loc["verdict"] == "ignored_by_model"
    assert loc["session_id"] == KEPT.session_id
    assert len(loc["turns"]) == 3


def test_an_earlier_turn_missing_never_gives_a_definite_not_returned(
    recorded: tuple[Path, Any], tmp_path: Path
) -> None:
    # Turns 2 and 3 stored, turn 1 (the one that retrieved v2) not: turn 2's retrieval did not
    # return v2, but the history of turn 3 shows an earlier turn that is not stored — so no
    # "not returned"/"filtered": unconfirmed, naming the session to collect.
    db, _ = recorded
    source = open_store(f"sqlite:///{db}")
    partial = SqliteStore(tmp_path / "partial.db")
    try:
        for tid in KEPT.trace_ids[1:]:
            partial.put_spans(source.get_spans(tid))
    finally:
        source.close()
        partial.close()
    loc = _triage(tmp_path / "partial.db", "--ticket", str(TICKET_KEPT))
    assert loc["verdict"] == "unconfirmed"
    retrieved = loc["stages"][1]
    assert retrieved["status"] == "unconfirmed"
    assert any("1 earlier turn(s) of session conv-8812" in m for m in retrieved["missing"])
    # With every turn stored the same ticket is definite (above): the removal only made it unconfirmed.


def test_traces_show_session_lists_the_turns_oldest_first(recorded: tuple[Path, Any]) -> None:
    db, _ = recorded
    runner = CliRunner()
    shown = runner.invoke(
        cli, ["--store", f"sqlite:///{db}", "traces", "show", "--session", CUT.session_id, "--json"]
    )
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["session_id"] == CUT.session_id
    assert [t["trace_id"] for t in data["turns"]] == list(CUT.trace_ids)
    text = runner.invoke(cli, ["--store", f"sqlite:///{db}", "traces", "show", "--session", CUT.session_id])
    assert text.exit_code == 0
    assert text.output.index("turn 1") < text.output.index("turn 2") < text.output.index("turn 3")
    unknown = runner.invoke(cli, ["--store", f"sqlite:///{db}", "traces", "show", "--session", "nope"])
    assert unknown.exit_code == 2
    assert "collect" in unknown.output


def test_a_trace_whose_root_has_not_arrived_says_so_beside_the_verdict(
    recorded: tuple[Path, Any], tmp_path: Path
) -> None:
    db, _ = recorded
    source = open_store(f"sqlite:///{db}")
    late = SqliteStore(tmp_path / "late.db")
    try:
        for tid in KEPT.trace_ids:
            spans = source.get_spans(tid)
            # Turn 3's root is still in flight (another exporter flushes late).
            late.put_spans(
                [s for s in spans if s.parent_span_id is not None] if tid == KEPT.trace_ids[2] else spans
            )
    finally:
        source.close()
        late.close()
    loc = _triage(tmp_path / "late.db", "--ticket", str(TICKET_KEPT))
    assert any("root span has not been received" in n for n in loc["notes"])
    assert any("parent span" in n and "not received" in n for n in loc["notes"])
    assert loc["verdict"] in {"ignored_by_model", "unconfirmed"}
    shown = CliRunner().invoke(
        cli, ["--store", f"sqlite:///{tmp_path / 'late.db'}", "traces", "show", KEPT.trace_ids[2]]
    )
    assert "may be incomplete" in shown.output
    plain = CliRunner().invoke(
        cli,
        [
            "--store",
            f"sqlite:///{tmp_path / 'late.db'}",
            "triage",
            "--ticket",
            str(TICKET_KEPT),
            "--manifest",
            str(MANIFEST),
        ],
    )
    assert "note: the trace may be incomplete" in plain.output


def test_running_the_example_records_both_conversations_and_prints_commands_that_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "conversation.db"
    assert ex.main(["--store", str(db)]) == 0
    printed = [
        line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("  tracejudge ")
    ]
    assert len(printed) == 4
    verdicts = []
    for words in printed:
        result = CliRunner().invoke(cli, [*words[1:], "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        if words[3] == "traces":
            ids = [t["trace_id"] for t in data["turns"]]  # every turn of the session, oldest first
            assert len(ids) == 3
            assert ids == sorted(ids)
        else:
            verdicts.append(data["verdict"])
    assert verdicts == ["ignored_by_model", "dropped_in_context"]


def _run_example(db: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Run the example into ``db`` and each ``triage`` command it prints, with --json."""
    assert ex.main(["--store", str(db)]) == 0
    out: dict[str, Any] = {}
    for line in capsys.readouterr().out.splitlines():
        words = line.split()
        if line.startswith("  tracejudge ") and "triage" in words:
            result = CliRunner().invoke(cli, [*words[1:], "--json"])
            assert result.exit_code == 0, result.output
            out[words[words.index("--ticket") + 1]] = json.loads(result.stdout)
    return out


def test_two_runs_give_the_same_triage_the_task_time_being_the_turns_time_from_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The tickets give no task_time: triage takes the trace's start, which is the turn's time (the
    # conversation's start plus a minute a turn), not the wall clock of the run.
    first = _run_example(tmp_path / "one.db", capsys)
    second = _run_example(tmp_path / "two.db", capsys)
    assert len(first) == 2
    assert first == second
    assert {loc["task_time"] for loc in first.values()} == {"2026-11-18T09:32:00Z"}
    store = open_store(f"sqlite:///{tmp_path / 'one.db'}")
    try:
        starts = [t.start_time for t in store.session_traces(KEPT.session_id)]
    finally:
        store.close()
    assert starts == [datetime(2026, 11, 18, 9, 30 + n, tzinfo=UTC) for n in range(3)]
