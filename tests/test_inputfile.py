"""Hostile input files (issue 17.4–17.5): tickets, manifests, rubrics, labels and suites that used to
crash with a traceback, name a byte offset, or be misread, now exit 2 naming the file and line — and
valid JSONL holding U+2028 / U+0085 inside a string is read.

Each case failed before the one reader (``tracejudge._inputfile``) existed.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracejudge import InputError
from tracejudge.audit import load_labels
from tracejudge.checks import read_manifest
from tracejudge.cli import cli
from tracejudge.judge import load_rubric
from tracejudge.localize import load_manifest, load_ticket, parse_ticket
from tracejudge.regress import load_suite

HUGE_INT = "9" * 5000  # past Python's 4,300-digit int limit
DEEP_JSON = "[" * 10_000 + "]" * 10_000
TICKET_HEAD = "ticket: EXP-1\ntrace_id: 4bf92f3577b34da6a3ce929d0e0e4736\n"
REQUIRED = "required:\n  - {doc_id: C-17, version: v2}\n"


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def _fails_at(exc: pytest.ExceptionInfo[InputError], path: Path, line: int) -> None:
    assert exc.value.exit_code == 2
    assert f"{path}:{line}" in str(exc.value), str(exc.value)
    assert exc.value.hint


TICKETS = {
    "impossible date": (TICKET_HEAD + "task_time: 2026-02-30\n" + REQUIRED, 3),
    "impossible time": (TICKET_HEAD + "task_time: 2026-03-01 25:61:00\n" + REQUIRED, 3),
    "huge integer": (TICKET_HEAD + REQUIRED + f"    facts: {{cap: {HUGE_INT}}}\n", 5),
    "deep flow nesting": (TICKET_HEAD + REQUIRED + "notes: " + "[" * 10_000 + "]" * 10_000 + "\n", 5),
    "deep block nesting": (TICKET_HEAD + REQUIRED + "notes:\n" + "- " * 10_000 + "x\n", 6),
    "deep JSON": ('{"ticket": "EXP-1",\n "notes": ' + DEEP_JSON + "}", 2),
    "number as a time": (TICKET_HEAD + "task_time: 123\n" + REQUIRED, 3),
}


@pytest.mark.parametrize("case", list(TICKETS))
def test_hostile_tickets_exit_2_naming_the_line(tmp_path: Path, case: str) -> None:
    text, line = TICKETS[case]
    path = _write(tmp_path, "t.yaml", text)
    with pytest.raises(InputError) as exc:
        load_ticket(path)
    _fails_at(exc, path, line)


def test_a_number_as_task_time_names_the_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.yaml", TICKETS["number as a time"][0])
    with pytest.raises(InputError, match=r"task_time: .*not the number 123"):
        load_ticket(path)


MANIFEST_LINE = '{"doc_id": "C-17", "version": "v2", "indexed_at": "2026-03-01T00:00:00Z"}'
MANIFESTS = {
    "latin-1": (MANIFEST_LINE.encode() + b"\n" + '{"doc_id": "Café", "version": "v1"}'.encode("latin-1"), 2),
    "huge integer": (f'{MANIFEST_LINE}\n{{"doc_id": "a", "version": {HUGE_INT}}}', 2),
    "deep": (f"{MANIFEST_LINE}\n{MANIFEST_LINE}\n{DEEP_JSON}", 3),
    "impossible date": (f'{MANIFEST_LINE}\n{{"doc_id": "a", "version": "1", "indexed_at": "2026-02-30"}}', 2),
    "number as a time": ('{"doc_id": "a", "version": "1", "indexed_at": 123}', 1),
    "broken JSON": (f"{MANIFEST_LINE}\n{{", 2),
}


@pytest.mark.parametrize("reader", [load_manifest, read_manifest], ids=["triage", "score"])
@pytest.mark.parametrize("case", list(MANIFESTS))
def test_hostile_manifests_exit_2_naming_the_line(tmp_path: Path, case: str, reader: object) -> None:
    data, line = MANIFESTS[case]
    path = _write(tmp_path, "m.jsonl", data)
    with pytest.raises(InputError) as exc:
        reader(path)  # type: ignore[operator]
    _fails_at(exc, path, line)


def test_score_with_a_latin1_manifest_exits_2_naming_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "m.jsonl", MANIFESTS["latin-1"][0])
    rubric = Path(__file__).parents[1] / "examples" / "calibration" / "rubric-correctness.yaml"
    store = f"sqlite:///{tmp_path / 's.db'}"
    result = CliRunner().invoke(
        cli, ["--store", store, "score", "--manifest", str(path), "--rubric", str(rubric)]
    )
    assert result.exit_code == 2, result.output
    assert f"{path}:2: not UTF-8" in result.output


@pytest.mark.parametrize("sep", ["\u2028", "\u0085", "\u2029", "\x1c"])
def test_jsonl_with_unicode_line_separators_inside_strings_is_valid(tmp_path: Path, sep: str) -> None:
    manifest = _write(
        tmp_path, "m.jsonl", json.dumps({"doc_id": f"a{sep}b", "version": "1"}, ensure_ascii=False) + "\n"
    )
    (entry,) = load_manifest(manifest)
    assert entry.doc_id == f"a{sep}b"
    assert read_manifest(manifest)[0].doc_id == f"a{sep}b"
    labels = _write(
        tmp_path,
        "l.jsonl",
        json.dumps({"id": "1", "input": f"q{sep}x", "output": "a", "label": "pass"}, ensure_ascii=False),
    )
    (item,) = load_labels(labels).items
    assert item.input == f"q{sep}x"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('{"id": "1", "label": "pass"}\n' + DEEP_JSON, 2),
        (f'{{"id": "1", "label": "pass", "n": {HUGE_INT}}}', 1),
        ('{"id": "1", "label": "pass"}\n{"id": ', 2),
    ],
    ids=["deep", "huge integer", "broken"],
)
def test_hostile_labels_exit_2_naming_the_line(tmp_path: Path, text: str, line: int) -> None:
    path = _write(tmp_path, "l.jsonl", text)
    with pytest.raises(InputError) as exc:
        load_labels(path)
    _fails_at(exc, path, line)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("name: r\ncriteria:\n  - id: " + "[" * 10_000 + "]" * 10_000 + "\n", 3),
        (f"name: r\nthreshold: {HUGE_INT}\n", 2),
        ("name: r\ncriteria: [\n", 3),
    ],
    ids=["deep", "huge integer", "broken"],
)
def test_hostile_rubrics_exit_2_naming_the_line(tmp_path: Path, text: str, line: int) -> None:
    path = _write(tmp_path, "r.yaml", text)
    with pytest.raises(InputError) as exc:
        load_rubric(path)
    _fails_at(exc, path, line)


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"schema_version: 1\nid: s\nnote: caf\xe9\n", 3),
        (b"schema_version: 1\nid: s\ncreated: 2026-02-30\n", 3),
        (b"schema_version: 1\nid: s\nx: " + b"{a: " * 10_000 + b"}" * 10_000 + b"\n", 3),
    ],
    ids=["latin-1", "impossible date", "deep"],
)
def test_hostile_suite_samples_exit_2_naming_the_line(tmp_path: Path, data: bytes, line: int) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    path = _write(suite, "s.yaml", data)
    with pytest.raises(InputError) as exc:
        load_suite(suite)
    _fails_at(exc, path, line)


def test_a_ticket_of_many_entries_reads_without_full_gc_passes() -> None:
    # Issue 17.7: a 7 MB ticket of 100k entries ran past 180 s — the cyclic GC's full passes over the
    # growing node tree and records made reading quadratic. Reading now makes no full pass (and uses
    # libyaml's parser when PyYAML has it); benchmarks/bench_triage.py measures the time.
    lines = ["ticket: T", "trace_id: 4bf92f3577b34da6a3ce929d0e0e4736", "required:"]
    lines += [
        f'  - {{doc_id: doc-{i}, version: v{i % 3}, clause: "clause {i}", facts: {{cap: {i}}}}}'
        for i in range(20_000)
    ]
    text = "\n".join(lines) + "\n"
    full_passes: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full_passes.append(1)

    gc.callbacks.append(note)
    try:
        ticket = parse_ticket(text)
    finally:
        gc.callbacks.remove(note)
    assert len(ticket.required) == 20_000
    assert full_passes == []
