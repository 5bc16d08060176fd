"""Losses the removal property (test_removal_property.py) found to make a verdict more definite, each
on the recorded trace it was found on: what the trace lost is taken away here directly, and the verdict
must stay as it was or become ``unconfirmed`` (DESIGN 5.5)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tracejudge.normalize import cut_short
from tracejudge.schema import RawSpan


def _changed(spans: list[RawSpan], key: str, change: Any) -> list[RawSpan]:
    """The spans with attribute ``key`` replaced by ``change(value)`` (removed when it returns None)."""
    out = []
    for span in spans:
        if key not in span.attributes:
            out.append(span)
            continue
        attrs = dict(span.attributes)
        value = change(attrs.pop(key))
        if value is not None:
            attrs[key] = value
        out.append(span.model_copy(update={"attributes": attrs}))
    return out


def _cut(limit: int) -> Any:
    """An exporter's attribute-length limit (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT): the value cut, no mark."""
    return lambda value: value[:limit]


def _verdict(mk: ModuleType, spans: list[RawSpan], manifest: Any) -> str:
    loc = mk.localize(mk.normalize(spans), mk.ticket(), manifest)
    return loc.verdict + (f" ({loc.cause})" if loc.cause else "")


@pytest.mark.parametrize("role", [None, "__REDACTED__"], ids=["removed", "redacted"])
def test_a_message_whose_role_was_lost_may_still_be_the_request(mk: ModuleType, role: str | None) -> None:
    # LiteLLM under OpenInference sends the contract excerpts in the user message, so the answer's 30,000
    # RMB echoes the request and settles nothing. Without the message's role (or with it hidden) no
    # message was the request, the echo went unseen, and the answer read as agreeing: no_fault.
    spans = mk.recorded_spans("litellm_openinference_rag.pb")
    manifest = mk.policy_manifest("EU", ids="chunk")
    assert _verdict(mk, spans, manifest) == "unconfirmed"
    fewer = _changed(spans, "llm.input_messages.1.message.role", lambda _: role)
    assert mk.normalize(fewer).input is not None
    assert _verdict(mk, fewer, manifest) == "unconfirmed"


@pytest.mark.parametrize(
    ("name", "key", "limit"),
    [
        # The second model call's message list, cut inside its JSON: it was read as raw text, whole.
        ("adk_rag.pb", "gen_ai.input.messages", 128),
        # A Python-literal repr of the tool's documents (OpenInference, OpenAI Agents SDK), cut.
        ("openai_agents_rag.pb", "llm.input_messages.3.message.content", 128),
        # Plain text: the system prompt holding the excerpts, cut mid-sentence at a round length.
        ("haystack_rag.pb", "llm.input_messages.0.message.content", 128),
        ("haystack_rag.pb", "llm.input_messages.0.message.content", 256),
        # OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=300 or 500: round figures users set (read whole before).
        ("haystack_rag.pb", "llm.input_messages.0.message.content", 300),
        ("atomic_agents_rag.pb", "llm.input_messages.0.message.content", 300),
        # One attribute cut at a length no rule knows (a backend's column, a processor's rule on one key):
        # the span's request (input.value) holds the message whole — as JSON, or as a repr inside JSON.
        ("atomic_agents_rag.pb", "llm.input_messages.0.message.content", 333),
        ("haystack_rag.pb", "llm.input_messages.0.message.content", 250),
        ("llamaindex_openinference_rag.pb", "llm.input_messages.1.message.content", 333),
    ],
)
def test_a_model_input_cut_at_a_length_limit_is_not_read_as_whole(
    mk: ModuleType, name: str, key: str, limit: int
) -> None:
    # The clause was past the cut: the input read as whole said dropped_in_context.
    spans = mk.recorded_spans(name)
    manifest = mk.policy_manifest("EU")
    assert _verdict(mk, spans, manifest) == "no_fault"
    cut = _changed(spans, key, _cut(limit))
    assert _verdict(mk, cut, manifest) == "unconfirmed"
    record = mk.normalize(cut)
    assert "model_input_truncated" in {g.kind for g in record.gaps}
    (stage,) = [s for s in mk.localize(record, mk.ticket(), manifest).stages if s.name == "in_context"]
    assert any("cut short" in item for item in stage.missing)


def test_a_request_cut_at_a_length_limit_does_not_make_the_answer_agree(mk: ModuleType) -> None:
    # The request (the user message with the excerpts, both versions) cut at 128 characters no longer
    # stated the superseded 50,000 RMB the answer repeats: the echo went unseen, ignored_by_model.
    spans = mk.recorded_spans("litellm_openinference_ignored.pb")
    manifest = mk.policy_manifest("EU", ids="chunk")
    assert _verdict(mk, spans, manifest) == "unconfirmed"
    cut = _changed(spans, "llm.input_messages.1.message.content", _cut(128))
    assert _verdict(mk, cut, manifest) == "unconfirmed"


def test_candidates_cut_at_a_length_limit_do_not_let_ranking_be_concluded(mk: ModuleType) -> None:
    # The recorded candidates say the filter excluded v2; cut, they were skipped as unreadable and the
    # documents without v2 read as a ranking cut (not_retrieved) — the candidates may say otherwise.
    spans = mk.recorded_spans("openinference_rag.pb")
    manifest = mk.recorded_manifest("CN")
    assert _verdict(mk, spans, manifest) == "filtered (filter)"
    cut = _changed(spans, "tracejudge.retrieval.candidates", _cut(128))
    assert _verdict(mk, cut, manifest) == "unconfirmed"


SENTENCES = "Prepayment shall not exceed 30,000 RMB per order. " * 30


@pytest.mark.parametrize(
    ("value", "cut"),
    [
        ('[{"role": "user", "content": "Can we pre', True),
        ('[{"role": "user", "content": "Can we prepay?"}]', False),
        ("[{'role': 'user', 'content': 'Can we pre", True),
        ("[{'role': 'user', 'content': 'Can we prepay?'}]", False),
        # Prompts that open like JSON and are none: DSPy's field markers, an instruction tag.
        ("[[ ## context ## ]]\nContract C-17" + "x" * 200, False),
        ("[INST] Can we prepay", False),
        # A repr that is no literal, whole: TruLens records LangChain's config so.
        ("{'tags': [], 'callbacks': <CallbackManager object at 0x32bcba750>, 'recursion_limit': 25}", False),
        # Round lengths: text stopping mid-sentence, a whole sentence, a length no limit has, an id.
        (SENTENCES[:128], True),
        (SENTENCES[:1024], True),
        (("Clause 4. " + SENTENCES)[:300], True),
        (("Clause 4. " + SENTENCES)[:1500], True),
        (("Clause 4. " + SENTENCES)[:333], False),
        (SENTENCES[:127] + ".", False),
        (SENTENCES[:129], False),
        ("a" * 128, False),
    ],
)
def test_what_reads_as_cut_short(value: str, cut: bool) -> None:
    assert (cut_short(value) is not None) == cut


def test_a_message_list_hidden_whole_is_redacted_not_the_input_text(mk: ModuleType) -> None:
    # gen_ai.input.messages replaced whole by the redaction mark (a redacting processor, a hide switch) is
    # no JSON: it was read as the input's raw text, "__REDACTED__", which holds no clause —
    # dropped_in_context on a trace whose model got the clause.
    spans = mk.recorded_spans("pydantic_ai_rag.pb")
    manifest = mk.policy_manifest("EU")
    assert _verdict(mk, spans, manifest) == "no_fault"
    hidden = _changed(spans, "gen_ai.input.messages", lambda _: "__REDACTED__")
    assert _verdict(mk, hidden, manifest) == "unconfirmed"
    assert "model_input_redacted" in {g.kind for g in mk.normalize(hidden).gaps}


# An answer that names the superseded cap before the one in effect, as long answers do.
BOTH = (
    "Attachment v1 of contract C-17 capped prepayment at 50,000 RMB per order, but attachment v2, in effect"
    " since 2026-03-01, lowers the cap to 30,000 RMB per order, so 40,000 RMB is over the limit."
)


@pytest.mark.parametrize("limit", [128, 1024])
def test_an_answer_cut_at_a_length_limit_is_not_read_as_all_it_said(mk: ModuleType, limit: int) -> None:
    # Cut at the limit, the answer keeps v1's 50,000 RMB and loses v2's 30,000 that follows it: read as
    # whole, it rested on superseded material (ignored_by_model).
    whole = mk.localize(mk.task(answer=BOTH), mk.ticket())
    assert whole.verdict == "unconfirmed"  # it states both
    # Whatever came before, the cut falls after the 50,000 and before the 30,000.
    before = ("The buyer asked about order 7. " * 40)[: limit - 128]
    cut = mk.localize(mk.task(answer=(before + BOTH)[:limit]), mk.ticket())
    assert cut.verdict == "unconfirmed"
    (used,) = [s for s in cut.stages if s.name == "used_by_model"]
    assert "cut short" in used.detail
    # An answer that ends where a sentence ends is read as it is, at any length.
    assert mk.localize(mk.task(answer=mk.BAD), mk.ticket()).verdict == "ignored_by_model"
