"""A streamed reply that ended before the model finished (DESIGN 5.5).

An app reading a streamed chat reply may stop part way (the user pressed stop, the client went away, a
timeout) and close the stream. opentelemetry-instrumentation-openai-v2 then records the text read so far
with the finish reason ``error`` — opentelemetry-python-contrib's own test of it,
``test_chat_completion_streaming_not_complete`` (tests/fixtures/outside/opentelemetry_python_contrib), reads
two chunks and closes. What the model stated past the break is not in the trace: the answer read from it is
not all the model said, so what it states settles nothing about the material — a reply that first names
v1's cap and then corrects it read ``ignored_by_model`` once its stream broke off after the first sentence.
Here the real instrumentation records the real ``openai`` client reading the scripted OpenAI stand-in's
stream, word by word as it sends it.
"""

from __future__ import annotations

import openai
import pytest

from tests.localize import conftest as mk
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan
from tracejudge.testing.openai_server import Rule

STALE_FIRST = (
    "Attachment v1 allowed prepayment up to 50,000 RMB. Under attachment v2, in effect now, prepayment is"
    " capped at 30,000 RMB, so 40,000 RMB is over the limit."
)
GOOD_FIRST = f"{mk.GOOD} Attachment v1 allowed up to 50,000 RMB, which no longer applies."


def _trace(reply: str, words: int | None) -> list[RawSpan]:
    """The GenAI RAG app streaming one chat reply; it reads ``words`` words of it and closes the stream
    (None: reads it to the end)."""

    def read(client: openai.OpenAI) -> None:
        stream = client.chat.completions.create(
            model="scripted-model",
            messages=mk.RAG_MESSAGES,
            stream=True,
        )
        seen = 0
        for chunk in stream:
            seen += bool(chunk.choices and chunk.choices[0].delta.content)
            if words is not None and seen == words:
                break
        stream.close()

    return mk.genai_rag_trace([Rule(reply=reply)], read)


def _verdict(spans: list[RawSpan]) -> str:
    return localize(normalize(spans), mk.ticket(), [mk.entry(acl=None), mk.v1_entry()]).verdict


@pytest.mark.parametrize(("reply", "whole"), [(STALE_FIRST, "unconfirmed"), (GOOD_FIRST, "unconfirmed")])
def test_a_reply_whose_stream_broke_off_states_nothing_definite(reply: str, whole: str) -> None:
    # Read to the end, the reply names both caps (which one it rests on is left to a judge).
    assert _verdict(_trace(reply, None)) == whole
    # Cut after its first sentence (8 and 17 words), it reads as what the model said: v1's cap alone
    # (ignored_by_model) or v2's alone (no_fault) — the model went on.
    first = _trace(reply, 8 if reply is STALE_FIRST else 17)
    task = normalize(first)
    (call,) = task.model_calls
    assert task.final_answer == " ".join(reply.split()[: 8 if reply is STALE_FIRST else 17]) + " "
    loc = localize(task, mk.ticket(), [mk.entry(acl=None), mk.v1_entry()])
    assert loc.verdict == "unconfirmed"
    (gap,) = [g for g in task.gaps if g.kind == "model_output_truncated"]
    assert gap.span_id == call.span_id
    assert "finish_reason error" in gap.detail
    used = next(s for s in loc.stages if s.name == "used_by_model")
    assert used.status == "unconfirmed"
    assert "the answer may be incomplete" in used.detail


def test_a_reply_read_to_its_end_is_whole() -> None:
    task = normalize(_trace(mk.GOOD, None))
    assert task.final_answer == mk.GOOD
    assert not [g for g in task.gaps if g.kind == "model_output_truncated"]
    assert _verdict(_trace(mk.GOOD, None)) == "no_fault"
