"""Triage over a hand-written tool-calling RAG app on the ``groq`` client, recorded under
openinference-instrumentation-groq and OpenLLMetry's opentelemetry-instrumentation-groq
(tests/fixtures/traces/record_groq.py; the app and its runs: _policy.py). The four faults of the plain app
(both instrumentations) and of the streamed one under OpenLLMetry are rows of test_recorded_frameworks.py;
here: the never_indexed runs, and the streamed answer OpenInference records as the stream object's repr.
"""

from __future__ import annotations

from types import ModuleType

import pytest

# the streamed app under OpenInference: run -> (verdict, cause, stage statuses). The answering call's span
# holds ``<groq.Stream object at 0x…>`` as its output and the app's root records nothing: what the user got is
# not in the trace, so a run that showed the model v2 stays open; the faults before the model need no answer.
OPENINFERENCE_STREAM = {
    "rag": ("unconfirmed", None, ["pass", "pass", "pass", "unconfirmed"]),
    "ignored": ("unconfirmed", None, ["pass", "pass", "pass", "unconfirmed"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("app", ["tool", "stream"])
@pytest.mark.parametrize("inst", ["openinference", "openllmetry"])
def test_never_indexed_is_told_by_the_manifest(mk: ModuleType, inst: str, app: str) -> None:
    loc = mk.triage_framework(f"groq_{inst}_{app}_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])


@pytest.mark.parametrize("run", list(OPENINFERENCE_STREAM))
def test_a_streamed_answer_openinference_did_not_read_is_open(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = OPENINFERENCE_STREAM[run]
    loc = mk.triage_framework(f"groq_openinference_stream_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_the_stream_objects_repr_is_not_the_answer(mk: ModuleType) -> None:
    # Read as text, "<groq.Stream object at 0x…>" was the model's output and so the run's answer (a usage
    # judge would have been asked whether it uses v2). It names the object, not what the model said.
    task = mk.normalize(mk.recorded_spans("groq_openinference_stream_ignored.pb"))
    assert task.final_answer is None
    assert [c.output_text for c in task.model_calls] == [None, None]
    (gap,) = [g for g in task.gaps if g.kind == "model_output_not_recorded"]
    assert "<groq.Stream object at 0x" in gap.detail


def test_the_answer_on_the_apps_root_span_settles_a_streamed_run(mk: ModuleType) -> None:
    # What makes the streamed app triage-ready under OpenInference: the app records the answer it showed.
    spans = mk.recorded_spans("groq_openinference_stream_ignored.pb")
    answer = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
    spans = [
        s.model_copy(update={"attributes": {**s.attributes, "output.value": answer}})
        if s.parent_span_id is None
        else s
        for s in spans
    ]
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("ignored_by_model", ["pass", "pass", "pass", "fail"])
