"""Ticket and manifest files: parsed into records, or an InputError naming file, line and problem."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracejudge import InputError
from tracejudge.localize import load_manifest, load_ticket, ticket_files

TICKET = """\
ticket: EXP-311
trace_id: 4bf92f3577b34da6a3ce929d0e0e4736
task_time: 2026-11-18T09:30:00Z
feedback: "the agent used the old cap"
verified_by: finance-ops
required:
  - doc_id: C-17/attachment
    version: v2
    clause: "Prepayment shall not exceed 30,000 RMB"
    facts: {prepayment_cap_rmb: 30000}
superseded:
  - doc_id: C-17/attachment
    version: v1
    facts: {prepayment_cap_rmb: 50000}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_ticket_of_design_5_2(tmp_path: Path) -> None:
    t = load_ticket(write(tmp_path, "t.yaml", TICKET))
    assert t.ticket == "EXP-311"
    assert t.verified_by == "finance-ops"
    assert t.task_time == datetime(2026, 11, 18, 9, 30, tzinfo=UTC)
    assert t.required[0].facts == {"prepayment_cap_rmb": 30000}
    assert t.superseded[0].version == "v1"


def test_numeric_ids_read_as_text(tmp_path: Path) -> None:
    t = load_ticket(write(tmp_path, "t.yaml", "ticket: 311\nrequired:\n  - {doc_id: 17, version: 2}\n"))
    assert (t.ticket, t.required[0].doc_id, t.required[0].version) == ("311", "17", "2")


def test_numeric_and_date_clauses_read_as_text(tmp_path: Path) -> None:
    """YAML reads `clause: 30000` as an int and `clause: 2026-03-01` as a date: both are the text written."""
    text = "trace_id: ab\nrequired:\n  - {doc_id: a, clause: 30000}\n  - {doc_id: b, clause: 2026-03-01}\n"
    t = load_ticket(write(tmp_path, "t.yaml", text))
    assert [m.clause for m in t.required] == ["30000", "2026-03-01"]
    # A clause that is no text at all is still refused, with its line.
    with pytest.raises(InputError, match=r"t2\.yaml:4: required\[0\]\.clause"):
        load_ticket(
            write(tmp_path, "t2.yaml", "trace_id: ab\nrequired:\n  - doc_id: a\n    clause: [1, 2]\n")
        )


def test_broken_yaml_names_line(tmp_path: Path) -> None:
    p = write(tmp_path, "t.yaml", "ticket: EXP-1\nrequired:\n  - doc_id: [unclosed\n    version: v2\n")
    with pytest.raises(InputError) as err:
        load_ticket(p)
    assert f"{p}:4:" in err.value.message
    assert "broken YAML" in err.value.message


def test_schema_error_points_at_the_yaml_line(tmp_path: Path) -> None:
    bad = TICKET.replace("task_time: 2026-11-18T09:30:00Z", "task_time: yesterday")
    p = write(tmp_path, "t.yaml", bad)
    with pytest.raises(InputError) as err:
        load_ticket(p)
    assert f"{p}:3: task_time:" in err.value.message
    nested = TICKET.replace("    version: v2\n", "    version: v2\n    facts: [1, 2]\n").replace(
        "    facts: {prepayment_cap_rmb: 30000}\n", "", 1
    )
    p2 = write(tmp_path, "t2.yaml", nested)
    with pytest.raises(InputError) as err2:
        load_ticket(p2)
    assert f"{p2}:9: required[0].facts:" in err2.value.message


def test_missing_required_and_empty_required(tmp_path: Path) -> None:
    p = write(tmp_path, "t.yaml", "ticket: EXP-1\nfeedback: wrong\n")
    with pytest.raises(InputError, match=r"t\.yaml:1: required: Field required"):
        load_ticket(p)
    p = write(tmp_path, "e.yaml", "ticket: EXP-1\nrequired: []\n")
    with pytest.raises(InputError, match=r"e\.yaml:2: required: names no material"):
        load_ticket(p)


def test_not_a_mapping_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a mapping"):
        load_ticket(write(tmp_path, "t.yaml", "- a\n- b\n"))
    with pytest.raises(InputError, match="no such file"):
        load_ticket(tmp_path / "nope.yaml")


MANIFEST = (
    '{"doc_id": "C-17/attachment", "version": "v2", "effective_from": "2026-03-01T00:00:00Z", '
    '"effective_to": null, "indexed_at": "2026-03-02T03:00:00Z", "removed_at": null, '
    '"metadata": {"region": "CN"}, "acl": ["procurement"]}\n'
    "\n"
    '{"doc_id": "C-17/attachment", "version": 1, "indexed_at": "2025-01-02T00:00:00Z"}\n'
)


def test_manifest_of_design_5_3(tmp_path: Path) -> None:
    entries = load_manifest(write(tmp_path, "m.jsonl", MANIFEST))
    assert [e.version for e in entries] == ["v2", "1"]
    assert entries[0].acl == ("procurement",)
    assert entries[0].metadata == {"region": "CN"}
    assert entries[1].acl is None


def test_manifest_bad_json_line(tmp_path: Path) -> None:
    p = write(tmp_path, "m.jsonl", MANIFEST + '{"doc_id": "x", \n')
    with pytest.raises(InputError) as err:
        load_manifest(p)
    assert f"{p}:4:" in err.value.message
    assert "not valid JSON" in err.value.message


def test_manifest_schema_error_line(tmp_path: Path) -> None:
    p = write(tmp_path, "m.jsonl", MANIFEST + '{"doc_id": "x", "indexed_at": "soon"}\n')
    with pytest.raises(InputError) as err:
        load_manifest(p)
    assert f"{p}:4: indexed_at:" in err.value.message
    p = write(tmp_path, "n.jsonl", "[1, 2]\n")
    with pytest.raises(InputError, match=r"n\.jsonl:1: expected a JSON object"):
        load_manifest(p)


def test_ticket_files(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", TICKET)
    write(tmp_path, "a.yml", TICKET)
    write(tmp_path, "notes.txt", "x")
    assert [p.name for p in ticket_files(tmp_path)] == ["a.yml", "b.yaml"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no ticket files"):
        ticket_files(empty)


def test_byte_order_mark_and_crlf_are_read(tmp_path: Path) -> None:
    ticket = tmp_path / "t.yaml"
    ticket.write_bytes(b"\xef\xbb\xbf" + TICKET.replace("\n", "\r\n").encode())
    assert load_ticket(ticket).ticket == "EXP-311"
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b"\xef\xbb\xbf" + MANIFEST.replace("\n", "\r\n").encode())
    assert [e.version for e in load_manifest(manifest)] == ["v2", "1"]


def test_one_material_as_a_mapping_reads_as_a_list_of_one(tmp_path: Path) -> None:
    text = "required:\n  doc_id: C-17/attachment\n  version: v2\nsuperseded:\n  doc_id: C-17/attachment\n"
    t = load_ticket(write(tmp_path, "t.yaml", text))
    assert [(m.doc_id, m.version) for m in t.required] == [("C-17/attachment", "v2")]
    assert len(t.superseded) == 1
    with pytest.raises(InputError) as err:
        load_ticket(write(tmp_path, "u.yaml", "ticket: X\nrequired: C-17/attachment\n"))
    assert f"{tmp_path / 'u.yaml'}:2: required: should be a list" in err.value.message


def test_missing_manifest_file_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file") as err:
        load_manifest(tmp_path / "nope.jsonl")
    assert "leave out --manifest" in (err.value.hint or "")
