"""Runs of Langfuse's v2 ``@observe`` decorator under one trace id (DESIGN 5.5), as the v2 SDK sent them.

The v2 decorator makes the outermost function the trace itself (its input and output the trace's) and each
function it calls a top-level observation: every step of every run sits at the top level of the trace, and
two runs given one trace id (``langfuse_observation_id`` per conversation) were read as one run — the
trace's answer the last run's, the retrieval and model inputs either's. And a run whose top-level steps each
hold input, output and a model call (``plan`` then ``respond``) was split into two runs by the sign that
tells a Langfuse trace's runs apart. The batches are the real SDK's (langfuse 2.60.10,
tests/fixtures/traces/record_langfuse_v2.py), folded as Langfuse's ingestion merges them
(tests/localize/_langfuse_ingestion.py), served by the Langfuse stand-in and collected with ``collect
langfuse``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.localize._langfuse_ingestion import fold
from tests.localize.test_reused_trace_id import _collected, _triage_stored


def _triaged(
    name: str, tmp_path: Path, generation: str = "v3"
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The recorded trace served by a Langfuse of ``generation`` (v3: its trace record; v4: observations
    only, no trace record of a trace no single observation roots), collected and triaged."""
    trace = fold(name)
    got, task = _triage_stored(tmp_path, _collected(tmp_path, generation, trace), trace["id"])
    return got, task, trace


@pytest.mark.parametrize("name", ["one_run_tool_loop", "one_run_plan_respond"])
def test_one_v2_run_with_several_generations_stays_one_run(name: str, tmp_path: Path) -> None:
    # plan and respond each hold input, output and a generation: read as two runs, the plan's (no
    # retrieval, no answer of the run's) disagreed with the respond's and the verdict was unconfirmed.
    got, task, _ = _triaged(name, tmp_path)
    assert task["runs"] == []
    assert not any(g["kind"] == "several_runs" for g in task["gaps"])
    assert len(task["model_calls"]) == 2
    assert got["verdict"] == "no_fault", got["summary"]


@pytest.mark.parametrize("generation", ["v3", "v4"])
@pytest.mark.parametrize("name", ["two_runs_good_dropped", "two_runs_dropped_good"])
def test_two_v2_runs_under_one_trace_id_are_read_run_by_run(
    name: str, generation: str, tmp_path: Path
) -> None:
    # Read as one run, the trace said ignored_by_model (good then dropped: the last run's answer, the first
    # run's model input holding v2 — neither run's verdict) or no_fault: which run the ticket is about is not
    # recorded. Through v4 the trace has no record of its own (no input or output): told apart all the same.
    got, task, trace = _triaged(name, tmp_path, generation)
    assert got["verdict"] == "unconfirmed", got["summary"]
    assert "read whole" in got["summary"]
    (gap,) = [g for g in task["gaps"] if g["kind"] == "several_runs"]
    assert "told apart by the question their model calls were asked" in gap["detail"]
    assert len(task["runs"]) == 2
    # Each run its three steps (under the trace's root), named by its first.
    first, second = (o for o in trace["observations"] if o["name"] == "search_documents")
    assert [len(r["span_ids"]) for r in task["runs"]] == [4, 4]
    assert [first["id"] in r["span_ids"] for r in task["runs"]] == [True, False]
    assert [second["id"] in r["span_ids"] for r in task["runs"]] == [False, True]
    starts = [o["id"] for o in trace["observations"] if o["name"] == "chat"][::2]
    (root,) = [s["span_id"] for s in task["spans"] if s["parent_span_id"] is None]
    assert [r["label"] for r in task["runs"]] == [
        f"run {root} (answer_question from {start} (chat))" for start in starts
    ]
    assert len({r["final_answer"] for r in task["runs"]}) == 2
    assert task["final_answer"] is None


def test_two_v2_runs_that_agree_keep_their_verdict(tmp_path: Path) -> None:
    got, task, _ = _triaged("two_runs_good_good", tmp_path)
    assert len(task["runs"]) == 2
    assert got["verdict"] == "no_fault", got["summary"]


def test_two_v2_runs_each_under_a_span_of_their_own_are_read_run_by_run(tmp_path: Path) -> None:
    # langfuse_parent_trace_id: each run's outermost function is a top-level span holding the whole run.
    got, task, _ = _triaged("two_parented_runs_good_dropped", tmp_path)
    assert len(task["runs"]) == 2
    assert got["verdict"] == "unconfirmed", got["summary"]
