"""A trace exported under ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` set to a length no rule knows (250, 333, 777):
the SDK cuts every longer value to exactly that length and marks nothing. A plain text cut there read as whole
— the clause past the cut "not in the model input", the request's value past the cut "not stated by the
user" — and gave a definite verdict the whole trace contradicts. The trace shows the limit: its longest values
share that length (``normalize._cut.shown_limits``), so a text that long that stops mid-sentence may have been
longer (DESIGN 5.5). The recorded traces are replayed span by span through the real SDK under the variable
(its own truncation), encoded by its OTLP encoder and decoded by tracejudge's decoder."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.localize import test_removal_property as prop
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.normalize._cut import shown_limits
from tracejudge.schema import ManifestEntry, RawSpan, Ticket
from tracejudge_collectors.otel import decode_protobuf


def exported(spans: Sequence[RawSpan], monkeypatch: pytest.MonkeyPatch, limit: int | None) -> list[RawSpan]:
    """``spans`` made again by the real SDK (one provider per recorded resource, parents before children,
    the recorded names, times, attributes and events) with ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` set to
    ``limit`` (unset for None), as the OTLP request its exporter sends, decoded."""
    if limit is None:
        monkeypatch.delenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", raising=False)
    else:
        monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", str(limit))
    exporter = InMemorySpanExporter()
    tracers: dict[str, trace.Tracer] = {}
    made: dict[str, trace.Span] = {}
    for raw in _parents_first(spans):
        key = repr(sorted(raw.resource.items()))
        if key not in tracers:
            provider = TracerProvider(resource=Resource(raw.resource))  # SpanLimits() reads the variable
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            tracers[key] = provider.get_tracer(raw.scope_name, raw.scope_version or None)
        parent = made.get(raw.parent_span_id or "")
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = tracers[key].start_span(
            raw.name, context, attributes=_values(raw.attributes), start_time=raw.start_time_unix_nano
        )
        for event in raw.events:
            span.add_event(event.name, _values(event.attributes), event.time_unix_nano or None)
        made[raw.span_id] = span
    for raw in spans:  # ended after every child started: a parent's context stays valid
        made[raw.span_id].end(raw.end_time_unix_nano)
    return decode_protobuf(encode_spans(exporter.get_finished_spans()).SerializeToString()).spans


def _parents_first(spans: Sequence[RawSpan]) -> Iterator[RawSpan]:
    ids = {s.span_id for s in spans}
    children: dict[str, list[RawSpan]] = {}
    for span in spans:
        children.setdefault(span.parent_span_id if span.parent_span_id in ids else "", []).append(span)
    frontier = list(children.get("", []))
    while frontier:
        span = frontier.pop(0)
        yield span
        frontier.extend(children.get(span.span_id, []))


def _values(attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes an SDK takes (strings, numbers, booleans and lists of one of them)."""
    return {k: v for k, v in attributes.items() if isinstance(v, (str, int, float, bool, list))}


def _case(name: str) -> prop.Case:
    return next(c for c in prop.corpus() if c.name == name)


def _verdict(spans: list[RawSpan], ticket: Ticket, manifest: Sequence[ManifestEntry] | None) -> str:
    loc = localize(normalize(spans), ticket, manifest)
    return loc.verdict + (f" ({loc.cause})" if loc.cause else "")


@pytest.mark.parametrize("limit", [250, 333, 777])
def test_a_prompt_cut_at_the_limit_the_trace_shows_is_not_read_as_whole(
    monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    # TruLens over LlamaIndex: the model's prompt (the retrieved pages, the clause past the cut) and its
    # echoed reply cut at the limit, with the retrieved texts: the prompt read as whole said
    # dropped_in_context.
    case = _case("outside/trulens/llama@as-given")
    assert _verdict(exported(case.spans, monkeypatch, None), case.ticket, case.manifest) == "no_fault"
    spans = exported(case.spans, monkeypatch, limit)
    assert _verdict(spans, case.ticket, case.manifest) == "unconfirmed"
    assert shown_limits(spans) == {limit}
    record = normalize(spans)
    assert record.cut_lengths == (limit,)
    assert "model_input_truncated" in {g.kind for g in record.gaps}


def test_a_request_cut_at_the_limit_the_trace_shows_may_have_stated_what_the_answer_echoes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # LiteLLM under OpenInference sends the excerpts (both versions) in the user message, which is the
    # request: the answer's 50,000 RMB echoes it and settles nothing. Cut at 250 the request no longer
    # states 50,000, and the answer read as resting on the superseded version: ignored_by_model. The
    # request's JSON body (input.value), cut there too, stops open: the trace shows the limit.
    case = _case("litellm_openinference_ignored.pb@policy")
    assert _verdict(exported(case.spans, monkeypatch, None), case.ticket, case.manifest) == "unconfirmed"
    spans = exported(case.spans, monkeypatch, 250)
    assert _verdict(spans, case.ticket, case.manifest) == "unconfirmed"
    assert normalize(spans).cut_lengths == (250,)


@pytest.mark.parametrize("run", ["rag", "ignored"])
@pytest.mark.parametrize("limit", [250, 333])
def test_a_request_lost_with_the_model_input_it_was_in_may_have_stated_what_the_answer_says(
    monkeypatch: pytest.MonkeyPatch, run: str, limit: int
) -> None:
    # Anthropic document blocks under OpenLLMetry: the documents (both versions) sit in the user's own
    # message, so whichever value the answer states echoes the request and settles nothing. Cut at the
    # limit, gen_ai.input.messages no longer parses: no request is read at all, the clause is still found
    # in the raw text, and the answer's value counted as its own gave no_fault / ignored_by_model.
    case = _case(f"anthropic_openllmetry_documents_{run}.pb@policy")
    assert _verdict(exported(case.spans, monkeypatch, None), case.ticket, case.manifest) == "unconfirmed"
    spans = exported(case.spans, monkeypatch, limit)
    record = normalize(spans)
    assert record.input is None
    assert any(call.input_partial for call in record.model_calls)
    assert _verdict(spans, case.ticket, case.manifest) == "unconfirmed"


def test_no_recorded_trace_shows_a_limit_it_was_not_cut_at() -> None:
    # The cost: a whole trace whose longest values share a length would read its texts that long as cut.
    # Over every trace of the removal property's corpus, none shows one (two instrumentations' records of
    # one message list share the longest length, each closing as JSON: they do not count).
    shown = {case.name: shown_limits(case.spans) for case in prop.corpus()}
    assert {name: lengths for name, lengths in shown.items() if lengths} == {}


@pytest.mark.parametrize(
    ("values", "shown"),
    [
        # Two different texts at the longest length; one text alone shows nothing.
        (["Prepayment shall not exceed 30,000 RMB per order and " * 6, "a" * 80], set()),
        (["x " * 200, "y " * 200, "short"], {400}),
        # A JSON document that stops open at the longest length, alone; one that closes shows nothing.
        (['[{"role": "user", "content": "' + "w " * 100], {len('[{"role": "user", "content": "') + 200}),
        (['[{"role": "user", "content": "' + "w " * 98 + '"}]'], set()),
        # Ids (two UUIDs) share a length below any limit set for texts.
        (["0b6e2a3c-7a4e-4d7f-9a49-1c3f0f6f1d2e", "9c1d4e6f-2b3a-4c5d-8e7f-0a1b2c3d4e5f"], set()),
    ],
)
def test_what_shows_a_limit(values: list[str], shown: set[int]) -> None:
    spans = [
        RawSpan(trace_id="1" * 32, span_id=f"{i:016x}", attributes={"v": v}) for i, v in enumerate(values)
    ]
    assert shown_limits(spans) == shown


def test_each_process_shows_its_own_limit() -> None:
    # Two services, each with one long text at 300 characters: no process shows a limit. The same two
    # texts in one service's spans do.
    texts = ["x " * 150, "y " * 150]
    spans = [
        RawSpan(
            trace_id="1" * 32, span_id=f"{i:016x}", attributes={"v": t}, resource={"service.name": f"s{i}"}
        )
        for i, t in enumerate(texts)
    ]
    assert shown_limits(spans) == set()
    same = [s.model_copy(update={"resource": {"service.name": "s"}}) for s in spans]
    assert shown_limits(same) == {300}
