"""A mistyped PostgreSQL URL is refused (exit 2), not taken as a SQLite file path: ``postgresql:/…``
(one slash) made a SQLite file under ./postgresql:/ — a receiver then acknowledged spans into a
local file that never reached PostgreSQL, and a worker found "no traces" and exited 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracejudge.cli import cli

TYPOS = [
    "postgresql:/tj:hunter2secret@db.internal:5432/tracejudge",
    "postgres:tj:hunter2secret@db.internal/tracejudge",
    "postgresql//tj:hunter2secret@db.internal/tracejudge",
]


@pytest.mark.parametrize("url", TYPOS[:2])
def test_a_mistyped_store_url_exits_2_naming_the_forms_and_makes_no_file(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["--store", url, "traces", "list"])
    assert result.exit_code == 2, result.output
    assert "neither a store URL nor a file path" in result.output
    assert "postgresql://USER@HOST:5432/DB" in result.output
    assert "hunter2secret" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_path_without_a_scheme_is_still_a_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `postgresql//…` has no scheme: a relative path, as any other (its folders must exist).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "postgresql").mkdir()
    result = CliRunner().invoke(cli, ["--store", "postgresql//x.db", "traces", "list"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "postgresql" / "x.db").is_file()


def test_a_receiver_with_a_mistyped_store_url_does_not_start(tmp_path: Path) -> None:
    env = {**os.environ, "TRACEJUDGE_STORE": TYPOS[0]}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracejudge", "collect", "otlp", "--listen", "127.0.0.1:0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # "listening on …" when it took the URL for a file
    finally:
        if proc.poll() is None:
            proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert not first.startswith("listening"), "the receiver started on a local SQLite file"
    assert proc.returncode == 2, err
    assert "neither a store URL nor a file path" in err
    assert "hunter2secret" not in err
    assert list(tmp_path.iterdir()) == []
