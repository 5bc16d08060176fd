"""The sweep over stored traces: every answer resting on a version not in effect at its task time is
flagged, no correct answer is, and each flag's draft ticket triages like the hand-written ticket."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.store.damage import cut_chunks
from tests.sweep.sweep_data import EXAMPLE, RECORDED, recorded_manifest
from tracejudge._demo import load_example
from tracejudge._errors import InputError, StoreDamageError
from tracejudge.localize import load_ticket, localize
from tracejudge.normalize import normalize
from tracejudge.schema import Document, ManifestEntry, Material, ModelCall, RetrievalCall, TaskRecord, Ticket
from tracejudge.store import SqliteStore
from tracejudge.sweep import VersionIndex, flag_trace, iter_sweep, sweep
from tracejudge_collectors.otel import iter_otlp_file

FIXTURES = sorted(p for p in RECORDED.iterdir() if p.suffix in (".pb", ".json"))
STALE_ANSWER = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
RIGHT_ANSWER = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."
HAND_TICKET = Ticket(
    ticket="EXP-311",
    required=(
        Material(
            doc_id="C-17/attachment",
            version="v2",
            clause="Prepayment shall not exceed 30,000 RMB",
            facts={"prepayment_cap_rmb": 30000},
        ),
    ),
    superseded=(Material(doc_id="C-17/attachment", version="v1", facts={"prepayment_cap_rmb": 50000}),),
)


def _load(store: SqliteStore, path: Path) -> set[str]:
    """A fixture's spans into the store, with its log records (Semantic Kernel sends content as logs)."""
    results = list(iter_otlp_file(path))
    spans = [s for r in results for s in r.spans]
    store.put_spans(spans)
    store.put_log_events([e for r in results for e in r.log_events])  # an OTLP/JSON file may hold logs
    return {s.trace_id for s in spans}


RUNS_OF_FIVE = ("rag", "ignored", "filtered", "dropped", "never_indexed")
# Fixtures recorded without content, so without an answer: ADK 2 and Microsoft Agent Framework with
# their content capture off (the default), Griptape's own OpenTelemetry driver (span names and tags), the
# OpenAI Agents SDK under OpenLLMetry's agents instrumentation alone (no model output with a chat-completions
# model). And the agent that called the model after answering with no span recording its answer
# (record_post_answer.py): which reply the user got is open (answer_uncertain), so no answer is read — the
# memory summary after the right answer names v1's cap, and read as the answer it was flagged.
NO_ANSWER = {
    "post_answer_rag.pb",
    "post_answer_ignored.pb",
    # The preamble (text beside a tool request) last, the call that answered not traced (record_preamble.py).
    "preamble_unanswered.pb",
    "adk_nocontent_rag.pb",
    "agent_framework_nocontent_rag.pb",
    *(f"griptape_{run}.pb" for run in ("rag", "ignored", "filtered", "dropped")),
    *(f"openai_agents_openllmetry_alone_{run}.pb" for run in RUNS_OF_FIVE),
    # A refusal the instrumentation recorded no output of (OpenLLMetry's Anthropic and the anthropic SDK's own
    # spans: stop_reason refusal).
    "anthropic_openllmetry_tool_refusal.pb",
    "anthropic_sdk_tool_refusal.pb",
    # OpenLLMetry's span of a stream read through get_final_text() alone, which never ends (no response).
    "anthropic_openllmetry_documents_final_text_unended.pb",
    # A streamed answer OpenInference's Groq instrumentation records as the stream object's repr.
    *(f"groq_openinference_stream_{run}.pb" for run in RUNS_OF_FIVE),
    # OpenLLMetry's Mistral spans: no prompt (messages given as dicts), no tool call, so which reply the user
    # got is open (answer_uncertain).
    *(f"mistral_openllmetry_{app}_{run}.pb" for app in ("tool", "stream") for run in RUNS_OF_FIVE),
}
# Replies the model stopped short of the scripted ones: stopped at the token limit (the stale answer cut
# short: the user still got v1's cap, so it is flagged) and a refusal read as the answer (nothing to flag).
CUT_SHORT = {
    "anthropic_openinference_tool_max_tokens.pb",
    "anthropic_openllmetry_tool_max_tokens.pb",
    "anthropic_sdk_tool_max_tokens.pb",
    "google_genai_openinference_max_tokens.pb",
    "google_genai_otel_max_tokens.pb",
}
REFUSED = {"anthropic_openinference_tool_refusal.pb"}


@pytest.fixture(scope="module")
def conventions(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every recorded convention and framework fixture in one store, with each trace's recorded answer."""
    store = SqliteStore(tmp_path_factory.mktemp("conventions") / "store.db")
    answers: dict[str, tuple[str, str]] = {}
    for path in FIXTURES:
        for trace_id in _load(store, path):
            answers[trace_id] = (path.name, normalize(store.get_spans(trace_id)).final_answer or "")
    yield store, answers
    store.close()


def test_recording_answers_are_one_of_two() -> None:
    # The ground truth below rests on the recorders' two scripted answers (fixtures/traces/_recording.py).
    text = (RECORDED / "_recording.py").read_text()
    assert STALE_ANSWER in text
    assert RIGHT_ANSWER in text


def test_every_convention_stale_answer_is_flagged_and_no_right_one(conventions: Any) -> None:
    store, answers = conventions
    # Every recorded answer is one of the two scripted ones (a LangGraph root's state object is not
    # read as the answer, DESIGN 5.4); only a trace recorded without content has none.
    scripted = {t: a for t, (_, a) in answers.items() if a in (STALE_ANSWER, RIGHT_ANSWER)}
    assert {name for t, (name, a) in answers.items() if t not in scripted} == NO_ANSWER | CUT_SHORT | REFUSED
    assert all(STALE_ANSWER.startswith(a) for name, a in answers.values() if name in CUT_SHORT)
    assert len(scripted) > 0.8 * len(answers)
    report = sweep(store, recorded_manifest())
    assert report.scanned == len(answers)
    cut = {t for t, (name, _) in answers.items() if name in CUT_SHORT}
    flagged = {f.trace_id for f in report.flagged if f.trace_id in scripted or f.trace_id in cut}
    stale = {t for t, a in scripted.items() if a == STALE_ANSWER} | cut
    assert flagged == stale, {answers[t][0] for t in flagged ^ stale}
    for f in report.flagged:
        assert (f.doc_id, f.in_effect, f.used) == ("C-17/attachment", "v2", "v1")
        assert any('"50,000 RMB"' in e.note and e.span_id for e in f.evidence)
        assert f.ticket["status"] == "draft"


@pytest.mark.parametrize("fixture", [p.name for p in FIXTURES])
def test_each_flag_drafts_a_ticket_that_triages_like_the_hand_written_one(
    fixture: str, tmp_path: Path
) -> None:
    manifest = recorded_manifest()
    store = SqliteStore(tmp_path / "s.db")
    (trace_id, *_) = sorted(_load(store, RECORDED / fixture))
    task = normalize(store.get_spans(trace_id))
    store.close()
    flags = flag_trace(task, VersionIndex.build(manifest))
    if fixture in REFUSED:
        assert task.final_answer not in (STALE_ANSWER, RIGHT_ANSWER)
        assert flags == []
        return
    if task.final_answer not in (STALE_ANSWER, RIGHT_ANSWER) and fixture not in CUT_SHORT:
        # content capture off, or the answer open (see above): no answer, nothing to flag
        assert fixture in NO_ANSWER
        assert (task.final_answer, flags) == (None, [])
        return
    if task.final_answer != STALE_ANSWER and fixture not in CUT_SHORT:
        assert flags == []
        return
    (flag,) = flags
    drafted = Ticket.model_validate(flag.ticket)
    assert drafted.status == "draft"
    assert drafted.required[0].clause == "Prepayment shall not exceed 30,000 RMB per order."
    assert drafted.required[0].facts == {"prepayment_rmb": 30000}  # the currency as the document writes it
    assert drafted.superseded[0].facts == {"prepayment_rmb": 50000}
    hand = localize(task, HAND_TICKET, manifest)
    mine = localize(task, drafted, manifest)
    assert (mine.verdict, mine.cause) == (hand.verdict, hand.cause)
    assert mine.basis == "draft"
    assert mine.summary.startswith("unverified basis")


def test_procurement_stale_answers_flagged_right_ones_not(
    procurement: Any, procurement_manifest: Any
) -> None:
    store, answers = procurement
    ex = load_example(EXAMPLE)
    scenarios = {s.trace_id: s for s in ex.load_scenarios()}
    v1 = next(e for e in procurement_manifest if (e.doc_id, e.version) == ("C-17/attachment", "v1"))
    # Stale: the 50,000 answer given after v1 stopped applying (the scenario's task time is the trace's).
    stale = {
        t
        for t, a in answers.items()
        if a == ex.scenarios.ANSWER_50K and scenarios[t].task_time >= v1.effective_to
    }
    assert 0 < len(stale) < len(answers)
    report = sweep(store, procurement_manifest)
    assert report.scanned == len(answers)
    assert {f.trace_id for f in report.flagged} == stale
    for f in report.flagged:
        assert (f.doc_id, f.in_effect, f.used) == ("C-17/attachment", "v2", "v1")
        hand = load_ticket(scenarios[f.trace_id].ticket_path)
        task = normalize(store.get_spans(f.trace_id))
        drafted = localize(task, Ticket.model_validate(f.ticket), procurement_manifest)
        expected = localize(task, hand, procurement_manifest)
        assert (drafted.verdict, drafted.cause) == (expected.verdict, expected.cause), scenarios[
            f.trace_id
        ].name


def test_procurement_window(procurement: Any, procurement_manifest: Any) -> None:
    store, answers = procurement
    before_v2 = sweep(store, procurement_manifest, until=datetime(2026, 3, 1, tzinfo=UTC))
    assert before_v2.flagged == ()
    assert 0 < before_v2.scanned < len(answers)
    march = sweep(
        store,
        procurement_manifest,
        since=datetime(2026, 3, 1, tzinfo=UTC),
        until=datetime(2026, 3, 2, tzinfo=UTC),
    )
    assert march.scanned == 1
    assert len(march.flagged) == 1


def _task(
    answer: str, question: str = "What is the prepayment cap?", start: datetime | None = None
) -> TaskRecord:
    return TaskRecord(
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        start_time=start or datetime(2026, 11, 18, tzinfo=UTC),
        input=question,
        final_answer=answer,
        final_answer_span_id="b" * 16,
        retrievals=(
            RetrievalCall(span_id="a" * 16, documents=(Document(doc_id="C-17/attachment", version="v1"),)),
        ),
        model_calls=(ModelCall(span_id="b" * 16),),
    )


@pytest.mark.parametrize(
    ("answer", "question", "flagged"),
    [
        ("The cap is 50,000 RMB.", "What is the prepayment cap?", True),
        ("Per attachment v1 the cap applies to every order.", "What is the cap?", True),
        ("The cap was 50,000 RMB under v1; it is 30,000 RMB now.", "What is the cap?", False),
        ("No: 50,000 RMB is over the cap.", "Can we prepay 50,000 RMB?", False),
        ("Net 30 applies; the cap is 30,000 RMB.", "What is the cap?", False),
        ("The cap is 50.000 RMB.", "What is the cap?", True),
        ("Der Höchstbetrag liegt bei 50 000 RMB.", "Wie hoch ist die Vorauszahlung?", True),
        ("The answer has nothing versioned in it.", "Hello?", False),
    ],
)
def test_what_counts_as_resting_on_a_stale_version(answer: str, question: str, flagged: bool) -> None:
    flags = flag_trace(_task(answer, question), VersionIndex.build(recorded_manifest()))
    assert bool(flags) is flagged


def test_before_the_new_version_the_old_value_is_right() -> None:
    index = VersionIndex.build(recorded_manifest())
    early = datetime(2026, 2, 1, tzinfo=UTC)
    assert flag_trace(_task("The cap is 50,000 RMB.", start=early), index) == []
    # ... and quoting the coming version's value before it applied is what gets flagged.
    (flag,) = flag_trace(_task("The cap is 30,000 RMB.", start=early), index)
    assert (flag.in_effect, flag.used) == ("v1", "v2")


def test_a_value_another_document_in_effect_states_is_not_stale() -> None:
    manifest = [
        *recorded_manifest(),
        ManifestEntry(
            doc_id="POL-4/policy", version="v3", content="Payments above 50,000 RMB need approval."
        ),
    ]
    assert flag_trace(_task("The cap is 50,000 RMB."), VersionIndex.build(manifest)) == []


def test_a_manifest_without_versioned_content_is_refused(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    bare = [e.model_copy(update={"content": None}) for e in recorded_manifest()]
    with pytest.raises(InputError, match="content"):
        sweep(store, bare)
    store.close()


def test_the_sweep_streams(conventions: Any) -> None:
    # One trace at a time: the stream yields each flag before the next trace is read.
    store, answers = conventions
    seen: list[int] = []
    items = iter_sweep(store, recorded_manifest(), progress=lambda n, _k: seen.append(n))
    first = next(items)
    assert not isinstance(first, int)
    assert len(seen) < len(answers)
    rest = list(items)
    assert rest[-1] == len(answers)


@pytest.mark.parametrize(
    ("since", "until", "start", "inside"),
    [
        (None, None, None, True),  # an open window reads every trace, one with no start too
        (None, datetime(2026, 3, 1, tzinfo=UTC), None, False),  # a bound needs a start to compare
        (datetime(2026, 3, 1, tzinfo=UTC), None, datetime(2026, 3, 1, tzinfo=UTC), True),  # since is in
        (datetime(2026, 3, 1, tzinfo=UTC), None, datetime(2026, 2, 28, 23, 59, tzinfo=UTC), False),
        (None, datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC), False),  # until is out
        (None, datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 2, 28, 23, 59, tzinfo=UTC), True),
    ],
)
def test_the_sweep_window_is_half_open_and_needs_a_start_when_bounded(
    since: datetime | None, until: datetime | None, start: datetime | None, inside: bool
) -> None:
    from tracejudge.sweep._api import _Window

    assert _Window(since, until).holds(start) is inside


def test_a_trace_the_store_holds_damaged_is_listed_and_the_rest_swept(tmp_path: Path) -> None:
    # One damaged trace stopped the whole sweep with a StoreError; now it is listed (`unreadable`, not
    # scanned) and every other trace is swept as before.
    store = SqliteStore(tmp_path / "store.db")
    try:
        ids = {name: _load(store, RECORDED / name) for name in ("langgraph_ignored.pb", "langgraph_rag.pb")}
        before = sweep(store, recorded_manifest())
        [lost] = ids["langgraph_ignored.pb"]
        assert lost in {f.trace_id for f in before.flagged}  # the stale answer, flagged while it read
        cut_chunks(tmp_path / "store.db", lost)  # as a damaged file has it
        with pytest.raises(StoreDamageError):
            list(iter_sweep(store, recorded_manifest()))  # a caller that does not take them still stops
        after = sweep(store, recorded_manifest())
    finally:
        store.close()
    assert after.unreadable == (lost,)
    assert after.scanned == before.scanned - 1
    assert after.flagged == tuple(f for f in before.flagged if f.trace_id != lost)
    assert "unreadable" in after.model_dump(mode="json")
