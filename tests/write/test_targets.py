"""The one write-back registry: what each target takes, how writers open and close, and that every
command's help and errors list the targets from it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tracejudge import InputError
from tracejudge.cli import cli
from tracejudge.schema import Localization
from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge.write import (
    TARGETS,
    LangfuseWriter,
    PhoenixWriter,
    RecordingWriter,
    find_target,
    open_dataset_writer,
    open_score_writer,
    target_names,
    targets_help,
    write_triage,
)


def test_the_registry_says_what_each_target_takes():
    assert target_names("scores") == ("langfuse", "phoenix")
    assert target_names("events") == ("otel",)
    assert target_names("datasets") == ("langfuse",)
    assert target_names("scores", "events") == ("langfuse", "otel", "phoenix")
    assert targets_help("scores", "events") == "langfuse, otel or phoenix"
    assert targets_help("datasets") == "langfuse"
    for name, target in TARGETS.items():
        assert target.name == name
        assert target.about
        assert any(target.writes(k) for k in ("scores", "events", "datasets"))


def test_unknown_and_unsupported_targets_name_the_valid_ones():
    with pytest.raises(InputError, match="unknown write-back target 'langfus'") as unknown:
        find_target("langfus", "scores")
    assert "langfuse, phoenix" in str(unknown.value)
    with pytest.raises(InputError, match="otel does not take scores"):
        open_score_writer("otel")
    with pytest.raises(InputError, match="phoenix does not take datasets"):
        open_dataset_writer("phoenix")


def test_writers_open_from_the_environment_and_close(monkeypatch):
    with LangfuseServer() as server:
        monkeypatch.setenv("LANGFUSE_BASE_URL", server.base_url)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", server.public_key)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", server.secret_key)
        monkeypatch.setenv("PHOENIX_COLLECTOR_ENDPOINT", "http://127.0.0.1:9")
        with open_score_writer("langfuse") as scores:
            assert isinstance(scores, LangfuseWriter)
        assert scores.api._client.is_closed
        with open_dataset_writer("langfuse") as items:
            assert isinstance(items, LangfuseWriter)
        assert items.api._client.is_closed
        phoenix = open_score_writer("phoenix")
        assert isinstance(phoenix, PhoenixWriter)
        phoenix.close()
        assert phoenix.api._client.is_closed


def test_a_given_writer_is_used_and_left_open():
    rec = RecordingWriter()
    result = Localization(trace_id="t1", verdict="no_fault", summary="s", stages=[], task_time=None)
    report = write_triage("phoenix", [result], writer=rec)
    assert report.written == 1
    assert rec.calls == ["write_scores"]
    with rec:
        pass
    assert rec.closed


@pytest.mark.parametrize(
    ("args", "kinds"),
    [
        (["triage", "--help"], ("scores",)),
        (["score", "--help"], ("scores", "events")),
        (["regress", "push", "--help"], ("datasets",)),
    ],
)
def test_help_lists_the_targets_from_the_registry(args, kinds):
    out = CliRunner().invoke(cli, args, terminal_width=200).output
    assert targets_help(*kinds) in " ".join(out.split())
    for name in TARGETS:
        if not any(TARGETS[name].writes(k) for k in kinds):
            assert f"{name}," not in out
            assert f"or {name}" not in out
