"""The command the MCP ``score_trace`` tool suggests to go on with a run left waiting names the run's store.

Whoever runs it — the user, the coding agent in its own shell — is not in the server's environment (a
client starts the server with ``--store`` or ``TRACEJUDGE_STORE`` of its own): a command naming no store
went on in the default store, where the run is not. The store is named without its secrets: a PostgreSQL
URL's password is left out (PostgreSQL reads it from ``PGPASSWORD`` or a password file)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from tests.runs.test_local_still_arriving import password_env
from tests.runs.test_shared_still_arriving import late_beside_whole
from tests.store.conftest import postgres_url, store_url  # noqa: F401 - the store fixtures
from tracejudge.cli import cli
from tracejudge.mcp import Toolbox
from tracejudge.runs import resume_store_arg
from tracejudge.store import open_store


def _suggested(url: str, tmp_path: Path, *, given: str | None) -> tuple[dict[str, Any], str]:
    """``score_trace`` of a trace still arriving, through a server on the store at ``url`` given as
    ``given``: the outcome and the trace's id."""
    _, late, _, rubric = late_beside_whole(url, tmp_path)
    store = open_store(url)
    try:
        out = Toolbox(store, roots=[tmp_path], store_url=given).score_trace(late, str(rubric))
    finally:
        store.close()
    assert out["waiting"]["items"] == 1
    return out, late


def test_the_suggested_command_goes_on_with_the_run_in_its_store(
    store_url: str,  # noqa: F811 - the fixture
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # the default store would be made here
    monkeypatch.delenv("TRACEJUDGE_STORE", raising=False)
    out, late = _suggested(store_url, tmp_path, given=store_url)
    command = out["waiting"]["command"]
    args = shlex.split(command)
    # Named (it was not: the command went on in the default store, where the trace and the run are not).
    named = args[args.index("--store") + 1]
    password = urlsplit(store_url).password
    if password is None:
        assert named == store_url
    else:
        # (the test server's user and password may be one word: the URL's password part is what must go)
        assert f":{password}@" not in command
        assert named == store_url.replace(f":{password}@", "@")
    # Run as printed, in a shell that is not the server's (no TRACEJUDGE_STORE; PostgreSQL's password from
    # a password file): it joins the run in its store — the trace waits still, nothing is scored.
    result = CliRunner().invoke(cli, [*args[1:], "--json"], env=password_env(store_url))
    assert result.exit_code == 0, result.output
    again = json.loads(result.stdout)
    assert (again["run_id"], again["items"], again["waiting"]["items"]) == (out["run_id"], [], 1)
    assert not (tmp_path / ".tracejudge").exists()
    assert late in command


def test_a_server_not_told_its_store_url_names_none(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    out, _ = _suggested(url, tmp_path, given=None)
    assert "--store" not in shlex.split(out["waiting"]["command"])


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://app:s3cret@db.internal:5432/tj", "postgresql://app@db.internal:5432/tj"),
        (
            "postgresql://app:p%40ss@db/tj?sslmode=require&password=x",
            "postgresql://app@db/tj?sslmode=require",
        ),
        ("postgresql://:s3cret@db/tj", "postgresql://db/tj"),
        ("sqlite:////abs/store.db", "sqlite:////abs/store.db"),
        ("store.db", "store.db"),
    ],
)
def test_a_store_is_named_without_its_secrets(url: str, named: str) -> None:
    assert resume_store_arg(url, environment=None) == named
    assert resume_store_arg(url, environment=url) is None
