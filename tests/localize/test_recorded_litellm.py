"""Triage over a hand-written RAG app whose model call goes through LiteLLM, recorded three ways: LiteLLM's
``otel`` callback with ``USE_OTEL_LITELLM_REQUEST_SPAN=true`` (``litellm_otel_*``), the same callback without
it (``litellm_otel_nospan_rag``: only a ``raw_gen_ai_request`` span with Python reprs), and
openinference-instrumentation-litellm (``litellm_openinference_*``). The app records its search as an OTel
GenAI retrieval span with chunk ids and scores only; the manifest's ``ids`` map them to versions. The
prompt is one user message holding the excerpts and the question. Fixtures from
tests/fixtures/traces/record_litellm.py (the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

MODES = ["otel", "openinference"]
# The request (the first user message) holds the excerpts, so both values are in it: the answer's
# values cannot be told from an echo of the request, and a usage judge decides (none configured here).
RUNS = {
    "rag": ("unconfirmed", None, ["pass", "pass", "pass", "unconfirmed"]),
    "ignored": ("unconfirmed", None, ["pass", "pass", "pass", "unconfirmed"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, mode: str, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(f"litellm_{mode}_{run}.pb", mk.policy_manifest("EU", ids="chunk"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)
    if verdict == "unconfirmed":
        assert any("usage judge" in item for item in loc.stages[3].missing)


@pytest.mark.parametrize("mode", ["otel", "otel_nospan", "openinference"])
def test_v2_retrieved_and_in_the_model_input_under_every_recording(mk: ModuleType, mode: str) -> None:
    loc = mk.triage_framework(f"litellm_{mode}_rag.pb", mk.policy_manifest("EU", ids="chunk"))
    assert mk.statuses(loc)[:3] == ["pass", "pass", "pass"]
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)


def test_chunk_ids_the_manifest_does_not_list_leave_retrieval_unconfirmed(mk: ModuleType) -> None:
    # The GenAI retrieval span records ids and scores, no text: without the manifest's ids nothing says
    # which version chunk-042 is, and the identity is asked for instead of concluding "not returned".
    loc = mk.triage_framework("litellm_otel_rag.pb", mk.policy_manifest("EU"))
    assert loc.verdict == "unconfirmed"
    assert any("'chunk-042'" in item and "ids" in item for item in loc.stages[1].missing)
