"""The console entry point: exit codes a shell script or CI gate can rely on."""

from __future__ import annotations

import subprocess
import sys
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


def test_help_lists_each_command_as_the_command_itself_would_without_importing_it() -> None:
    # `tracejudge --help` shows the summaries kept beside the lazy commands: each must read exactly as
    # the command's own short help at any width.
    import importlib

    from tracejudge.cli._root import RootGroup

    assert isinstance(cli, RootGroup)
    assert set(cli.lazy) | {"collect"} == set(cli.list_commands(click.Context(cli)))
    for name, lazy in cli.lazy.items():
        command = getattr(importlib.import_module(lazy.module), lazy.attribute)
        assert command.name == name
        for limit in range(10, 300, 7):
            summary = click.Command(None, help=lazy.summary).get_short_help_str(limit)
            assert summary == command.get_short_help_str(limit), name


def test_a_command_loads_only_what_it_uses() -> None:
    # In a fresh interpreter: --help imports no command module; `score` imports its own, not the
    # others', nor what only other commands need (rich's tables for --json is not needed either);
    # openai and aiohttp are imported when a judge client is made, not for help or the version.
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "PREFIXES = ('tracejudge', 'httpx', 'rich', 'jinja2', 'opentelemetry', 'openai', 'aiohttp')\n"
        "from tracejudge.cli import cli\n"
        "try:\n"
        "    cli.main(sys.argv[1:], prog_name='tracejudge', standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(PREFIXES))))\n"
    )

    def loaded(*args: str) -> set[str]:
        out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True)
        return set(out.stdout.strip().splitlines()[-1].split())  # the help text, then the modules

    shown = loaded("--help")
    assert not {m for m in shown if m.startswith("tracejudge.cli._") and m not in _CORE}, shown
    scoring = loaded("score", "--help")
    assert "tracejudge.cli._score" in scoring
    unused = {"tracejudge.cli._regress", "tracejudge.cli._audit", "tracejudge.cli._serve", "tracejudge.audit"}
    assert not scoring & unused
    judge_client = ("openai", "aiohttp")
    elsewhere = ("httpx", "jinja2", "opentelemetry", "tracejudge.write._langfuse")
    assert not {m for m in scoring if m.startswith(elsewhere + judge_client)}
    for modules in (shown, loaded("--version")):
        assert not {m for m in modules if m.startswith(judge_client)}, modules


_CORE = {
    "tracejudge.cli._app",
    "tracejudge.cli._gc",
    "tracejudge.cli._root",
    "tracejudge.cli._safe",
    "tracejudge.cli._when",
}


_CONSOLE = """
import atexit, sys, threading, time
atexit.register(lambda: print("exit hook ran", file=sys.stderr))
if sys.argv[1] == "thread":
    # A thread still running when the command is done: the usual exit waits for it.
    threading.Thread(target=lambda: (time.sleep(0.2), print("thread done", file=sys.stderr))).start()
sys.argv = ["tracejudge", *sys.argv[2:]]
from tracejudge.cli import console_main
console_main()
"""


def _console(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CONSOLE, *argv], capture_output=True, text=True, timeout=120
    )


def test_the_console_entry_ends_with_the_exit_hooks_run_the_output_flushed_and_the_code_kept() -> None:
    # The process ends without the interpreter's teardown (os._exit), after what the usual exit does
    # that anyone sees.
    done = _console("-", "--version")
    assert done.returncode == 0
    assert done.stdout.startswith("tracejudge ")  # the output flushed
    assert "exit hook ran" in done.stderr  # the exit hooks ran (logging's flush among them)
    assert _console("-", "no-such-command").returncode == 2  # the exit code kept


def test_the_console_entry_exits_the_usual_way_while_a_thread_runs() -> None:
    done = _console("thread", "--version")
    assert done.returncode == 0
    assert done.stdout.startswith("tracejudge ")
    assert "thread done" in done.stderr
    assert "exit hook ran" in done.stderr
