"""The example's tickets, manifest and scenario list parse, and agree with each other."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tracejudge._demo import find_examples, load_example
from tracejudge.schema import ManifestEntry, Ticket

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "procurement"


def _tickets() -> list[Path]:
    return sorted((EXAMPLE / "tickets").glob("*.yaml"))


def test_every_ticket_is_a_valid_ticket_with_a_trace_id_and_task_time() -> None:
    paths = _tickets()
    assert len(paths) == 9
    for path in paths:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        ticket = Ticket.model_validate(raw)
        assert ticket.trace_id is not None
        assert re.fullmatch(r"[0-9a-f]{32}", ticket.trace_id), path
        assert ticket.task_time is not None
        assert ticket.task_time.tzinfo is not None
        assert ticket.required[0].clause
        assert ticket.required[0].facts


def test_trace_ids_are_unique() -> None:
    ids = [yaml.safe_load(p.read_text(encoding="utf-8"))["trace_id"] for p in _tickets()]
    assert len(set(ids)) == len(ids)


def test_manifest_lines_are_manifest_entries_naming_every_ticket_material() -> None:
    entries = [
        ManifestEntry.model_validate_json(line)
        for line in (EXAMPLE / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    keys = {(e.doc_id, e.version) for e in entries}
    assert len(keys) == len(entries)
    for path in _tickets():
        ticket = Ticket.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
        for m in (*ticket.required, *ticket.superseded):
            assert (m.doc_id, m.version) in keys, (path.name, m.doc_id, m.version)
    v2 = next(e for e in entries if (e.doc_id, e.version) == ("C-17/attachment", "v2"))
    assert v2.content is not None
    assert "Prepayment shall not exceed 30,000 RMB" in v2.content


def test_the_localize_loaders_read_the_example_files() -> None:
    from tracejudge.localize import load_manifest, load_ticket

    manifest = load_manifest(EXAMPLE / "manifest.jsonl")
    assert {(e.doc_id, e.version) for e in manifest} >= {("C-17/attachment", "v1"), ("C-17/attachment", "v2")}
    for path in _tickets():
        ticket = load_ticket(path)
        assert ticket.required[0].doc_id == "C-17/attachment"


def test_scenarios_name_their_tickets_and_cover_every_verdict() -> None:
    example = load_example(EXAMPLE)
    scenarios = example.load_scenarios(EXAMPLE)
    assert {s.ticket_path for s in scenarios} == set(_tickets())
    assert {s.expect_verdict for s in scenarios} == {
        "not_indexed",
        "filtered",
        "not_retrieved",
        "dropped_in_context",
        "ignored_by_model",
        "no_fault",
        "unconfirmed",
        "basis_not_in_effect",
    }
    assert {s.expect_cause for s in scenarios if s.expect_verdict == "filtered"} == {"filter", "permission"}
    for s in scenarios:
        ticket = Ticket.model_validate(yaml.safe_load(s.ticket_path.read_text(encoding="utf-8")))
        assert s.trace_id == ticket.trace_id
        assert s.task_time == ticket.task_time


def test_the_scenario_file_rejects_unknown_agent_settings(tmp_path: Path) -> None:
    import shutil

    import pytest

    target = tmp_path / "procurement"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    spec = yaml.safe_load((target / "scenarios.yaml").read_text(encoding="utf-8"))
    spec["scenarios"][0]["config"] = {"top_kk": 3}
    (target / "scenarios.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    example = load_example(target)
    with pytest.raises(ValueError, match="unknown agent settings"):
        example.load_scenarios(target)


def test_find_examples_finds_the_source_checkout() -> None:
    assert find_examples() == EXAMPLE
    assert find_examples(EXAMPLE) == EXAMPLE
