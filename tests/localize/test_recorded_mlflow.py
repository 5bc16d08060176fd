"""Triage on MLflow tracing exported with ``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true`` (record_mlflow.py): the
GenAI translation keeps the model calls' messages but exports the retriever span with neither its inputs nor
its documents. What the retrieval returned is then not in the trace — the documents reach the model only
inside a tool message — so every verdict that needs the search's result is ``unconfirmed``, naming the
retriever span's documents and the switch that records them; the filter the app set on the retriever span
survives the translation, so ``filtered`` stays definite. MLflow's own attributes (the default export) are in
test_recorded_five_runs.py's table.
"""

from __future__ import annotations

from types import ModuleType

import pytest

# run -> (verdict, stage statuses) under the recordings' index (v2 indexed, in the EU)
RUNS = {
    "rag": ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"]),
    "ignored": ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"]),
    "dropped": ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"]),
    "never_indexed": ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"]),
    "filtered": ("filtered", ["pass", "fail", "skipped", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_the_genai_translation_leaves_the_search_result_unconfirmed(mk: ModuleType, run: str) -> None:
    verdict, statuses = RUNS[run]
    loc = mk.triage_framework(f"mlflow_genai_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == (verdict, statuses)
    if verdict == "unconfirmed":
        # the retriever span is there (its operation name is MLflow's span type), its documents are not,
        # and the switch that records them is named
        [documents] = [item for item in loc.stages[1].missing if item.startswith("the documents returned by")]
        assert "unset MLFLOW_ENABLE_OTEL_GENAI_SEMCONV" in documents


def test_never_indexed_is_still_told_by_the_manifest(mk: ModuleType) -> None:
    loc = mk.triage_framework("mlflow_genai_never_indexed.pb", mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])
