"""``tracejudge triage``: one ticket, a folder of tickets, --json, --write-back, and exit codes."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.cli.triage_records import V2, record, stand_in_normalizer, store_traces
from tests.store.damage import cut_chunks
from tracejudge.cli import cli
from tracejudge.schema import Localization, RawSpan
from tracejudge.store import open_store

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER = "0af7651916cd43dd8448eb211c80319c"

TICKET = f"""\
ticket: EXP-311
trace_id: {TRACE}
feedback: "the agent used the old cap"
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
MANIFEST = (
    '{"doc_id": "C-17/attachment", "version": "v2", "effective_from": "2026-03-01T00:00:00Z", '
    '"indexed_at": "2026-03-02T03:00:00Z", "metadata": {"region": "CN"}, "acl": ["procurement"]}\n'
)


RECORDS = {
    TRACE: record(TRACE, f"Context: {V2}", "The cap is 30,000 RMB."),
    OTHER: record(OTHER, "Context: (trimmed)", "Up to 50,000 RMB is fine."),
}


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'tj.db'}"
    store_traces(url, (TRACE, OTHER))
    return url


@pytest.fixture
def records(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand in for the normalizer so these tests pin the command, not the convention tables."""
    stand_in_normalizer(monkeypatch, RECORDS)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def run(store_url: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", store_url, "triage", *args])


@pytest.mark.usefixtures("records")
def test_single_ticket_json_is_design_5_5(store_url: str, tmp_path: Path) -> None:
    ticket = write(tmp_path, "t.yaml", TICKET)
    manifest = write(tmp_path, "m.jsonl", MANIFEST)
    res = run(store_url, "--ticket", str(ticket), "--manifest", str(manifest), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["trace_id"] == TRACE
    assert data["verdict"] == "no_fault"
    assert data["task_time"].startswith("2026-11-18T09:30:00")
    assert [s["name"] for s in data["stages"]] == ["indexed", "retrieved", "in_context", "used_by_model"]
    assert [s["status"] for s in data["stages"]] == ["pass"] * 4
    assert data["stages"][0]["evidence"][0]["span_id"] == "a" * 16


@pytest.mark.usefixtures("records")
def test_single_ticket_table(store_url: str, tmp_path: Path) -> None:
    ticket = write(tmp_path, "t.yaml", TICKET)
    res = run(store_url, OTHER, "--ticket", str(ticket))  # the argument overrides the ticket's trace_id
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("verdict: dropped_in_context")
    for word in ("indexed", "retrieved", "in_context", "used_by_model", "skipped", "fail"):
        assert word in res.stdout


@pytest.mark.usefixtures("records")
def test_folder_of_tickets(store_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "tickets"
    write(folder, "a.yaml", TICKET)
    write(folder, "b.yaml", TICKET.replace(TRACE, OTHER).replace("EXP-311", "EXP-312"))
    res = run(store_url, "--ticket", str(folder), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [(r["ticket"], r["verdict"]) for r in data["results"]] == [
        ("EXP-311", "no_fault"),
        ("EXP-312", "dropped_in_context"),
    ]
    assert data["results"][1]["ticket_file"].endswith("b.yaml")
    assert data["summary"]["dropped_in_context"] == 1
    assert sum(data["summary"].values()) == 2
    table = run(store_url, "--ticket", str(folder))
    assert table.exit_code == 0, table.output
    assert "EXP-312" in table.stdout
    assert "dropped_in_context" in table.stdout
    assert "in_context" in table.stdout


def test_ticket_parse_error_exits_2_naming_the_line(store_url: str, tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.yaml", "ticket: EXP-1\nrequired:\n  - doc_id: [x\n")
    res = run(store_url, "--ticket", str(bad))
    assert res.exit_code == 2
    assert f"{bad}:4:" in res.stderr or f"{bad}:3:" in res.stderr
    schema = write(tmp_path, "schema.yaml", f"trace_id: {TRACE}\nrequired:\n  - version: v2\n")
    res = run(store_url, "--ticket", str(schema))
    assert res.exit_code == 2
    assert f"{schema}:3: required[0].doc_id: Field required" in res.stderr


def test_bad_ticket_in_a_folder_exits_2(store_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "tickets"
    write(folder, "a.yaml", TICKET)
    write(folder, "b.yaml", "required: {oops")
    res = run(store_url, "--ticket", str(folder), "--json")
    assert res.exit_code == 2
    assert "b.yaml:1:" in res.stderr
    assert res.stdout == ""


def test_manifest_parse_error_exits_2(store_url: str, tmp_path: Path) -> None:
    ticket = write(tmp_path, "t.yaml", TICKET)
    manifest = write(tmp_path, "m.jsonl", MANIFEST + "{not json}\n")
    res = run(store_url, "--ticket", str(ticket), "--manifest", str(manifest))
    assert res.exit_code == 2
    assert f"{manifest}:2:" in res.stderr


def test_unknown_trace_and_missing_trace_id_exit_2(store_url: str, tmp_path: Path) -> None:
    ticket = write(tmp_path, "t.yaml", TICKET)
    res = run(store_url, "f" * 32, "--ticket", str(ticket))
    assert res.exit_code == 2
    assert "no spans stored for trace" in res.stderr
    anonymous = write(tmp_path, "anon.yaml", TICKET.replace(f"trace_id: {TRACE}\n", ""))
    res = run(store_url, "--ticket", str(anonymous))
    assert res.exit_code == 2
    assert "no trace id" in res.stderr
    res = run(store_url, "--ticket", str(tmp_path / "missing.yaml"))
    assert res.exit_code == 2


@pytest.mark.usefixtures("records")
def test_write_back_calls_the_writer(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tracejudge.write

    calls: list[tuple[str, list[Localization]]] = []

    class Report:
        written = 1
        failed = ()

    def fake_write_triage(target: str, results: Sequence[Localization]) -> Report:
        calls.append((target, list(results)))
        return Report()

    monkeypatch.setattr(tracejudge.write, "write_triage", fake_write_triage)
    ticket = write(tmp_path, "t.yaml", TICKET)
    res = run(store_url, "--ticket", str(ticket), "--write-back", "langfuse", "--json")
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)  # stdout stays pure JSON
    assert "wrote 1 triage verdict(s) to langfuse" in res.stderr
    assert [(t, [r.trace_id for r in rs]) for t, rs in calls] == [("langfuse", [TRACE])]
    calls.clear()
    assert run(store_url, "--ticket", str(ticket)).exit_code == 0
    assert calls == []  # nothing written without the flag


@pytest.mark.usefixtures("records")
def test_write_back_unavailable_exits_2(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tracejudge.write", None)
    ticket = write(tmp_path, "t.yaml", TICKET)
    res = run(store_url, "--ticket", str(ticket), "--write-back", "langfuse")
    assert res.exit_code == 2
    assert "--write-back is not available" in res.stderr


def test_real_normalizer_openinference_trace(tmp_path: Path) -> None:
    """Spans in the OpenInference convention through the real normalizer, end to end."""
    base = 1_700_000_000_000_000_000
    prompt = f"Context: {V2}\nCan I prepay 40,000 RMB?"
    docs = {
        "retrieval.documents.0.document.id": "chunk-1",
        "retrieval.documents.0.document.content": V2,
        "retrieval.documents.0.document.metadata": json.dumps({"doc_id": "C-17/attachment", "version": "v2"}),
    }
    spans = [
        RawSpan(trace_id=TRACE, span_id="1" * 16, name="agent", start_time_unix_nano=base,
                end_time_unix_nano=base + 3000,
                attributes={"openinference.span.kind": "AGENT", "input.value": "Can I prepay 40,000 RMB?",
                            "output.value": "No: the cap is 30,000 RMB."}),
        RawSpan(trace_id=TRACE, span_id="2" * 16, parent_span_id="1" * 16, name="retrieve",
                start_time_unix_nano=base + 1, end_time_unix_nano=base + 2,
                attributes={"openinference.span.kind": "RETRIEVER", "input.value": "prepayment cap", **docs}),
        RawSpan(trace_id=TRACE, span_id="3" * 16, parent_span_id="1" * 16, name="llm",
                start_time_unix_nano=base + 3, end_time_unix_nano=base + 4,
                attributes={"openinference.span.kind": "LLM",
                            "llm.input_messages.0.message.role": "user",
                            "llm.input_messages.0.message.content": prompt,
                            "llm.output_messages.0.message.role": "assistant",
                            "llm.output_messages.0.message.content": "No: the cap is 30,000 RMB."}),
    ]  # fmt: skip
    url = f"sqlite:///{tmp_path / 'tj.db'}"
    store = open_store(url)
    store.put_spans(spans)
    store.close()
    ticket = write(tmp_path, "t.yaml", TICKET)
    res = run(url, "--ticket", str(ticket), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["verdict"] == "no_fault", data


@pytest.mark.usefixtures("records")
def test_folder_goes_on_past_a_trace_not_stored(store_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "tickets"
    write(folder, "a.yaml", TICKET)
    write(folder, "b.yaml", TICKET.replace(TRACE, "f" * 32).replace("EXP-311", "EXP-399"))
    res = run(store_url, "--ticket", str(folder), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [(r["ticket"], r["verdict"]) for r in data["results"]] == [
        ("EXP-311", "no_fault"),
        ("EXP-399", "unconfirmed"),
    ]
    assert data["results"][1]["stages"][0]["missing"] == [
        f"the spans of trace {'f' * 32} in the store (collect the trace first)"
    ]
    assert data["summary"]["unconfirmed"] == 1
    assert "1 ticket(s) name a trace with no stored spans (EXP-399)" in res.stderr
    store = open_store(store_url)
    try:
        # Only real triages are kept for the report; the unstored trace has nothing to report on.
        assert {r.trace_id for r in store.list_triage_results()} == {TRACE}
    finally:
        store.close()


@pytest.mark.usefixtures("records")
def test_folder_table_never_cuts_a_verdict(store_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "tickets"
    write(folder, "a.yaml", TICKET.replace(TRACE, OTHER))
    res = CliRunner().invoke(
        cli, ["--store", store_url, "triage", "--ticket", str(folder)], env={"COLUMNS": "60"}
    )
    assert res.exit_code == 0, res.output
    assert "dropped_in_context" in res.stdout
    assert "in_context" in res.stdout
    assert all(len(line) <= 60 for line in res.stdout.splitlines())


@pytest.mark.usefixtures("records")
def test_write_back_failures_are_named_and_exit_1(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each failed write names its ticket, trace, score and the backend's reason (never a secret);
    any failed write exits 1 and says a rerun is safe; --json carries the write results."""
    import tracejudge.write
    from tracejudge.write import WriteFailure, WriteReport, triage_scores

    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-very-secret-0123")

    def half_failing(target: str, results: Sequence[Localization]) -> WriteReport:
        scores = triage_scores(results)
        bad = next(s for s in scores if s.trace_id == OTHER)
        reason = "rejected: Authorization failed for sk-lf-very-secret-0123 (quota exceeded)"
        return WriteReport(
            target=target,
            written=len(scores) - 1,
            failed=(WriteFailure(key=bad.score_id, reason=reason, status=429),),
        )

    monkeypatch.setattr(tracejudge.write, "write_triage", half_failing)
    write(tmp_path, "tickets/a.yaml", TICKET)
    write(tmp_path, "tickets/b.yaml", TICKET.replace(TRACE, OTHER).replace("EXP-311", "EXP-312"))
    folder = str(tmp_path / "tickets")
    res = run(store_url, "--ticket", folder, "--write-back", "langfuse")
    assert res.exit_code == 1, res.output
    assert "sk-lf-very-secret" not in res.output + res.stderr
    failed = [line for line in res.stderr.splitlines() if "failed:" in line]
    assert len(failed) == 1
    assert all(w in failed[0] for w in ("EXP-312", OTHER, "tracejudge.triage", "429", "quota exceeded"))
    assert TRACE not in failed[0]
    assert "rerun" in res.stderr
    assert "deterministic" in res.stderr

    res = run(store_url, "--ticket", folder, "--write-back", "langfuse", "--json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["summary"]["dropped_in_context"] == 1
    wb = data["write_back"]
    assert (wb["target"], wb["written"]) == ("langfuse", 1)
    [f] = wb["failed"]
    assert (f["ticket"], f["trace_id"], f["score_name"], f["status"]) == (
        "EXP-312",
        OTHER,
        "tracejudge.triage",
        429,
    )
    assert "quota exceeded" in f["reason"]
    assert "sk-lf" not in f["reason"]


@pytest.mark.usefixtures("records")
def test_write_back_success_exits_0_whatever_the_verdict(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracejudge.write
    from tracejudge.write import RecordingWriter, write_triage

    writer = RecordingWriter()
    monkeypatch.setattr(
        tracejudge.write, "write_triage", lambda target, results: write_triage(target, results, writer=writer)
    )
    ticket = write(tmp_path, "t.yaml", TICKET)
    res = run(store_url, OTHER, "--ticket", str(ticket), "--write-back", "langfuse", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["verdict"] == "dropped_in_context"
    assert data["write_back"] == {"target": "langfuse", "written": 1, "failed": []}
    assert [s.value for s in writer.scores.values()] == ["dropped_in_context"]


@pytest.mark.usefixtures("records")
def test_command_line_trace_differing_from_the_ticket_warns(store_url: str, tmp_path: Path) -> None:
    ticket = write(tmp_path, "t.yaml", TICKET)
    res = run(store_url, OTHER.upper(), "--ticket", str(ticket), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["trace_id"] == OTHER  # the command line wins
    assert "warning" in res.stderr
    assert TRACE in res.stderr
    assert OTHER in res.stderr
    res = run(store_url, TRACE.upper(), "--ticket", str(ticket), "--json")
    assert res.exit_code == 0
    assert "warning" not in res.stderr  # the same id, written differently, is no mismatch


@pytest.mark.usefixtures("records")
def test_the_library_call_returns_exactly_the_json_the_command_prints(store_url: str, tmp_path: Path) -> None:
    from tracejudge.cli import print_json
    from tracejudge.localize import triage_tickets

    folder = tmp_path / "tickets"
    write(folder, "a.yaml", TICKET)
    write(folder, "b.yaml", TICKET.replace(TRACE, "f" * 32).replace("EXP-311", "EXP-399"))
    single = write(tmp_path, "t.yaml", TICKET)
    for path, extra in ((single, ("--manifest", str(write(tmp_path, "m.jsonl", MANIFEST)))), (folder, ())):
        res = run(store_url, "--ticket", str(path), *extra, "--json")
        assert res.exit_code == 0, res.output
        store = open_store(store_url)
        try:
            manifest = Path(extra[1]) if extra else None
            out = triage_tickets(store, path, manifest_path=manifest)
        finally:
            store.close()
        assert out.folder == (path == folder)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            print_json(out.json())
        assert buf.getvalue() == res.stdout


@pytest.mark.usefixtures("records")
def test_the_verdict_line_shows_control_characters_escaped(store_url: str, tmp_path: Path) -> None:
    # A ticket id carrying a terminal title sequence and a bidi override is shown, never acted on.
    hostile = TICKET.replace("ticket: EXP-311", 'ticket: "EXP-311\\e]0;pwned\\a\\u202e"')
    ticket = write(tmp_path, "t.yaml", hostile)
    res = run(store_url, "--ticket", str(ticket))
    assert res.exit_code == 0, res.output
    assert "\x1b]0;" not in res.stdout
    assert "\u202e" not in res.stdout
    assert "\\x1b]0;pwned\\x07\\u202e" in res.stdout


@pytest.mark.usefixtures("records")
def test_folder_goes_on_past_a_trace_the_store_holds_damaged(store_url: str, tmp_path: Path) -> None:
    """A damaged trace is unconfirmed as a trace not stored is, and the rest are triaged; so is a trace
    whose earlier turn is damaged (its conversation cannot be read whole). Alone, it is an error."""
    folder = tmp_path / "tickets"
    write(folder, "a.yaml", TICKET)
    write(folder, "b.yaml", TICKET.replace(TRACE, OTHER).replace("EXP-311", "EXP-312"))
    cut_chunks(tmp_path / "tj.db", OTHER)
    res = run(store_url, "--ticket", str(folder), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [(r["ticket"], r["verdict"]) for r in data["results"]] == [
        ("EXP-311", "no_fault"),
        ("EXP-312", "unconfirmed"),
    ]
    [indexed, *rest] = data["results"][1]["stages"]
    assert indexed["status"] == "unconfirmed"
    assert indexed["detail"].startswith(f"store_damaged: trace {OTHER}: a stored chunk of spans")
    assert "restore the store from a backup" in indexed["missing"][0]
    assert {s["status"] for s in rest} == {"skipped"}
    assert "1 ticket(s) name a trace the store holds damaged" in " ".join(res.stderr.split())
    assert "no stored spans" not in res.stderr
    store = open_store(store_url)
    try:  # nothing kept for the damaged trace: the store's damage is not a verdict on the agent
        assert {r.trace_id for r in store.list_triage_results()} == {TRACE}
    finally:
        store.close()
    alone = run(store_url, "--ticket", str(folder / "b.yaml"))
    assert alone.exit_code == 1
    assert f"trace {OTHER}: a stored chunk of spans" in alone.stderr
    assert "doctor --deep" in alone.stderr


@pytest.mark.usefixtures("records")
def test_a_damaged_earlier_turn_leaves_the_later_turn_unconfirmed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tj.db'}"
    store = open_store(url)
    try:  # OTHER the first turn of session s, TRACE the second
        store.put_spans(
            [
                RawSpan(trace_id=t, span_id="c" * 16, name="agent", start_time_unix_nano=n,
                        end_time_unix_nano=n + 1, attributes={"session.id": "s"})
                for t, n in ((OTHER, 1), (TRACE, 5))
            ]
        )  # fmt: skip
    finally:
        store.close()
    folder = tmp_path / "tickets"
    write(folder, "a.yaml", TICKET)
    whole = json.loads(run(url, "--ticket", str(folder), "--json").stdout)
    assert [r["verdict"] for r in whole["results"]] == ["no_fault"]
    cut_chunks(tmp_path / "tj.db", OTHER)
    res = run(url, "--ticket", str(folder), "--json")
    assert res.exit_code == 0, res.output
    [result] = json.loads(res.stdout)["results"]
    assert result["verdict"] == "unconfirmed"
    detail = result["stages"][0]["detail"]
    assert detail.startswith(f"store_damaged: trace {OTHER}, an earlier turn of session s:")
