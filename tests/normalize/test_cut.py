"""Values an exporter may have cut short (``normalize._cut``): a model call's messages, parsed by the
convention's reader, are not parsed again to know they close — the same notes, one parse."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.normalize.test_conventions import root, span
from tracejudge.normalize import normalize
from tracejudge.normalize._cut import cut_values, shown_limits
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
    assert cut_values(chat, {id(text): (text, None)}) == cut_values(chat) != []


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
        "llm.input_messages.0.message.content: text exactly 200 characters long, a limit's length, where"
        " input.value of the same span holds it longer (cut on the way)"
    )
    assert cut_values(llm) == [note]
    task = normalize([root(), llm])
    assert task.model_calls[0].input_partial
    # Alone, the same text reads whole: nothing says it went on.
    alone = llm.model_copy(
        update={"attributes": {k: v for k, v in llm.attributes.items() if k != "input.value"}}
    )
    assert cut_values(alone) == []


MESSAGE = "Answer from the contract excerpts you were given: prepayment shall not exceed 30,000 RMB per order"
SENTENCE = MESSAGE + "."  # 99 characters: a limit's length only where the trace shows it


def _request(*messages: str) -> str:
    return json.dumps({"messages": [{"role": "user", "content": m} for m in messages]})


@pytest.mark.parametrize(
    ("text", "others", "shown", "cut"),
    [
        # Stopping mid-sentence, at any length: the request goes on past it (as JSON; as a repr inside JSON).
        (MESSAGE[:90], [_request(MESSAGE)], set(), True),
        (MESSAGE[:90], [json.dumps({"messages": repr([{"content": MESSAGE}])})], set(), True),
        # ... or holds it whole: the message ends there (a closing quote follows it), or nowhere.
        (MESSAGE, [_request(MESSAGE)], set(), False),
        (MESSAGE[:90], [_request("Something else " * 10)], set(), False),
        # Held whole by one value, longer by another (a longer text that opens like it): whole.
        (MESSAGE, [MESSAGE + " per month", _request(MESSAGE)], set(), False),
        (MESSAGE, [MESSAGE + " per month"], set(), True),
        # Ending a sentence: read only at a limit's length (one exporters use, or the one the trace shows).
        (SENTENCE, [_request(SENTENCE + " Cite the clause.")], set(), False),
        (SENTENCE, [_request(SENTENCE + " Cite the clause.")], {len(SENTENCE)}, True),
        # Too short to be cut by a limit anyone sets, no words, a JSON document.
        (MESSAGE[:40], [_request(MESSAGE)], set(), False),
        ("x" * 90, [_request("x" * 200)], set(), False),
        ('{"a": "' + MESSAGE[:80], ['{"a": "' + MESSAGE + '"}'], set(), False),
    ],
)
def test_a_text_another_value_of_its_span_holds_longer_was_cut(
    text: str, others: list[str], shown: set[int], cut: bool
) -> None:
    attrs = {"llm.input_messages.0.message.content": text, **{f"v{i}": v for i, v in enumerate(others)}}
    notes = [n for n in cut_values(span("b1", attrs), None, frozenset(shown)) if "holds it longer" in n]
    assert bool(notes) == cut


# Texts with quotes and apostrophes of their own, as prompts and replies have them: a cut right before one
# is followed, where a longer value holds the text, by that quote (escaped in JSON) and by what followed it.
QUOTED = [
    "The supplier's terms say \"prepayment\" is capped, and the customers' orders aren't covered: don't"
    " prepay more than 30,000 RMB per order ('the cap'), as Hengda's contract C-17 says",
    'He said "yes", then "no" \u2014 it\'s the "final" answer; the users\' files aren\'t "shared" with'
    ' anyone, "as agreed": see the \'terms\' [of C-17] (the "cap") and {the rest} of it',
    "Rules:\n- Don't try to do multiple things at once.\n- If you can't fully answer the user's question,"
    " answer partially and say what you couldn't do, as the 'final_answer' tool's \"answer\" field",
    "合同 C-17 规定 \"预付款\" 不得超过 30,000 RMB \u2014 the supplier's cap;\ndon't prepay more than"
    " 'the cap' per order (每笔订单), as \"Hengda\" agreed",
]
# How a longer value of the span holds a message: as JSON (compact, indented, non-ASCII escaped or not), as a
# repr inside JSON (a list of dicts, an object's), as a repr (CrewAI's TaskOutput, pydantic's str), as the end
# of a plain text.
HOLDERS = {
    "json": lambda m: json.dumps({"messages": [{"role": "user", "content": m}]}),
    "json indented": lambda m: json.dumps({"messages": [{"role": "user", "content": m}]}, indent=2),
    "json non-ASCII as is": lambda m: json.dumps({"messages": [{"content": m}]}, ensure_ascii=False),
    "repr in json": lambda m: json.dumps({"messages": repr([{"role": "user", "content": m}])}),
    "object repr in json": lambda m: json.dumps(
        [f"ChatMessage(role=<MessageRole.USER: 'user'>, blocks=[TextBlock(text={m!r})])"]
    ),
    "repr": lambda m: f"[TaskOutput(description='the question', raw={m!r}, agent='analyst')]",
    "pydantic str": lambda m: f"content={m!r} role='user'",
    "plain": lambda m: "user: " + m,
}


def _held_notes(text: str, holder: str, shown: frozenset[int] = frozenset()) -> list[str]:
    """The notes on the message (``text``) beside the value holding it: it reads as cut, by any sign."""
    attrs = {"llm.input_messages.0.message.content": text, "input.value": holder}
    return [n for n in cut_values(span("b1", attrs), None, shown) if n.startswith("llm.input_messages")]


def _whole(text: str, holder: str, shown: frozenset[int] = frozenset()) -> bool:
    """Whether the value holding ``text`` shows it whole (at a limit's length it may be cut all the same)."""
    return not [n for n in _held_notes(text, holder, shown) if "holds it longer" in n]


@pytest.mark.parametrize("holds", HOLDERS.values(), ids=HOLDERS.keys())
@pytest.mark.parametrize("message", QUOTED, ids=range(len(QUOTED)))
def test_a_text_with_quotes_cut_anywhere_never_reads_whole(message: str, holds: Any) -> None:
    holder = holds(message)
    assert _whole(message, holder)  # where a longer value records it whole
    read = []
    for end in range(64, len(message)):
        cut = message[:end]
        # A cut that ends a sentence is read at a limit's length only (here the one the trace shows).
        shown = frozenset({end}) if cut.rstrip().endswith(tuple(".!?;:)]}>\"'`*")) else frozenset()
        if not _held_notes(cut, holder, shown):
            read.append(f"{end}: ...{message[end - 20 : end + 10]!r}")
    assert read == []


@pytest.mark.parametrize("holds", HOLDERS.values(), ids=HOLDERS.keys())
def test_a_whole_text_ending_on_a_quote_reads_whole(holds: Any) -> None:
    message = QUOTED[0] + " (the 'cap')"
    assert _whole(message, holds(message))
    assert _whole(message, holds(message), frozenset({len(message)}))


WORDS = [
    "合同",
    "the",
    "cap",
    "is",
    "30,000",
    "RMB",
    "it's",
    "users'",
    '"quoted"',
    "'single'",
    "don't",
    '"as',
    'is"',
    "(the",
    "'cap')",
    "[C-17]",
    "{x}",
    "\n",
    "\u2014",
    "a\\b",
    ":",
    ",",
    '"',
    "'",
]


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=30, max_size=60),
    holds=st.sampled_from(list(HOLDERS.values())),
    data=st.data(),
)
def test_a_random_text_cut_anywhere_never_reads_whole(
    words: list[str], holds: Any, data: st.DataObject
) -> None:
    message = " ".join(words)
    holder = holds(message)
    assert _whole(message, holder)
    end = data.draw(st.integers(64, len(message) - 1))
    cut = message[:end]
    shown = frozenset({end}) if cut.rstrip().endswith(tuple(".!?;:)]}>\"'`*")) else frozenset()
    assert " " not in cut or _held_notes(cut, holder, shown) != []


def test_a_list_item_held_longer_is_cut() -> None:
    # TruLens records a call's arguments as lists (call.kwargs.args) beside its echoed return.
    chat = span("b1", {"call.kwargs.args": ["short", MESSAGE[:90]], "call.return": MESSAGE + " and more."})
    assert cut_values(chat) == [
        "call.kwargs.args: text that stops mid-sentence where call.return of the same span holds it longer"
        " (cut on the way)"
    ]


def test_each_process_of_a_trace_keeps_its_own_longest_values() -> None:
    # Spans of two services, interleaved: each service's longest values are its own (the process is read
    # again whenever a span's resource differs from the one before).
    cut = ["x " * 150, "y " * 150]  # service a: two texts at 300 characters, a limit shown
    spans = [
        RawSpan(
            trace_id="1" * 32,
            span_id=f"{i:016x}",
            attributes={"v": text},
            resource={"service.name": service},
        )
        for i, (service, text) in enumerate(
            [("a", cut[0]), ("b", "z " * 200), ("a", cut[1]), ("b", "w " * 10)]
        )
    ]
    assert shown_limits(spans) == {300}
