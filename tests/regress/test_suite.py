"""The suite format is validated on load, with errors naming the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tracejudge._errors import InputError
from tracejudge.regress import dump_sample, load_runs, load_suite, parse_sample, write_run
from tracejudge.schema import Sample, SuiteRun

from .conftest import balanced, sample, write_suite


def _error(folder: Path) -> str:
    with pytest.raises(InputError) as info:
        load_suite(folder)
    return str(info.value)


def test_a_clean_suite_loads_in_file_order(tmp_path: Path) -> None:
    suite = load_suite(balanced(tmp_path / "s"))
    assert [s.sample.id for s in suite.samples] == ["rs-0001", "rs-0002", "rs-0003", "rs-0004"]
    assert suite.samples[0].sample.environment.tools[1].mode == "block"


def test_a_bad_kind_names_the_file_line_and_field(tmp_path: Path) -> None:
    folder = write_suite(tmp_path / "s", [sample(kind="regression")])
    msg = _error(folder)
    assert "rs-0001.yaml:3: kind:" in msg
    assert "failure" in msg  # says what is allowed


def test_a_nested_field_error_names_its_path(tmp_path: Path) -> None:
    bad = sample()
    bad["expected"]["checks"][0] = {"name": "cites_v2", "type": "cites"}  # cites needs doc_id
    bad["environment"]["materials"][1]["content"] = None
    msg = _error(write_suite(tmp_path / "s", [bad]))
    assert "rs-0001.yaml:" in msg
    assert "expected.checks[0]" in msg
    assert "doc_id" in msg
    assert "environment.materials[1].content" in msg


def test_missing_input_and_unknown_keys_are_named(tmp_path: Path) -> None:
    bad = sample()
    del bad["input"]
    bad["expectd"] = {}
    msg = _error(write_suite(tmp_path / "s", [bad]))
    assert "input: Field required" in msg
    assert "expectd: Extra inputs are not permitted" in msg


def test_schema_version_is_required_and_checked(tmp_path: Path) -> None:
    no_version = sample()
    del no_version["schema_version"]
    assert "schema_version: missing" in _error(write_suite(tmp_path / "a", [no_version]))
    assert "schema_version: 7 is not supported" in _error(
        write_suite(tmp_path / "b", [sample(schema_version=7)])
    )


def test_broken_yaml_duplicate_ids_and_empty_folders(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "rs-0001.yaml").write_text("id: [unclosed\n", encoding="utf-8")
    assert "rs-0001.yaml:" in _error(folder)
    assert "broken YAML" in _error(folder)
    dup = write_suite(tmp_path / "d", [sample("rs-0001")])
    (dup / "copy.yaml").write_text(yaml.safe_dump(sample("rs-0001")), encoding="utf-8")
    assert "id: rs-0001 is also the id of" in _error(dup)
    (tmp_path / "empty").mkdir()
    assert "no sample files" in _error(tmp_path / "empty")
    assert "no such suite folder" in _error(tmp_path / "nowhere")


def test_a_sample_round_trips_through_its_yaml() -> None:
    s = Sample.model_validate(sample())
    assert parse_sample(dump_sample(s)) == s


def test_run_records_are_never_overwritten(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    run = SuiteRun(
        run_id="rr-1",
        suite="s",
        suite_hash="x",
        created_at=datetime.now(UTC),
        target="m:f",
        retrieval="include",
    )
    write_run(tmp_path, run)
    with pytest.raises(FileExistsError):
        write_run(tmp_path, run)
    assert [r.run_id for r in load_runs(tmp_path)] == ["rr-1"]
