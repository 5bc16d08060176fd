"""Triage over record_groq.py's tool-calling RAG app on the ``mistralai`` client, recorded under
openinference-instrumentation-mistralai (mistralai 3) and OpenLLMetry's
opentelemetry-instrumentation-mistralai (mistralai 1; tests/fixtures/traces/record_mistral.py; the app and
its runs: _policy.py). The four faults under OpenInference, plain and streamed, are rows of
test_recorded_frameworks.py; here: the never_indexed runs, and OpenLLMetry's spans, which record no prompt
of messages given as dicts and no tool call — and, given the SDK's message models (app ``objects``), the
prompt with an assistant turn that asked for a tool recorded by its role alone.
"""

from __future__ import annotations

from types import ModuleType

import pytest

# OpenLLMetry: run -> (verdict, cause, stage statuses). Given dicts its spans hold ``gen_ai.prompt.0.role =
# user`` and no content (it reads each message as an object and fails on a dict): whether v2 reached the model
# stays open. The filter on the app's search span still decides.
OPENLLMETRY = {
    "rag": ("unconfirmed", None, ["pass", "pass", "unconfirmed", "skipped"]),
    "ignored": ("unconfirmed", None, ["pass", "pass", "unconfirmed", "skipped"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("unconfirmed", None, ["pass", "pass", "unconfirmed", "skipped"]),
}


@pytest.mark.parametrize(
    ("inst", "app"),
    [(i, a) for i in ("openinference", "openllmetry") for a in ("tool", "stream")]
    + [("openllmetry", "objects")],
)
def test_never_indexed_is_told_by_the_manifest(mk: ModuleType, inst: str, app: str) -> None:
    loc = mk.triage_framework(f"mistral_{inst}_{app}_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])


@pytest.mark.parametrize("run", list(OPENLLMETRY))
@pytest.mark.parametrize("app", ["tool", "stream"])
def test_a_prompt_openllmetry_did_not_record_leaves_the_model_input_open(
    mk: ModuleType, app: str, run: str
) -> None:
    verdict, cause, statuses = OPENLLMETRY[run]
    loc = mk.triage_framework(f"mistral_openllmetry_{app}_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_a_role_without_content_is_no_model_input(mk: ModuleType) -> None:
    # ``gen_ai.prompt.0.role = user`` alone is not a user message with no text: read as one, the model input
    # would hold no clause and every run would read dropped_in_context.
    task = mk.normalize(mk.recorded_spans("mistral_openllmetry_tool_rag.pb"))
    assert [c.input_text for c in task.model_calls] == ["", ""]
    assert sum(g.kind == "model_input_not_recorded" for g in task.gaps) == 2
    # Nor is the answer read: the first call's output (a tool call) is not recorded either, so which reply the
    # user got is open.
    assert task.final_answer is None
    assert any(g.kind == "answer_uncertain" for g in task.gaps)


# OpenLLMetry given the SDK's message models: run -> (verdict, cause, stage statuses). The prompt is recorded;
# the first call's tool request is not (its reply records role and finish reason, the next call's prompt the
# assistant turn's role alone, gen_ai.prompt.2.role, before the tool result).
OBJECTS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("run", list(OBJECTS))
def test_an_assistant_turn_recorded_by_its_role_before_a_tool_result_is_the_tool_request(
    mk: ModuleType, run: str
) -> None:
    # Read as a message that lost its content, the turn left the last call's input partial (in_context
    # unconfirmed) and the answer open; losing the turn, or the first call's span, then gave a definite
    # verdict (15 removal-property violations). A chat API takes a tool result only after a request: the turn
    # is that request, its details not recorded, and the last call continues the first.
    verdict, cause, statuses = OBJECTS[run]
    loc = mk.triage_framework(f"mistral_openllmetry_objects_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)
    task = mk.normalize(mk.recorded_spans(f"mistral_openllmetry_objects_{run}.pb"))
    assert [c.input_partial for c in task.model_calls] == [False, False]
    assert task.final_answer_span_id == task.model_calls[-1].span_id
    assert "answer_uncertain" not in {g.kind for g in task.gaps}
