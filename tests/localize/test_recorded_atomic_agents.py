"""Triage over an Atomic Agents 2 ``AtomicAgent`` with its retrieved documents in a context provider, traced
by its own ``AtomicAgentsInstrumentor`` (TOOL, AGENT and model-attempt spans with GenAI and OpenInference
attributes, no messages) with openinference-instrumentation-instructor and -openai (the structured call and
the model call with its messages). The answering model call sits below Atomic's own model-attempt span under
``instructor.create``; its one tool call is the object Instructor returned (``_instructor.py``). The search
is an Atomic ``BaseTool``: a TOOL span whose result names manifest documents. Fixtures from
tests/fixtures/traces/record_atomic_agents.py (the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

FILE = "atomic_agents_{run}.pb"


def test_the_model_call_below_atomics_attempt_span_wrote_the_answer(mk: ModuleType) -> None:
    spans = mk.recorded_spans(FILE.format(run="dropped"))
    record = mk.normalize(spans)
    [call] = record.model_calls
    assert call.name == "ChatCompletion"
    assert record.final_answer_span_id == call.span_id
    # Atomic's own spans alone record no model input: the context stage cannot be decided. Its model-attempt
    # span then names a parent not received (instructor.create): it may be this run's or another run's whose
    # root was lost, and the readings already differ on what was retrieved.
    own = [s for s in spans if s.scope_name == "atomic_agents" or s.name == "answer question"]
    loc = mk.localize(mk.normalize(own), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    # Read whole (the attempt span this run's, as before), retrieval passed: the context stage was the open
    # one.
    whole = "the trace read whole (the spans whose parent was not received as this run's): pass"
    assert whole in loc.materials[0].stages[1].detail
