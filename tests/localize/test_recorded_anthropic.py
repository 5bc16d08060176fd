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

from tracejudge.schema import RawSpan

QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
INSTRUMENTATIONS = ["openinference", "openllmetry"]
# and the anthropic SDK's own spans (scope com.anthropic.sdk.python), in content mode
TRACED = [*INSTRUMENTATIONS, "sdk"]
# documents app run -> (verdict, cause, stage statuses). The documents travel in the user's own message (a
# ``document`` block beside the question): the answer's values alone cannot be told from an echo of the
# request. openinference-instrumentation-anthropic records the reply's citations (``output.value``,
# ``metadata``): the answer cites the passage stating the value it gives (v2's in rag, v1's in ignored), so
# the model took it from that document. OpenLLMetry records no citations: the answers of rag and ignored are
# left to a usage judge (none configured here) — as in litellm's prompt.
DOCUMENTS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}
UNCITED = {"rag": ("unconfirmed", None, ["pass", "pass", "pass", "unconfirmed"])}
UNCITED["ignored"] = UNCITED["rag"]


@pytest.mark.parametrize("run", list(DOCUMENTS))
@pytest.mark.parametrize("inst", INSTRUMENTATIONS)
def test_document_blocks_are_the_model_input(mk: ModuleType, inst: str, run: str) -> None:
    verdict, cause, statuses = (UNCITED if inst == "openllmetry" else {}).get(run, DOCUMENTS[run])
    loc = mk.triage_framework(f"anthropic_{inst}_documents_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)
    if verdict == "unconfirmed":
        assert any("usage judge" in item for item in loc.stages[3].missing)


@pytest.mark.parametrize("run", ["rag", "ignored"])
def test_a_cited_passage_tells_the_answer_from_an_echo(mk: ModuleType, run: str) -> None:
    # The reply cites the passage it took the value from: both records of the citations lost (the response
    # body and metadata), the value reads as a possible echo of the user's message again (unconfirmed).
    name = f"anthropic_openinference_documents_{run}.pb"
    loc = mk.triage_framework(name, mk.policy_manifest("EU"))
    stated = "30,000" if run == "rag" else "50,000"
    assert any(
        f"cites the passage 'Prepayment shall not exceed {stated}" in e.note for e in loc.stages[3].evidence
    )
    spans = mk.recorded_spans(name)
    for lost in (["output.value"], ["metadata"]):
        kept = mk.drop_attribute(spans, lost[0])
        assert mk.localize(mk.normalize(kept), mk.ticket(), mk.policy_manifest("EU")).verdict == loc.verdict
    loc = mk.localize(mk.normalize(_uncited(spans)), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == UNCITED[run][::2]
    assert any("the request states it too" in e.note for e in loc.stages[3].evidence)


def _uncited(spans: list[RawSpan]) -> list[RawSpan]:
    """The spans with the LLM spans' records of the citations (``output.value``, ``metadata``) lost."""
    return [
        s.model_copy(update={"attributes": {k: v for k, v in s.attributes.items() if k not in _CITED}})
        if s.attributes.get("openinference.span.kind") == "LLM"
        else s
        for s in spans
    ]


_CITED = ("output.value", "metadata")


def _citing(spans: list[RawSpan], was: str, now: str) -> list[RawSpan]:
    """The spans with the LLM span's recorded citations (``output.value``, ``metadata``) replaced: ``was``
    -> ``now`` in their text."""
    return [
        s.model_copy(
            update={
                "attributes": {
                    k: v.replace(was, now) if k in _CITED and isinstance(v, str) else v
                    for k, v in s.attributes.items()
                }
            }
        )
        for s in spans
    ]


def test_a_cited_passage_the_input_does_not_hold_is_no_evidence(mk: ModuleType) -> None:
    # A citation is read only where the call's recorded input holds its passage: one that does not (its
    # document lost or cut short) says nothing of what the model was given and read.
    spans = mk.recorded_spans("anthropic_openinference_documents_rag.pb")
    spans = _citing(spans, "shall not exceed 30,000 RMB per order.", "shall not exceed 30,000 RMB per month.")
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == UNCITED["rag"][::2]


def test_a_stale_answer_citing_the_required_passage_is_not_ignored(mk: ModuleType) -> None:
    # The tool app's search results (no echo: the documents are a tool's result): the answer states v1's cap
    # but its reply cites v2's passage — the model read v2 and answered otherwise, not "ignored": unconfirmed,
    # for a usage judge. Without the citation the trace is a real ignored fault to the letter (the reply's
    # citations lost: ignored_by_model), a case the removal property cannot tell from one (DESIGN 5.5's
    # indistinguishable losses); no recorded fixture cites against its answer.
    name = "anthropic_openinference_search_results_ignored.pb"
    assert mk.triage_framework(name, mk.policy_manifest("EU")).verdict == "ignored_by_model"
    v1, v2 = (
        "Prepayment shall not exceed 50,000 RMB per order.",
        "Prepayment shall not exceed 30,000 RMB per order.",
    )
    spans = _citing(mk.recorded_spans(name), v1, v2)
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
    assert "the model read" in loc.stages[3].detail
    lost = mk.localize(mk.normalize(_uncited(spans)), mk.ticket(), mk.policy_manifest("EU"))
    assert lost.verdict == "ignored_by_model"


@pytest.mark.parametrize("inst", INSTRUMENTATIONS)
def test_a_document_block_is_read_by_its_text_source(mk: ModuleType, inst: str) -> None:
    # The block's text is its source's ``data`` (not a ``text`` or ``content`` field): read without it, v2's
    # clause would be missing from the input and a run without fault would read as dropped in context.
    task = mk.normalize(mk.recorded_spans(f"anthropic_{inst}_documents_rag.pb"))
    (call,) = task.model_calls
    assert "Prepayment shall not exceed 30,000 RMB" in call.input_text
    assert not call.input_partial


@pytest.mark.parametrize("run", list(DOCUMENTS))
def test_document_blocks_the_sdk_keeps_by_their_type_alone_are_not_the_model_input(
    mk: ModuleType, run: str
) -> None:
    # The SDK's own spans keep of a ``document`` block only ``{"type": "anthropic_document"}``: the model
    # was given text the trace does not hold. Read as a whole input, v2's clause would be missing from it and
    # every run would be dropped_in_context (rag and ignored too); the filter fault is told before the input.
    loc = mk.triage_framework(f"anthropic_sdk_documents_{run}.pb", mk.policy_manifest("EU"))
    if run == "filtered":
        assert (loc.verdict, mk.statuses(loc)) == DOCUMENTS[run][::2]
        return
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
    task = mk.normalize(mk.recorded_spans(f"anthropic_sdk_documents_{run}.pb"))
    (call,) = task.model_calls
    (user,) = [m for m in call.input_messages if m.role == "user"]
    assert (user.content, user.unread) == (QUESTION, ("anthropic_document", "anthropic_document"))


@pytest.mark.parametrize("inst", TRACED)
def test_a_stream_read_through_get_final_text(mk: ModuleType, inst: str) -> None:
    # The documents app's rag run, its stream read through ``get_final_text()`` alone. OpenInference and the
    # SDK record the call as for the rag run; OpenLLMetry never ends its span (its stream wrapper ends it only
    # when iterated through its own proxy; opentelemetry-instrumentation-anthropic 0.62.4, the newest). Its
    # recording holds the span as a backend showing spans still open would: the request, no end time, no
    # response; an exporter sends none of it (the SDK's processors export a span when it ends), leaving no
    # model call. Either way unconfirmed, not a definite verdict.
    rag = mk.triage_framework(f"anthropic_{inst}_documents_rag.pb", mk.policy_manifest("EU"))
    if inst != "openllmetry":
        loc = mk.triage_framework(f"anthropic_{inst}_documents_final_text.pb", mk.policy_manifest("EU"))
        assert (loc.verdict, mk.statuses(loc)) == (rag.verdict, mk.statuses(rag))
        return
    spans = mk.recorded_spans("anthropic_openllmetry_documents_final_text_unended.pb")
    task = mk.normalize(spans)
    (call,) = task.model_calls
    assert "Prepayment shall not exceed 30,000 RMB" in call.input_text
    (gap,) = [g for g in task.gaps if g.kind == "model_output_not_recorded"]
    assert "never ended" in gap.detail
    assert not gap.switch  # no content switch would have recorded it
    loc = mk.localize(task, mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
    exported = [s for s in spans if s.end_time_unix_nano]
    assert len(exported) == len(spans) - 1
    loc = mk.localize(mk.normalize(exported), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"])
    assert "no model call" in loc.stages[2].detail


@pytest.mark.parametrize("app", ["tool", "documents", "search_results"])
@pytest.mark.parametrize("inst", TRACED)
def test_never_indexed_is_told_by_the_manifest(mk: ModuleType, inst: str, app: str) -> None:
    loc = mk.triage_framework(f"anthropic_{inst}_{app}_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])


@pytest.mark.parametrize("inst", TRACED)
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


def test_a_refusal_with_no_content_is_unconfirmed_under_the_sdks_own_spans(mk: ModuleType) -> None:
    # The SDK records the reply's stop_reason (``anthropic.message.stop_reason``) and an output message with
    # no part: no text, no response body to show it was the model's refusal — unconfirmed.
    loc = mk.triage_framework("anthropic_sdk_tool_refusal.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"])
