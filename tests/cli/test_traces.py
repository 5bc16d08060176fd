"""``traces list`` / ``traces show`` with values from hostile traces (issue 17.6) and the small things
a new user hit (issue 11.6): markup printed literally, trace ids cut at 80 columns, no prefixes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tracejudge.cli import cli
from tracejudge.schema import RawSpan
from tracejudge.store import SqliteStore

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER = "4bf92f3577b34da6a3ce929d0e0e9999"
ESC = "\x1b"
HOSTILE_NAMES = [
    "[/x]",
    "[link=https://evil.example]click[/link]",
    f"{ESC}]0;owned{ESC}\\ title",
    f"{ESC}[2J cleared",
    "back\rover",
    "a\u202etxt.exe",
]


def _span(trace_id: str, name: str, **attributes: object) -> RawSpan:
    return RawSpan(
        trace_id=trace_id,
        span_id="00f067aa0ba902b7",
        name=name,
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_000_100_000_000,
        attributes=dict(attributes),
    )


def _run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", *args])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "s.db"


def _store(db: Path, *spans: RawSpan) -> None:
    store = SqliteStore(db)
    store.put_spans(spans)
    store.close()


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_traces_list_shows_a_hostile_name_as_inert_text(db: Path, name: str) -> None:
    _store(db, _span(TRACE, name))
    result = _run(db, "traces", "list")
    assert result.exit_code == 0, result.output
    assert ESC not in result.output
    assert "\r" not in result.output
    assert "\u202e" not in result.output
    assert TRACE in result.output


def test_markup_in_a_name_is_shown_not_read(db: Path) -> None:
    _store(db, _span(TRACE, "[link=https://evil.example]click[/link]"))
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", "traces", "list"], env={"COLUMNS": "200"})
    assert "[link=https://evil.example]click[/link]" in result.output


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_traces_show_writes_no_escape_sequence_from_span_data(db: Path, name: str) -> None:
    _store(db, _span(TRACE, name, **{"input.value": name, "output.value": f"{ESC}[31mred"}))
    result = _run(db, "traces", "show", TRACE)
    assert result.exit_code == 0, result.output
    assert ESC not in result.output
    assert "\u202e" not in result.output
    assert (
        "\\x1b" in result.output
        or "[/x]" in result.output
        or "\\r" in result.output
        or "\\u202e" in result.output
    )


def test_traces_show_prints_not_recorded_without_literal_markup(db: Path) -> None:
    _store(db, _span(TRACE, "retrieve", **{"openinference.span.kind": "RETRIEVER"}))
    result = _run(db, "traces", "show", TRACE)
    assert result.exit_code == 0, result.output
    assert "<not recorded>" in result.output
    assert "[dim]" not in result.output


def test_trace_ids_are_whole_in_a_pipe_of_80_columns(db: Path) -> None:
    _store(db, _span(TRACE, "a fairly long trace name " * 4))
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", "traces", "list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert TRACE in result.output


def test_traces_show_and_triage_accept_a_unique_prefix(db: Path, tmp_path: Path) -> None:
    _store(db, _span(TRACE, "root"), _span("0123456789abcdef0123456789abcdef", "other"))
    shown = _run(db, "traces", "show", TRACE[:8], "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["trace_id"] == TRACE


def test_an_ambiguous_prefix_exits_2_listing_the_candidates(db: Path, tmp_path: Path) -> None:
    _store(db, _span(TRACE, "root"), _span(OTHER, "other"))
    result = _run(db, "traces", "show", TRACE[:10])
    assert result.exit_code == 2
    assert TRACE in result.output
    assert OTHER in result.output
    ticket = tmp_path / "t.yaml"
    ticket.write_text("ticket: T-1\nrequired:\n  - {doc_id: C-17, version: v2}\n", encoding="utf-8")
    triage = _run(db, "triage", "--ticket", str(ticket), TRACE[:10])
    assert triage.exit_code == 2, triage.output
    assert OTHER in triage.output


def test_traces_show_leaves_no_piece_of_a_secret_a_value_is_cut_in(db: Path) -> None:
    # The tree shows each value cut to a line; cut first, a configured key loses its end, no longer
    # matches, and its first part is printed. Redacted first, nothing of it is.
    key = "Zq8Wv3Lk5Tn2Rb7Yh4Pd9Xs1Mm"
    answer = "a" * 185 + " " + key
    _store(db, _span(TRACE, "agent", **{"input.value": "q " * 40 + key, "output.value": answer}))
    result = CliRunner().invoke(
        cli,
        ["--store", f"sqlite:///{db}", "traces", "show", TRACE],
        env={"OPENAI_API_KEY": key, "COLUMNS": "400"},
    )
    assert result.exit_code == 0, result.output
    assert "a" * 150 in result.output  # the answer is shown, cut
    pieces = {key[i : i + 8] for i in range(len(key) - 7)}
    assert not [p for p in pieces if p in result.output], result.output


def test_a_tool_call_output_and_a_document_without_id_are_shown_as_what_they_are(db: Path) -> None:
    # From the outside traces (tests/fixtures/outside): an OpenAI call whose output is a tool call read
    # "output: <not recorded>", and TruLens' returned texts (no ids) read "doc None".
    call = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Weather in Boston?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_current_weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"location": "Boston"}',
    }
    _store(db, _span(TRACE, "ChatCompletion", **call))
    result = _run(db, "traces", "show", TRACE)
    assert result.exit_code == 0, result.output
    assert "output: tool call get_current_weather" in result.output
    assert "<not recorded>" not in result.output
    texts = ["Recent work has achieved", "To facilitate"]
    retrieval = {
        "ai.observability.span_type": "retrieval",
        "ai.observability.retrieval.retrieved_contexts": texts,
    }
    _store(db, _span(OTHER, "retrieve", **retrieval))
    result = _run(db, "traces", "show", OTHER)
    assert result.exit_code == 0, result.output
    assert "doc (no id): Recent work has achieved" in result.output
    assert "None" not in result.output


def test_a_refusal_is_shown_as_one(db: Path) -> None:
    # OpenLLMetry's OpenAI instrumentation writes a chat refusal as a GenAI "refusal" part.
    refusal = "I'm sorry, I can't help with that."
    parts = [
        {"role": "assistant", "parts": [{"type": "refusal", "content": refusal}], "finish_reason": "stop"}
    ]
    call = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "Cap?"}]}]
        ),
        "gen_ai.output.messages": json.dumps(parts),
    }
    _store(db, _span(TRACE, "openai.chat", **call))
    shown = _run(db, "traces", "show", TRACE)
    assert shown.exit_code == 0, shown.output
    assert f"refusal: {refusal}" in shown.output
    record = json.loads(_run(db, "traces", "show", TRACE, "--json").output)
    assert record["model_calls"][0]["output_messages"][0]["refusal"] == refusal
