"""tests/fixtures/traces/compare_recordings.py: a re-recorded file is compared with the committed one, and a
new recording (no committed file of its name) is reported as new, not a crash."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fixtures.traces import compare_recordings

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def test_a_new_recording_is_reported_as_new(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new, committed = tmp_path / "new", tmp_path / "committed"
    new.mkdir()
    committed.mkdir()
    shutil.copy(TRACES / "bedrock_kb_rag.pb", new / "bedrock_kb_rag.pb")
    shutil.copy(TRACES / "bedrock_kb_rag.pb", committed / "bedrock_kb_rag.pb")
    shutil.copy(TRACES / "bedrock_kb_dropped.pb", new / "bedrock_kb_brand_new.pb")
    assert compare_recordings.main([str(new), str(committed)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0] == f"bedrock_kb_brand_new.pb: new (no {committed / 'bedrock_kb_brand_new.pb'} to compare with)"
    )
    assert out[1].startswith("bedrock_kb_rag.pb: same;")


def test_a_recording_that_differs_is_still_a_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new, committed = tmp_path / "new", tmp_path / "committed"
    new.mkdir()
    committed.mkdir()
    shutil.copy(TRACES / "bedrock_kb_rag.pb", new / "bedrock_kb_rag.pb")
    shutil.copy(TRACES / "bedrock_kb_dropped.pb", committed / "bedrock_kb_rag.pb")
    shutil.copy(TRACES / "bedrock_kb_dropped.pb", new / "bedrock_kb_brand_new.pb")
    assert compare_recordings.main([str(new), str(committed)]) == 1
    assert "bedrock_kb_rag.pb: " in capsys.readouterr().out
