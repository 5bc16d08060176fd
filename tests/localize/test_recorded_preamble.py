"""Triage over a model reply holding text and a tool request at once (OpenAI's content beside tool_calls),
traced by the real opentelemetry-instrumentation-openai-v2 against the local OpenAI stand-in: the text is a
preamble the app got before running the tool, and the call that read the tool's result gave the answer. With
that call in the trace its reply is read; without it (sent through a client nothing instruments, or its span
lost) the preamble is never read as the answer — it states v1's cap, and read so it gave ignored_by_model
where the user got v2's. Fixtures from tests/fixtures/traces/record_preamble.py."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.fixtures.traces._recording import ANSWER_RIGHT, ANSWER_STALE
from tracejudge.schema import RawSpan

REGIONS = [None, "CN", "EU"]
# record_preamble.PREAMBLE (importing the recorder sets the instrumentation's environment for every test).
PREAMBLE = (
    "Attachment v1 allowed prepayment up to 50,000 RMB; let me check the amount against the current cap."
)


def _spans(mk: ModuleType, name: str) -> list[RawSpan]:
    return list(mk.read_otlp_file(mk.RECORDED / name))


def _triage(mk: ModuleType, spans: list[RawSpan], region: str | None) -> object:
    manifest = None if region is None else mk.recorded_manifest(region)
    return mk.localize(mk.normalize(spans), mk.ticket(), manifest)


@pytest.mark.parametrize(
    ("name", "answer", "verdict"),
    [
        ("preamble_rag.pb", ANSWER_RIGHT, "no_fault"),
        ("preamble_ignored.pb", ANSWER_STALE, "ignored_by_model"),
    ],
)
@pytest.mark.parametrize("region", REGIONS)
def test_the_call_after_the_preamble_answers(
    mk: ModuleType, name: str, answer: str, verdict: str, region: str | None
) -> None:
    spans = _spans(mk, name)
    task = mk.normalize(spans)
    preamble, answered = task.model_calls
    (message,) = preamble.output_messages
    assert message.content == PREAMBLE
    assert [t["name"] for t in message.tool_calls] == ["check_prepayment"]
    assert (task.final_answer, task.final_answer_span_id) == (answer, answered.span_id)
    assert _triage(mk, spans, region).verdict == verdict  # type: ignore[attr-defined]
    # Without the answering call's span the preamble is last: open, not ignored_by_model from its v1 cap.
    lost = [s for s in spans if s.span_id != answered.span_id]
    assert _triage(mk, lost, region).verdict == "unconfirmed"  # type: ignore[attr-defined]


@pytest.mark.parametrize("region", REGIONS)
def test_a_preamble_whose_answering_call_is_not_traced_is_no_answer(
    mk: ModuleType, region: str | None
) -> None:
    spans = _spans(mk, "preamble_unanswered.pb")
    task = mk.normalize(spans)
    (call,) = task.model_calls
    assert call.output_text == PREAMBLE
    assert (task.final_answer, task.answering_calls) == (None, (call.span_id,))
    (gap,) = [g for g in task.gaps if g.kind == "answer_uncertain"]
    assert gap.span_id == call.span_id
    assert "asked for a tool ('check_prepayment') beside its text" in gap.note
    loc = _triage(mk, spans, region)
    # Read as the answer, the preamble (v1's cap) gave ignored_by_model; the user got v2's cap.
    assert loc.verdict == "unconfirmed"  # type: ignore[attr-defined]
    assert mk.statuses(loc) == ["pass", "pass", "pass", "unconfirmed"]
