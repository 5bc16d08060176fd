"""``score`` and a trace still arriving: exporters send spans as they end, a batch at a time, the root last.
A first batch whose answer is read from a model call — maybe a draft the user never got — is not scored
pass or fail: the item is ``indeterminate``, saying why, and a later run scores it. The batches are the real
SDK's BatchSpanProcessor's (the builder of tests/localize/test_late_spans.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tests.localize.test_late_spans import RUNS, _batches, collect_batch
from tracejudge.cli import cli

# A hard check only: no judge is needed, and the draft (v1's 50,000 RMB) fails it.
RUBRIC = """\
name: prepayment-answer
version: 1
criteria: []
checks:
  - {name: states_cap, type: contains, target: output, value: "30,000"}
"""


def _score(db: Path, rubric: Path, trace_id: str) -> dict[str, Any]:
    args = ["--store", f"sqlite:///{db}", "score", "--rubric", str(rubric), "--trace", trace_id, "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 1), result.output
    item: dict[str, Any] = json.loads(result.stdout)["items"][0]
    return item


def test_a_first_batch_whose_answer_may_be_a_draft_is_scored_once_the_rest_has_arrived(
    tmp_path: Path,
) -> None:
    run = next(r for r in RUNS if r.name == "draft-then-answer")
    first, rest = _batches(run)
    trace_id = f"{first[0].context.trace_id:032x}"
    db, rubric = tmp_path / "s.db", tmp_path / "rubric.yaml"
    rubric.write_text(RUBRIC)
    verdicts = []
    for n, batch in enumerate((first, rest)):
        collect_batch(db, tmp_path / f"batch-{n}.json", batch)
        item = _score(db, rubric, trace_id)
        verdicts.append(item["verdict"])
        if n == 0:
            # It was fail: the draft's cap, not the answer the user got.
            assert item["reason"].startswith("still_arriving: the answer was read from span ")
            assert "root span has not been received" in item["reason"]
            assert "score it again once the rest of the trace has arrived" in item["reason"]
    assert verdicts == ["indeterminate", "pass"]
