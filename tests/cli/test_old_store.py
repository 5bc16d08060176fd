"""The commands that only read (traces, report) work on a store an older tracejudge wrote (schema 1)
and leave it at that schema, so older processes still using it keep working during a rolling upgrade
(README, At scale); the first command that stores spans upgrades it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tests.store.test_upgrade import READS, _columns, _spans_as_this_version_keeps_them, _v1_store, _version
from tracejudge.cli import cli
from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan
from tracejudge.store import STORE_SCHEMA_VERSION

RECORDED = Path(__file__).parents[1] / "fixtures" / "traces"


@pytest.fixture(params=["sqlite", "postgresql"])
def v1_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    postgres = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    return _v1_store(request.param, tmp_path, postgres)


def _run(url: str, *args: str) -> Result:
    result = CliRunner().invoke(cli, ["--store", url, *args])
    assert result.exit_code == 0, result.output
    return result


def _at_schema_1(url: str) -> bool:
    cols, idx = _columns(url)
    return _version(url) == 1 and "otlp" not in cols and "spans_start" in idx


def test_reading_commands_read_a_schema_1_store_without_upgrading_it(v1_url: str, tmp_path: Path) -> None:
    listed = json.loads(_run(v1_url, "traces", "list", "--json").stdout)
    assert listed == READS["traces"]
    for trace_id, spans in READS["spans"].items():
        shown = json.loads(_run(v1_url, "traces", "show", trace_id[:8], "--json").stdout)
        expected = normalize([RawSpan.model_validate(s) for s in spans]).model_dump(mode="json")
        assert shown == expected
    session = json.loads(_run(v1_url, "traces", "show", "--session", "session-7", "--json").stdout)
    assert [t["trace_id"] for t in session["turns"]] == ["0af7651916cd43dd8448eb211c80319c"]
    report = json.loads(_run(v1_url, "report", "--out", str(tmp_path / "r.html"), "--json").stdout)
    assert (tmp_path / "r.html").is_file()
    assert report["out"] == str(tmp_path / "r.html")
    assert _at_schema_1(v1_url)


def test_the_first_command_that_stores_spans_upgrades_it(v1_url: str) -> None:
    _run(v1_url, "traces", "list")
    assert _at_schema_1(v1_url)
    recorded = RECORDED / "adk_rag.pb"
    _run(v1_url, "collect", "file", str(recorded))
    assert _version(v1_url) == STORE_SCHEMA_VERSION
    assert _spans_as_this_version_keeps_them(v1_url)
    listed = json.loads(_run(v1_url, "traces", "list", "--json").stdout)
    assert {t["trace_id"] for t in READS["traces"]} < {t["trace_id"] for t in listed}
