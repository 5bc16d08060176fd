"""Triage over record_groq.py's tool-calling RAG app on the ``ollama`` Python client, recorded under
openinference-instrumentation-ollama and OpenLLMetry's opentelemetry-instrumentation-ollama against a loopback
stand-in of Ollama's ``/api/chat`` (tests/fixtures/traces/record_ollama.py; the app and its runs: _policy.py).
The four faults, plain and streamed, are rows of test_recorded_frameworks.py; here: the never_indexed runs,
and OpenLLMetry's reply that asked for the search, whose tool call it does not record.
"""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.mark.parametrize("app", ["tool", "stream"])
@pytest.mark.parametrize("inst", ["openinference", "openllmetry"])
def test_never_indexed_is_told_by_the_manifest(mk: ModuleType, inst: str, app: str) -> None:
    loc = mk.triage_framework(f"ollama_{inst}_{app}_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])


@pytest.mark.parametrize("app", ["tool", "stream"])
def test_the_answer_is_the_call_that_read_the_tool_result_under_openllmetry(mk: ModuleType, app: str) -> None:
    # The first call's span records ``gen_ai.completion.0.role`` alone (its tool call is lost), but the next
    # call's prompt holds that tool call and the tool's result: the first reply was the tool request, not the
    # answer, and the last call's completion is.
    task = mk.normalize(mk.recorded_spans(f"ollama_openllmetry_{app}_ignored.pb"))
    assert task.model_calls[0].output_text is None
    assert (task.final_answer or "").startswith("Yes: contract C-17")
    assert not any(g.kind == "answer_uncertain" for g in task.gaps)
