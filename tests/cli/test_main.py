"""The console entry point: exit codes a shell script or CI gate can rely on."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import click
import pytest

from tracejudge.cli import cli, main

AddCommand = Callable[[str, BaseException | None], None]


@pytest.fixture
def extra_command() -> Iterator[AddCommand]:
    added: list[str] = []

    def add(name: str, exc: BaseException | None) -> None:
        @cli.command(name)
        def cmd() -> None:
            if exc is not None:
                raise exc

        added.append(name)

    yield add
    for name in added:
        cli.commands.pop(name, None)


def run_main(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    monkeypatch.setattr("sys.argv", ["tracejudge", *argv])
    with pytest.raises(SystemExit) as info:
        main()
    return int(info.value.code or 0)


def test_ctrl_c_exits_130_with_a_resume_hint(
    extra_command: AddCommand, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra_command("interrupted-cmd", KeyboardInterrupt())
    assert run_main(monkeypatch, "interrupted-cmd") == 130
    assert "run the command again to resume" in capsys.readouterr().err


def test_success_usage_errors_and_click_errors_keep_their_codes(
    extra_command: AddCommand, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra_command("ok-cmd", None)
    extra_command("bad-cmd", click.ClickException("nope"))
    assert run_main(monkeypatch, "ok-cmd") == 0
    assert run_main(monkeypatch, "bad-cmd") == 1
    assert "nope" in capsys.readouterr().err
    assert run_main(monkeypatch, "no-such-command") == 2
    assert run_main(monkeypatch, "--version") == 0


def test_version_names_the_package_version_and_the_store_schema(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlib.metadata import version

    from tracejudge import __version__
    from tracejudge.store import STORE_SCHEMA_VERSION

    assert run_main(monkeypatch, "--version") == 0
    out = capsys.readouterr().out.strip()
    assert out == f"tracejudge {__version__} (store schema {STORE_SCHEMA_VERSION})"
    # One version source: the installed metadata is read from tracejudge/__init__.py.
    assert version("tracejudge") == __version__
