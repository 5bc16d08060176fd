"""``tracejudge collect otlp`` as the demo runs it: a subprocess that prints one line when ready."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from tracejudge.cli import cli

TRACE_HEX = "4bf92f3577b34da6a3ce929d0e0e4736"


def _read_line(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        proc.kill()
        pytest.fail("the receiver did not print its listening line")
    return proc.stdout.readline()


@pytest.fixture
def start(store_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracejudge",
                "--store",
                f"sqlite:///{store_path}",
                "collect",
                "otlp",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        procs.append(proc)
        return proc

    yield run
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_subprocess_prints_one_line_serves_and_stops_cleanly(
    start: Callable[..., subprocess.Popen[str]],
    sig: signal.Signals,
    make_request: Callable[..., Any],
    good_span: Callable[..., Any],
    store_path: Path,
) -> None:
    proc = start("--listen", "127.0.0.1:0", "--token", "very-secret-token")
    line = _read_line(proc)
    assert line.startswith("listening on http://127.0.0.1:")
    url = line.split()[-1]
    assert int(url.rsplit(":", 1)[1]) > 0
    with httpx.Client(trust_env=False, timeout=30) as client:
        resp = client.post(
            f"{url}/v1/traces",
            content=make_request([good_span(1)]).SerializeToString(),
            headers={"Content-Type": "application/x-protobuf", "Authorization": "Bearer very-secret-token"},
        )
    assert resp.status_code == 200
    with httpx.Client(trust_env=False, timeout=30) as client:  # the same span again: taken, not new
        again = client.post(
            f"{url}/v1/traces",
            content=make_request([good_span(1)]).SerializeToString(),
            headers={"Content-Type": "application/x-protobuf", "Authorization": "Bearer very-secret-token"},
        )
    assert again.status_code == 200
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == ""  # nothing after the one line
    assert "stopped: 2 span(s) taken in 2 export request(s), 1 new in the store" in err
    assert "very-secret-token" not in line + out + err
    listed = CliRunner().invoke(cli, ["--store", f"sqlite:///{store_path}", "traces", "list", "--json"])
    assert [t["trace_id"] for t in json.loads(listed.stdout)] == [TRACE_HEX]


def test_listen_address_from_the_environment(start: Callable[..., subprocess.Popen[str]]) -> None:
    proc = start(env={"TRACEJUDGE_OTLP_LISTEN": "127.0.0.1:0"})
    assert _read_line(proc).startswith("listening on http://127.0.0.1:")
    proc.terminate()
    proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_refuses_to_listen_off_loopback_without_a_token(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRACEJUDGE_OTLP_TOKEN", raising=False)
    result = CliRunner().invoke(
        cli, ["--store", f"sqlite:///{store_path}", "collect", "otlp", "--listen", "0.0.0.0:0"]
    )
    assert result.exit_code == 2
    assert "without a bearer token" in result.stderr
    assert "--token" in result.stderr
    assert result.stdout == ""


def test_bad_listen_address_exits_2(store_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--store", f"sqlite:///{store_path}", "collect", "otlp", "--listen", "nope"]
    )
    assert result.exit_code == 2
    assert "is not HOST:PORT" in result.stderr


def test_collect_help_lists_both_commands() -> None:
    result = CliRunner().invoke(cli, ["collect", "--help"])
    assert result.exit_code == 0
    assert "otlp" in result.stdout
    assert "file" in result.stdout
