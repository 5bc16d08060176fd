"""Triage over a hand-written function-calling RAG app on ``google-genai``, recorded under
openinference-instrumentation-google-genai and the OTel contrib opentelemetry-instrumentation-google-genai
(tests/fixtures/traces/record_google_genai.py; the app and its runs: _policy.py). The four faults are rows of
test_recorded_frameworks.py; here: the never_indexed runs, and a streamed answer that stopped at
``MAX_TOKENS``.
"""

from __future__ import annotations

from types import ModuleType

import pytest

MODES = ["openinference", "otel"]


@pytest.mark.parametrize("mode", MODES)
def test_never_indexed_is_told_by_the_manifest(mk: ModuleType, mode: str) -> None:
    loc = mk.triage_framework(f"google_genai_{mode}_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])


@pytest.mark.parametrize("mode", MODES)
def test_an_answer_stopped_at_max_tokens_is_unconfirmed(mk: ModuleType, mode: str) -> None:
    # Gemini's MAX_TOKENS (OpenInference records it as is, the contrib instrumentation as max_tokens/length):
    # the stale value is stated, but what the answer said past the limit is unknown.
    loc = mk.triage_framework(f"google_genai_{mode}_max_tokens.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
    assert any("whole answer" in item for item in loc.stages[3].missing)


def test_the_finish_reason_is_read_from_the_response_body_too(mk: ModuleType) -> None:
    # OpenInference's output.value holds the streamed response whole: without llm.finish_reason it still
    # says the reply stopped at the limit.
    spans = mk.drop_attribute(
        mk.recorded_spans("google_genai_openinference_max_tokens.pb"), "llm.finish_reason"
    )
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert loc.verdict == "unconfirmed"
