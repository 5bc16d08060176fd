"""The span the Langfuse collector makes for a trace (its synthetic root) is known by its mark and, the mark
lost, by its id: read as a run's own root, two runs of Langfuse's v2 decorator under one trace id were one
run whose answer was the last run's — ignored_by_model or no_fault where the trace supports neither
(found by the removal property over tests/fixtures/langfuse_v2)."""

from __future__ import annotations

import pytest

from tests.localize import conftest as mk
from tests.localize._langfuse_ingestion import fold
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.normalize._normalize import SYNTHETIC_ROOT, _synthetic_root_id
from tracejudge.schema import RawSpan
from tracejudge_collectors.langfuse import trace_to_spans
from tracejudge_collectors.langfuse._convert import synthetic_root_id


@pytest.mark.parametrize("trace_id", ["trace-abc", "4bf92f3577b34da6a3ce929d0e0e4736", "x"])
def test_the_reader_knows_the_id_the_collector_gives(trace_id: str) -> None:
    assert _synthetic_root_id(trace_id) == synthetic_root_id(trace_id)


def _without_mark(spans: list[RawSpan]) -> list[RawSpan]:
    return [
        s.model_copy(update={"attributes": {k: v for k, v in s.attributes.items() if k != SYNTHETIC_ROOT}})
        for s in spans
    ]


@pytest.mark.parametrize("name", ["two_runs_good_dropped", "two_runs_dropped_good"])
def test_two_decorator_runs_stay_two_when_the_roots_mark_is_lost(name: str) -> None:
    trace = fold(name)
    spans = trace_to_spans(trace, trace["observations"])
    assert sum(SYNTHETIC_ROOT in s.attributes for s in spans) == 1
    manifest = [mk.entry(acl=None), mk.v1_entry()]
    for read in (spans, _without_mark(spans)):
        task = normalize(read)
        assert len(task.runs) == 2
        assert any(g.kind == "several_runs" for g in task.gaps)
        assert localize(task, mk.ticket(), manifest).verdict == "unconfirmed"
