"""Triage over hand-written RAG apps on the ``anthropic`` client, recorded under
openinference-instrumentation-anthropic and OpenLLMetry's opentelemetry-instrumentation-anthropic
(tests/fixtures/traces/record_anthropic.py; the app and its runs: _policy.py). The ``tool`` and
``search_results`` apps' four faults are rows of test_recorded_frameworks.py; here: their never_indexed
runs, the ``documents`` app (the retrieved text as ``document`` content blocks with citations, streamed),
and replies that stop before the model finished (``max_tokens``) or that the API refused (``refusal``).
"""

from __future__ import annotations

from types import ModuleType

import pytest

INSTRUMENTATIONS = ["openinference", "openllmetry"]
# documents app run -> (verdict, cause, stage statuses). The documents travel in the user's own message (a
# ``document`` block beside the question): the answer's values cannot be told from an echo of the request, so
# the answers of rag and ignored are left to a usage judge (none configured here) — as in litellm's prompt.
DOCUMENTS = {
    "rag": ("unconfirmed", None, ["pass", "pass", "pass", "unconfirmed"]),
    "ignored": ("unconfirmed", None, ["pass", "pass", "pass", "unconfirmed"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("run", list(DOCUMENTS))
@pytest.mark.parametrize("inst", INSTRUMENTATIONS)
def test_document_blocks_are_the_model_input(mk: ModuleType, inst: str, run: str) -> None:
    verdict, cause, statuses = DOCUMENTS[run]
    loc = mk.triage_framework(f"anthropic_{inst}_documents_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)
    if verdict == "unconfirmed":
        assert any("usage judge" in item for item in loc.stages[3].missing)


@pytest.mark.parametrize("inst", INSTRUMENTATIONS)
def test_a_document_block_is_read_by_its_text_source(mk: ModuleType, inst: str) -> None:
    # The block's text is its source's ``data`` (not a ``text`` or ``content`` field): read without it, v2's
    # clause would be missing from the input and a run without fault would read as dropped in context.
    task = mk.normalize(mk.recorded_spans(f"anthropic_{inst}_documents_rag.pb"))
    (call,) = task.model_calls
    assert "Prepayment shall not exceed 30,000 RMB" in call.input_text
    assert not call.input_partial


@pytest.mark.parametrize("app", ["tool", "documents", "search_results"])
@pytest.mark.parametrize("inst", INSTRUMENTATIONS)
def test_never_indexed_is_told_by_the_manifest(mk: ModuleType, inst: str, app: str) -> None:
    loc = mk.triage_framework(f"anthropic_{inst}_{app}_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])


@pytest.mark.parametrize("inst", INSTRUMENTATIONS)
def test_a_reply_stopped_at_max_tokens_is_unconfirmed(mk: ModuleType, inst: str) -> None:
    # The stale value is stated, but the reply stopped at the token limit: what it said past it is unknown.
    loc = mk.triage_framework(f"anthropic_{inst}_tool_max_tokens.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
    assert any("whole answer" in item for item in loc.stages[3].missing)
    assert "token limit" in loc.stages[3].detail


def test_a_refusal_with_no_content_is_the_models_refusal_under_openinference(mk: ModuleType) -> None:
    # The response body (output.value) shows stop_reason refusal with no content block: the model was given
    # v2 and refused, stating none of its facts.
    loc = mk.triage_framework("anthropic_openinference_tool_refusal.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("ignored_by_model", ["pass", "pass", "pass", "fail"])
    assert "refused" in loc.stages[3].detail
    # Without the body, the span holds the finish reason alone: nothing says what the reply was.
    spans = mk.drop_attribute(mk.recorded_spans("anthropic_openinference_tool_refusal.pb"), "output.value")
    assert mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU")).verdict == "unconfirmed"


def test_a_refusal_with_no_content_is_unconfirmed_under_openllmetry(mk: ModuleType) -> None:
    # OpenLLMetry records no output message for a reply with no content block, only the finish reason.
    task = mk.normalize(mk.recorded_spans("anthropic_openllmetry_tool_refusal.pb"))
    assert any(g.kind == "model_output_not_recorded" and "refusal" in g.detail for g in task.gaps)
    loc = mk.triage_framework("anthropic_openllmetry_tool_refusal.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
