"""What the triage command tests share: a one-retrieval, one-model-call task record, and a store that
holds a placeholder span per trace while the normalizer is stood in for (the command is pinned here,
the convention tables in tests/localize)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

import pytest

from tracejudge.schema import Document, Message, ModelCall, RawSpan, RetrievalCall, TaskRecord
from tracejudge.store import open_store

T0 = datetime(2026, 11, 18, 9, 30, tzinfo=UTC)
V2 = "Prepayment shall not exceed 30,000 RMB per order."


def record(trace_id: str, context: str, answer: str) -> TaskRecord:
    """C-17/attachment v2 retrieved, ``context`` as the model input, ``answer`` as the final answer."""
    return TaskRecord(
        trace_id=trace_id,
        start_time=T0,
        final_answer=answer,
        final_answer_span_id="b" * 16,
        retrievals=(
            RetrievalCall(
                span_id="a" * 16,
                documents=(Document(doc_id="C-17/attachment", version="v2", content=V2),),
            ),
        ),
        model_calls=(
            ModelCall(
                span_id="b" * 16,
                input_messages=(Message(role="user", content=context),),
                input_recorded=True,
                output_recorded=True,
                input_text=context,
                output_text=answer,
            ),
        ),
    )


def span(trace_id: str) -> RawSpan:
    return RawSpan(
        trace_id=trace_id, span_id="c" * 16, name="agent", start_time_unix_nano=1, end_time_unix_nano=2
    )


def store_traces(url: str, trace_ids: Iterable[str]) -> None:
    """A placeholder span per trace, so the command finds the trace in the store."""
    store = open_store(url)
    store.put_spans([span(t) for t in trace_ids])
    store.close()


def stand_in_normalizer(monkeypatch: pytest.MonkeyPatch, records: Mapping[str, TaskRecord]) -> None:
    def fake_normalize(spans: Sequence[RawSpan]) -> TaskRecord:
        return records[spans[0].trace_id]

    monkeypatch.setattr("tracejudge.localize._triage.normalize", fake_normalize)
