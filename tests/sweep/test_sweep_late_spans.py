"""The sweep and a trace still arriving: exporters send spans as they end, a batch at a time, the root
last (DESIGN 5.5). A first batch whose answer is read from a model call — maybe a draft the user never got —
is not judged while the rest may be on its way; the sweep lists it, and a later sweep reads it. The batches
are the real SDK's BatchSpanProcessor's (the builder of tests/localize/test_late_spans.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan

from tests.localize import conftest as mk
from tests.localize.test_late_spans import RUNS, _batches, collect_batch
from tracejudge.cli import cli
from tracejudge.localize import STILL_ARRIVING
from tracejudge.normalize import normalize
from tracejudge.report import build_report, render_html, store_metrics
from tracejudge.schema import StoredReport, SweepSummary
from tracejudge.store import SqliteStore
from tracejudge.sweep import latest_sweep, sweep

# The versions with their text, as a sweep needs them.
MANIFEST = [
    mk.entry(acl=None, content=mk.V2_TEXT),
    mk.v1_entry(acl=None, content=mk.V1_TEXT),
]


def first_batch_stored(tmp_path: Path) -> tuple[Path, Path, str, Sequence[ReadableSpan]]:
    """The store (``s.db`` under ``tmp_path``) holding the first batch of a run whose first call's reply is
    a draft stating v1's cap (the root, and the answer the user got, come later); the manifest file; the
    trace id; the rest of the run's spans."""
    run = next(r for r in RUNS if r.name == "draft-then-answer")
    first, rest = _batches(run)
    db, manifest = tmp_path / "s.db", tmp_path / "manifest.jsonl"
    manifest.write_text("".join(e.model_dump_json() + "\n" for e in MANIFEST))
    collect_batch(db, tmp_path / "batch-0.json", first)
    return db, manifest, f"{first[0].context.trace_id:032x}", rest


def _cli(db: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", *args, "--json"])
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.output)
    return out


def test_a_first_batch_whose_draft_states_the_old_cap_is_not_flagged_while_the_rest_may_arrive(
    tmp_path: Path,
) -> None:
    db, manifest, trace_id, rest = first_batch_stored(tmp_path)
    got = _cli(db, "triage", "--sweep", "--manifest", str(manifest))
    assert got["flagged"] == []
    assert got["scanned"] == 1
    assert got["still_arriving"] == [trace_id]

    # Long after its last span ended, the missing spans are not on their way: the trace reads as it is, and
    # the draft's stale cap is flagged (what it was before this rule).
    store = SqliteStore(db)
    try:
        end = normalize(store.get_spans(trace_id)).end_time
        assert end is not None
        late = sweep(store, MANIFEST, now=end + STILL_ARRIVING)
        assert [(f.trace_id, f.used) for f in late.flagged] == [(trace_id, "v1")]
        assert late.still_arriving == ()
    finally:
        store.close()

    # Once the rest has arrived, the answer the user got (v2's cap) is read: nothing to flag or wait for.
    collect_batch(db, tmp_path / "batch-1.json", rest)
    got = _cli(db, "triage", "--sweep", "--manifest", str(manifest))
    assert (got["flagged"], got["still_arriving"]) == ([], [])


BEFORE_COUNT = Path(__file__).with_name("fixtures") / "sweep_before_count.json"


def _metric(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name)]


def test_the_recorded_sweep_counts_the_traces_it_did_not_judge_in_the_report_and_metrics(
    tmp_path: Path,
) -> None:
    db, manifest, trace_id, _rest = first_batch_stored(tmp_path)
    _cli(db, "triage", "--sweep", "--manifest", str(manifest))  # records its summary
    store = SqliteStore(db)
    try:
        summary = latest_sweep(store)
        assert summary is not None
        # It counted the trace scanned (1) and nothing flagged; what it passed over was not kept.
        assert (summary.scanned, summary.flagged_total) == (1, 0)
        assert (summary.still_arriving, summary.still_arriving_traces) == (1, (trace_id,))
        metrics = store_metrics(store)
        html = render_html(build_report(store))
        # The summary as stored holds what the tracejudge before the count wrote, no more: it forbids
        # fields it does not know, and would pass over this sweep for an older one.
        (stored,) = store.list_reports("sweep")
        before = json.loads(BEFORE_COUNT.read_text(encoding="utf-8"))
        assert set(stored.payload) == set(before[0]["payload"])
        SweepSummary.model_validate(stored.payload)
    finally:
        store.close()
    assert _metric(metrics, "tracejudge_sweep_still_arriving_traces") == [
        "tracejudge_sweep_still_arriving_traces 1"
    ]
    text = " ".join(html.split())
    assert "1 trace(s) scanned but not judged: they may still have been arriving" in text
    assert "sweep again once they have arrived" in text
    assert trace_id in text


def test_a_sweep_recorded_before_the_count_reads_as_not_counted(tmp_path: Path) -> None:
    # Recorded by tracejudge at 636bdc0 (tests/sweep/fixtures/make_sweep_before_count.py): it passed over a
    # trace still arriving and kept no count of it. Read as not counted, not as none.
    store = SqliteStore(tmp_path / "s.db")
    try:
        for row in json.loads(BEFORE_COUNT.read_text(encoding="utf-8")):
            store.put_report(StoredReport.model_validate(row))
        summary = latest_sweep(store)
        assert summary is not None
        assert (summary.scanned, summary.flagged_total) == (3, 1)
        assert (summary.still_arriving, summary.still_arriving_traces) == (None, ())
        metrics = store_metrics(store)
        html = render_html(build_report(store))
    finally:
        store.close()
    assert _metric(metrics, "tracejudge_sweep_still_arriving_traces ") == []
    assert _metric(metrics, 'tracejudge_sweep_flagged_traces{doc_id="C-17/attachment"') != []
    assert "not counted (this sweep was recorded by an earlier tracejudge)" in " ".join(html.split())
