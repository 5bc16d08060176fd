"""The PostgreSQL test databases do not pile up on the shared server: a test process killed before its
teardown (a timeout, kill -9, a cancelled CI job) left its ``tj_…`` database for good. Each test database
now says which process made it, and the next test process on the host drops those whose process is gone
and that nobody is connected to — and none other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg

from tests.store.conftest import (
    drop_database,
    drop_orphaned_databases,
    postgres_admin_url,
    postgres_url,  # noqa: F401 - the fresh-database fixture
)

ROOT = Path(__file__).resolve().parents[2]


def _left_by_a_killed_process(admin: str) -> str:
    """A database made by a test process that was then killed (SIGKILL: no teardown ran)."""
    made = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; from tests.store.conftest import create_database;"
            " print(create_database(sys.argv[1]), flush=True); os.kill(os.getpid(), 9)",
            admin,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert made.returncode == -9, made.stderr[-2000:]
    return made.stdout.strip()


def _exists(admin: str, name: str) -> bool:
    with psycopg.connect(admin) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def test_a_database_left_by_a_killed_test_process_is_dropped_and_no_other(
    postgres_url: str,  # noqa: F811
) -> None:
    admin = postgres_admin_url()
    base = admin.rsplit("/", 1)[0]
    in_use = _left_by_a_killed_process(admin)
    left = ""
    try:
        with psycopg.connect(f"{base}/{in_use}"):  # someone is looking at it: it stays
            # (the killed process swept on its way in too: in_use stayed then as well)
            left = _left_by_a_killed_process(admin)
            assert _exists(admin, left)
            dropped = drop_orphaned_databases(admin)
        assert left in dropped
        assert not _exists(admin, left)
        assert _exists(admin, in_use)
        ours = postgres_url.rsplit("/", 1)[1]
        assert ours not in dropped  # this process is alive: its database stays
        assert _exists(admin, ours)
        assert "tracejudge_test" not in dropped  # not made by a test process: never touched
    finally:
        drop_database(admin, in_use)
        if left:
            drop_database(admin, left)
