"""README's *Beyond DESIGN* row on the JSON outputs, held to the code: each field it says a command's
``--json`` adds to what DESIGN 5 lists is in what that command prints (the records and the functions the
commands print through), and what it names is what the row says — a renamed or dropped field fails here,
and so does a row that stops naming one."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from tests.docs.test_readme_commands import _text
from tracejudge.audit import RunGate
from tracejudge.audit._sample import LabellingSample
from tracejudge.cli._calibrate import _sample_summary
from tracejudge.judge import parse_rubric
from tracejudge.runs import ScoreOutcome, provenance
from tracejudge.schema import (
    AuditReport,
    BuildReport,
    CalibrationReport,
    DraftTicket,
    Drift,
    RunRecord,
    SweepReport,
)

_ROW = "| 5.5 and 5.6: what `triage --sweep --json` and `score --json` print |"


def _row() -> str:
    line = next((x for x in _text().splitlines() if x.startswith(_ROW)), None)
    assert line is not None, f"README's Beyond DESIGN table has no row {_ROW!r}"
    return line


def _score_json() -> dict[str, Any]:
    rubric = parse_rubric(
        "name: r\nversion: 1\nchecks: [{name: c, type: contains, target: output, value: x}]\n"
    )
    run = RunRecord(
        run_id="run-x", series="s", created_at=datetime.now(UTC), provenance=provenance(rubric, repeat=1)
    )
    out = ScoreOutcome(
        run=run,
        items=(),
        write_back_pending=0,
        waiting=1,
        waiting_s=60.0,
        resume="tracejudge score --rubric r.yaml --run run-x",
        gate=RunGate(0.9, False, "why"),
    )
    return out.json()


def test_the_score_fields_the_readme_names_are_printed() -> None:
    row = _row()
    printed = _score_json()
    assert '`waiting: {"items", "after_s", "command"}`' in row
    assert set(printed["waiting"]) == {"items", "after_s", "command"}
    assert "`summary.waiting`" in row
    assert printed["summary"]["waiting"] == 1
    assert "`write_back_pending`" in row
    assert "write_back_pending" in printed
    assert '`gate: {"threshold", "passed", "reason"}`' in row
    assert set(printed["gate"]) == {"threshold", "passed", "reason"}


def test_the_still_arriving_fields_the_readme_names_are_printed() -> None:
    row = _row()
    sample = LabellingSample(rows=(), bands={}, available={}, run_id=None, report_id="r")
    claims = {
        "`triage --sweep --json`: `still_arriving`": "still_arriving" in SweepReport.model_fields,
        "`triage --sweep --json` also `unreadable`": "unreadable" in SweepReport.model_fields,
        "`calibrate --json` `labels_skipped`": "labels_skipped" in CalibrationReport.model_fields,
        "`regress build --json` lists it under `skipped`": "skipped" in BuildReport.model_fields,
        "`audit --json` `still_arriving`": "still_arriving" in AuditReport.model_fields,
        "`drift.still_arriving`": "still_arriving" in Drift.model_fields,
        "`ticket draft --json` `still_arriving`": "still_arriving" in DraftTicket.model_fields,
        "`calibrate sample --json` `still_arriving`": "still_arriving" in _sample_summary(sample, None, None),
    }
    for claim, printed in claims.items():
        assert claim in row, f"README no longer says {claim}"
        assert printed, f"README says {claim}, and the command does not print it"
    # Every field the row names for these outputs is one of those checked here.
    named = set(re.findall(r"`([a-z_.]+)`", row))
    assert named <= {
        "still_arriving",
        "drift.still_arriving",
        "summary.waiting",
        "write_back_pending",
        "running",
        "indeterminate",
        "status",
        "flags",
        "tracejudge_sweep_still_arriving_traces",
        "unreadable",
        "labels_skipped",
        "skipped",
    }, named
