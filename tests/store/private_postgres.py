"""A PostgreSQL server of a test's own (initdb in a temporary folder, its own port), for tests that
stop and restart the server: the shared one (TRACEJUDGE_TEST_POSTGRES) serves every other test at
once, so restarting it would break them. Root cannot run the server: as root (CI), the server runs as
the ``postgres`` user the Debian package made."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    if initdb := shutil.which("initdb"):
        return Path(initdb).resolve().parent
    pytest.fail("initdb is not installed: .ci/services.sh installs PostgreSQL (apt-get install postgresql)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivatePostgres:
    """A PostgreSQL cluster on 127.0.0.1:``port``, trust authentication, database ``postgres``."""

    def __init__(self) -> None:
        self._bin = _bindir()
        self.dir = Path(tempfile.mkdtemp(prefix="tracejudge-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "--auth=trust", "-U", "postgres", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        command = [*self._as, str(self._bin / tool), *args]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, f"{tool}: {done.stdout[-1000:]}{done.stderr[-1000:]}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: sessions ended, as a planned restart; ``immediate``: as a crash)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def close(self) -> None:
        with contextlib.suppress(AssertionError, subprocess.SubprocessError, OSError):
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
