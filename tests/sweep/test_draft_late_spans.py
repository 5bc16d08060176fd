"""``ticket draft`` and a trace still arriving (DESIGN 5.5): exporters send spans as they end, a batch at a
time, the root last. A first batch whose answer was read from a model call — maybe a draft the user never
got — does not settle the basis from that answer (as the sweep does not flag it); the draft says so and
what to do. The batches are the real SDK's BatchSpanProcessor's (tests/localize/test_late_spans.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tests.localize.test_late_spans import collect_batch
from tests.sweep.test_sweep_late_spans import MANIFEST, first_batch_stored
from tracejudge.cli import cli
from tracejudge.localize import STILL_ARRIVING
from tracejudge.normalize import normalize
from tracejudge.store import SqliteStore
from tracejudge.sweep import VersionIndex, draft_ticket


def _draft(db: Path, manifest: Path, trace_id: str, *, as_json: bool = True) -> Any:
    args = ["--store", f"sqlite:///{db}", "ticket", "draft", "--trace", trace_id, "--manifest", str(manifest)]
    result = CliRunner().invoke(cli, [*args, "--json"] if as_json else args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if as_json else result


def test_a_draft_from_a_first_batch_does_not_rest_on_an_answer_that_may_be_a_draft(tmp_path: Path) -> None:
    # The first call's reply is a draft stating v1's cap; the root, and the answer the user got, come later.
    db, manifest, trace_id, rest = first_batch_stored(tmp_path)

    got = _draft(db, manifest, trace_id)
    # Read from the draft it was the sweep's finding: superseded v1 with the draft's 50,000 as its fact,
    # and the draft's span as the evidence — a basis the answer the user got (v2's cap) does not support.
    assert got["still_arriving"].startswith("the answer was not read: it was read from span ")
    assert "draft again once the rest of the trace has arrived" in got["still_arriving"]
    assert got["evidence"] == []
    assert "facts" not in got["ticket"]["superseded"][0]
    assert got["yaml"].splitlines()[1].startswith("# STILL ARRIVING: the answer was not read")
    # What a person reads: why, and what to do.
    said = " ".join(_draft(db, manifest, trace_id, as_json=False).stderr.split())
    assert "still arriving: the answer was not read" in said

    # Long after its last span ended the missing spans are not on their way: the answer is read again.
    store = SqliteStore(db)
    try:
        task = normalize(store.get_spans(trace_id))
    finally:
        store.close()
    assert task.end_time is not None
    late = draft_ticket(task, VersionIndex.build(MANIFEST), now=task.end_time + STILL_ARRIVING)
    assert late.still_arriving is None
    assert late.ticket["superseded"] == [
        {"doc_id": "C-17/attachment", "version": "v1", "facts": {"prepayment_rmb": 50000}}
    ]

    # Once the rest has arrived, nothing is awaited.
    collect_batch(db, tmp_path / "batch-1.json", rest)
    assert _draft(db, manifest, trace_id)["still_arriving"] is None
