"""``audit`` and ``calibrate`` and a trace still arriving (DESIGN 5.5): exporters send spans as they end, a
batch at a time, the root last. A first batch whose answer was read from a model call — maybe a draft the
user never got — is not judged by ``calibrate`` (as ``score`` leaves it), and ``audit`` says which items of
a run were left so and that a pass-rate change may be theirs. The batches are the real SDK's
BatchSpanProcessor's (the builder of tests/localize/test_late_spans.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tests.localize.test_late_spans import RUNS, _batches, collect_batch
from tests.runs.test_still_arriving import RUBRIC
from tracejudge.cli import cli
from tracejudge.store import SqliteStore


def _invoke(db: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", *args])
    assert result.exit_code == code, result.output
    return result.stdout


def _json(db: Path, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(_invoke(db, *args, "--json"))
    return out


def _first_batch(tmp_path: Path) -> tuple[Path, str, Any]:
    """The store holding the draft-then-answer run's first batch; its trace id; the rest of the run."""
    run = next(r for r in RUNS if r.name == "draft-then-answer")
    first, rest = _batches(run)
    db = tmp_path / "s.db"
    collect_batch(db, tmp_path / "batch-0.json", first)
    (tmp_path / "rubric.yaml").write_text(RUBRIC)
    return db, f"{first[0].context.trace_id:032x}", rest


def test_calibrate_does_not_judge_a_stored_answer_that_may_be_a_draft(tmp_path: Path) -> None:
    db, trace_id, rest = _first_batch(tmp_path)
    labels = tmp_path / "labels.jsonl"
    # A person labelled the answer the user got (v2's cap) as right: the labelled item names the trace.
    labels.write_text(json.dumps({"id": "t1", "trace_id": trace_id, "label": "pass"}) + "\n")
    args = ("calibrate", "--rubric", str(tmp_path / "rubric.yaml"), "--labels", str(labels))

    got = _json(db, *args)
    # Judged on the draft it was fail: a disagreement with the label that is not the judge's.
    [item] = got["items"]
    assert (item["judge"], item["label"]) == ("indeterminate", "pass")
    assert item["reason"].startswith("still_arriving: the answer was read from span ")
    assert "score it again once the rest of the trace has arrived" in item["reason"]
    assert got["confusion"]["false_fail"] == 0
    flag = next(f for f in got["flags"] if f.startswith("still_arriving:"))
    assert "1 item(s) not judged" in flag
    assert "Calibrate again once the rest of the trace" in flag
    # Not marked as used: a later calibration judges it as if for the first time.
    store = SqliteStore(db)
    try:
        assert store.tuning_marks("prepayment-answer") == []
    finally:
        store.close()
    # What a person reads says why and what to do.
    assert "still_arriving: 1 item(s) not judged" in " ".join(_invoke(db, *args).split())

    collect_batch(db, tmp_path / "batch-1.json", rest)
    got = _json(db, *args)
    assert [(i["judge"], i["label"]) for i in got["items"]] == [("pass", "pass")]
    assert not any(f.startswith("still_arriving:") for f in got["flags"])


def test_audit_names_the_items_left_unscored_and_reads_no_drift_from_them(tmp_path: Path) -> None:
    db, trace_id, rest = _first_batch(tmp_path)
    score = ("score", "--rubric", str(tmp_path / "rubric.yaml"), "--trace", trace_id, "--json")
    first_run = json.loads(_invoke(db, *score))["run_id"]
    got = _json(db, "audit", first_run)
    assert got["still_arriving"] == [trace_id]
    text = " ".join(_invoke(db, "audit", first_run).split())  # as wrapped to the console's width
    assert "not scored: 1 item(s) whose trace may still have been arriving" in text
    assert "score them again once they have arrived" in text

    # The rest arrives and the trace is scored again: pass, where the first run had it indeterminate.
    collect_batch(db, tmp_path / "batch-1.json", rest)
    second_run = json.loads(_invoke(db, *score))["run_id"]
    got = _json(db, "audit", second_run)
    assert got["still_arriving"] == []
    drift = got["drift"]
    rates = (drift["previous_run_id"], drift["pass_rate"], drift["previous_pass_rate"])
    assert rates == (first_run, 1.0, 0.0)
    # Same judge, rubric and traces: it read "the judge's own instability"; the change is the trace's.
    assert drift["still_arriving"] == [0, 1]
    assert drift["reading"].startswith("0 item(s) of this run and 1 of the previous were not scored")
    assert "the change may be theirs" in drift["reading"]


def test_calibrate_sample_leaves_out_a_trace_whose_answer_may_be_a_draft(tmp_path: Path) -> None:
    db, late, _rest = _first_batch(tmp_path)
    whole = [s for batch in _batches(next(r for r in RUNS if r.name == "draft-then-answer")) for s in batch]
    done = f"{whole[0].context.trace_id:032x}"
    collect_batch(db, tmp_path / "whole.json", whole)
    _invoke(db, "score", "--rubric", str(tmp_path / "rubric.yaml"), "--trace", late, "--trace", done)

    got = _json(db, "calibrate", "sample", "--n", "5")
    # It was in the sample with the draft (v1's 50,000 RMB) as the answer to label.
    assert [r["trace_id"] for r in got["rows"]] == [done]
    assert got["still_arriving"] == [late]
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", "calibrate", "sample", "--n", "5"])
    assert "left out 1 trace(s) that may still be arriving" in " ".join(result.stderr.split())
    assert "sample again once they have arrived" in " ".join(result.stderr.split())
