"""What a reader sees first: the at-a-glance cards over a filled store and over an empty one, and the
judge's mismatches as one row per finding."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

from tracejudge.report import build_report, render_html
from tracejudge.report._metrics import store_metrics
from tracejudge.store import SqliteStore


def _text(html: str) -> str:
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))
    return re.sub(r" ([:,.)])", r"\1", text)


def _section(html: str, name: str) -> str:
    m = re.search(rf'<section id="{name}">(.*?)</section>', html, re.S)
    assert m, name
    return _text(m.group(1))


def _render(db: Path, **kwargs: Any) -> str:
    store = SqliteStore(db)
    try:
        return render_html(build_report(store, langfuse_url="", **kwargs))
    finally:
        store.close()


def test_glance_sums_up_each_area(populated: tuple[Path, dict[str, Any]]) -> None:
    db, filled = populated
    html = _render(db)
    glance = _section(html, "glance")
    rows = filled["demo"].rows
    located = {"not_indexed", "filtered", "not_retrieved", "dropped_in_context", "ignored_by_model"}
    faults = [r for r in rows if r.verdict in located]
    assert f"{len(faults)} of {len(rows)} tickets: the stage that lost the material is located" in glance
    assert "2 filtered" in glance
    last = filled["runs"][-1].summary.overall
    assert f"restaurant-assistant: {last.pass_rate * 100:.1f}% pass (run before:" in glance
    # The newest run bumped the rubric: the reader is told before reading the pass rate as the agent's.
    assert "rubric v1 \u2192 v2: not an agent change alone" in glance
    # The fixture calibrates on every item, none held out.
    assert "no items held out: cannot gate a build" in glance
    assert "no suite in this report" in glance


def test_glance_on_an_empty_store_says_what_to_run(tmp_path: Path) -> None:
    glance = _section(_render(tmp_path / "empty.db"), "glance")
    for hint in (
        "no triage yet: run tracejudge triage --ticket TICKET.yaml",
        "no scoring yet: run tracejudge score --rubric RUBRIC.yaml",
        "no calibration yet: run tracejudge calibrate",
        "no suite in this report: tracejudge report --suite SUITE_DIR",
    ):
        assert hint in glance


def test_empty_store_gives_empty_metrics_not_an_error(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "empty.db")
    text = store_metrics(store)
    store.close()
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert samples == ['tracejudge_info{version="' + samples[0].split('"')[1] + '"} 1']


def test_glance_reads_the_latest_suite_run(populated: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    import shutil

    suite = tmp_path / "suite"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "procurement" / "suite", suite)
    for old in (suite / "runs").glob("*"):
        old.unlink() if old.is_file() else shutil.rmtree(old)
    db, _ = populated
    glance = _section(_render(db, suites=[suite]), "glance")
    assert re.search(r"suite: \d+ samples, never run", glance), glance


def test_mismatches_show_cue_words_and_how_many_calls(populated: tuple[Path, dict[str, Any]]) -> None:
    db, filled = populated
    audit = filled["audit"]
    assert audit.mismatches, "the fixture's audit should find reasoning that contradicts its score"
    judge = _section(_render(db), "judge")
    assert "cue words" in judge
    first = audit.mismatches[0]
    cues = ", ".join(dict.fromkeys((*first.negative_cues, *first.positive_cues)))
    assert cues in judge
    distinct = {(m.trace_id, m.criterion, m.score, m.reasoning) for m in audit.mismatches}
    assert f"{len(distinct)} repl" in judge


def test_sweep_section_shows_the_latest_sweep(populated: tuple[Path, dict[str, Any]]) -> None:
    db, filled = populated
    swept = filled["sweep"]
    assert swept.flagged_total > 0
    section = _section(_render(db), "sweep")
    assert f"{swept.flagged_total} flagged" in section
    assert f"{swept.scanned} traces scanned" in section
    (row,) = swept.by_version
    assert f"{row.doc_id} {row.used} {row.in_effect} {row.flagged}" in section
    for f in swept.flagged:
        assert f.trace_id in section


def test_sweep_section_on_an_empty_store_says_what_to_run(tmp_path: Path) -> None:
    section = _section(_render(tmp_path / "empty.db"), "sweep")
    assert "no sweep recorded: run tracejudge triage --sweep --manifest MANIFEST.jsonl" in section
