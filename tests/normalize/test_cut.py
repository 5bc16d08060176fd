"""Values an exporter may have cut short (``normalize._cut``): a model call's messages, parsed by the
convention's reader, are not parsed again to know they close — the same notes, one parse."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.normalize.test_conventions import root, span
from tracejudge.normalize import normalize
from tracejudge.normalize._cut import cut_values
from tracejudge.schema import RawSpan

MESSAGES = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Prepayment cap? " * 50}]}])


def _chat(messages: str) -> RawSpan:
    return span("b1", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": messages})


def test_a_model_calls_messages_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loads = json.loads
    parsed: list[str] = []

    def counting(text: Any, *args: Any, **kw: Any) -> Any:
        parsed.append(text)
        return loads(text, *args, **kw)

    monkeypatch.setattr(json, "loads", counting)
    task = normalize([root(), _chat(MESSAGES)])
    assert "Prepayment cap?" in task.model_calls[0].input_text
    assert parsed.count(MESSAGES) == 1  # the reader's parse; cut_values reads it as whole from it
    assert not [g for g in task.gaps if g.kind == "model_input_truncated"]


def test_messages_cut_short_are_still_read_as_cut() -> None:
    cut = MESSAGES[:300]
    task = normalize([root(), _chat(cut)])
    kinds = {g.kind: g.detail for g in task.gaps if g.span_id == "00000000000000b1"}
    assert "attribute_unparseable" in kinds  # the reader could not parse it: nothing to reuse
    note = "gen_ai.input.messages: a JSON (or Python) value that stops at 300 characters before it closes"
    assert note in kinds["model_input_truncated"]
    assert cut_values(_chat(cut)) == [note]


def test_a_text_another_reader_parsed_is_judged_as_before() -> None:
    # A parsed text that does not open like a JSON document is still read for a limit's length.
    text = "word " * 819 + "w"  # 4096 characters, stopping mid-sentence
    chat = span("b1", {"gen_ai.operation.name": "chat", "note": text})
    assert cut_values(chat, {id(text): text}) == cut_values(chat) != []


PROMPT = (
    "Answer from the contract excerpts you were given. " * 4
    + "Prepayment shall not exceed 30,000 RMB per order."
)


def test_a_text_cut_where_a_sentence_ends_is_cut_when_the_span_holds_it_longer() -> None:
    # Cut at 200 characters the message ends a sentence, and input.value holds the whole prompt: the message
    # was cut (a limit on one key, a collector's truncate processor). At another length nothing says so.
    cut = PROMPT[:250]
    llm = span(
        "b1",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": cut,
            "input.value": PROMPT,
        },
    )
    assert cut_values(llm) == []  # 250 is no limit's length
    shorter = PROMPT[:200]
    assert shorter.rstrip().endswith(".")
    llm = llm.model_copy(
        update={"attributes": {**llm.attributes, "llm.input_messages.0.message.content": shorter}}
    )
    note = (
        "llm.input_messages.0.message.content: text exactly 200 characters long that another attribute of the"
        " span holds longer"
    )
    assert cut_values(llm) == [note]
    task = normalize([root(), llm])
    assert task.model_calls[0].input_partial
    # Alone, the same text reads whole: nothing says it went on.
    alone = llm.model_copy(
        update={"attributes": {k: v for k, v in llm.attributes.items() if k != "input.value"}}
    )
    assert cut_values(alone) == []
